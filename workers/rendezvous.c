#include "workers/rendezvous.h"
#include "common/clock.h"
#include "wire/keys.h"
#include "wire/lua_scripts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RDV_TTL_MS 86400000
#define RDV_POLL_US 20000

static void key_of(char *key, size_t len, const char *job_id, int generation)
{
    snprintf(key, len, "%s%s:%d", K_RDV_PREFIX, job_id, generation);
}

/* reads the hash: 1 when every address is there, 0 not yet, -1 aborted/error (err set) */
static int poll_members(rs_conn *r, const char *key, rdv_members *out, char *missing, size_t mlen, char *err, size_t errlen)
{
    redisReply *rep = rs_command(r, "HGETALL %s", key);
    if (!rep || rep->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(rep);
        return 0; /* Redis away for a moment: the deadline decides */
    }
    bool have[RDV_MAX_WORLD] = {false};
    int rc = 1;
    for (size_t i = 0; i + 1 < rep->elements; i += 2) {
        const char *f = rep->element[i]->str, *v = rep->element[i + 1]->str;
        if (strcmp(f, "abort") == 0) {
            snprintf(err, errlen, "rendezvous aborted by a member: %s", v);
            rc = -1;
        } else if (strncmp(f, "addr:", 5) == 0) {
            int k = atoi(f + 5);
            if (k >= 0 && k < out->world) {
                snprintf(out->addrs[k], RDV_ADDR_LEN, "%s", v);
                have[k] = true;
            }
        }
    }
    freeReplyObject(rep);
    if (rc < 0) return rc;
    size_t ml = 0;
    missing[0] = '\0';
    for (int k = 0; k < out->world; k++)
        if (!have[k]) {
            rc = 0;
            if (ml < mlen) ml += (size_t)snprintf(missing + ml, mlen - ml, "%s%d", ml ? ", " : "", k);
        }
    return rc;
}

int rdv_join(rs_conn *r, const char *job_id, int generation, int world, const char *addr, const char *worker_id, int timeout_ms,
             bool (*stop)(void *arg), void *stop_arg, rdv_members *out, char *err, size_t errlen)
{
    if (world == 0) { /* an elastic gang: the scheduler wrote its size at dispatch */
        redisReply *w = rs_command(r, "HGET %s%s:%d world", K_RDV_PREFIX, job_id, generation);
        world = w && w->type == REDIS_REPLY_STRING ? atoi(w->str) : 0;
        freeReplyObject(w);
        if (world < 1) {
            snprintf(err, errlen, "rendezvous: the scheduler did not record the size of generation %d of job %s", generation,
                     job_id);
            return -1;
        }
    }
    if (world < 1 || world > RDV_MAX_WORLD) {
        snprintf(err, errlen, "rendezvous: a gang of %d workers is not supported (1 to %d)", world, RDV_MAX_WORLD);
        return -1;
    }
    char key[192], ws[16], ttl[16];
    key_of(key, sizeof(key), job_id, generation);
    snprintf(ws, sizeof(ws), "%d", world);
    snprintf(ttl, sizeof(ttl), "%d", RDV_TTL_MS);
    memset(out, 0, sizeof(*out));
    out->world = world;
    int64_t deadline = clock_mono_us() + (int64_t)timeout_ms * 1000;
    redisReply *rep;
    while (!(rep = rs_command(r, "EVAL %s 1 %s %s %s %s %s", lua_rdv_join, key, ws, addr, worker_id, ttl))) {
        if (clock_mono_us() > deadline) {
            snprintf(err, errlen, "rendezvous: Redis unreachable for %d ms", timeout_ms);
            return -1;
        }
        usleep(RDV_POLL_US * 5);
    }
    long long rank = rep->type == REDIS_REPLY_INTEGER ? rep->integer : -2;
    if (rep->type == REDIS_REPLY_ERROR) snprintf(err, errlen, "rendezvous: %s", rep->str);
    freeReplyObject(rep);
    if (rank == -2) return -1;
    if (rank < 0) {
        snprintf(err, errlen, "rendezvous: generation %d of job %s already has its %d members", generation, job_id, world);
        return -1;
    }
    out->rank = (int)rank;
    char missing[256];
    for (;;) {
        int rc = poll_members(r, key, out, missing, sizeof(missing), err, errlen);
        if (rc != 0) return rc > 0 ? 0 : -1;
        if (stop && stop(stop_arg)) {
            snprintf(err, errlen, "rendezvous: stopped while waiting for the other workers");
            return -1;
        }
        if (clock_mono_us() > deadline) {
            snprintf(err, errlen, "rendezvous: ranks %s of %d did not join within %d ms", missing, world, timeout_ms);
            rdv_abort(r, job_id, generation, err);
            return -1;
        }
        usleep(RDV_POLL_US);
    }
}

void rdv_abort(rs_conn *r, const char *job_id, int generation, const char *reason)
{
    char key[192];
    key_of(key, sizeof(key), job_id, generation);
    /* not written (rs_do logged why): the others wait for this member until their own deadline */
    if (rs_do(r, "HSETNX %s abort %s", key, reason)) rs_do(r, "PEXPIRE %s %d", key, RDV_TTL_MS);
}

int rdv_put(rs_conn *r, const char *job_id, int generation, const char *field, const char *value)
{
    char key[192];
    key_of(key, sizeof(key), job_id, generation);
    redisReply *rep = rs_command(r, "HSET %s val:%s %s", key, field, value);
    int ok = rep && rep->type == REDIS_REPLY_INTEGER;
    freeReplyObject(rep);
    return ok ? 0 : -1;
}

int rdv_get(rs_conn *r, const char *job_id, int generation, const char *field, int timeout_ms, bool (*stop)(void *arg),
            void *stop_arg, char *out, size_t outlen, char *err, size_t errlen)
{
    char key[192];
    key_of(key, sizeof(key), job_id, generation);
    int64_t deadline = clock_mono_us() + (int64_t)timeout_ms * 1000;
    for (;;) {
        redisReply *rep = rs_command(r, "HMGET %s val:%s abort", key, field);
        int got = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 && rep->element[0]->type == REDIS_REPLY_STRING;
        int aborted = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 && rep->element[1]->type == REDIS_REPLY_STRING;
        if (got) snprintf(out, outlen, "%s", rep->element[0]->str);
        if (aborted) snprintf(err, errlen, "rendezvous aborted by a member: %s", rep->element[1]->str);
        freeReplyObject(rep);
        if (got) return 0;
        if (aborted) return -1;
        if (stop && stop(stop_arg)) {
            snprintf(err, errlen, "rendezvous: stopped while waiting for '%s'", field);
            return -1;
        }
        if (clock_mono_us() > deadline) {
            snprintf(err, errlen, "rendezvous: no '%s' from rank 0 within %d ms", field, timeout_ms);
            return -1;
        }
        usleep(RDV_POLL_US);
    }
}
