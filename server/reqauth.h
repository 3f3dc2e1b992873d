/* reqauth.h - authorizing a request by its bearer token: the Authorization header values (as h2o
 * has them) looked up in the token store (auth.h) and checked against the least role a route needs.
 * Apart from the dispatcher (http.h) so that the gate, which judges a request from its head before
 * the dispatcher runs, needs nothing of it. */
#ifndef GANTRY_REQAUTH_H
#define GANTRY_REQAUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "server/auth.h"
#include "server/errors.h"
#include "server/server.h"

/* Whether the Authorization header values (n of them) carry a live token whose role is at least need:
 * true with info filled, or false with the error (400 for several headers, 401, 403) and a message. */
bool reqauth_bearer(server *srv, const h2o_iovec_t *authz, int n, role need, auth_info *info, gerr *e, char *msg, size_t mlen);

#endif
