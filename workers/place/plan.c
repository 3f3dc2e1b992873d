/* plan.c - create and free placement plans. */
#include "workers/place/plan.h"

#include <stdlib.h>

place_plan *place_plan_new(int n_ops)
{
    place_plan *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    size_t n = n_ops > 0 ? (size_t)n_ops : 1;
    p->n_ops = n_ops;
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
    free(p);
}
