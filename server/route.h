/* route.h - what a route is and how a request finds one: the table's row (the table itself is
 * routes.c, reached only through server.routes, which main.c sets), matching a method and path
 * against the table, whether a path belongs to the API, and a route's body limit.  http.c (the
 * dispatcher) and gate.c (which judges a request from its head) both route with it; metrics.c
 * labels its series with the rows and the OpenAPI document is written from them.  It calls no
 * handler and includes no HTTP layer, so none of its readers depends on another through it. */
#ifndef GANTRY_ROUTE_H
#define GANTRY_ROUTE_H

#include <stddef.h>

#include "server/auth.h"
#include "server/server.h"

typedef struct http_ctx http_ctx;
typedef void (*route_fn)(http_ctx *c);

/* BODY_RAW: size, type and nesting are checked but the body is not parsed (it is
 * forwarded as is: inference requests, parsed by the replica) */
/* BODY_UPLOAD: multipart/form-data up to the model-upload-limit, handed to the handler unparsed */
enum { BODY_NONE = 0, BODY_JSON = 1, BODY_JSON_LARGE = 2, BODY_RAW = 3, BODY_UPLOAD = 4 };

typedef struct route {
    const char *method;
    const char *pattern; /* "/v1/jobs/{id}/cancel" */
    role role;           /* ROLE_NONE: no token needed */
    int body;            /* BODY_* */
    route_fn fn;
    const char *summary;
    int limiter; /* LIMIT_API (the per-token API rate limit) or LIMIT_INFER (the per-token prediction limit) */
} route;

enum { LIMIT_API = 0, LIMIT_INFER = 1 };

/* 1 when path matches pattern ("/v1/jobs/{id}"), capturing up to two {params}: a param is one
 * non-empty path segment; the last one, when written {name*}, is the non-empty rest of the path */
int route_match(const char *pattern, h2o_iovec_t path, h2o_iovec_t *params);

/* The route for method and (normalized) path in srv's table, as an index into srv->routes (HEAD finds
 * the GET route), or -1 with allow listing the methods the path takes ("" when no route has this path).
 * The gate and the dispatcher both route with it. */
int route_find(const server *srv, h2o_iovec_t method, h2o_iovec_t path, h2o_iovec_t *params, char *allow, size_t alen);
/* whether the path belongs to the API (else to the dashboard's files) */
int route_is_api_path(h2o_iovec_t path);
/* the largest body the route takes */
size_t route_body_limit(const server *srv, const route *r);

#endif
