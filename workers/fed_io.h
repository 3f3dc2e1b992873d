/* fed_io.h - the Redis side of a federated site (keys in wire/keys.h): the
 * site claims, and the transport of workers/fed/net.h over Redis streams.
 *
 * A channel is the stream gantry:fed:<job>:<gen>:<channel>; put is one XADD
 * (field d: the message's bytes) and renews the stream's expiry; get reads the
 * stream from its start with XREAD BLOCK, in slices of at most half a second
 * between which it asks `stop` (the job's cancellation and preemption), until
 * it has its messages or the deadline passes.  No polling: a waiting site
 * wakes when the message it waits for is written.  drop is DEL.
 *
 * What goes through it is sealed by the protocol (workers/fed/secagg.h): Redis
 * sees public keys with their tags, then sizes and timing.
 *
 * Tests only: with GANTRY_TEST_FED_HOLD=1 in its environment a site waits,
 * after publishing its public key and before reading the others', for a
 * message on the channel "go" (tests/integration/test_federated.py swaps a
 * key in between). */
#ifndef GANTRY_FED_IO_H
#define GANTRY_FED_IO_H

#include "wire/redis_sync.h"
#include "workers/fed/net.h"

#include <stdbool.h>

typedef struct {
    fed_net net; /* first: a fed_io is its fed_net */
    rs_conn *r;
    char prefix[192]; /* gantry:fed:<job>:<gen>: */
    bool (*stop)(void *arg);
    void *stop_arg;
    bool hold, held;
} fed_io;

/* the transport of generation `generation` of job_id (stop may be NULL) */
void fed_io_open(fed_io *io, rs_conn *r, const char *job_id, int generation, bool (*stop)(void *arg), void *stop_arg);

/* Claims a site for worker_id in the generation's hash gantry:fed:<job>:<gen>:sites, atomically: a site
 * this worker claimed before (a restarted worker), else the first of candidates (in order) that nobody
 * holds.  The site, -1 when none is left, -2 when Redis did not answer. */
int fed_io_claim(rs_conn *r, const char *job_id, int generation, const int *candidates, int ncand, const char *worker_id);

#endif
