/* fed_io.c - a federated site's Redis side (fed_io.h). */
#include "workers/fed_io.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "wire/keys.h"
#include "wire/lua_scripts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FED_CHANNEL_TTL_S 600 /* a channel outlives its last message by this much (nobody drops it: e.g. a lost site) */
#define FED_BLOCK_SLICE_MS 500
#define FED_CLAIMS_TTL_S "86400" /* the claims hash lives a day after the last claim */

static int io_put(fed_net *net, const char *chan, const void *data, size_t len, char *err, size_t errlen)
{
    fed_io *io = (fed_io *)net;
    char key[256];
    snprintf(key, sizeof key, "%s%s", io->prefix, chan);
    redisReply *r = rs_command(io->r, "XADD %s * d %b", key, (const char *)data, len);
    int ok = r && r->type == REDIS_REPLY_STRING;
    if (!ok)
        snprintf(err, errlen, "cannot write to %s: %s", key, r && r->type == REDIS_REPLY_ERROR ? r->str : "Redis did not answer");
    freeReplyObject(r);
    /* without its TTL the channel stays until io_drop deletes it at the end of the exchange */
    if (ok) rs_do(io->r, "EXPIRE %s %d", key, FED_CHANNEL_TTL_S);
    return ok ? FED_NET_OK : FED_NET_ERROR;
}

/* appends the entries of an XREAD reply to out (from *have, at most count); the last id read in last */
static void take(const redisReply *r, fed_blob *out, int *have, int count, char *last, size_t lastlen)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1) return;
    const redisReply *s = r->element[0]; /* [key, entries] */
    if (s->type != REDIS_REPLY_ARRAY || s->elements < 2 || s->element[1]->type != REDIS_REPLY_ARRAY) return;
    const redisReply *entries = s->element[1];
    for (size_t i = 0; i < entries->elements && *have < count; i++) {
        const redisReply *e = entries->element[i]; /* [id, [field, value, ...]] */
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 || e->element[0]->type != REDIS_REPLY_STRING) continue;
        snprintf(last, lastlen, "%s", e->element[0]->str);
        const redisReply *f = e->element[1];
        for (size_t k = 0; f->type == REDIS_REPLY_ARRAY && k + 1 < f->elements; k += 2)
            if (f->element[k]->type == REDIS_REPLY_STRING && strcmp(f->element[k]->str, "d") == 0 &&
                f->element[k + 1]->type == REDIS_REPLY_STRING) {
                const redisReply *v = f->element[k + 1];
                out[*have].data = xmalloc(v->len);
                memcpy(out[*have].data, v->str, v->len);
                out[*have].len = v->len;
                (*have)++;
                break;
            }
    }
}

static int wait_for(fed_io *io, const char *chan, int count, int timeout_ms, fed_blob *out, char *err, size_t errlen)
{
    char key[256], last[64] = "0-0", cnt[16];
    snprintf(key, sizeof key, "%s%s", io->prefix, chan);
    int have = 0;
    int64_t deadline = clock_mono_us() + (int64_t)timeout_ms * 1000;
    while (have < count) {
        int64_t left_ms = (deadline - clock_mono_us()) / 1000;
        if (left_ms <= 0) {
            snprintf(err, errlen, "%s: %d of %d messages within %d s", chan, have, count, timeout_ms / 1000);
            fed_blobs_free(out, have);
            return FED_NET_TIMEOUT;
        }
        char block[16];
        snprintf(block, sizeof block, "%d", (int)(left_ms < FED_BLOCK_SLICE_MS ? left_ms : FED_BLOCK_SLICE_MS));
        snprintf(cnt, sizeof cnt, "%d", count - have);
        const char *argv[] = {"XREAD", "COUNT", cnt, "BLOCK", block, "STREAMS", key, last};
        redisReply *r = rs_command_argv(io->r, 8, argv, NULL);
        if (!r) usleep(50000); /* Redis away: the deadline decides */
        int before = have;
        take(r, out, &have, count, last, sizeof last);
        freeReplyObject(r);
        if (have < count && have == before && io->stop && io->stop(io->stop_arg)) {
            snprintf(err, errlen, "stopped");
            fed_blobs_free(out, have);
            return FED_NET_STOPPED;
        }
    }
    return FED_NET_OK;
}

static int io_get(fed_net *net, const char *chan, int count, int timeout_ms, fed_blob *out, char *err, size_t errlen)
{
    fed_io *io = (fed_io *)net;
    if (io->hold && !io->held && strcmp(chan, "hello") == 0) { /* tests: a key may be swapped meanwhile */
        fed_blob go;
        int rc = wait_for(io, "go", 1, timeout_ms, &go, err, errlen);
        if (rc) return rc;
        fed_blobs_free(&go, 1);
        io->held = true;
    }
    return wait_for(io, chan, count, timeout_ms, out, err, errlen);
}

static void io_drop(fed_net *net, const char *chan)
{
    fed_io *io = (fed_io *)net;
    rs_do(io->r, "DEL %s%s", io->prefix, chan); /* not deleted: the channel's TTL removes it */
}

void fed_io_open(fed_io *io, rs_conn *r, const char *job_id, int generation, bool (*stop)(void *arg), void *stop_arg)
{
    memset(io, 0, sizeof(*io));
    io->net = (fed_net){io_put, io_get, io_drop, NULL}; /* no count: the threshold mode reads with get */
    io->r = r;
    snprintf(io->prefix, sizeof io->prefix, "%s%s:%d:", K_FED_PREFIX, job_id, generation);
    io->stop = stop, io->stop_arg = stop_arg;
    const char *hold = getenv("GANTRY_TEST_FED_HOLD");
    io->hold = hold && strcmp(hold, "1") == 0;
}

/* wire/lua/fed_claim.lua: the site, or -1 */
int fed_io_claim(rs_conn *r, const char *job_id, int generation, const int *candidates, int ncand, const char *worker_id)
{
    enum { MAXC = 256 };
    const char *argv[MAXC + 6];
    char idx[MAXC][12], key[200];
    int argc = 0;
    if (ncand > MAXC) ncand = MAXC;
    snprintf(key, sizeof key, "%s%s:%d:sites", K_FED_PREFIX, job_id, generation);
    argv[argc++] = "EVAL", argv[argc++] = lua_fed_claim, argv[argc++] = "1", argv[argc++] = key;
    argv[argc++] = FED_CLAIMS_TTL_S, argv[argc++] = worker_id && *worker_id ? worker_id : "?";
    for (int i = 0; i < ncand; i++) {
        snprintf(idx[i], sizeof idx[i], "%d", candidates[i]);
        argv[argc++] = idx[i];
    }
    redisReply *rep = rs_command_argv(r, argc, argv, NULL);
    int me = rep && rep->type == REDIS_REPLY_INTEGER ? (int)rep->integer : -2;
    freeReplyObject(rep);
    return me < -1 ? -2 : me;
}
