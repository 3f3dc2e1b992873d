/* schedule.c - the compact schedule of the best plan, for the dashboard's
 * Gantt chart and memory chart:
 *
 *   {"op_names": [...],
 *    "ops": [[op, device, start_us, end_us], ...],
 *    "transfers": [[from, to, start_us, end_us, bytes, producer_op], ...],
 *    "memory": [[[t_us, bytes], ...] per device]}
 *
 * Op indices are positions in op_names (the graph's ops in input order);
 * devices are positions in result.plan.devices.  The members of a fused op
 * all carry the fused op's interval, and a fused producer's transfer names
 * its first member read on the receiving device.  Transfers are listed by
 * start time, the order each channel serves them.  Memory lists the live
 * bytes after every instant they changed, thinned to at most
 * PLACE_SCHEDULE_MEM_POINTS per device by keeping the first point and, in
 * each of the remaining equal time buckets, the highest point: peaks stay
 * visible against the capacity line. */
#include "workers/place/solve.h"

#include "common/alloc.h"

#include <math.h>
#include <stdlib.h>

json_t *place_jreal(double x)
{
    /* json_real refuses non-finite values and a NULL would silently drop the field */
    return isfinite(x) ? json_real(round(x * 1000.0) / 1000.0) : json_null();
}

static json_t *op_names(const place_graph *g)
{
    json_t *a = json_array();
    for (int i = 0; i < g->n_ops; i++)
        json_array_append_new(a, json_string(g->ops[i].name));
    return a;
}

static json_t *ops_json(const place_view *v, const place_plan *expanded, const place_sim_result *r)
{
    json_t *a = json_array();
    for (int i = 0; i < v->orig->n_ops; i++) {
        int k = v->of ? v->of[i] : i;
        json_array_append_new(
            a, json_pack("[i,i,o,o]", i, expanded->device[i], place_jreal(r->start_us[k]), place_jreal(r->end_us[k])));
    }
    return a;
}

/* The original op behind a view transfer. */
static int producer_of(const place_view *v, const place_plan *expanded, const place_sim_xfer *x)
{
    if (!v->of) return x->src;
    const place_graph *g = v->orig;
    for (int i = v->off[x->src]; i < v->off[x->src + 1]; i++) {
        int p = v->members[i];
        for (int e = g->out_off[p]; e < g->out_off[p + 1]; e++)
            if (expanded->device[g->edges[g->out_edge[e]].dst] == x->to) return p;
    }
    return v->members[v->off[x->src]];
}

static int cmp_xfer(const void *a, const void *b, void *ctx)
{
    const place_sim_result *r = ctx;
    const place_sim_xfer *x = &r->xfers[*(const int *)a], *y = &r->xfers[*(const int *)b];
    if (x->start_us != y->start_us) return x->start_us < y->start_us ? -1 : 1;
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

static json_t *transfers_json(const place_view *v, const place_plan *expanded, const place_sim_result *r)
{
    json_t *a = json_array();
    int *idx = xmalloc((size_t)(r->n_xfers ? r->n_xfers : 1) * sizeof *idx);
    for (int x = 0; x < r->n_xfers; x++)
        idx[x] = x;
    qsort_r(idx, (size_t)r->n_xfers, sizeof *idx, cmp_xfer, (void *)r);
    for (int k = 0; k < r->n_xfers; k++) {
        const place_sim_xfer *x = &r->xfers[idx[k]];
        json_array_append_new(a, json_pack("[i,i,o,o,I,i]", x->from, x->to, place_jreal(x->start_us), place_jreal(x->end_us),
                                           (json_int_t)x->bytes, producer_of(v, expanded, x)));
    }
    free(idx);
    return a;
}

static json_t *point(const place_mem_point *p)
{
    return json_pack("[o,I]", place_jreal(p->t_us), (json_int_t)p->bytes);
}

static json_t *memory_of_device(const place_mem_point *p, int n, double span)
{
    json_t *a = json_array();
    if (n == 0) return a;
    json_array_append_new(a, point(&p[0]));
    int buckets = PLACE_SCHEDULE_MEM_POINTS - 1, best = -1, cur = -1;
    for (int i = 1; i < n; i++) {
        int b = n - 1 <= buckets || span <= 0 ? i : (int)(p[i].t_us / span * buckets);
        if (b >= buckets && n - 1 > buckets) b = buckets - 1;
        if (b != cur) {
            if (best >= 0) json_array_append_new(a, point(&p[best]));
            cur = b, best = i;
        } else if (p[i].bytes > p[best].bytes) {
            best = i;
        }
    }
    if (best >= 0) json_array_append_new(a, point(&p[best]));
    return a;
}

json_t *place_schedule_json(const place_view *v, const place_plan *expanded, const place_sim_result *trace)
{
    json_t *mem = json_array();
    for (int d = 0; d < trace->n_devices; d++) {
        int n = trace->n_mem[d];
        double span = n > 0 ? trace->mem[d][n - 1].t_us : 0;
        json_array_append_new(mem, memory_of_device(trace->mem[d], n, span));
    }
    json_t *s = json_object();
    json_object_set_new(s, "op_names", op_names(v->orig));
    json_object_set_new(s, "ops", ops_json(v, expanded, trace));
    json_object_set_new(s, "transfers", transfers_json(v, expanded, trace));
    json_object_set_new(s, "memory", mem);
    return s;
}
