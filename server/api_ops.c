/* api_ops.c - probes, metrics, the SSE stream (the worker registry view is in api_cluster.c, models in api_models.c). */
#include "common/alloc.h"
#include "wire/redis_auth.h"
#include "server/db.h"
#include "server/api.h"
#include "server/bus.h"
#include "server/metrics.h"
#include "server/reqauth.h"
#include "server/sse.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void api_healthz(http_ctx *c)
{
    http_reply_json(c, 200, json_pack("{s:s}", "status", "ok"));
}

void api_readyz(http_ctx *c)
{
    sqlite3_stmt *st = db_stmt(c->srv->db, "SELECT 1");
    int db_ok = st && db_step(st) == SQLITE_ROW;
    db_release(st);
    int redis_ok = bus_ready(c->srv->bus) && !redis_auth_failing(); /* connected, and not refused our credentials */
    json_t *body =
        json_pack("{s:s, s:b, s:b}", "status", db_ok && redis_ok ? "ready" : "not ready", "sqlite", db_ok, "redis", redis_ok);
    http_reply_json(c, db_ok && redis_ok ? 200 : 503, body);
}

/* Who sees what (docs/operations.md, "Metrics"): without a token, or with a viewer's or a member's, the
 * cluster-wide series only (no tenant name, no job id); with the scrape token (--metrics-token-file,
 * compared in constant time) or an admin token, every series.  A token that is neither known nor the
 * scrape token is a 401, so a Prometheus with a wrong credentials_file sees its scrape fail instead of
 * quietly getting the reduced set. */
static int metrics_access(http_ctx *c, bool *full)
{
    h2o_iovec_t authz[4];
    int n = 0;
    for (ssize_t i = -1; (i = h2o_find_header(&c->req->headers, H2O_TOKEN_AUTHORIZATION, i)) != -1 && n < 4;)
        authz[n++] = c->req->headers.entries[i].value;
    *full = false;
    if (n == 0) return 0;
    const server *srv = c->srv;
    if (n == 1 && srv->metrics_token_len && authz[0].len == 7 + srv->metrics_token_len &&
        strncasecmp(authz[0].base, "Bearer ", 7) == 0 &&
        CRYPTO_memcmp(authz[0].base + 7, srv->metrics_token, srv->metrics_token_len) == 0) {
        *full = true;
        return 0;
    }
    gerr e;
    char msg[128];
    if (!reqauth_bearer(c->srv, authz, n, ROLE_VIEWER, &c->auth, &e, msg, sizeof(msg))) {
        http_error(c, e, e == GERR_BAD_REQUEST ? "Authorization" : NULL, "%s", msg);
        return -1;
    }
    *full = c->auth.role == ROLE_ADMIN;
    return 0;
}

void api_metrics(http_ctx *c)
{
    bool full;
    if (metrics_access(c, &full) != 0) return;
    char *buf = NULL;
    size_t len = 0;
    FILE *out = xopen_memstream(&buf, &len);
    metrics_render(c->srv, out, full);
    fclose(out);
    http_reply_text(c, 200, "text/plain; version=0.0.4", buf, len);
    free(buf);
}

void api_events_stream(http_ctx *c)
{
    sse_attach(c->srv->sse, c->req, c->auth.role == ROLE_ADMIN ? NULL : c->auth.tenant_id);
}
