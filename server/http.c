/* http.c - the dispatcher (http.h): a request's way from h2o to its handler (the dashboard's files
 * fall through), the checks every route shares (routing: route.h; the token: reqauth.h or the gate's
 * answer; rate limits, content type, body size and JSON), replies, request accessors and deferred
 * replies.  Each reply is counted in httpstats.h; /metrics itself is its handler's (metrics.h). */
#include "server/http.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "server/gate.h"
#include "common/jsonfmt.h"
#include "common/log.h"
#include "common/utf8.h"
#include "server/httpstats.h"
#include "server/reqauth.h"
#include "server/route.h"
#include "server/ratelimit.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    h2o_handler_t super;
    server *srv;
} api_handler;

struct http_defer {
    http_ctx *c; /* NULL once the request is gone */
    int refs;
};

/* ---- replies ---- */

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 411:
        return "Length Required";
    case 413:
        return "Payload Too Large";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Content";
    case 429:
        return "Too Many Requests";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return status < 400 ? "OK" : "Error";
    }
}

static void finish(http_ctx *c, int status)
{
    httpstats_record(c->srv->httpstats, c->route_index, status, (double)(clock_mono_us() - c->start_us) / 1e6);
}

void http_add_header(http_ctx *c, const char *name, const char *value)
{
    h2o_add_header_by_str(&c->req->pool, &c->req->res.headers, name, strlen(name), 1, NULL, value, strlen(value));
}

void http_reply_text(http_ctx *c, int status, const char *content_type, const char *body, size_t len)
{
    h2o_req_t *req = c->req;
    if (status >= 500) /* never the client's mistake: say why, once, in the log */
        log_warn("%d on %.*s %.*s: %.*s", status, (int)req->method.len, req->method.base, (int)req->path.len, req->path.base,
                 (int)(len < 300 ? len : 300), body);
    if (c->refused) req->http1_is_persistent = 0; /* the gate dropped this request's body: the connection ends */
    req->res.status = status;
    req->res.reason = reason_phrase(status);
    req->res.content_length = len; /* h2o_send_inline does not set it */
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, content_type, strlen(content_type));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-store"));
    finish(c, status);
    h2o_send_inline(req, body, len);
}

void http_reply_json(http_ctx *c, int status, json_t *body)
{
    char *s = jsonfmt_dumps(body, JSON_COMPACT); /* reals in their shortest round-trip form */
    json_decref(body);
    if (!s) {
        static const char oom[] = "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\",\"field\":null}}";
        http_reply_text(c, 500, "application/json", oom, sizeof(oom) - 1);
        return;
    }
    http_reply_text(c, status, "application/json", s, strlen(s));
    free(s);
}

void http_error(http_ctx *c, gerr e, const char *field, const char *fmt, ...)
{
    char msg[1024];
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
    } else {
        snprintf(msg, sizeof(msg), "%s", gerr_message(e));
    }
    http_reply_json(c, gerr_status(e), http_error_body(e, field, msg));
}

json_t *http_error_body(gerr e, const char *field, const char *message)
{
    char msg[1024], fld[512];
    utf8_copy(msg, sizeof(msg), message);
    utf8_copy(fld, sizeof(fld), field ? field : "");
    utf8_scrub(msg); /* a parser's message may quote the broken bytes it stopped at */
    utf8_scrub(fld);
    return json_pack("{s:{s:s, s:s, s:o}}", "error", "code", gerr_code(e), "message", msg, "field",
                     field ? json_string(fld) : json_null());
}

json_t *http_parse_object(const char *s, size_t len, int max_depth, char *msg, size_t mlen)
{
    int depth = http_json_depth(s, len);
    if (depth > max_depth) {
        snprintf(msg, mlen, "JSON nesting depth %d exceeds the limit of %d", depth, max_depth);
        return NULL;
    }
    json_error_t jerr;
    json_t *v = json_loadb(s, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!v) {
        snprintf(msg, mlen, "invalid JSON at line %d column %d: %s", jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        snprintf(msg, mlen, "the body must be a JSON object");
        return NULL;
    }
    return v;
}

/* ---- request accessors ---- */

const char *http_param(http_ctx *c, int i)
{
    return h2o_strdup(&c->req->pool, c->params[i].base, c->params[i].len).base;
}

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

long http_query_value(const char *qs, size_t len, const char *name, char *out)
{
    const char *p = qs, *end = qs + len;
    size_t nlen = strlen(name);
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *stop = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(stop - p));
        if (eq && (size_t)(eq - p) == nlen && memcmp(p, name, nlen) == 0) {
            size_t o = 0;
            for (const char *q = eq + 1; q < stop; q++) {
                if (*q == '%' && q + 2 < stop && hexval(q[1]) >= 0 && hexval(q[2]) >= 0) {
                    out[o++] = (char)(hexval(q[1]) * 16 + hexval(q[2]));
                    q += 2;
                } else {
                    out[o++] = *q == '+' ? ' ' : *q;
                }
            }
            out[o] = '\0';
            return (long)o;
        }
        p = stop + 1;
    }
    return -1;
}

const char *http_query(http_ctx *c, const char *name)
{
    h2o_req_t *req = c->req;
    if (req->query_at == SIZE_MAX) return NULL;
    const char *qs = req->path.base + req->query_at + 1;
    size_t len = req->path.len - req->query_at - 1;
    char *out = h2o_mem_alloc_pool(&req->pool, len + 1);
    return http_query_value(qs, len, name, out) >= 0 ? out : NULL;
}

const char *http_header(http_ctx *c, const char *name)
{
    size_t nlen = strlen(name);
    for (size_t i = 0; i < c->req->headers.size; i++) {
        h2o_header_t *h = c->req->headers.entries + i;
        if (h->name->len == nlen && h2o_lcstris(h->name->base, nlen, name, nlen))
            return h2o_strdup(&c->req->pool, h->value.base, h->value.len).base;
    }
    return NULL;
}

/* ---- deferred replies ---- */

static void on_dispose(void *p)
{
    http_defer **slot = p;
    http_defer *d = *slot;
    d->c = NULL;
    if (--d->refs == 0) free(d);
}

http_defer *http_defer_begin(http_ctx *c)
{
    http_defer *d = xmalloc(sizeof(*d));
    http_defer **slot = h2o_mem_alloc_shared(&c->req->pool, sizeof(*slot), on_dispose);
    *d = (http_defer){c, 2};
    *slot = d;
    c->defer = d;
    return d;
}

http_ctx *http_defer_ctx(http_defer *d)
{
    return d->c;
}

void http_defer_end(http_defer *d)
{
    if (--d->refs == 0) free(d);
}

/* ---- matching ---- */

int http_json_depth(const char *s, size_t len)
{
    int depth = 0, max = 0, in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (in_str) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_str = 0;
        } else if (ch == '"') {
            in_str = 1;
        } else if (ch == '{' || ch == '[') {
            if (++depth > max) max = depth;
        } else if (ch == '}' || ch == ']') {
            depth--;
        }
    }
    return max;
}

static int authenticate(http_ctx *c)
{
    h2o_iovec_t authz[4];
    int n = 0;
    for (ssize_t i = -1; (i = h2o_find_header(&c->req->headers, H2O_TOKEN_AUTHORIZATION, i)) != -1 && n < 4;)
        authz[n++] = c->req->headers.entries[i].value;
    gerr e;
    char msg[128];
    /* a request with a body: the gate looked its token up a moment ago (one lookup, not two) */
    if (n == 1 && c->req->entity.len > 0 && gate_authorized(c->req, authz[0], &c->auth) && c->auth.role >= c->route->role) return 0;
    if (reqauth_bearer(c->srv, authz, n, c->route->role, &c->auth, &e, msg, sizeof(msg))) return 0;
    http_error(c, e, e == GERR_BAD_REQUEST ? "Authorization" : NULL, "%s", msg);
    return -1;
}

/* "application/json", any case, alone or with parameters ("; charset=utf-8") */
static bool is_json_type(const char *ct)
{
    if (!ct || strncasecmp(ct, "application/json", 16) != 0) return false;
    const char *rest = ct + 16;
    while (*rest == ' ' || *rest == '\t')
        rest++;
    return *rest == '\0' || *rest == ';';
}

/* answers a request the gate refused from its head (see gate.h), once routing and the token
 * have had their say: the same 404/405/401/403 the gate saw, then its own status */
static void gate_refusal(http_ctx *c, int status, uint64_t declared)
{
    size_t limit = c->route ? route_body_limit(c->srv, c->route) : 0;
    switch (status) {
    case 411:
        http_error(c, GERR_LENGTH_REQUIRED, NULL, "send the body with a Content-Length (chunked bodies are not accepted)");
        break;
    case 413:
        http_error(c, GERR_TOO_LARGE, NULL, "the body is %llu bytes; the limit here is %zu", (unsigned long long)declared, limit);
        break;
    case 503:
        http_add_header(c, "retry-after", "1");
        http_error(c, GERR_UNAVAILABLE, NULL, "too many request bodies are being received now; retry in 1 s");
        break;
    case 405:
        http_add_header(c, "allow", "GET, HEAD");
        http_error(c, GERR_METHOD_NOT_ALLOWED, NULL, "this path takes no body");
        break;
    default:
        http_error(c, GERR_BAD_REQUEST, "Content-Length", "a malformed or conflicting Content-Length or Transfer-Encoding");
    }
}

/* whether the dashboard has a file (or a directory with index.html) at the normalized path */
static bool is_web_file(server *srv, h2o_iovec_t path)
{
    char f[4096];
    int n = snprintf(f, sizeof(f), "%s%.*s", srv->web_dir, (int)path.len, path.base);
    if (n <= 0 || (size_t)n >= sizeof(f) - 16) return false;
    struct stat st;
    if (stat(f, &st) != 0) return false;
    if (S_ISDIR(st.st_mode)) {
        snprintf(f + n, sizeof(f) - (size_t)n, "/index.html");
        return stat(f, &st) == 0 && S_ISREG(st.st_mode);
    }
    return S_ISREG(st.st_mode);
}

static int parse_body(http_ctx *c)
{
    h2o_req_t *req = c->req;
    size_t limit = route_body_limit(c->srv, c->route);
    if (req->entity.len > limit) {
        http_error(c, GERR_TOO_LARGE, NULL, "body is %zu bytes; the limit is %zu", req->entity.len, limit);
        return -1;
    }
    if (c->route->body == BODY_UPLOAD) { /* parsed by the handler (server/multipart.h) */
        const char *type = http_header(c, "content-type");
        if (!type || strncasecmp(type, "multipart/form-data", 19) != 0) {
            http_error(c, GERR_UNSUPPORTED_MEDIA, NULL, "send the body as 'Content-Type: multipart/form-data' (curl -F)");
            return -1;
        }
        return 0;
    }
    if (req->entity.len == 0 || req->entity.base == NULL) {
        if (c->route->body == BODY_RAW) {
            http_error(c, GERR_INVALID_JSON, NULL, "a JSON body is required");
            return -1;
        }
        c->body = json_object();
        return 0;
    }
    const char *binary = c->route->body == BODY_RAW ? http_header(c, "inference-header-content-length") : NULL;
    c->json_len = req->entity.len;
    if (binary) { /* JSON, then the tensors' bytes: any content type (application/octet-stream, usually) */
        char *end;
        unsigned long long n = strtoull(binary, &end, 10);
        if (end == binary || *end || n < 2 || n > req->entity.len) {
            http_error(c, GERR_BAD_REQUEST, "Inference-Header-Content-Length",
                       "must be the byte length of the JSON at the start of the body (at most its %zu bytes)", req->entity.len);
            return -1;
        }
        c->json_len = (size_t)n;
    } else if (!is_json_type(http_header(c, "content-type"))) {
        http_error(c, GERR_UNSUPPORTED_MEDIA, NULL, "send the body as 'Content-Type: application/json'");
        return -1;
    }
    char msg[512];
    if (c->route->body == BODY_RAW) { /* parsed by the replica (workers/serve): only its depth here */
        int depth = http_json_depth(req->entity.base, c->json_len);
        if (depth <= c->srv->json_max_depth) return 0;
        http_error(c, GERR_INVALID_JSON, NULL, "JSON nesting depth %d exceeds the limit of %d", depth, c->srv->json_max_depth);
        return -1;
    }
    c->body = http_parse_object(req->entity.base, req->entity.len, c->srv->json_max_depth, msg, sizeof(msg));
    if (!c->body) {
        http_error(c, GERR_INVALID_JSON, NULL, "%s", msg);
        return -1;
    }
    return 0;
}

static void free_body(void *p)
{
    http_ctx *c = *(http_ctx **)p;
    json_decref(c->body);
    c->body = NULL;
}

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    server *srv = ((api_handler *)self)->srv;
    h2o_iovec_t path = req->path_normalized;
    uint64_t declared;
    bool close;
    int refused = gate_mark(req, &declared, &close);
    bool api = route_is_api_path(path);
    bool get = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET")) ||
               h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"));
    if (!api && !refused && (!get || is_web_file(srv, path))) return -1; /* the static dashboard */

    http_ctx *c = h2o_mem_alloc_pool(&req->pool, sizeof(*c));
    memset(c, 0, sizeof(*c));
    c->req = req;
    c->srv = srv;
    c->start_us = clock_mono_us();
    c->route_index = -1;
    c->refused = refused && close;
    http_ctx **owner = h2o_mem_alloc_shared(&req->pool, sizeof(*owner), free_body);
    *owner = c;
    if (!api) {
        if (refused) {
            gate_refusal(c, refused, declared);
        } else {
            http_error(c, GERR_NOT_FOUND, NULL, "no such page or endpoint: %.*s", (int)path.len, path.base);
        }
        return 0;
    }

    char allow[128];
    c->route_index = route_find(srv, req->method, path, c->params, allow, sizeof(allow));
    if (c->route_index >= 0) c->route = &srv->routes[c->route_index];
    if (!c->route) {
        if (allow[0]) {
            http_add_header(c, "allow", allow);
            http_error(c, GERR_METHOD_NOT_ALLOWED, NULL, "%.*s is not allowed here; allowed: %s", (int)req->method.len,
                       req->method.base, allow);
        } else {
            http_error(c, GERR_NOT_FOUND, NULL, "no such endpoint: %.*s", (int)path.len, path.base);
        }
        return 0;
    }
    if (c->route->role != ROLE_NONE && authenticate(c) != 0) return 0;
    if (refused) {
        gate_refusal(c, refused, declared);
        return 0;
    }
    ratelimit *rl = c->route->limiter == LIMIT_INFER ? srv->infer_ratelimit : srv->ratelimit;
    int wait = c->route->role != ROLE_NONE ? ratelimit_take(rl, c->auth.token_id, c->start_us) : 0;
    if (wait) {
        char retry[16];
        snprintf(retry, sizeof(retry), "%d", wait);
        http_add_header(c, "retry-after", retry);
        http_error(c, GERR_RATE_LIMITED, NULL, "this token is over its rate limit; retry in %d s", wait);
        return 0;
    }
    if (c->route->body != BODY_NONE && parse_body(c) != 0) return 0;
    c->route->fn(c);
    return 0;
}

void http_register(server *srv, h2o_pathconf_t *pathconf)
{
    api_handler *h = (api_handler *)h2o_create_handler(pathconf, sizeof(*h));
    h->srv = srv;
    h->super.on_req = on_req;
}
