/* profile.c - segment tree of deltas with (sum, max prefix) per node. */
#include "workers/place/profile.h"

#include "common/alloc.h"

#include <stdlib.h>

static void pull(place_profile *p, int i)
{
    int64_t l = p->top[2 * i], r = p->sum[2 * i] + p->top[2 * i + 1];
    p->sum[i] = p->sum[2 * i] + p->sum[2 * i + 1];
    p->top[i] = l > r ? l : r;
}

/* Doubles the leaves until pos fits; old deltas keep their positions. */
static int grow(place_profile *p, int pos)
{
    int cap = p->cap ? p->cap : 64;
    while (cap <= pos)
        cap *= 2;
    int64_t *sum = xcalloc(2 * (size_t)cap, sizeof *sum), *top = xcalloc(2 * (size_t)cap, sizeof *top);
    for (int i = 0; i < p->cap; i++)
        sum[cap + i] = top[cap + i] = p->sum[p->cap + i];
    free(p->sum), free(p->top);
    p->sum = sum, p->top = top, p->cap = cap;
    for (int i = cap - 1; i >= 1; i--)
        pull(p, i);
    return 0;
}

int place_profile_add(place_profile *p, int pos, int64_t delta)
{
    if (pos >= p->cap && grow(p, pos) < 0) return -1;
    int i = p->cap + pos;
    p->sum[i] += delta;
    p->top[i] = p->sum[i];
    for (i /= 2; i >= 1; i /= 2)
        pull(p, i);
    return 0;
}

void place_profile_clear(place_profile *p)
{
    free(p->sum);
    free(p->top);
    p->sum = p->top = NULL;
    p->cap = 0;
}
