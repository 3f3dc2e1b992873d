/* reqauth.c - a request's bearer token against the token store (auth.h): the Authorization header
 * values a request carries, looked up and checked against the role a route needs.  The dispatcher
 * (http.c), the gate (gate.c, from a request's head) and /metrics (api_ops.c) authorize with it. */
#include "server/reqauth.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

bool reqauth_bearer(server *srv, const h2o_iovec_t *authz, int n, role need, auth_info *info, gerr *e, char *msg, size_t mlen)
{
    *e = GERR_UNAUTHORIZED;
    if (n > 1) {
        *e = GERR_BAD_REQUEST;
        snprintf(msg, mlen, "send one Authorization header, not %d", n);
        return false;
    }
    if (n == 0 || authz[0].len <= 7 || strncasecmp(authz[0].base, "Bearer ", 7) != 0) {
        snprintf(msg, mlen, "missing bearer token (header 'Authorization: Bearer <token>')");
        return false;
    }
    const char *secret = authz[0].base + 7;
    size_t len = authz[0].len - 7;
    int rc = len > 256 ? -1 : auth_lookup(srv->db, secret, len, info);
    if (rc != 0) {
        snprintf(msg, mlen, rc == AUTH_EXPIRED ? "this token has expired" : "unknown or revoked token");
        return false;
    }
    if (info->role < need) {
        *e = GERR_FORBIDDEN;
        snprintf(msg, mlen, "role '%s' may not do this (needs '%s')", role_name(info->role), role_name(need));
        return false;
    }
    return true;
}
