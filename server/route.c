/* route.c - routing: a request's method and path against the route table (server.routes, routes.c),
 * whether a path is the API's, and a route's body limit.  Pure but for the table it is given. */
#include "server/route.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int route_match(const char *pattern, h2o_iovec_t path, h2o_iovec_t *params)
{
    const char *p = pattern, *s = path.base, *end = path.base + path.len;
    int n = 0;
    while (*p && s < end) {
        if (*p == '{') {
            const char *close = strchr(p, '}');
            const char *seg = s;
            bool rest = close[-1] == '*' && close[1] == '\0'; /* "{path*}" at the end: the rest of the path, '/' too */
            while (s < end && (rest || *s != '/'))
                s++;
            if (s == seg || n >= 2) return 0;
            for (const char *q = seg; q < s; q++)
                if ((unsigned char)*q < 0x20 || *q == 0x7f) return 0; /* a decoded %00 or other control byte */
            params[n++] = h2o_iovec_init(seg, (size_t)(s - seg));
            p = close + 1;
        } else if (*p++ != *s++) {
            return 0;
        }
    }
    return *p == '\0' && s == end;
}

int route_is_api_path(h2o_iovec_t path)
{
    static const char *const prefixes[] = {"/v1/", "/v2/", "/healthz", "/readyz", "/metrics", "/v1"};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        size_t n = strlen(prefixes[i]);
        if (path.len >= n && memcmp(path.base, prefixes[i], n) == 0) return 1;
    }
    return 0;
}

int route_find(const server *srv, h2o_iovec_t method, h2o_iovec_t path, h2o_iovec_t *params, char *allow, size_t alen)
{
    /* HEAD is GET without the body (h2o_send_inline leaves it out) */
    if (h2o_memis(method.base, method.len, H2O_STRLIT("HEAD"))) method = h2o_iovec_init(H2O_STRLIT("GET"));
    allow[0] = '\0';
    for (int i = 0; i < srv->routes_count; i++) {
        h2o_iovec_t p[2] = {{NULL, 0}, {NULL, 0}};
        if (!route_match(srv->routes[i].pattern, path, p)) continue;
        if (!h2o_memis(method.base, method.len, srv->routes[i].method, strlen(srv->routes[i].method))) {
            size_t n = strlen(allow);
            snprintf(allow + n, alen - n, "%s%s%s", n ? ", " : "", srv->routes[i].method,
                     strcmp(srv->routes[i].method, "GET") == 0 ? ", HEAD" : "");
            continue;
        }
        memcpy(params, p, sizeof(p));
        return i;
    }
    return -1;
}

size_t route_body_limit(const server *srv, const route *r)
{
    return r->body == BODY_JSON_LARGE ? srv->placement_body_limit
           : r->body == BODY_RAW      ? srv->infer_body_limit
           : r->body == BODY_UPLOAD   ? srv->upload_body_limit
                                      : srv->body_limit;
}
