/* plan.c - create and free placement plans. */
#include "workers/place/plan.h"

#include <stdlib.h>

place_plan *place_plan_new(int n_ops)
{
    place_plan *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    size_t n = n_ops > 0 ? (size_t)n_ops : 1;
    p->n_ops = n_ops;
    p->note[0] = '\0';
    p->device = malloc(n * sizeof *p->device);
    p->order = malloc(n * sizeof *p->order);
    if (!p->device || !p->order) {
        place_plan_free(p);
        return NULL;
    }
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
        int *s = realloc(p->xfer_src, (size_t)cap * sizeof *s);
        if (!s) return -1;
        p->xfer_src = s;
        int *d = realloc(p->xfer_dev, (size_t)cap * sizeof *d);
        if (!d) return -1;
        p->xfer_dev = d;
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
