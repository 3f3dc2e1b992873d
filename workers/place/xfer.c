/* xfer.c - the (producer, device) -> bytes accumulator: open addressing with
 * linear probing on a 64-bit key, grown at half load.  Entries are never
 * removed; setting 0 is how an entry is undone. */
#include "workers/place/xfer.h"

#include <stdlib.h>

struct place_xfer_acc {
    int64_t *keys; /* -1 = empty */
    int64_t *vals;
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

static int acc_alloc(place_xfer_acc *a, size_t cap)
{
    a->keys = malloc(cap * sizeof *a->keys);
    a->vals = malloc(cap * sizeof *a->vals);
    if (!a->keys || !a->vals) return -1;
    for (size_t i = 0; i < cap; i++)
        a->keys[i] = -1;
    a->cap = cap;
    a->used = 0;
    return 0;
}

static size_t acc_slot(const place_xfer_acc *a, int64_t key)
{
    size_t i = mix((uint64_t)key) & (a->cap - 1);
    while (a->keys[i] != -1 && a->keys[i] != key)
        i = (i + 1) & (a->cap - 1);
    return i;
}

static int acc_grow(place_xfer_acc *a)
{
    place_xfer_acc old = *a;
    if (acc_alloc(a, old.cap * 2) < 0) {
        free(a->keys), free(a->vals);
        *a = old;
        return -1;
    }
    for (size_t i = 0; i < old.cap; i++) {
        if (old.keys[i] == -1) continue;
        size_t s = acc_slot(a, old.keys[i]);
        a->keys[s] = old.keys[i];
        a->vals[s] = old.vals[i];
        a->used++;
    }
    free(old.keys);
    free(old.vals);
    return 0;
}

place_xfer_acc *place_xfer_acc_new(int n_devices)
{
    place_xfer_acc *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->n_devices = n_devices;
    if (acc_alloc(a, 64) < 0) {
        place_xfer_acc_free(a);
        return NULL;
    }
    return a;
}

void place_xfer_acc_free(place_xfer_acc *a)
{
    if (!a) return;
    free(a->keys);
    free(a->vals);
    free(a);
}

int64_t place_xfer_acc_get(const place_xfer_acc *a, int src, int dev)
{
    size_t s = acc_slot(a, (int64_t)src * a->n_devices + dev);
    return a->keys[s] == -1 ? 0 : a->vals[s];
}

int place_xfer_acc_set(place_xfer_acc *a, int src, int dev, int64_t edge_sum)
{
    if (2 * (a->used + 1) > a->cap && acc_grow(a) < 0) return -1;
    int64_t key = (int64_t)src * a->n_devices + dev;
    size_t s = acc_slot(a, key);
    if (a->keys[s] == -1) {
        a->keys[s] = key;
        a->used++;
    }
    a->vals[s] = edge_sum;
    return 0;
}
