/* rendezvous.c - a gang's rendezvous in Redis: join, addresses, abort (rendezvous.h). */
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
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements > RDV_MAX_FIELDS) {
        int too_many = rep && rep->type == REDIS_REPLY_ARRAY;
        freeReplyObject(rep);
        if (!too_many) return 0; /* Redis away for a moment (logged): the deadline decides */
        snprintf(err, errlen, "rendezvous: %s has too many fields to be a rendezvous", key);
        return -1;
    }
    const char *v[RDV_MAX_FIELDS];
    size_t lens[RDV_MAX_FIELDS];
    for (size_t i = 0; i < rep->elements; i++) {
        int str = rep->element[i]->type == REDIS_REPLY_STRING;
        v[i] = str ? rep->element[i]->str : NULL, lens[i] = str ? rep->element[i]->len : 0;
    }
    rdv_state st; /* wire/rdv_wire.h: the hash's one decoder */
    int bad = rdv_decode(rep->elements, v, lens, &st);
    freeReplyObject(rep);
    if (bad) {
        snprintf(err, errlen, "rendezvous: %s is not a rendezvous of this version (a malformed field)", key);
        return -1;
    }
    if (st.aborted) {
        snprintf(err, errlen, "rendezvous aborted by a member: %s", st.abort);
        return -1;
    }
    int rc = 1;
    size_t ml = 0;
    missing[0] = '\0';
    for (int k = 0; k < out->world; k++)
        if (st.have[k])
            snprintf(out->addrs[k], RDV_ADDR_LEN, "%s", st.addrs[k]);
        else {
            rc = 0;
            if (ml < mlen) ml += (size_t)snprintf(missing + ml, mlen - ml, "%s%d", ml ? ", " : "", k);
        }
    return rc;
}

int rdv_join(rs_conn *r, const char *job_id, int generation, int world, const char *addr, const char *worker_id, int timeout_ms,
             bool (*stop)(void *arg), void *stop_arg, rdv_members *out, char *err, size_t errlen)
{
    if (world == 0) { /* an elastic gang: the scheduler wrote its size at dispatch */
        redisReply *w = rs_command(r, "HGET %s%s:%d %s", K_RDV_PREFIX, job_id, generation, RDV_F_WORLD);
        long ws = w && w->type == REDIS_REPLY_STRING ? rdv_number(w->str, w->len) : 0;
        world = ws > RDV_MAX_WORLD ? RDV_MAX_WORLD + 1 : (int)ws; /* too large: refused below */
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
    char key[192];
    key_of(key, sizeof(key), job_id, generation);
    rdv_join_nums nums;
    const char *jargv[3 + RDV_JOIN_ARGC] = {"EVAL", lua_rdv_join, "1"};
    if (rdv_join_encode(&(rdv_join_msg){world, addr, worker_id, RDV_TTL_MS}, &nums, jargv + 3) != 0) {
        snprintf(err, errlen, "rendezvous: this member's address '%s' or worker id cannot be sent (empty, or %d bytes or more)",
                 addr, RDV_ADDR_LEN);
        return -1;
    }
    const char *argv[4 + RDV_JOIN_ARGC];
    size_t lens[4 + RDV_JOIN_ARGC];
    for (int i = 0; i < 3; i++)
        argv[i] = jargv[i];
    argv[3] = key;
    for (int i = 0; i < RDV_JOIN_ARGC; i++)
        argv[4 + i] = jargv[3 + i];
    for (int i = 0; i < 4 + RDV_JOIN_ARGC; i++)
        lens[i] = strlen(argv[i]);
    memset(out, 0, sizeof(*out));
    out->world = world;
    int64_t deadline = clock_mono_us() + (int64_t)timeout_ms * 1000;
    redisReply *rep;
    while (!(rep = rs_command_argv(r, 4 + RDV_JOIN_ARGC, argv, lens))) {
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
    if (rs_do(r, "HSETNX %s %s %s", key, RDV_F_ABORT, reason)) rs_do(r, "PEXPIRE %s %d", key, RDV_TTL_MS);
}

int rdv_put(rs_conn *r, const char *job_id, int generation, const char *field, const char *value)
{
    char key[192], f[128];
    key_of(key, sizeof(key), job_id, generation);
    if (rdv_field_val(f, sizeof(f), field) != 0) return -1;
    redisReply *rep = rs_command(r, "HSET %s %s %s", key, f, value);
    int ok = rep && rep->type == REDIS_REPLY_INTEGER;
    freeReplyObject(rep);
    return ok ? 0 : -1;
}

int rdv_get(rs_conn *r, const char *job_id, int generation, const char *field, int timeout_ms, bool (*stop)(void *arg),
            void *stop_arg, char *out, size_t outlen, char *err, size_t errlen)
{
    char key[192], f[128];
    key_of(key, sizeof(key), job_id, generation);
    if (rdv_field_val(f, sizeof(f), field) != 0) {
        snprintf(err, errlen, "rendezvous: the name '%s' is too long", field);
        return -1;
    }
    int64_t deadline = clock_mono_us() + (int64_t)timeout_ms * 1000;
    for (;;) {
        redisReply *rep = rs_command(r, "HMGET %s %s %s", key, f, RDV_F_ABORT);
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
