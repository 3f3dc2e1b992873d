/* result.c - the placement result as JSON (docs/placement.md "Result"):
 * every algorithm's figures (its fastest variant's, with the others it was
 * placed on), the best plan mapped back to the user's ops with the variant
 * it came from, its schedule, and the lower bound every makespan is
 * measured against. */
#include "workers/place/solve.h"

#include "common/alloc.h"
#include "workers/place/variant.h"

#include <stdlib.h>
#include <string.h>

static json_t *per_device_ints(const int64_t *v, int n)
{
    json_t *a = json_array();
    for (int d = 0; d < n; d++)
        json_array_append_new(a, json_integer(v[d]));
    return a;
}

static json_t *per_device_reals(const double *v, int n)
{
    json_t *a = json_array();
    for (int d = 0; d < n; d++)
        json_array_append_new(a, place_jreal(v[d]));
    return a;
}

static void add_figures(json_t *o, const place_candidate *c, int D, double lb)
{
    json_object_set_new(o, "simulation_ms", place_jreal(c->simulation_ms));
    json_object_set_new(o, "makespan_us", place_jreal(c->sim.makespan_us));
    if (lb > 0) json_object_set_new(o, "makespan_over_lower_bound", place_jreal(c->sim.makespan_us / lb));
    json_object_set_new(o, "peak_bytes", per_device_ints(c->sim.peak_bytes, D));
    json_object_set_new(o, "busy_us", per_device_reals(c->sim.busy_us, D));
    json_object_set_new(o, "transfers", json_integer(c->sim.transfers));
    json_object_set_new(o, "transfer_bytes", json_integer(c->sim.transfer_bytes));
    if (c->unfused_makespan_us >= 0) json_object_set_new(o, "unfused_makespan_us", place_jreal(c->unfused_makespan_us));
}

/* One variant's line of an algorithm: feasibility, times and the makespan, or the reason. */
static json_t *variant_json(const place_candidate *c, double lb)
{
    json_t *o = json_object();
    json_object_set_new(o, "variant", json_string(c->variant));
    json_object_set_new(o, "feasible", json_boolean(c->feasible));
    json_object_set_new(o, "placement_ms", place_jreal(c->placement_ms));
    if (c->simulated) json_object_set_new(o, "makespan_us", place_jreal(c->sim.makespan_us));
    if (c->simulated && lb > 0) json_object_set_new(o, "makespan_over_lower_bound", place_jreal(c->sim.makespan_us / lb));
    if (c->plan && c->plan->note[0]) json_object_set_new(o, "note", json_string(c->plan->note));
    if (!c->feasible) json_object_set_new(o, "reason", json_string(c->reason));
    return o;
}

static json_t *candidate_json(const place_graph *g, const place_candidate *c, double lb)
{
    json_t *o = json_object();
    json_object_set_new(o, "algorithm", json_string(c->name));
    json_object_set_new(o, "variant", json_string(c->variant));
    json_object_set_new(o, "feasible", json_boolean(c->feasible));
    json_object_set_new(o, "placement_ms", place_jreal(c->placement_ms));
    if (c->simulated) add_figures(o, c, g->n_devices, lb);
    if (c->plan && c->plan->note[0]) json_object_set_new(o, "note", json_string(c->plan->note));
    if (!c->feasible) json_object_set_new(o, "reason", json_string(c->reason));
    return o;
}

static json_t *devices_json(const place_graph *g, const place_candidate *c)
{
    int *ops = xcalloc((size_t)g->n_devices, sizeof *ops);
    for (int i = 0; i < g->n_ops; i++)
        ops[c->expanded->device[i]]++;
    json_t *devices = json_array();
    for (int d = 0; d < g->n_devices; d++) {
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(g->devices[d].name));
        json_object_set_new(o, "memory_bytes", json_integer(g->devices[d].memory_bytes));
        json_object_set_new(o, "speed", json_real(g->devices[d].speed));
        json_object_set_new(o, "peak_bytes", json_integer(c->sim.peak_bytes[d]));
        json_object_set_new(o, "busy_us", place_jreal(c->sim.busy_us[d]));
        json_object_set_new(o, "ops", json_integer(ops[d]));
        json_array_append_new(devices, o);
    }
    free(ops);
    return devices;
}

static json_t *plan_json(const place_view *v, const place_candidate *c, const place_sim_result *trace)
{
    const place_graph *g = v->orig;
    json_t *placement = json_object(), *order = json_array();
    for (int i = 0; i < g->n_ops; i++) {
        json_object_set_new(placement, g->ops[i].name, json_string(g->devices[c->expanded->device[i]].name));
        json_array_append_new(order, json_string(g->ops[c->expanded->order[i]].name));
    }
    json_t *plan = json_object();
    json_object_set_new(plan, "algorithm", json_string(c->name));
    json_object_set_new(plan, "variant", json_string(c->variant));
    json_object_set_new(plan, "devices", devices_json(g, c));
    json_object_set_new(plan, "placement", placement);
    json_object_set_new(plan, "order", order);
    if (c->plan->note[0]) json_object_set_new(plan, "note", json_string(c->plan->note));
    if (trace)
        json_object_set_new(plan, "schedule", place_schedule_json(v, c->expanded, trace));
    else
        json_object_set_new(plan, "schedule_omitted", json_sprintf("more than %d ops", PLACE_SCHEDULE_MAX_OPS));
    return plan;
}

static json_t *metrics_json(const place_view *v, const place_candidate *best, const place_search *s)
{
    const place_graph *g = v->orig;
    int used = 0;
    for (int d = 0; d < g->n_devices; d++)
        used += best->sim.ops[d] > 0;
    json_t *m = json_object();
    json_object_set_new(m, "makespan_us", place_jreal(best->sim.makespan_us));
    json_object_set_new(m, "ops", json_integer(g->n_ops));
    json_object_set_new(m, "devices", json_integer(g->n_devices));
    json_object_set_new(m, "devices_used", json_integer(used));
    if (v->g) json_object_set_new(m, "placed_units", json_integer(place_view_graph(v)->n_ops));
    if (v->coplaced) json_object_set_new(m, "coplaced_ops", json_integer(v->coplaced));
    if (v->of) json_object_set_new(m, "fused_ops", json_integer(v->fused));
    json_object_set_new(m, "variants_weighed", json_integer(s->variants));
    json_object_set_new(m, "search_ms", place_jreal(s->search_ms));
    return m;
}

/* The line shown for an algorithm: its fastest feasible variant (ties: the plainer, as the best
 * plan's), else its plain graph's (the reason names the user's op), else its first. */
static const place_candidate *representative(const place_candidate *c, int n, const char *name)
{
    const place_candidate *r = NULL;
    for (int i = 0; i < n; i++) {
        if (strcmp(c[i].name, name) != 0) continue;
        if (c[i].feasible) {
            if (!r || !r->feasible || c[i].sim.makespan_us < r->sim.makespan_us) r = &c[i]; /* tie: the plainer, run first */
        } else if (!r || (!r->feasible && strcmp(c[i].variant, "plain") == 0)) {
            r = &c[i];
        }
    }
    return r;
}

/* One entry per algorithm, by rank (request order, then the added ones). */
static json_t *candidates_json(const place_graph *g, const place_candidate *c, int n, double lb)
{
    json_t *cands = json_array();
    for (int rank = 0;; rank++) {
        int first = -1, variants = 0;
        for (int k = 0; k < n; k++)
            if (c[k].rank == rank) {
                if (first < 0) first = k;
                variants++;
            }
        if (first < 0) return cands;
        const place_candidate *r = representative(c, n, c[first].name);
        if (!r->requested && !r->feasible) continue;
        json_t *o = candidate_json(g, r, lb);
        if (variants > 1) {
            json_t *all = json_array();
            for (int v = 0; v < PLACE_N_VARIANTS; v++) /* in view order: plainest first */
                for (int k = 0; k < n; k++)
                    if (c[k].rank == rank && c[k].view == v) json_array_append_new(all, variant_json(&c[k], lb));
            json_object_set_new(o, "variants", all);
        }
        json_array_append_new(cands, o);
    }
}

json_t *place_result_json(const place_view *v, const place_candidate *c, int n, const place_candidate *best,
                          const place_sim_result *trace, double lower_bound_us, const place_search *s)
{
    const place_graph *g = place_view_graph(v);
    json_t *r = json_object();
    json_object_set_new(r, "best", json_string(best->name));
    json_object_set_new(r, "variant", json_string(best->variant));
    json_object_set_new(r, "candidates", candidates_json(g, c, n, lower_bound_us));
    json_object_set_new(r, "plan", plan_json(v, best, trace));
    json_object_set_new(r, "lower_bound_us", place_jreal(lower_bound_us));
    json_object_set_new(r, "metrics", metrics_json(v, best, s));
    return r;
}
