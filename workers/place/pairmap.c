/* pairmap.c - (op, device) -> double, open addressing on a 64-bit key. */
#include "workers/place/pairmap.h"

#include "common/alloc.h"

#include <stdint.h>
#include <stdlib.h>

struct place_pairmap {
    int64_t *keys; /* -1 = empty */
    double *vals;
    size_t cap, used;
    int n_devices;
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static void alloc_table(place_pairmap *m, size_t cap)
{
    m->keys = xmalloc(cap * sizeof *m->keys);
    m->vals = xmalloc(cap * sizeof *m->vals);
    for (size_t i = 0; i < cap; i++)
        m->keys[i] = -1;
    m->cap = cap;
    m->used = 0;
}

static size_t slot(const place_pairmap *m, int64_t key)
{
    size_t i = mix((uint64_t)key) & (m->cap - 1);
    while (m->keys[i] != -1 && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static void grow(place_pairmap *m)
{
    place_pairmap old = *m;
    alloc_table(m, old.cap * 2);
    for (size_t i = 0; i < old.cap; i++) {
        if (old.keys[i] == -1) continue;
        size_t s = slot(m, old.keys[i]);
        m->keys[s] = old.keys[i];
        m->vals[s] = old.vals[i];
        m->used++;
    }
    free(old.keys);
    free(old.vals);
}

place_pairmap *place_pairmap_new(int n_devices)
{
    place_pairmap *m = xcalloc(1, sizeof *m);
    m->n_devices = n_devices;
    alloc_table(m, 256);
    return m;
}

void place_pairmap_free(place_pairmap *m)
{
    if (!m) return;
    free(m->keys);
    free(m->vals);
    free(m);
}

int place_pairmap_get(const place_pairmap *m, int op, int dev, double *val)
{
    size_t s = slot(m, (int64_t)op * m->n_devices + dev);
    if (m->keys[s] == -1) return 0;
    *val = m->vals[s];
    return 1;
}

int place_pairmap_set(place_pairmap *m, int op, int dev, double val)
{
    if (2 * (m->used + 1) > m->cap) grow(m);
    int64_t key = (int64_t)op * m->n_devices + dev;
    size_t s = slot(m, key);
    if (m->keys[s] == -1) {
        m->keys[s] = key;
        m->used++;
    }
    m->vals[s] = val;
    return 0;
}
