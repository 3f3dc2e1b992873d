/* sse.h - Server-Sent Events to dashboards: GET /v1/events streams, per tenant.
 * The hub owns the list of open streams; each stream keeps a pending buffer that
 * is handed to h2o whenever the previous write completed (h2o allows one write
 * in flight per response).  A stream's memory is released with its request. */
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
int sse_count(const sse_hub *hub);
void sse_close(sse_hub *hub);

#endif
