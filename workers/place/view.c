/* view.c - build the view the algorithms see, and expand plans made on it
 * back to the original ops. */
#include "workers/place/view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int place_view_build(const place_graph *orig, int coplace, int fuse, place_view *v, char *msg, size_t len)
{
    *v = (place_view){.orig = orig};
    if (coplace && !(v->g = place_coplace(orig, &v->coplaced, msg, len))) return -1;
    if (!fuse) return 0;
    place_graph *f = place_fuse(place_view_graph(v), &v->off, &v->members, &v->of, msg, len);
    if (!f) {
        place_view_clear(v);
        return -1;
    }
    place_graph_free(v->g);
    v->g = f;
    v->fused = orig->n_ops - f->n_ops;
    return 0;
}

void place_view_clear(place_view *v)
{
    place_graph_free(v->g);
    free(v->off);
    free(v->members);
    free(v->of);
    *v = (place_view){.orig = v->orig};
}

static int copy_xfers(place_plan *out, const place_plan *vp)
{
    for (int k = 0; k < vp->n_xfers; k++)
        if (place_plan_add_xfer(out, vp->xfer_src[k], vp->xfer_dev[k]) < 0) return -1;
    return 0;
}

/* The view's transfer (fused producer, dev) becomes one transfer per member
 * whose output is read on dev, in member order. */
static int expand_xfers(const place_view *v, const place_plan *vp, place_plan *out)
{
    const place_graph *g = v->orig;
    for (int k = 0; k < vp->n_xfers; k++) {
        int f = vp->xfer_src[k], dev = vp->xfer_dev[k];
        for (int i = v->off[f]; i < v->off[f + 1]; i++) {
            int p = v->members[i], reads = 0;
            for (int e = g->out_off[p]; e < g->out_off[p + 1] && !reads; e++)
                reads = out->device[g->edges[g->out_edge[e]].dst] == dev;
            if (reads && place_plan_add_xfer(out, p, dev) < 0) return -1;
        }
    }
    return 0;
}

place_plan *place_view_expand(const place_view *v, const place_plan *vp)
{
    const place_graph *g = v->orig;
    place_plan *out = place_plan_new(g->n_ops);
    if (!out) return NULL;
    memcpy(out->note, vp->note, sizeof out->note);
    if (!v->of) {
        memcpy(out->device, vp->device, (size_t)g->n_ops * sizeof *out->device);
        memcpy(out->order, vp->order, (size_t)g->n_ops * sizeof *out->order);
        if (copy_xfers(out, vp) == 0) return out;
        place_plan_free(out);
        return NULL;
    }
    for (int i = 0; i < g->n_ops; i++)
        out->device[i] = vp->device[v->of[i]];
    int n = 0;
    for (int k = 0; k < vp->n_ops; k++) {
        int f = vp->order[k];
        for (int i = v->off[f]; i < v->off[f + 1]; i++)
            out->order[n++] = v->members[i];
    }
    if (expand_xfers(v, vp, out) == 0) return out;
    place_plan_free(out);
    return NULL;
}
