/* profile.h - a device's memory bound over the steps of its execution
 * order.
 *
 * Owns: a segment tree (place_profile_clear).  Position i is the i-th op the
 * device runs; the value at i is the sum of every delta added at positions
 * <= i, so "add x at i" means "x more bytes from step i on" and frees are
 * negative adds.  The tree keeps, per node, the sum of its deltas and the
 * largest prefix sum inside it, so the peak over all positions is at the
 * root; capacity doubles as positions grow (new positions inherit the total,
 * as suffix semantics want). */
#ifndef GANTRY_PLACE_PROFILE_H
#define GANTRY_PLACE_PROFILE_H

#include <stdint.h>

typedef struct place_profile {
    int cap;      /* leaves, a power of two */
    int64_t *sum; /* 2 * cap nodes, 1-based */
    int64_t *top; /* largest prefix sum within the node's range */
} place_profile;

/* 0, or -1 when out of memory. */
int place_profile_add(place_profile *p, int pos, int64_t delta);
/* The largest value at any position (0 when empty). */
static inline int64_t place_profile_peak(const place_profile *p)
{
    return p->cap ? (p->top[1] > 0 ? p->top[1] : 0) : 0;
}
void place_profile_clear(place_profile *p);

#endif
