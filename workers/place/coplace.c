/* coplace.c - co-placement: grow colocation groups along single consumers.
 *
 * An op whose out-edges all go to one consumer has nothing to gain from a
 * device of its own: its only tensor would cross a link.  So it joins its
 * consumer's group, and groups merge transitively (union-find; one pass in
 * topological order reaches the fixed point, since whether an op has a
 * single consumer does not depend on the groups).  Baechi lets groups grow
 * without bound, so a chain becomes one group that fits no device; here a
 * merge is skipped when the merged group's own memory would exceed a
 * quarter of the largest device.  User groups are kept whole whatever
 * their size (they are constraints, not hints). */
#include "workers/place/view.h"

#include "common/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct uf {
    int *parent;
    int64_t *bytes; /* own memory of the set, at the root */
    int *user;      /* a user group in the set, at the root, or -1 */
} uf;

static int find(uf *u, int x)
{
    while (u->parent[x] != x) {
        u->parent[x] = u->parent[u->parent[x]];
        x = u->parent[x];
    }
    return x;
}

static void join(uf *u, int a, int b)
{
    a = find(u, a), b = find(u, b);
    if (a == b) return;
    u->parent[b] = a;
    u->bytes[a] += u->bytes[b];
    if (u->user[a] < 0) u->user[a] = u->user[b];
}

/* The single consumer of op, or -1. */
static int single_consumer(const place_graph *g, int op)
{
    int c = -1;
    for (int k = g->out_off[op]; k < g->out_off[op + 1]; k++) {
        int v = g->edges[g->out_edge[k]].dst;
        if (c >= 0 && v != c) return -1;
        c = v;
    }
    return c;
}

static int group_sets(const place_graph *g, uf *u)
{
    int64_t cap = 0, *first = xmalloc((size_t)(g->n_groups ? g->n_groups : 1) * sizeof *first);
    for (int d = 0; d < g->n_devices; d++)
        if (g->devices[d].memory_bytes > cap) cap = g->devices[d].memory_bytes;
    cap /= 4;
    for (int k = 0; k < g->n_groups; k++)
        first[k] = -1;
    for (int i = 0; i < g->n_ops; i++) {
        u->parent[i] = i, u->bytes[i] = place_op_memory(g, i), u->user[i] = g->ops[i].group;
        int k = g->ops[i].group;
        if (k < 0) continue;
        if (first[k] < 0)
            first[k] = i;
        else
            join(u, (int)first[k], i);
    }
    free(first);
    for (int t = 0; t < g->n_ops; t++) {
        int op = g->topo[t], c = single_consumer(g, op);
        if (c < 0) continue;
        int a = find(u, op), b = find(u, c);
        if (a == b || u->bytes[a] + u->bytes[b] > cap) continue;
        join(u, b, a);
    }
    return 0;
}

/* Copies ops (names duplicated) and edges of g into a new graph. */
static place_graph *copy_graph(const place_graph *g)
{
    place_graph *c = xcalloc(1, sizeof *c);
    c->ops = xcalloc((size_t)g->n_ops, sizeof *c->ops);
    c->edges = xmalloc((size_t)(g->n_edges ? g->n_edges : 1) * sizeof *c->edges);
    c->group_names = xcalloc((size_t)g->n_ops, sizeof *c->group_names);
    place_graph_copy_devices(c, g);
    for (int i = 0; i < g->n_ops; i++) {
        c->ops[i] = g->ops[i];
        c->ops[i].name = xstrdup(g->ops[i].name);
        c->n_ops = i + 1;
    }
    if (g->n_edges) memcpy(c->edges, g->edges, (size_t)g->n_edges * sizeof *c->edges); /* a graph without edges has none */
    c->n_edges = g->n_edges;
    return c;
}

/* Group ids from the sets: a set of one op with no user group stays ungrouped. */
static int name_groups(const place_graph *g, place_graph *c, uf *u)
{
    int *id = xmalloc((size_t)g->n_ops * sizeof *id), *size = xcalloc((size_t)g->n_ops, sizeof *size);
    for (int i = 0; i < g->n_ops; i++)
        id[i] = -1, size[find(u, i)]++;
    for (int t = g->n_ops - 1; t >= 0; t--) { /* named after the set's last op: where it flows to */
        int op = g->topo[t], r = find(u, op);
        if (size[r] < 2 && u->user[r] < 0) continue;
        if (id[r] < 0) {
            char name[PLACE_MAX_NAME + 8];
            if (u->user[r] >= 0)
                snprintf(name, sizeof name, "%s", g->group_names[u->user[r]]);
            else
                snprintf(name, sizeof name, "co:%.*s", PLACE_MAX_NAME - 8, g->ops[op].name);
            c->group_names[c->n_groups] = xstrdup(name);
            id[r] = c->n_groups++;
        }
        c->ops[op].group = id[r];
    }
    free(id);
    free(size);
    return 0;
}

place_graph *place_coplace(const place_graph *g, int *joined, char *msg, size_t len)
{
    size_t N = (size_t)g->n_ops;
    uf u = {xmalloc(N * sizeof(int)), xmalloc(N * sizeof(int64_t)), xmalloc(N * sizeof(int))};
    place_graph *c = NULL;
    int ok = group_sets(g, &u) == 0 && (c = copy_graph(g)) && name_groups(g, c, &u) == 0 && place_graph_index(c, msg, len) == 0;
    *joined = 0;
    for (int i = 0; ok && i < g->n_ops; i++)
        *joined += g->ops[i].group < 0 && c->ops[i].group >= 0;
    free(u.parent), free(u.bytes), free(u.user);
    if (ok) return c;
    place_graph_free(c);
    snprintf(msg, len, "co-placement: out of memory");
    return NULL;
}
