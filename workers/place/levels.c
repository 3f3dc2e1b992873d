/* levels.c - top and bottom levels by two passes over the topological
 * order, O(N + E); and the makespan lower bound. */
#include "workers/place/levels.h"

#include "common/alloc.h"

#include <stdlib.h>

static void mean_link(const place_graph *g, place_levels *lv)
{
    int D = g->n_devices;
    double lat = 0, inv = 0, speed = 0;
    for (int a = 0; a < D; a++) {
        speed += g->devices[a].speed;
        for (int b = 0; b < D; b++) {
            if (a == b) continue;
            lat += g->latency_us[a * D + b];
            inv += 1.0 / g->bytes_per_us[a * D + b];
        }
    }
    int pairs = D * (D - 1);
    lv->mean_latency = pairs ? lat / pairs : 0;
    lv->mean_inv_bw = pairs ? inv / pairs : 0;
    lv->mean_speed = speed / D;
}

double place_levels_edge(const place_levels *lv, const place_graph *g, int edge)
{
    if (g->n_devices < 2) return 0;
    return lv->mean_latency + (double)g->edges[edge].bytes * lv->mean_inv_bw;
}

double place_levels_op(const place_levels *lv, const place_graph *g, int op)
{
    return g->ops[op].compute_us / lv->mean_speed;
}

int place_levels_compute(const place_graph *g, place_levels *lv)
{
    size_t N = (size_t)g->n_ops;
    lv->top = xcalloc(N, sizeof *lv->top);
    lv->bottom = xcalloc(N, sizeof *lv->bottom);
    mean_link(g, lv);
    for (int t = 0; t < g->n_ops; t++) {
        int u = g->topo[t];
        double done = lv->top[u] + place_levels_op(lv, g, u);
        for (int k = g->out_off[u]; k < g->out_off[u + 1]; k++) {
            int e = g->out_edge[k], v = g->edges[e].dst;
            double at = done + place_levels_edge(lv, g, e);
            if (at > lv->top[v]) lv->top[v] = at;
        }
    }
    lv->cp = 0;
    for (int t = g->n_ops - 1; t >= 0; t--) {
        int u = g->topo[t];
        double rest = 0;
        for (int k = g->out_off[u]; k < g->out_off[u + 1]; k++) {
            int e = g->out_edge[k];
            double r = place_levels_edge(lv, g, e) + lv->bottom[g->edges[e].dst];
            if (r > rest) rest = r;
        }
        lv->bottom[u] = place_levels_op(lv, g, u) + rest;
        if (lv->top[u] + lv->bottom[u] > lv->cp) lv->cp = lv->top[u] + lv->bottom[u];
    }
    return 0;
}

void place_levels_clear(place_levels *lv)
{
    free(lv->top);
    free(lv->bottom);
    lv->top = lv->bottom = NULL;
}

double place_lower_bound_us(const place_graph *g)
{
    double fastest = 0, speed = 0, work = 0, cp = 0;
    for (int d = 0; d < g->n_devices; d++) {
        speed += g->devices[d].speed;
        if (g->devices[d].speed > fastest) fastest = g->devices[d].speed;
    }
    double *finish = xmalloc((size_t)g->n_ops * sizeof *finish);
    for (int t = 0; t < g->n_ops; t++) {
        int u = g->topo[t];
        double start = 0;
        for (int k = g->in_off[u]; k < g->in_off[u + 1]; k++) {
            double f = finish[g->edges[g->in_edge[k]].src];
            if (f > start) start = f;
        }
        finish[u] = start + g->ops[u].compute_us / fastest;
        if (finish[u] > cp) cp = finish[u];
        work += g->ops[u].compute_us;
    }
    free(finish);
    return work / speed > cp ? work / speed : cp;
}
