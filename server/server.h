/* server.h - the gantry-server process: what it owns and the pieces it wires.
 *
 * One libuv loop runs everything: h2o (HTTP), the Redis bus (hiredis async),
 * the group-commit store (SQLite, the only writer), the SSE hub, timers. */
#ifndef GANTRY_SERVER_H
#define GANTRY_SERVER_H

#define H2O_USE_LIBUV 1
#include <h2o.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <uv.h>

#include "server/store.h"

typedef struct bus bus;
typedef struct sse_hub sse_hub;
typedef struct httpstats httpstats;
typedef struct ratelimit ratelimit;
typedef struct infer_gw infer_gw;
typedef struct logs_hub logs_hub;
struct route;

typedef struct server {
    uv_loop_t *loop;
    sqlite3 *db;
    store *store;
    bus *bus;
    sse_hub *sse;
    httpstats *httpstats;       /* HTTP replies by route (server/httpstats.h) */
    ratelimit *ratelimit;       /* per token */
    ratelimit *infer_ratelimit; /* per token, predictions (POST /v2/models/{name}/infer) */
    infer_gw *infer;            /* inference requests and replies (server/infer.h) */
    logs_hub *logs;             /* program jobs' logs and their followers (server/logs.h) */
    const struct route *routes; /* the route table (server/routes.h), set by main.c */
    int routes_count;

    /* settings */
    const char *web_dir;
    const char *state_dir;
    size_t body_limit;           /* every JSON body (default 1 MiB) */
    size_t placement_body_limit; /* POST /v1/jobs with a placement graph (default 32 MiB) */
    size_t infer_body_limit;     /* POST /v2/models/{name}/infer (default 20 MiB: 1,024 samples of pixels/255) */
    size_t upload_body_limit;    /* POST /v1/models/{name}/versions: a model file and its metadata (default 512 MiB) */
    const char *model_store;     /* where uploaded models are written (absolute; default STATE/models) */
    char metrics_token[256];     /* --metrics-token-file: a Prometheus scrape token ("" for none; api_metrics) */
    size_t metrics_token_len;
    int json_max_depth;
    int list_max;

    h2o_globalconf_t h2o;
    h2o_context_t h2o_ctx;
    h2o_accept_ctx_t accept;
    uv_tcp_t listener;
    bool stopping;
} server;

#endif
