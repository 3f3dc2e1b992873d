/* http.h - the dispatcher, the request context and replies (a route, the table's row, and
 * routing: route.h; a request's token: reqauth.h; the reply counters: httpstats.h).
 *
 * One table (routes.c, its rows' type in route.h, handed over as server.routes) lists every
 * endpoint: method, path pattern with {params}, the least role needed, the body limit and the
 * handler.  http.c dispatches a request against it in one place: 404/405, authentication (401), roles (403),
 * content type (415), body size (413), JSON syntax and nesting depth (400)
 * are all decided there, before any handler runs.  Handlers answer with
 * http_reply_json or http_error; a handler that must wait (for a commit)
 * takes an http_defer and answers later. */
#ifndef GANTRY_HTTP_H
#define GANTRY_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/auth.h"
#include "server/errors.h"
#include "server/route.h" /* route_fn, the table's row; routing itself is route.h's */
#include "server/server.h"

struct http_ctx {
    h2o_req_t *req;
    server *srv;
    const route *route;
    int route_index;
    auth_info auth;
    h2o_iovec_t params[2];
    json_t *body; /* parsed body for BODY_JSON routes, owned by the context */
    /* BODY_RAW: the bytes of the body that are JSON; the rest is binary tensor data (the Open
     * Inference Protocol's binary extension: header Inference-Header-Content-Length) */
    size_t json_len;
    int64_t start_us;
    struct http_defer *defer;
    bool refused; /* the gate refused its body and the connection closes after the answer (gate.h) */
};

/* installs the API dispatcher on pathconf; requests outside the API fall through (-1) */
void http_register(server *srv, h2o_pathconf_t *pathconf);

/* stealing `body`; adds Content-Type and Content-Length */
void http_reply_json(http_ctx *c, int status, json_t *body);
void http_reply_text(http_ctx *c, int status, const char *content_type, const char *body, size_t len);
void http_error(http_ctx *c, gerr e, const char *field, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void http_add_header(http_ctx *c, const char *name, const char *value);

/* the named {param} of the route ("" when absent), copied into the request pool */
const char *http_param(http_ctx *c, int i);
/* the query parameter's value copied into the request pool, NULL when absent (no decoding beyond %XX) */
const char *http_query(http_ctx *c, const char *name);
/* Pure: finds name=value in a query string (without '?'), decodes %XX and '+' into out (needs len + 1
 * bytes); the decoded length, or -1 when the name is absent. */
long http_query_value(const char *qs, size_t len, const char *name, char *out);
/* a request header's value copied into the request pool, NULL when absent */
const char *http_header(http_ctx *c, const char *name);

/* Deferred replies: the request may be gone (client closed) before the answer
 * is ready.  http_defer_ctx returns NULL then; http_defer_end releases. */
typedef struct http_defer http_defer;
http_defer *http_defer_begin(http_ctx *c);
http_ctx *http_defer_ctx(http_defer *d);
void http_defer_end(http_defer *d);

/* Pure: the reply body of an error, {"error":{"code","message","field"}}, from any bytes (a message that
 * quotes broken input is made valid UTF-8 first, so the body always exists). */
json_t *http_error_body(gerr e, const char *field, const char *message);
/* Pure: a request body as a JSON object (nesting up to max_depth, no duplicate keys), or NULL with the
 * reason in msg.  The fuzz target fuzz_body drives it with http_error_body, as a request does. */
json_t *http_parse_object(const char *s, size_t len, int max_depth, char *msg, size_t mlen);

/* the depth of the deepest nesting of arrays/objects in a JSON text (strings skipped) */
int http_json_depth(const char *s, size_t len);

#endif
