/* place.c - the algorithm table, spec validation and the solver.
 *
 * Algorithms are rows of ALGOS (name -> function); validation, "all", the
 * CLI's --help and the docs all read this one table.  The solver builds the
 * view the algorithms see (co-placement and fusion when asked, view.h),
 * runs every requested algorithm on it, always adds the single-device and
 * m-TOPO plans (a split plan is only worth its transfers when it beats one
 * device, and a list scheduler is not always faster than filling devices in
 * order), replays every plan in the simulator, and returns the feasible
 * plan with the lowest simulated makespan (ties: the first in request
 * order), with its schedule.  A spec with "strategy" instead of "graph" is
 * an AMP strategy search (amp.h). */
#include "common/utf8.h"
#include "workers/place/perr.h"
#include "workers/place/place.h"

#include "common/clock.h"
#include "workers/place/amp.h"
#include "workers/place/levels.h"
#include "workers/place/solve.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct algo_entry {
    const char *name;
    place_algo_fn run;
    int always; /* weighed even when not requested (shown only when feasible) */
} algo_entry;

#define ALGO(i, fn, always)                                                                                                        \
    {                                                                                                                              \
        ALGO_NAME_##i, fn, always                                                                                                  \
    }
#define ALGO_NAME_0 "m-topo"
#define ALGO_NAME_1 "m-etf"
#define ALGO_NAME_2 "m-sct"
#define ALGO_NAME_3 "single"

static const algo_entry ALGOS[] = {
    ALGO(0, place_algo_topo, 1),
    ALGO(1, place_algo_etf, 0),
    ALGO(2, place_algo_sct, 0),
    ALGO(3, place_algo_single, 1),
};

#define N_ALGOS ((int)(sizeof ALGOS / sizeof ALGOS[0]))

/* ---- the spec's shape (common/schema.h): validation and the API document ---- */

/* what spec.algorithms may name: the table's rows, then "all" */
static const char *const algo_values[] = {ALGO_NAME_0, ALGO_NAME_1, ALGO_NAME_2, ALGO_NAME_3, "all", NULL};
_Static_assert(sizeof algo_values / sizeof algo_values[0] == N_ALGOS + 2, "algo_values lists every row of ALGOS");
static const sch algo_s = {SCH_STR, .values = algo_values};
static const sch algos_s = {SCH_ARRAY,
                            .flags = SCH_LO | SCH_NULLABLE,
                            .lo = 1,
                            .items = &algo_s,
                            .dflt = "[\"m-topo\"]",
                            .desc = "placement algorithms to run (all: every one); the fastest feasible plan wins, and "
                                    "m-topo and single are always weighed"};
static const sch graph_s = {SCH_OBJECT, .flags = SCH_OPEN,
                            .desc = "the operator graph: {ops, edges, devices, comm}, in the format of docs/graph.schema.json "
                                    "(op and device names unique, edges between existing ops, acyclic)"};
static const sch strategy_s = {SCH_OBJECT, .flags = SCH_OPEN,
                               .desc = "an AMP parallel strategy search instead of a graph (docs/placement.md)"};
static const sch fuse_s = {SCH_BOOL, .flags = SCH_NULLABLE, .dflt = "false",
                           .desc = "fuse chains of ops before placing (fewer, larger ops; faster on big graphs)"};
static const sch coplace_s = {SCH_BOOL, .flags = SCH_NULLABLE, .dflt = "false",
                              .desc = "keep each op with the ops it must share a device with (m-TOPO's co-placement)"};
static const sch_member spec_m[] = {{"graph", &graph_s, 0}, {"strategy", &strategy_s, 0}, {"algorithms", &algos_s, 0},
                                    {"fuse", &fuse_s, 0},   {"coplace", &coplace_s, 0},   {0}};
const sch place_spec_shape = {SCH_OBJECT, .members = spec_m,
                              .desc = "A placement job: split an operator graph over memory-limited devices and simulate "
                                      "the plan's step time; give a graph or a strategy search, not both."};
#define DEFAULT_ALGO "m-topo"
#define SINGLE_ALGO "single"

const char *place_algorithm_name(int i)
{
    return i >= 0 && i < N_ALGOS ? ALGOS[i].name : NULL;
}

static int algo_find(const char *name)
{
    for (int i = 0; i < N_ALGOS; i++)
        if (strcmp(ALGOS[i].name, name) == 0) return i;
    return -1;
}

/* ---- spec validation ---- */

/* Adds table row i to the selection unless already there. */
static void select_algo(int *sel, int *n_sel, int i)
{
    for (int k = 0; k < *n_sel; k++)
        if (sel[k] == i) return;
    sel[(*n_sel)++] = i;
}

/* Fills sel (N_ALGOS entries at most) with table rows, in request order (the names fit algo_s). */
static void parse_algorithms(const json_t *spec, int *sel, int *n_sel)
{
    const json_t *a = json_object_get(spec, "algorithms");
    *n_sel = 0;
    if (!a || json_is_null(a)) {
        select_algo(sel, n_sel, algo_find(DEFAULT_ALGO));
        return;
    }
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v)
    {
        const char *name = json_string_value(v);
        if (strcmp(name, "all") != 0) {
            select_algo(sel, n_sel, algo_find(name));
            continue;
        }
        for (int k = 0; k < N_ALGOS; k++)
            select_algo(sel, n_sel, k);
    }
}

typedef struct options {
    int sel[N_ALGOS], n_sel;
    int fuse, coplace;
    const json_t *graph, *strategy;
} options;

/* Everything but the graph's (or strategy's) contents. */
static int check_options(perr *e, const json_t *spec, options *o)
{
    if (sch_check(&place_spec_shape, spec, "spec", e->field, e->field_len, e->msg, e->msg_len)) return -1;
    o->graph = json_object_get(spec, "graph");
    o->strategy = json_object_get(spec, "strategy");
    if (o->graph && o->strategy) return perr_fail(e, "spec.strategy", "give either a graph or a strategy search, not both");
    if (o->strategy) return 0;
    if (!o->graph) return perr_fail(e, "spec.graph", "is required (or spec.strategy for a parallel strategy search)");
    parse_algorithms(spec, o->sel, &o->n_sel);
    o->fuse = json_is_true(json_object_get(spec, "fuse"));
    o->coplace = json_is_true(json_object_get(spec, "coplace"));
    return 0;
}

static int validate(const json_t *spec, char *field, size_t field_len, char *msg, size_t msg_len)
{
    perr e = {"", field, field_len, msg, msg_len};
    options o;
    if (check_options(&e, spec, &o) < 0) return -1;
    if (o.strategy) {
        amp_problem *p = amp_problem_parse(o.strategy, "spec.strategy", field, field_len, msg, msg_len);
        amp_problem_free(p);
        return p ? 0 : -1;
    }
    place_graph *g = place_graph_parse(o.graph, "spec.graph", field, field_len, msg, msg_len);
    if (!g) return -1;
    place_graph_free(g);
    return 0;
}

/* ---- candidates ---- */

static void run_candidate(const place_view *v, const algo_entry *algo, int requested, place_candidate *c)
{
    const place_graph *g = place_view_graph(v);
    *c = (place_candidate){.name = algo->name, .requested = requested, .unfused_makespan_us = -1};
    c->plan = place_plan_new(g->n_ops);
    if (!c->plan) {
        snprintf(c->reason, sizeof c->reason, "out of memory");
        return;
    }
    int64_t t0 = clock_mono_us();
    int rc = algo->run(g, c->plan, c->reason, sizeof c->reason);
    c->placement_ms = (double)(clock_mono_us() - t0) / 1000.0;
    if (rc < 0) return;
    c->simulated = 1;
    t0 = clock_mono_us();
    rc = place_simulate(g, c->plan, &c->sim);
    c->simulation_ms = (double)(clock_mono_us() - t0) / 1000.0;
    if (rc < 0 || !c->sim.feasible) {
        snprintf(c->reason, sizeof c->reason, "simulation: %s", c->sim.reason);
        return;
    }
    if (!(c->expanded = place_view_expand(v, c->plan))) {
        snprintf(c->reason, sizeof c->reason, "out of memory");
        return;
    }
    if (v->of) { /* fused: the user's ops must also run within memory, op by op */
        place_sim_result r;
        rc = place_simulate(v->orig, c->expanded, &r);
        c->unfused_makespan_us = r.makespan_us;
        if (rc < 0 || !r.feasible) snprintf(c->reason, sizeof c->reason, "replay of the unfused ops: %s", r.reason);
        place_sim_result_clear(&r);
        if (rc < 0 || c->reason[0]) return;
    }
    c->feasible = 1;
}

static void candidate_clear(place_candidate *c)
{
    place_plan_free(c->plan);
    place_plan_free(c->expanded);
    if (c->simulated) place_sim_result_clear(&c->sim);
}

/* The reason to give when nothing is feasible: a requested placement
 * algorithm's (it names the op and the missing bytes) before single's. */
static const place_candidate *clearest_failure(const place_candidate *c, int n)
{
    for (int i = 0; i < n; i++)
        if (c[i].requested && strcmp(c[i].name, SINGLE_ALGO) != 0) return &c[i];
    return &c[0];
}

/* ---- solve ---- */

static const place_candidate *pick_best(const place_candidate *c, int n)
{
    const place_candidate *best = NULL;
    for (int i = 0; i < n; i++)
        if (c[i].feasible && (!best || c[i].sim.makespan_us < best->sim.makespan_us)) best = &c[i];
    return best;
}

static json_t *answer(const place_view *v, place_candidate *c, int n, char *err, size_t err_len)
{
    const place_candidate *best = pick_best(c, n);
    if (!best) {
        const place_candidate *f = clearest_failure(c, n);
        snprintf(err, err_len, "no feasible placement; %s: %s", f->name, f->reason);
        return NULL;
    }
    place_sim_result trace = {0};
    int traced = v->orig->n_ops <= PLACE_SCHEDULE_MAX_OPS &&
                 place_simulate_ex(place_view_graph(v), best->plan, &trace, PLACE_SIM_MEMORY) == 0 && trace.feasible;
    json_t *r = place_result_json(v, c, n, best, traced ? &trace : NULL, place_lower_bound_us(v->orig));
    place_sim_result_clear(&trace);
    if (!r) snprintf(err, err_len, "out of memory");
    return r;
}

static json_t *solve(const place_graph *g, const options *o, char *err, size_t err_len)
{
    place_view v;
    if (place_view_build(g, o->coplace, o->fuse, &v, err, err_len) < 0) return NULL;
    place_candidate c[N_ALGOS];
    int n = 0, chosen[N_ALGOS] = {0};
    for (int k = 0; k < o->n_sel; k++) {
        run_candidate(&v, &ALGOS[o->sel[k]], 1, &c[n++]);
        chosen[o->sel[k]] = 1;
    }
    for (int k = 0; k < N_ALGOS; k++)
        if (ALGOS[k].always && !chosen[k]) run_candidate(&v, &ALGOS[k], 0, &c[n++]);
    json_t *r = answer(&v, c, n, err, err_len);
    for (int i = 0; i < n; i++)
        candidate_clear(&c[i]);
    place_view_clear(&v);
    return r;
}

static json_t *solve_spec(const json_t *spec, char *err, size_t err_len)
{
    char field[160], msg[320];
    perr e = {"", field, sizeof field, msg, sizeof msg};
    options o;
    if (check_options(&e, spec, &o) < 0) {
        snprintf(err, err_len, "%s: %s", field, msg);
        return NULL;
    }
    if (o.strategy) return amp_solve(o.strategy, "spec.strategy", err, err_len);
    place_graph *g = place_graph_parse(o.graph, "spec.graph", field, sizeof field, msg, sizeof msg);
    if (!g) {
        snprintf(err, err_len, "%s: %s", field, msg);
        return NULL;
    }
    json_t *r = solve(g, &o, err, err_len);
    place_graph_free(g);
    return r;
}

/* Public entry points: names copied from the graph into messages are cut to fixed
 * buffers, possibly inside a UTF-8 character; the text that leaves is trimmed. */
int place_spec_validate(const json_t *spec, char *field, size_t field_len, char *msg, size_t msg_len)
{
    int rc = validate(spec, field, field_len, msg, msg_len);
    if (rc != 0) {
        utf8_trim(field);
        utf8_trim(msg);
    }
    return rc;
}

json_t *place_solve(const json_t *spec, char *err, size_t err_len)
{
    json_t *r = solve_spec(spec, err, err_len);
    if (!r) utf8_trim(err);
    return r;
}
