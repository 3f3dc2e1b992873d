/* fuse.c - operator fusion inside colocation groups.
 *
 * Along an edge u -> v of one group, v is merged into u unless u has more
 * than one consumer and v more than one producer, counted between fused
 * ops.  That rule cannot create a cycle: a cycle after merging needs a
 * second path from u to v, which needs u to reach another op or v to be
 * reached from another op.  Fused ops are union-find sets; each set keeps
 * linked lists of the edges leaving and entering it, and edges that became
 * internal are unlinked the first time a degree check walks over them, so
 * the checks cost O(E) overall plus the early exits.
 *
 * A fused op runs its members one after another in topological order.  It
 * sums their compute and persistent memory and keeps only external outputs
 * (read outside the op, or by nobody).  Baechi then takes the largest
 * temporary and stops there, so a fused op can need more memory than it is
 * charged (its plans exceeded 667 MB devices by up to 31%).  We replay the
 * members: at member i the live bytes are every output still needed (by a
 * later member, or outside) plus member i's temporary; the peak of that is
 * the fused op's internal peak, and its temporary is set so that output +
 * temporary covers the peak.  The ledger then charges at least what the
 * members can ever hold at once. */
#include "workers/place/view.h"

#include "common/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fuser {
    const place_graph *g;
    int *parent;
    int *ohead, *otail, *onext; /* edges leaving each set */
    int *ihead, *itail, *inext; /* edges entering each set */
} fuser;

static int find(fuser *f, int x)
{
    while (f->parent[x] != x) {
        f->parent[x] = f->parent[f->parent[x]];
        x = f->parent[x];
    }
    return x;
}

/* 1 when every edge leaving (out) or entering (!out) set a, other than those
 * now inside it, connects it with set b. */
static int only_with(fuser *f, int a, int b, int out)
{
    int *head = out ? f->ohead : f->ihead, *tail = out ? f->otail : f->itail, *next = out ? f->onext : f->inext;
    int prev = -1, e = head[a];
    while (e >= 0) {
        const place_edge *ed = &f->g->edges[e];
        int other = find(f, out ? ed->dst : ed->src), nx = next[e];
        if (other == a) { /* internal now: unlink for good */
            if (prev < 0)
                head[a] = nx;
            else
                next[prev] = nx;
            if (tail[a] == e) tail[a] = prev;
            e = nx;
            continue;
        }
        if (other != b) return 0;
        prev = e;
        e = nx;
    }
    return 1;
}

static void append(int *head, int *tail, int *next, int a, int b)
{
    if (head[b] < 0) return;
    if (head[a] < 0)
        head[a] = head[b];
    else
        next[tail[a]] = head[b];
    tail[a] = tail[b];
}

static void merge(fuser *f, int a, int b)
{
    f->parent[b] = a;
    append(f->ohead, f->otail, f->onext, a, b);
    append(f->ihead, f->itail, f->inext, a, b);
}

static void link_edges(fuser *f)
{
    const place_graph *g = f->g;
    for (int i = 0; i < g->n_ops; i++)
        f->parent[i] = i, f->ohead[i] = f->otail[i] = f->ihead[i] = f->itail[i] = -1;
    for (int e = g->n_edges - 1; e >= 0; e--) {
        int u = g->edges[e].src, v = g->edges[e].dst;
        f->onext[e] = f->ohead[u], f->ohead[u] = e;
        if (f->otail[u] < 0) f->otail[u] = e;
        f->inext[e] = f->ihead[v], f->ihead[v] = e;
        if (f->itail[v] < 0) f->itail[v] = e;
    }
}

static void fuse_sets(fuser *f)
{
    const place_graph *g = f->g;
    link_edges(f);
    for (int t = 0; t < g->n_ops; t++) {
        int u = g->topo[t];
        for (int k = g->out_off[u]; k < g->out_off[u + 1]; k++) {
            int v = g->edges[g->out_edge[k]].dst;
            if (g->ops[u].group < 0 || g->ops[u].group != g->ops[v].group) continue;
            int a = find(f, u), b = find(f, v);
            if (a != b && (only_with(f, a, b, 1) || only_with(f, b, a, 0))) merge(f, a, b);
        }
    }
}

/* ---- the fused graph ---- */

typedef struct fused {
    const place_graph *g;
    place_graph *h;
    int *off, *members, *of;
    int *pos;   /* original op -> position in members[] */
    int *bhead; /* per position: first member whose output dies after it */
    int *bnext;
} fused;

/* Fused op ids in order of their first member, and member lists. */
static int number_sets(fuser *f, fused *x)
{
    const place_graph *g = f->g;
    int n = 0, *id = xmalloc((size_t)g->n_ops * sizeof *id), *fill;
    for (int i = 0; i < g->n_ops; i++)
        id[i] = -1;
    for (int t = 0; t < g->n_ops; t++) {
        int r = find(f, g->topo[t]);
        if (id[r] < 0) id[r] = n++;
        x->of[g->topo[t]] = id[r];
    }
    free(id);
    x->off = xcalloc((size_t)n + 1, sizeof *x->off);
    fill = xcalloc((size_t)n + 1, sizeof *fill);
    for (int i = 0; i < g->n_ops; i++)
        x->off[x->of[i] + 1]++;
    for (int k = 0; k < n; k++)
        x->off[k + 1] += x->off[k];
    for (int t = 0; t < g->n_ops; t++) {
        int op = g->topo[t], k = x->of[op];
        x->pos[op] = x->off[k] + fill[k];
        x->members[x->off[k] + fill[k]++] = op;
    }
    free(fill);
    return n;
}

/* An output read outside its fused op, or by nobody, outlives the op. */
static int external(const fused *x, int op, int64_t *ext_bytes)
{
    const place_graph *g = x->g;
    int ext = g->out_off[op] == g->out_off[op + 1];
    *ext_bytes = 0;
    for (int k = g->out_off[op]; k < g->out_off[op + 1]; k++) {
        const place_edge *e = &g->edges[g->out_edge[k]];
        if (x->of[e->dst] != x->of[op]) ext = 1, *ext_bytes += e->bytes;
    }
    return ext;
}

/* Fills fused op k from its members (see the top of the file). */
static void fuse_op(fused *x, int k)
{
    const place_graph *g = x->g;
    place_op *o = &x->h->ops[k];
    int64_t live = 0, peak = 0, max_temp = 0, out = 0;
    for (int i = x->off[k]; i < x->off[k + 1]; i++)
        x->bhead[i] = -1;
    for (int i = x->off[k]; i < x->off[k + 1]; i++) {
        int m = x->members[i], last = -1;
        int64_t ext_bytes;
        o->compute_us += g->ops[m].compute_us;
        o->persistent_bytes += g->ops[m].persistent_bytes;
        if (g->ops[m].temp_bytes > max_temp) max_temp = g->ops[m].temp_bytes;
        if (external(x, m, &ext_bytes)) {
            /* an output the graph leaves at 0 bytes still travels by its edges */
            out += g->ops[m].output_bytes > 0 ? g->ops[m].output_bytes : ext_bytes;
            continue;
        }
        for (int e = g->out_off[m]; e < g->out_off[m + 1]; e++) {
            int p = x->pos[g->edges[g->out_edge[e]].dst];
            if (p > last) last = p;
        }
        x->bnext[m] = x->bhead[last], x->bhead[last] = m;
    }
    for (int i = x->off[k]; i < x->off[k + 1]; i++) {
        int m = x->members[i];
        live += g->ops[m].output_bytes;
        if (live + g->ops[m].temp_bytes > peak) peak = live + g->ops[m].temp_bytes;
        for (int j = x->bhead[i]; j >= 0; j = x->bnext[j])
            live -= g->ops[j].output_bytes;
    }
    o->output_bytes = out;
    o->temp_bytes = peak - out > max_temp ? peak - out : max_temp;
    o->group = g->ops[x->members[x->off[k]]].group;
}

static void build_ops(fused *x, int n)
{
    const place_graph *g = x->g;
    place_graph *h = x->h;
    h->ops = xcalloc((size_t)n, sizeof *h->ops);
    h->group_names = xcalloc((size_t)(g->n_groups ? g->n_groups : 1), sizeof *h->group_names);
    for (int k = 0; k < g->n_groups; k++) {
        h->group_names[k] = xstrdup(g->group_names[k]);
        h->n_groups = k + 1;
    }
    for (int k = 0; k < n; k++) {
        h->ops[k].name = xstrdup(g->ops[x->members[x->off[k]]].name);
        h->n_ops = k + 1;
        fuse_op(x, k);
    }
}

/* External edges, merged per (original producer, fused consumer): one
 * tensor read twice by one fused op crosses a link once. */
static void build_edges(fused *x, int n)
{
    const place_graph *g = x->g;
    place_graph *h = x->h;
    int *stamp = xmalloc((size_t)n * sizeof *stamp), *slot = xmalloc((size_t)n * sizeof *slot);
    h->edges = xmalloc((size_t)(g->n_edges ? g->n_edges : 1) * sizeof *h->edges);
    for (int k = 0; k < n; k++)
        stamp[k] = -1;
    for (int p = 0; p < g->n_ops; p++) {
        int first = h->n_edges;
        for (int k = g->out_off[p]; k < g->out_off[p + 1]; k++) {
            const place_edge *e = &g->edges[g->out_edge[k]];
            int to = x->of[e->dst];
            if (to == x->of[p]) continue;
            if (stamp[to] != p) {
                stamp[to] = p, slot[to] = h->n_edges;
                h->edges[h->n_edges++] = (place_edge){x->of[p], to, 0};
            }
            h->edges[slot[to]].bytes += e->bytes;
        }
        int64_t cap = g->ops[p].output_bytes;
        for (int i = first; i < h->n_edges; i++)
            if (cap > 0 && h->edges[i].bytes > cap) h->edges[i].bytes = cap;
    }
    free(stamp);
    free(slot);
}

place_graph *place_fuse(const place_graph *g, int **off, int **members, int **of, char *msg, size_t len)
{
    size_t N = (size_t)g->n_ops, E = (size_t)(g->n_edges ? g->n_edges : 1);
    fuser f = {g,
               xmalloc(N * sizeof(int)),
               xmalloc(N * sizeof(int)),
               xmalloc(N * sizeof(int)),
               xmalloc(E * sizeof(int)),
               xmalloc(N * sizeof(int)),
               xmalloc(N * sizeof(int)),
               xmalloc(E * sizeof(int))};
    fused x = {.g = g,
               .members = xmalloc(N * sizeof(int)),
               .of = xmalloc(N * sizeof(int)),
               .pos = xmalloc(N * sizeof(int)),
               .bhead = xmalloc(N * sizeof(int)),
               .bnext = xmalloc(N * sizeof(int))};
    x.h = xcalloc(1, sizeof *x.h);
    fuse_sets(&f);
    int n = number_sets(&f, &x);
    build_ops(&x, n);
    build_edges(&x, n);
    place_graph_copy_devices(x.h, g);
    int ok = place_graph_index(x.h, msg, len) == 0; /* a cycle here would be a bug in the rule above */
    free(f.parent), free(f.ohead), free(f.otail), free(f.onext), free(f.ihead), free(f.itail), free(f.inext);
    free(x.pos), free(x.bhead), free(x.bnext);
    if (!ok) {
        place_graph_free(x.h);
        free(x.off), free(x.members), free(x.of);
        return NULL;
    }
    *off = x.off, *members = x.members, *of = x.of;
    return x.h;
}
