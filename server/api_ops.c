/* api_ops.c - probes, metrics, the SSE stream (the worker registry view is in api_cluster.c, models in api_models.c). */
#include "common/alloc.h"
#include "server/db.h"
#include "server/api.h"
#include "server/bus.h"
#include "server/metrics.h"
#include "server/sse.h"

#include <stdio.h>
#include <stdlib.h>

void api_healthz(http_ctx *c)
{
    http_reply_json(c, 200, json_pack("{s:s}", "status", "ok"));
}

void api_readyz(http_ctx *c)
{
    sqlite3_stmt *st = db_stmt(c->srv->db, "SELECT 1");
    int db_ok = st && db_step(st) == SQLITE_ROW;
    db_release(st);
    int redis_ok = bus_ready(c->srv->bus);
    json_t *body =
        json_pack("{s:s, s:b, s:b}", "status", db_ok && redis_ok ? "ready" : "not ready", "sqlite", db_ok, "redis", redis_ok);
    http_reply_json(c, db_ok && redis_ok ? 200 : 503, body);
}

void api_metrics(http_ctx *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = xopen_memstream(&buf, &len);
    metrics_render(c->srv->metrics, c->srv, out);
    fclose(out);
    http_reply_text(c, 200, "text/plain; version=0.0.4", buf, len);
    free(buf);
}

void api_events_stream(http_ctx *c)
{
    sse_attach(c->srv->sse, c->req, c->auth.role == ROLE_ADMIN ? NULL : c->auth.tenant_id);
}
