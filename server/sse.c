/* sse.c - Server-Sent Events: the per-tenant streams and a request's own stream (sse.h). */
#include "server/sse.h"
#include "common/alloc.h"
#include "common/jsonfmt.h"

#include <stdlib.h>
#include <string.h>

#define SSE_MAX_PENDING (4u << 20) /* a stream that falls this far behind misses events (the client refetches) */
#define SSE_KEEPALIVE_MS 15000

typedef struct sse_stream {
    h2o_generator_t gen; /* first: h2o hands it back to proceed */
    h2o_req_t *req;
    sse_hub *hub;
    char tenant[48]; /* "" = every tenant */
    char *pending, *inflight;
    size_t pending_len, pending_cap;
    int sending;
    int own;       /* a request's own stream (sse_open): sse_publish passes it by */
    int finishing; /* sse_finish: the response ends with what is pending */
    int finished;  /* the final part was handed to h2o: nothing more is sent */
    void (*on_close)(void *arg);
    void *close_arg;
    struct sse_stream *prev, *next;
} stream;

struct sse_hub {
    stream *head;
    int count;
    uv_timer_t keepalive;
};

static void send_pending(stream *s)
{
    if (s->sending || s->finished || (s->pending_len == 0 && !s->finishing)) return;
    free(s->inflight);
    s->inflight = s->pending;
    h2o_iovec_t buf = h2o_iovec_init(s->inflight, s->pending_len);
    s->pending = NULL;
    s->pending_len = s->pending_cap = 0;
    s->sending = 1;
    s->finished = s->finishing;
    h2o_send(s->req, &buf, buf.len ? 1 : 0, s->finished ? H2O_SEND_STATE_FINAL : H2O_SEND_STATE_IN_PROGRESS);
}

static void on_proceed(h2o_generator_t *gen, h2o_req_t *req)
{
    (void)req;
    stream *s = (stream *)gen;
    s->sending = 0;
    send_pending(s);
}

static void on_stop(h2o_generator_t *gen, h2o_req_t *req)
{
    (void)gen;
    (void)req; /* the stream is unlinked when the request's pool is released (on_dispose) */
}

static void on_dispose(void *p)
{
    stream *s = p;
    if (s->prev)
        s->prev->next = s->next;
    else
        s->hub->head = s->next;
    if (s->next) s->next->prev = s->prev;
    s->hub->count--;
    free(s->pending);
    free(s->inflight);
    if (s->on_close) s->on_close(s->close_arg);
}

static void append(stream *s, const char *data, size_t len)
{
    if (s->finishing || s->pending_len + len > SSE_MAX_PENDING) return;
    if (s->pending_len + len > s->pending_cap) {
        size_t cap = s->pending_cap ? s->pending_cap * 2 : 4096;
        while (cap < s->pending_len + len)
            cap *= 2;
        s->pending = xrealloc(s->pending, cap);
        s->pending_cap = cap;
    }
    memcpy(s->pending + s->pending_len, data, len);
    s->pending_len += len;
}

static void on_keepalive(uv_timer_t *t)
{
    sse_hub *hub = t->data;
    for (stream *s = hub->head; s; s = s->next) {
        append(s, ":keepalive\n\n", 12);
        send_pending(s);
    }
}

sse_hub *sse_create(uv_loop_t *loop)
{
    sse_hub *hub = xcalloc(1, sizeof(*hub));
    uv_timer_init(loop, &hub->keepalive);
    hub->keepalive.data = hub;
    uv_timer_start(&hub->keepalive, on_keepalive, SSE_KEEPALIVE_MS, SSE_KEEPALIVE_MS);
    uv_unref((uv_handle_t *)&hub->keepalive);
    return hub;
}

/* the stream of req, linked into the hub, its response started with ":connected" */
static stream *start(sse_hub *hub, h2o_req_t *req)
{
    stream *s = h2o_mem_alloc_shared(&req->pool, sizeof(*s), on_dispose);
    memset(s, 0, sizeof(*s));
    s->gen.proceed = on_proceed;
    s->gen.stop = on_stop;
    s->req = req;
    s->hub = hub;
    s->next = hub->head;
    if (hub->head) hub->head->prev = s;
    hub->head = s;
    hub->count++;

    req->res.status = 200;
    req->res.reason = "OK";
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("text/event-stream"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-store"));
    h2o_start_response(req, &s->gen);
    append(s, ":connected\n\n", 12);
    send_pending(s);
    return s;
}

void sse_attach(sse_hub *hub, h2o_req_t *req, const char *tenant_id)
{
    stream *s = start(hub, req);
    if (tenant_id) snprintf(s->tenant, sizeof(s->tenant), "%s", tenant_id);
}

sse_stream *sse_open(sse_hub *hub, h2o_req_t *req, void (*on_close)(void *arg), void *arg)
{
    stream *s = start(hub, req);
    s->own = 1;
    s->on_close = on_close;
    s->close_arg = arg;
    return s;
}

void sse_send(sse_stream *s, const char *name, const char *data)
{
    char *msg = xasprintf("event: %s\ndata: %s\n\n", name, data);
    append(s, msg, strlen(msg));
    free(msg);
    send_pending(s);
}

size_t sse_pending(const sse_stream *s)
{
    return s->pending_len;
}

void sse_finish(sse_stream *s)
{
    s->finishing = 1;
    send_pending(s);
}

void sse_publish(sse_hub *hub, const char *tenant_id, const char *name, const char *json)
{
    if (!hub->head) return; /* nobody listens */
    size_t jlen = strlen(json), len = strlen(name) + jlen + 20;
    char *msg = xmalloc(len);
    size_t n = (size_t)snprintf(msg, len, "event: %s\ndata: ", name);
    memcpy(msg + n, json, jlen + 1);
    n += jsonfmt_shorten(msg + n); /* every event's reals in their shortest round-trip form */
    memcpy(msg + n, "\n\n", 3);
    n += 2;
    for (stream *s = hub->head; s; s = s->next) {
        if (s->own || (s->tenant[0] && strcmp(s->tenant, tenant_id) != 0)) continue;
        append(s, msg, n);
        send_pending(s);
    }
    free(msg);
}

int sse_count(const sse_hub *hub)
{
    return hub->count;
}

void sse_close(sse_hub *hub)
{
    uv_timer_stop(&hub->keepalive);
    uv_close((uv_handle_t *)&hub->keepalive, NULL);
}
