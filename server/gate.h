/* gate.h - the request gate: what a request may cost us is decided from its head.
 *
 * h2o 2.2.5 reads a whole request body into memory before any handler runs (and
 * sends "100 Continue" before anyone looked at the request), so a client without
 * a token could make the server buffer the placement limit per connection.  The
 * gate sees every byte of an HTTP/1 connection before h2o's parser does and, as
 * soon as a request's head is complete and declares a body, decides from the head
 * alone: route and method (404/405), token and role (401/403, 400 for two
 * Authorization headers), a chunked or malformed length (411/400), the route's
 * body limit (413) and the memory budgets (503 with Retry-After): the bytes of
 * request bodies the server holds at once, and per token.
 *
 * A refused request reaches h2o without its body: the gate renames its
 * Content-Length / Transfer-Encoding header to a mark that carries the status
 * ("x-gate-413-len"), drops the body bytes as they arrive (never buffered), and
 * http.c answers the marked request in JSON; the connection goes on after the
 * dropped body, or ends when the body's end is unknown or the client waits for
 * "100 Continue" (it will not send the body).  So h2o never buffers, nor sends
 * "100 Continue" for, a refused body.  A mark a client sends itself can only get
 * its own request refused.
 *
 * Only HTTP/1 is spoken (the h2c upgrade is off; TLS offers no h2): HTTP/2 in
 * h2o 2.2.5 buffers whole bodies the same way.  The one seam into h2o: gate.c
 * interposes h2o_socket_read_start, so that the gate's read callback is put back
 * in front of h2o's HTTP/1 reader whenever h2o (re)starts reading a connection. */
#ifndef GANTRY_GATE_H
#define GANTRY_GATE_H

#include <stdbool.h>
#include <stdint.h>

#include "server/auth.h"
#include "server/server.h"

typedef struct gate gate;

/* budget: bytes of request bodies held at once in the whole server; token_budget: per token */
gate *gate_create(server *srv, uint64_t budget, uint64_t token_budget);
void gate_free(gate *g);

/* puts the gate in front of an accepted connection (call before h2o_accept) */
void gate_attach(gate *g, h2o_socket_t *sock);

/* the status the gate decided for a request it marked (0: not marked); *declared: the length the
 * request declared (0 when chunked); *close: the connection must end after the answer (the body's
 * end is unknown, or the client waits for an answer before it sends the body).  Otherwise the gate
 * drops the body as it comes and the connection goes on. */
int gate_mark(h2o_req_t *req, uint64_t *declared, bool *close);

/* whether the gate looked up this Authorization value for a body it let in on this connection (then
 * *info is its answer, milliseconds old): the dispatcher need not look the token up again */
bool gate_authorized(h2o_req_t *req, h2o_iovec_t authz, auth_info *info);


#endif
