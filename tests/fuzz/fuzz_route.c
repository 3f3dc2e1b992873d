/* fuzz_route.c - route_match against every pattern of the route table (server/routes.c),
 * as the dispatcher calls it on each request path.  The input is the path; it is copied into a
 * buffer of exactly its size because h2o's path is not NUL-terminated.
 *
 * Checks: a match captures one {param} per placeholder, each a non-empty slice of the path
 * without '/', and putting the captures back into the pattern gives the path again. */
#include "server/http.h"
#include "server/routes.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_match(const char *pattern, const char *path, size_t len, const h2o_iovec_t *params)
{
    size_t at = 0;
    int n = 0;
    for (const char *p = pattern; *p;) {
        if (*p == '{') {
            const char *close = strchr(p, '}');
            FUZZ_CHECK(close != NULL, "pattern '%s' has an unclosed '{'", pattern);
            FUZZ_CHECK(n < 2, "pattern '%s' has more than two params", pattern);
            const h2o_iovec_t *v = &params[n++];
            FUZZ_CHECK(v->base == path + at && v->len > 0 && at + v->len <= len, "'%s': param %d is not the next path segment",
                       pattern, n);
            FUZZ_CHECK(memchr(v->base, '/', v->len) == NULL, "'%s': param %d spans a '/'", pattern, n);
            at += v->len;
            p = close + 1;
        } else {
            FUZZ_CHECK(at < len && path[at] == *p, "'%s' matched a path that differs at byte %zu", pattern, at);
            at++;
            p++;
        }
    }
    FUZZ_CHECK(at == len, "'%s' matched a path with %zu bytes left over", pattern, len - at);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *path = malloc(size ? size : 1);
    if (!path) abort();
    if (size) memcpy(path, data, size);
    for (int i = 0; i < routes_count; i++) {
        h2o_iovec_t params[2] = {{NULL, 0}, {NULL, 0}};
        if (route_match(routes[i].pattern, h2o_iovec_init(path, size), params)) check_match(routes[i].pattern, path, size, params);
    }
    free(path);
    return 0;
}
