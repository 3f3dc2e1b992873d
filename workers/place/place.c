/* place.c - the algorithm table and the solver (the spec's validation: spec.c).
 *
 * Algorithms are rows of ALGOS (name -> function, the names from spec.h);
 * "all", the CLI's --help and the docs read this one table.  The solver
 * builds the views the algorithms see (the graph variants of variant.h:
 * plain, co-placement, fusion, both; only the one the spec forces when it
 * sets "fuse" or "coplace"), runs every requested algorithm on them, always
 * adds the single-device and m-TOPO plans (a split plan is only worth its
 * transfers when it beats one device, and a list scheduler is not always
 * faster than filling devices in order), replays every plan in the
 * simulator, and returns the feasible plan with the lowest simulated
 * makespan (ties: the plainer variant, then request order), with its
 * schedule and the variant it came from.  The cheap algorithms run on every
 * variant first; the list schedulers then go variant by variant (every
 * requested one runs on the first) and stop once a plan is within
 * PLACE_SEARCH_CLOSE of the lower bound.  A spec with
 * "strategy" instead of "graph" is an AMP strategy search (amp.h). */
#include "common/utf8.h"
#include "common/fielderr.h"
#include "workers/place/place.h"

#include "common/alloc.h"
#include "common/clock.h"
#include "workers/place/amp.h"
#include "workers/place/levels.h"
#include "workers/place/solve.h"
#include "workers/place/variant.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct algo_entry {
    const char *name;
    place_algo_fn run;
    int always; /* weighed even when not requested (shown only when feasible) */
} algo_entry;

/* row i is the algorithm spec.h names PLACE_ALGO_NAME_i */
#define ALGO(i, fn, always)                                                                                                        \
    {                                                                                                                              \
        PLACE_ALGO_NAME_##i, fn, always                                                                                            \
    }

static const algo_entry ALGOS[] = {
    ALGO(0, place_algo_topo, 1),
    ALGO(1, place_algo_etf, 0),
    ALGO(2, place_algo_sct, 0),
    ALGO(3, place_algo_single, 1),
};

#define N_ALGOS ((int)(sizeof ALGOS / sizeof ALGOS[0]))
_Static_assert(N_ALGOS == PLACE_N_ALGOS, "ALGOS has a row for every algorithm the spec may name");

#define SINGLE_ALGO PLACE_ALGO_NAME_3

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
        select_algo(sel, n_sel, algo_find(PLACE_DEFAULT_ALGO));
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
    const place_variant *variant; /* forced by the spec; NULL: weigh them all */
    const json_t *graph, *strategy;
} options;

/* Everything but the graph's (or strategy's) contents (spec.h checks the spec's shape). */
static int check_options(fielderr *e, const json_t *spec, options *o)
{
    if (place_spec_check(spec, &o->graph, &o->strategy, e->field, e->field_len, e->msg, e->msg_len)) return -1;
    if (o->strategy) return 0;
    parse_algorithms(spec, o->sel, &o->n_sel);
    const json_t *fuse = json_object_get(spec, "fuse"), *coplace = json_object_get(spec, "coplace");
    int forced = (fuse && !json_is_null(fuse)) || (coplace && !json_is_null(coplace));
    o->variant = forced ? place_variant_of(json_is_true(coplace), json_is_true(fuse)) : NULL;
    return 0;
}

/* ---- candidates ---- */

/* Runs algo on view number `view` (of variant x) into c. */
static void run_candidate(const place_view *v, int view, const place_variant *x, const algo_entry *algo, int requested,
                          place_candidate *c)
{
    const place_graph *g = place_view_graph(v);
    *c = (place_candidate){.name = algo->name, .variant = x->name, .view = view, .requested = requested, .unfused_makespan_us = -1};
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
 * algorithm's on the plain graph (it names the user's op and the missing
 * bytes), before another variant's, before single's. */
static const place_candidate *clearest_failure(const place_candidate *c, int n)
{
    const place_candidate *f = NULL;
    for (int i = 0; i < n; i++) {
        if (!c[i].requested || strcmp(c[i].name, SINGLE_ALGO) == 0) continue;
        if (strcmp(c[i].variant, "plain") == 0) return &c[i];
        if (!f) f = &c[i];
    }
    return f ? f : &c[0];
}

/* ---- solve ---- */

/* The fastest feasible candidate; on a tie the plainer variant (views are built in table order,
 * plain first), then the earlier in request order. */
static const place_candidate *pick_best(const place_candidate *c, int n)
{
    const place_candidate *best = NULL;
    for (int i = 0; i < n; i++) {
        if (!c[i].feasible) continue;
        if (!best) {
            best = &c[i];
            continue;
        }
        double d = c[i].sim.makespan_us - best->sim.makespan_us;
        if (d < 0 || (d == 0 && (c[i].view < best->view || (c[i].view == best->view && c[i].rank < best->rank)))) best = &c[i];
    }
    return best;
}

/* Every view placed on and every candidate made on them. */
typedef struct search {
    place_view views[PLACE_N_VARIANTS];
    const place_variant *variant[PLACE_N_VARIANTS];
    int n_views;
    place_candidate *c; /* PLACE_N_VARIANTS * N_ALGOS */
    int n;
    int order[N_ALGOS], n_order; /* table rows: the requested ones in request order, then the added ones */
} search;

static json_t *answer(const search *s, const place_search *info, double lb, char *err, size_t err_len)
{
    const place_candidate *best = pick_best(s->c, s->n);
    if (!best) {
        const place_candidate *f = clearest_failure(s->c, s->n);
        snprintf(err, err_len, "no feasible placement; %s: %s", f->name, f->reason);
        return NULL;
    }
    const place_view *v = &s->views[best->view];
    place_sim_result trace = {0};
    int traced = v->orig->n_ops <= PLACE_SCHEDULE_MAX_OPS &&
                 place_simulate_ex(place_view_graph(v), best->plan, &trace, PLACE_SIM_MEMORY) == 0 && trace.feasible;
    json_t *r = place_result_json(v, s->c, s->n, best, traced ? &trace : NULL, lb, info);
    place_sim_result_clear(&trace);
    if (!r) snprintf(err, err_len, "out of memory");
    return r;
}

/* Builds variant x's view; 0 (also when the view equals a plainer variant's and is dropped, or
 * cannot be built while searching), or -1 with a message when the forced variant cannot be built. */
static int build_view(search *s, const place_graph *g, const place_variant *x, const options *o, char *err, size_t err_len)
{
    place_view *v = &s->views[s->n_views];
    if (place_view_build(g, x->coplace, x->fuse, v, err, err_len) < 0) return o->variant ? -1 : 0;
    if (!o->variant && place_variant_redundant(x, v)) {
        place_view_clear(v);
        return 0;
    }
    s->variant[s->n_views++] = x;
    return 0;
}

/* Runs the ordered algorithms that are (cheap = 1) or are not (0) always weighed on view i. */
static void run_on_view(search *s, int i, const options *o, int cheap)
{
    for (int k = 0; k < s->n_order; k++) {
        int a = s->order[k];
        if (ALGOS[a].always != cheap) continue;
        run_candidate(&s->views[i], i, s->variant[i], &ALGOS[a], k < o->n_sel, &s->c[s->n]);
        s->c[s->n++].rank = k;
    }
}

/* The search may stop: the best plan so far is within PLACE_SEARCH_CLOSE of the lower bound. */
static int close_enough(const search *s, const options *o, double lb)
{
    const place_candidate *best = pick_best(s->c, s->n);
    return !o->variant && best && best->sim.makespan_us <= PLACE_SEARCH_CLOSE * lb;
}

/* The requested algorithms, then the ones always weighed, each once. */
static void order_algorithms(search *s, const options *o)
{
    int chosen[N_ALGOS] = {0};
    for (int k = 0; k < o->n_sel; k++)
        s->order[s->n_order++] = o->sel[k], chosen[o->sel[k]] = 1;
    for (int a = 0; a < N_ALGOS; a++)
        if (ALGOS[a].always && !chosen[a]) s->order[s->n_order++] = a;
}

/* Two rounds: the cheap algorithms (m-TOPO, single) on every variant, then the others variant by
 * variant, plainest first (every requested one runs at least there), until a plan is close
 * enough to the lower bound. */
static json_t *solve(const place_graph *g, const options *o, char *err, size_t err_len)
{
    int64_t t0 = clock_mono_us();
    double lb = place_lower_bound_us(g);
    search st = {.c = xcalloc(PLACE_N_VARIANTS * N_ALGOS, sizeof *st.c)}, *s = &st;
    json_t *r = NULL;
    order_algorithms(s, o);
    for (int k = 0; k < PLACE_N_VARIANTS; k++)
        if ((!o->variant || &place_variants[k] == o->variant) && build_view(s, g, &place_variants[k], o, err, err_len) < 0)
            goto out;
    for (int i = 0; i < s->n_views; i++)
        run_on_view(s, i, o, 1);
    for (int i = 0; i < s->n_views && (i == 0 || !close_enough(s, o, lb)); i++)
        run_on_view(s, i, o, 0);
    place_search info = {.search_ms = (double)(clock_mono_us() - t0) / 1000.0, .variants = s->n_views, .forced = !!o->variant};
    r = answer(s, &info, lb, err, err_len);
out:
    for (int i = 0; i < s->n; i++)
        candidate_clear(&s->c[i]);
    for (int i = 0; i < s->n_views; i++)
        place_view_clear(&s->views[i]);
    free(s->c);
    return r;
}

static json_t *solve_spec(const json_t *spec, char *err, size_t err_len)
{
    char field[160], msg[320];
    fielderr e = {"", field, sizeof field, msg, sizeof msg};
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

/* Public entry point: names copied from the graph into messages are cut to fixed buffers,
 * possibly inside a UTF-8 character; the text that leaves is trimmed. */
json_t *place_solve(const json_t *spec, char *err, size_t err_len)
{
    json_t *r = solve_spec(spec, err, err_len);
    if (!r) utf8_trim(err);
    return r;
}
