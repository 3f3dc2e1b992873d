/* route.h - what a route is: one row of the route table (routes.c), which http.c routes by, the
 * gate checks a request's head against, metrics.c labels its series with and the OpenAPI document
 * is written from.  Apart from http.h so that those readers of the table need not include the HTTP
 * layer (metrics.c, which http.c reports every reply to, among them). */
#ifndef GANTRY_ROUTE_H
#define GANTRY_ROUTE_H

#include "server/auth.h"

typedef struct http_ctx http_ctx;
typedef void (*route_fn)(http_ctx *c);

/* BODY_RAW: size, type and nesting are checked but the body is not parsed (it is
 * forwarded as is: inference requests, parsed by the replica) */
/* BODY_UPLOAD: multipart/form-data up to the model-upload-limit, handed to the handler unparsed */
enum { BODY_NONE = 0, BODY_JSON = 1, BODY_JSON_LARGE = 2, BODY_RAW = 3, BODY_UPLOAD = 4 };

typedef struct {
    const char *method;
    const char *pattern; /* "/v1/jobs/{id}/cancel" */
    role role;           /* ROLE_NONE: no token needed */
    int body;            /* BODY_* */
    route_fn fn;
    const char *summary;
    int limiter; /* LIMIT_API (the per-token API rate limit) or LIMIT_INFER (the per-token prediction limit) */
} route;

enum { LIMIT_API = 0, LIMIT_INFER = 1 };

/* the table (routes.c) */
extern const route routes[];
extern const int routes_count;

#endif
