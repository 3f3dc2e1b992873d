/* ratelimit.c - a token bucket per API token (ratelimit.h). */
#include "server/ratelimit.h"
#include "common/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 1024

typedef struct entry {
    char key[48];
    double tokens;
    int64_t last_us;
    struct entry *next;
} entry;

struct ratelimit {
    double rate, burst;
    entry *table[NBUCKETS];
};

static unsigned hash(const char *s)
{
    unsigned h = 2166136261u;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h % NBUCKETS;
}

ratelimit *ratelimit_create(double rate, double burst)
{
    ratelimit *rl = xcalloc(1, sizeof(*rl));
    rl->rate = rate;
    rl->burst = burst < 1 ? 1 : burst;
    return rl;
}

int ratelimit_take(ratelimit *rl, const char *key, int64_t now_us)
{
    if (!rl || rl->rate <= 0) return 0;
    entry **slot = &rl->table[hash(key)], *e = *slot;
    while (e && strcmp(e->key, key) != 0)
        e = e->next;
    if (!e) {
        e = xcalloc(1, sizeof(*e));
        snprintf(e->key, sizeof(e->key), "%s", key);
        e->tokens = rl->burst;
        e->last_us = now_us;
        e->next = *slot;
        *slot = e;
    }
    e->tokens = fmin(rl->burst, e->tokens + (double)(now_us - e->last_us) / 1e6 * rl->rate);
    e->last_us = now_us;
    if (e->tokens >= 1) {
        e->tokens -= 1;
        return 0;
    }
    int wait = (int)ceil((1 - e->tokens) / rl->rate);
    return wait < 1 ? 1 : wait;
}
