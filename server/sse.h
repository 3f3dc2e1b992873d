/* sse.h - Server-Sent Events to dashboards: GET /v1/events streams, per tenant,
 * and a request's own event stream (a job's log follow: server/logs.c).
 * The hub owns the list of open streams; each stream keeps a pending buffer that
 * is handed to h2o whenever the previous write completed (h2o allows one write
 * in flight per response).  Every stream gets a keepalive comment every 15 s.
 * A stream's memory is released with its request. */
#ifndef GANTRY_SSE_H
#define GANTRY_SSE_H

#define H2O_USE_LIBUV 1
#include <h2o.h>
#include <uv.h>

typedef struct sse_hub sse_hub;

sse_hub *sse_create(uv_loop_t *loop);
/* starts the event stream on req; tenant_id NULL sees every tenant (admin) */
void sse_attach(sse_hub *hub, h2o_req_t *req, const char *tenant_id);
/* queues "event: <name>\ndata: <json>\n\n" to every stream that may see tenant_id */
void sse_publish(sse_hub *hub, const char *tenant_id, const char *name, const char *json);

/* A request's own stream: sse_publish passes it by; its owner sends with sse_send.  on_close(arg)
 * is called once, when the request is released (the client went away, or the response ended
 * after sse_finish); the stream must not be used after it. */
typedef struct sse_stream sse_stream;
sse_stream *sse_open(sse_hub *hub, h2o_req_t *req, void (*on_close)(void *arg), void *arg);
/* queues "event: <name>\ndata: <data>\n\n": data is one line (no CR, no LF) */
void sse_send(sse_stream *s, const char *name, const char *data);
/* bytes queued and not yet handed to h2o (a reader that falls behind should wait: past 4 MiB
 * what is sent is dropped) */
size_t sse_pending(const sse_stream *s);
/* the response ends once what is queued has been sent */
void sse_finish(sse_stream *s);

int sse_count(const sse_hub *hub);
void sse_close(sse_hub *hub);

#endif
