/* serve_io.h - the Redis side of an inference replica (keys in wire/keys.h).
 *
 * Requests wait in gantry:infer:q:<job> as "<id> <reply stream> <bytes of JSON> <body>" (the
 * body's JSON, then any binary tensor data: serve.h serve_request.json_len; the line's one
 * encoder and decoder: wire/infer_wire.h); a replica
 * takes up to max_batch of them (blocking for the first, taking what else is
 * there, and only when that was something, i.e. under load, waiting batch_delay
 * for the batch to fill) and answers each on the stream its server
 * named, "<id> <status> <body>", all in one pipeline.  A request whose server
 * already gave up (timeout) is answered anyway: the server drops unknown ids. */
#ifndef GANTRY_SERVE_IO_H
#define GANTRY_SERVE_IO_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "wire/redis_sync.h"
#include "workers/serve/serve.h"

/* one request a replica takes, from the Redis queue (reply_to set: the server's reply stream) or from a
 * direct connection (reply_to NULL: conn and conn_gen name it in workers/serve_direct.h, seq is the
 * server's request id) */
typedef struct {
    char *raw; /* owned */
    const char *id, *reply_to;
    serve_request req; /* body points into raw */
    int conn;
    unsigned conn_gen;
    uint64_t seq;
} serve_msg;

/* Takes up to max requests; waits up to wait_ms for the first (0: does not wait) and then at most
 * delay_ms for more.  Returns how many (malformed entries are dropped), -1 when
 * Redis is unreachable. */
int serve_io_pop(rs_conn *r, const char *job_id, int max, int wait_ms, int delay_ms, serve_msg *out);
/* the answer to m: the body (the replica's reply, or the error body of its message; free it) and the
 * status in *status (the replica's 200/400, or the worker's 503/504); takes m's reply */
char *serve_msg_answer(serve_msg *m, int *status);
/* sends every reply (200 with the body, or 400 with {"error":...}) and frees the messages */
void serve_io_reply(rs_conn *r, serve_msg *msgs, int n);
/* publishes (or, endpoint NULL, withdraws) where this replica's worker takes requests directly
 * (workers/serve_direct.h): gantry:infer:ep:<job>, field <worker>, "<host> <port> <token> <attempt>" */
void serve_io_endpoint(rs_conn *r, const char *job_id, const char *worker_id, const char *endpoint, int attempt);
/* publishes this replica's counters in gantry:infer:stats:<job> */
void serve_io_stats(rs_conn *r, const char *job_id, const char *worker_id, const char *stats_json);

/* the job was requeued as a newer generation (a replica was lost: gantry:retry:<job>:<attempt>), or the
 * autoscaler drains this worker's replica (gantry:infer:drain:<job>:<worker>): it steps aside */
bool serve_io_superseded(rs_conn *r, const char *job_id, int attempt, const char *worker_id);
/* the version the job's replicas should serve now, after its alias moved (gantry:infer:model:<job>: a
 * new reference to a spec.resolved object), or NULL */
json_t *serve_io_wanted_model(rs_conn *r, const char *job_id);

#endif
