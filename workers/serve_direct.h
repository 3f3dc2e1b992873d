/* serve_direct.h - the direct side of an inference replica's worker: it listens on the worker's
 * advertised host (an ephemeral port), publishes "<host> <port> <token>" (serve_io_endpoint), and
 * takes requests from the servers' gateways over persistent connections in the frames of
 * wire/infer_frame.h, answering each on the connection it came on.  Requests no longer pass
 * through Redis (docs/inference.md "The request path"); Redis keeps the control: the endpoint, the
 * counters, cancels, alias moves.
 *
 * A connection's first frame must be a hello with the token (compared in constant time), or it is
 * closed; a malformed frame closes it too.  Owns the listening socket, the connections and the
 * requests read but not yet taken.  One thread (exec_infer's loop). */
#ifndef GANTRY_SERVE_DIRECT_H
#define GANTRY_SERVE_DIRECT_H

#include <stddef.h>

#include "workers/serve/replica_shm.h"
#include "workers/serve_io.h"

#define SD_MAX_CONNS 64 /* servers' gateways at once; one more is accepted and closed */

typedef struct serve_direct serve_direct;

/* listens on host (the worker's advertise-host), an ephemeral port, with a fresh random token; NULL
 * with err */
serve_direct *sd_open(const char *host, char *err, size_t errlen);
/* reads request bodies into shm (the job's request region, which its replicas map) from now on, as
 * long as it has room; it must outlive sd */
void sd_use_region(serve_direct *sd, replica_shm *shm);
/* "<host> <port> <token>", for serve_io_endpoint */
const char *sd_endpoint(const serve_direct *sd);
/* Takes up to max requests: waits up to wait_ms for the first, then, when more than one came at once
 * (there is load), up to delay_ms for the batch to fill.  Accepts and reads every connection
 * meanwhile.  Returns how many (each with reply_to NULL). */
int sd_pop(serve_direct *sd, int max, int wait_ms, int delay_ms, serve_msg *out);
/* answers every direct message of msgs (reply_to NULL; the others are left alone): 200 with the
 * replica's body, 400 with its error, or the worker's own status (503, 504); frees their bodies.  A
 * connection that does not take its replies within a few seconds is closed (its server retries or
 * answers 503). */
void sd_reply(serve_direct *sd, serve_msg *msgs, int n);
/* closes the listener and every connection (their servers answer what is in flight 503 or retry it) */
void sd_close(serve_direct *sd);

#endif
