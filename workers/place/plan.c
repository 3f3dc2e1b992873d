/* plan.c - create and free placement plans. */
#include "workers/place/plan.h"

#include "common/alloc.h"

#include <stdlib.h>

place_plan *place_plan_new(int n_ops)
{
    place_plan *p = xcalloc(1, sizeof *p);
    size_t n = n_ops > 0 ? (size_t)n_ops : 1;
    p->n_ops = n_ops;
    p->note[0] = '\0';
    p->device = xmalloc(n * sizeof *p->device);
    p->order = xmalloc(n * sizeof *p->order);
    for (int i = 0; i < n_ops; i++) {
        p->device[i] = -1;
        p->order[i] = i;
    }
    return p;
}

void place_plan_free(place_plan *p)
{
    if (!p) return;
    free(p->device);
    free(p->order);
    free(p->xfer_src);
    free(p->xfer_dev);
    free(p);
}

int place_plan_add_xfer(place_plan *p, int src, int dev)
{
    if (p->n_xfers == p->cap_xfers) {
        int cap = p->cap_xfers ? 2 * p->cap_xfers : 256;
        p->xfer_src = xreallocarray(p->xfer_src, (size_t)cap, sizeof *p->xfer_src);
        p->xfer_dev = xreallocarray(p->xfer_dev, (size_t)cap, sizeof *p->xfer_dev);
        p->cap_xfers = cap;
    }
    p->xfer_src[p->n_xfers] = src;
    p->xfer_dev[p->n_xfers++] = dev;
    return 0;
}

void place_plan_clear_xfers(place_plan *p)
{
    p->n_xfers = 0;
}
