/* infer_link.h - the inference gateway's direct connections to the replicas' workers: requests go
 * there without Redis (docs/inference.md "The request path").
 *
 * Each worker serving a job publishes an endpoint "<host> <port> <token> <attempt>" in
 * gantry:infer:ep:<job> (workers/serve_direct.h); the gateway hands them to ilinks_set, which
 * connects to the new ones (TCP, a hello frame with the token first: wire/infer_frame.h) and closes
 * the ones gone.  ilinks_send writes a request on the job's connected link with the fewest requests
 * outstanding; each reply frame comes back through the reply callback, and a link that drops (its
 * worker died, was stopped or cut off) is reported with its id so that the gateway retries what was
 * in flight on it once elsewhere or answers 503.  Owns the connections and their buffers; one libuv
 * loop (the server's). */
#ifndef GANTRY_INFER_LINK_H
#define GANTRY_INFER_LINK_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "wire/infer_frame.h"

typedef struct infer_links infer_links;

/* a request's frame (head and body, wire/infer_frame.h), counted: the gateway holds it until the
 * request is answered (a retry sends it again), each write until it is on the socket */
typedef struct {
    int refs;
    size_t len;
    char data[];
} ilink_frame;

/* the frame with head h (h->len: bytes of body) and the body, one reference held */
ilink_frame *ilink_frame_new(const if_head *h, const void *body);
void ilink_frame_unref(ilink_frame *f);

/* a reply frame: the request's id, its status and body (valid during the call) */
typedef void (*ilink_reply_fn)(void *arg, uint64_t seq, int status, const char *body, size_t len);
/* the link with this id is gone (requests sent on it will get no reply) */
typedef void (*ilink_lost_fn)(void *arg, uint32_t link);

infer_links *ilinks_create(uv_loop_t *loop, ilink_reply_fn on_reply, ilink_lost_fn on_lost, void *arg);

/* the job's endpoints now (the values of gantry:infer:ep:<job>): links to new ones are opened, links
 * to endpoints no longer listed closed (reported lost) */
void ilinks_set(infer_links *L, const char *job_id, const char *const *endpoints, int n);

/* The frame on the job's ready link with the fewest requests outstanding, other than `avoid` when
 * there is another; the link's id (> 0), or 0 when the job has no ready link. */
uint32_t ilinks_send(infer_links *L, const char *job_id, ilink_frame *f, uint32_t avoid);
/* a request sent on link was answered or given up: one fewer outstanding */
void ilinks_done(infer_links *L, uint32_t link);
/* requests outstanding on the job's ready links and how many links are ready */
int ilinks_outstanding(const infer_links *L, const char *job_id, int *ready);

/* closes every link; the handles are closed on the loop's next turn, then L is freed */
void ilinks_close(infer_links *L);

#endif
