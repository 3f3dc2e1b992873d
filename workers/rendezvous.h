/* rendezvous.h - how the workers of one gang find each other, through Redis.
 *
 * The scheduler gives the same task to N workers; each calls rdv_join with the
 * job id and the membership generation (the task's attempt: every requeue of
 * the job is a new generation, so a stale member can never join a newer gang).
 * Ranks are assigned atomically in join order by a Lua script on the hash
 * gantry:rdv:<job>:<generation> (fields n, addr:<rank>, worker:<rank>, abort, val:<name>; its codec is
 * wire/rdv_wire.h);
 * every member then polls until all N addresses are there, an abort reason
 * appears, or its deadline passes.  The hash expires a day after the last join. */
#ifndef GANTRY_RENDEZVOUS_H
#define GANTRY_RENDEZVOUS_H

#include "wire/rdv_wire.h"
#include "wire/redis_sync.h"

#include <stdbool.h>

typedef struct {
    int rank, world;
    char addrs[RDV_MAX_WORLD][RDV_ADDR_LEN]; /* "host:port" of every rank */
} rdv_members;

/* Joins and waits for the others; world 0: the size the scheduler recorded for
 * this generation at dispatch (elastic gangs; out->world has it).  `stop` (may be NULL) is polled while
 * waiting; when it returns true the join gives up.  0 with *out filled, or -1
 * with err: the gang is already full, a member aborted (its reason), the
 * deadline passed (who is missing), Redis unreachable, or stopped. */
int rdv_join(rs_conn *r, const char *job_id, int generation, int world, const char *addr, const char *worker_id, int timeout_ms,
             bool (*stop)(void *arg), void *stop_arg, rdv_members *out, char *err, size_t errlen);

/* A value the members of a generation share (e.g. rank 0's NCCL id): put sets
 * it, get waits for it until the deadline (or `stop`).  0, or -1 with err. */
int rdv_put(rs_conn *r, const char *job_id, int generation, const char *field, const char *value);
int rdv_get(rs_conn *r, const char *job_id, int generation, const char *field, int timeout_ms, bool (*stop)(void *arg),
            void *stop_arg, char *out, size_t outlen, char *err, size_t errlen);

/* Tells the other members of this generation to give up (a member failed before training). */
void rdv_abort(rs_conn *r, const char *job_id, int generation, const char *reason);

#endif
