/* variant.c - the table of graph variants the solver weighs (variant.h). */
#include "workers/place/variant.h"

#include <stddef.h>

const place_variant place_variants[PLACE_N_VARIANTS] = {
    {"plain", 0, 0},
    {"coplace", 1, 0},
    {"fuse", 0, 1},
    {"coplace+fuse", 1, 1},
};

const place_variant *place_variant_of(int coplace, int fuse)
{
    for (int k = 0; k < PLACE_N_VARIANTS; k++)
        if (place_variants[k].coplace == !!coplace && place_variants[k].fuse == !!fuse) return &place_variants[k];
    return NULL;
}

int place_variant_redundant(const place_variant *x, const place_view *v)
{
    return (x->coplace && v->coplaced == 0) || (x->fuse && v->fused == 0);
}
