/* memnet.c - the in-memory transport (memnet.h). */
#include "workers/fed/memnet.h"
#include "common/alloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MEMNET_MAX_PARTIES 256

typedef struct {
    char name[64];
    fed_blob *msgs; /* copies (without a log) or views of the log's bytes */
    int n, cap;
} channel;

typedef struct {
    fed_net net; /* first: the endpoint is its fed_net */
    fed_memnet *hub;
    int who;
    int fault, fault_ms, dead; /* fed_memnet_fault */
    char fault_at[32];
} endpoint;

struct fed_memnet {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int keep_log;
    channel *chans;
    int nchans, capchans;
    fed_memnet_msg *log;
    size_t nlog, caplog;
    endpoint ends[MEMNET_MAX_PARTIES];
    double put_bytes[MEMNET_MAX_PARTIES], got_bytes[MEMNET_MAX_PARTIES];
};

static channel *find(fed_memnet *h, const char *name, int create)
{
    for (int i = 0; i < h->nchans; i++)
        if (strcmp(h->chans[i].name, name) == 0) return &h->chans[i];
    if (!create) return NULL;
    if (h->nchans == h->capchans) {
        h->capchans = h->capchans ? 2 * h->capchans : 64;
        h->chans = xrealloc(h->chans, sizeof(channel) * (size_t)h->capchans);
    }
    channel *c = &h->chans[h->nchans++];
    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof(c->name), "%s", name);
    return c;
}

static int mem_put(fed_net *net, const char *chan, const void *data, size_t len, char *err, size_t errlen)
{
    endpoint *e = (endpoint *)net;
    fed_memnet *h = e->hub;
    if (strlen(chan) >= sizeof(((channel *)0)->name)) {
        snprintf(err, errlen, "channel name too long: %s", chan);
        return FED_NET_ERROR;
    }
    if (e->dead) {
        snprintf(err, errlen, "party %d was killed", e->who);
        return FED_NET_ERROR;
    }
    unsigned char *copy = xmalloc(len);
    memcpy(copy, data, len);
    if (e->fault && strncmp(chan, e->fault_at, strlen(e->fault_at)) == 0) {
        int kind = e->fault;
        e->fault = FED_FAULT_NONE;
        if (kind == FED_FAULT_KILL) {
            e->dead = 1, free(copy);
            snprintf(err, errlen, "party %d was killed", e->who);
            return FED_NET_ERROR;
        }
        if (kind == FED_FAULT_DELAY) nanosleep(&(struct timespec){e->fault_ms / 1000, (long)(e->fault_ms % 1000) * 1000000L}, NULL);
        if (kind == FED_FAULT_GARBLE && len) copy[len > 23 ? 23 : len - 1] ^= 0x5a; /* after a header: a key, or ciphertext */
    }
    pthread_mutex_lock(&h->mu);
    channel *c = find(h, chan, 1);
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 8;
        c->msgs = xrealloc(c->msgs, sizeof(fed_blob) * (size_t)c->cap);
    }
    c->msgs[c->n++] = (fed_blob){copy, len};
    if (h->keep_log) {
        if (h->nlog == h->caplog) {
            h->caplog = h->caplog ? 2 * h->caplog : 256;
            h->log = xrealloc(h->log, sizeof(fed_memnet_msg) * h->caplog);
        }
        fed_memnet_msg *m = &h->log[h->nlog++];
        m->writer = e->who;
        snprintf(m->chan, sizeof(m->chan), "%s", chan);
        m->blob.data = xmalloc(len), m->blob.len = len;
        memcpy(m->blob.data, data, len);
    }
    h->put_bytes[e->who] += (double)len;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return FED_NET_OK;
}

/* waits, with the hub locked, until channel chan holds count messages or timeout_ms passed; the channel (NULL: none
 * yet), the hub still locked; *full: whether it holds count */
static channel *wait_for(fed_memnet *h, const char *chan, int count, int timeout_ms, bool *full)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&h->mu);
    channel *c;
    while ((!(c = find(h, chan, 0)) || c->n < count) && pthread_cond_timedwait(&h->cv, &h->mu, &dl) != ETIMEDOUT)
        ;
    c = find(h, chan, 0);
    *full = c && c->n >= count;
    return c;
}

static int mem_get(fed_net *net, const char *chan, int count, int timeout_ms, fed_blob *out, char *err, size_t errlen)
{
    endpoint *e = (endpoint *)net;
    fed_memnet *h = e->hub;
    if (e->dead) {
        snprintf(err, errlen, "party %d was killed", e->who);
        return FED_NET_ERROR;
    }
    bool full;
    channel *c = wait_for(h, chan, count, timeout_ms, &full);
    if (!full) {
        snprintf(err, errlen, "channel %s: %d of %d messages within %d ms", chan, c ? c->n : 0, count, timeout_ms);
        pthread_mutex_unlock(&h->mu);
        return FED_NET_TIMEOUT;
    }
    for (int i = 0; i < count; i++) {
        out[i].len = c->msgs[i].len;
        out[i].data = xmalloc(out[i].len);
        memcpy(out[i].data, c->msgs[i].data, out[i].len);
        h->got_bytes[e->who] += (double)out[i].len;
    }
    pthread_mutex_unlock(&h->mu);
    return FED_NET_OK;
}

static int mem_count(fed_net *net, const char *chan, int count, int timeout_ms, int *have, char *err, size_t errlen)
{
    endpoint *e = (endpoint *)net;
    *have = 0;
    if (e->dead) {
        snprintf(err, errlen, "party %d was killed", e->who);
        return FED_NET_ERROR;
    }
    bool full;
    channel *c = wait_for(e->hub, chan, count, timeout_ms, &full);
    *have = c ? c->n : 0;
    pthread_mutex_unlock(&e->hub->mu);
    return FED_NET_OK;
}

static void mem_drop(fed_net *net, const char *chan)
{
    endpoint *e = (endpoint *)net;
    fed_memnet *h = e->hub;
    pthread_mutex_lock(&h->mu);
    channel *c = find(h, chan, 0);
    if (c) { /* the log (if any) keeps its own copies */
        fed_blobs_free(c->msgs, c->n);
        free(c->msgs);
        *c = h->chans[--h->nchans];
    }
    pthread_mutex_unlock(&h->mu);
}

fed_memnet *fed_memnet_new(int keep_log)
{
    fed_memnet *h = xmalloc(sizeof(*h));
    memset(h, 0, sizeof(*h));
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    h->keep_log = keep_log;
    for (int i = 0; i < MEMNET_MAX_PARTIES; i++)
        h->ends[i] = (endpoint){{mem_put, mem_get, mem_drop, mem_count}, h, i, FED_FAULT_NONE, 0, 0, {0}};
    return h;
}

void fed_memnet_free(fed_memnet *h)
{
    if (!h) return;
    for (int i = 0; i < h->nchans; i++) {
        fed_blobs_free(h->chans[i].msgs, h->chans[i].n);
        free(h->chans[i].msgs);
    }
    for (size_t i = 0; i < h->nlog; i++)
        free(h->log[i].blob.data);
    free(h->chans), free(h->log);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h);
}

fed_net *fed_memnet_endpoint(fed_memnet *h, int who)
{
    return who >= 0 && who < MEMNET_MAX_PARTIES ? &h->ends[who].net : NULL;
}

void fed_memnet_fault(fed_memnet *h, int who, const char *prefix, int kind, int ms)
{
    if (who < 0 || who >= MEMNET_MAX_PARTIES) return;
    endpoint *e = &h->ends[who];
    e->fault = kind, e->fault_ms = ms, e->dead = 0;
    snprintf(e->fault_at, sizeof e->fault_at, "%s", prefix);
}

size_t fed_memnet_count(const fed_memnet *h)
{
    return h->nlog;
}

const fed_memnet_msg *fed_memnet_at(const fed_memnet *h, size_t i)
{
    return i < h->nlog ? &h->log[i] : NULL;
}
