/* place.c - the algorithm table, spec validation and the solver.
 *
 * Algorithms are rows of ALGOS (name -> function); validation, "all", the
 * CLI's --help and the docs all read this one table.  The solver runs every
 * requested algorithm, always adds the single-device plan when it fits (a
 * split plan is only worth its transfers when it beats one device), replays
 * every plan in the simulator, and returns the feasible plan with the lowest
 * simulated makespan (ties: the first in request order). */
#include "workers/place/place.h"

#include "common/clock.h"
#include "workers/place/algo.h"
#include "workers/place/sim.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct algo_entry {
    const char *name;
    place_algo_fn run;
} algo_entry;

static const algo_entry ALGOS[] = {
    {"m-topo", place_algo_topo},
    {"m-etf", place_algo_etf},
    {"m-sct", place_algo_sct},
    {"single", place_algo_single},
};

#define N_ALGOS ((int)(sizeof ALGOS / sizeof ALGOS[0]))
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

typedef struct verr {
    char *field;
    size_t field_len;
    char *msg;
    size_t msg_len;
} verr;

static int vfail(verr *e, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int vfail(verr *e, const char *field, const char *fmt, ...)
{
    if (e->field && e->field_len) snprintf(e->field, e->field_len, "%s", field);
    if (e->msg && e->msg_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, e->msg_len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void known_names(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < N_ALGOS && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s, ", ALGOS[i].name);
    if (used < len) snprintf(buf + used, len - used, "all");
}

/* Adds table row i to the selection unless already there. */
static void select_algo(int *sel, int *n_sel, int i)
{
    for (int k = 0; k < *n_sel; k++)
        if (sel[k] == i) return;
    sel[(*n_sel)++] = i;
}

/* Fills sel (N_ALGOS entries at most) with table rows, in request order. */
static int parse_algorithms(verr *e, const json_t *spec, int *sel, int *n_sel)
{
    const json_t *a = json_object_get(spec, "algorithms");
    *n_sel = 0;
    if (!a || json_is_null(a)) {
        select_algo(sel, n_sel, algo_find(DEFAULT_ALGO));
        return 0;
    }
    if (!json_is_array(a)) return vfail(e, "spec.algorithms", "must be an array of algorithm names");
    if (json_array_size(a) == 0) return vfail(e, "spec.algorithms", "must name at least one algorithm");
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v)
    {
        char field[48], known[128];
        snprintf(field, sizeof field, "spec.algorithms[%zu]", i);
        if (!json_is_string(v)) return vfail(e, field, "must be a string");
        const char *name = json_string_value(v);
        if (strcmp(name, "all") == 0) {
            for (int k = 0; k < N_ALGOS; k++)
                select_algo(sel, n_sel, k);
            continue;
        }
        int k = algo_find(name);
        known_names(known, sizeof known);
        if (k < 0) return vfail(e, field, "unknown algorithm '%.64s' (known: %s)", name, known);
        select_algo(sel, n_sel, k);
    }
    return 0;
}

static int check_bool(verr *e, const json_t *spec, const char *key)
{
    char field[32];
    const json_t *v = json_object_get(spec, key);
    snprintf(field, sizeof field, "spec.%s", key);
    if (v && !json_is_boolean(v) && !json_is_null(v)) return vfail(e, field, "must be a boolean");
    return 0;
}

/* Everything but the graph's contents. */
static int check_options(verr *e, const json_t *spec, int *sel, int *n_sel)
{
    if (!json_is_object(spec)) return vfail(e, "spec", "must be an object");
    const json_t *graph = json_object_get(spec, "graph");
    if (!graph) return vfail(e, "spec.graph", "is required");
    if (!json_is_object(graph)) return vfail(e, "spec.graph", "must be an object");
    if (parse_algorithms(e, spec, sel, n_sel) < 0) return -1;
    if (check_bool(e, spec, "fuse") < 0) return -1;
    return check_bool(e, spec, "coplace");
}

int place_spec_validate(const json_t *spec, char *field, size_t field_len, char *msg, size_t msg_len)
{
    verr e = {field, field_len, msg, msg_len};
    int sel[N_ALGOS], n_sel;
    if (check_options(&e, spec, sel, &n_sel) < 0) return -1;
    place_graph *g = place_graph_parse(json_object_get(spec, "graph"), "spec.graph", field, field_len, msg, msg_len);
    if (!g) return -1;
    place_graph_free(g);
    return 0;
}

/* ---- candidates ---- */

typedef struct candidate {
    const algo_entry *algo;
    int requested; /* 0: the solver added it (single), shown only when feasible */
    int simulated; /* sim holds a replay */
    int feasible;
    double placement_ms, simulation_ms;
    char reason[384];
    place_plan *plan;
    place_sim_result sim;
} candidate;

static void run_candidate(const place_graph *g, const algo_entry *algo, int requested, candidate *c)
{
    memset(c, 0, sizeof *c);
    c->algo = algo;
    c->requested = requested;
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
    c->feasible = 1;
}

static void candidate_clear(candidate *c)
{
    place_plan_free(c->plan);
    if (c->simulated) place_sim_result_clear(&c->sim);
}

/* The reason to give when nothing is feasible: a placement algorithm's
 * (it names the op and the missing bytes) before the single-device one. */
static const candidate *clearest_failure(const candidate *c, int n)
{
    for (int i = 0; i < n; i++)
        if (c[i].requested && strcmp(c[i].algo->name, SINGLE_ALGO) != 0) return &c[i];
    return &c[0];
}

/* ---- result JSON ---- */

/* Microseconds and milliseconds to three decimals: enough, and short. */
static json_t *jreal(double x)
{
    return json_real(round(x * 1000.0) / 1000.0);
}

static json_t *candidate_json(const place_graph *g, const candidate *c)
{
    json_t *o = json_object();
    json_object_set_new(o, "algorithm", json_string(c->algo->name));
    json_object_set_new(o, "feasible", json_boolean(c->feasible));
    json_object_set_new(o, "placement_ms", jreal(c->placement_ms));
    if (c->simulated) {
        json_t *peak = json_array(), *busy = json_array();
        for (int d = 0; d < g->n_devices; d++) {
            json_array_append_new(peak, json_integer(c->sim.peak_bytes[d]));
            json_array_append_new(busy, jreal(c->sim.busy_us[d]));
        }
        json_object_set_new(o, "simulation_ms", jreal(c->simulation_ms));
        json_object_set_new(o, "makespan_us", jreal(c->sim.makespan_us));
        json_object_set_new(o, "peak_bytes", peak);
        json_object_set_new(o, "busy_us", busy);
        json_object_set_new(o, "transfers", json_integer(c->sim.transfers));
        json_object_set_new(o, "transfer_bytes", json_integer(c->sim.transfer_bytes));
    }
    if (!c->feasible) json_object_set_new(o, "reason", json_string(c->reason));
    return o;
}

static json_t *plan_json(const place_graph *g, const candidate *c)
{
    json_t *devices = json_array(), *placement = json_object();
    for (int d = 0; d < g->n_devices; d++) {
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(g->devices[d].name));
        json_object_set_new(o, "memory_bytes", json_integer(g->devices[d].memory_bytes));
        json_object_set_new(o, "peak_bytes", json_integer(c->sim.peak_bytes[d]));
        json_object_set_new(o, "busy_us", jreal(c->sim.busy_us[d]));
        json_object_set_new(o, "ops", json_integer(c->sim.ops[d]));
        json_array_append_new(devices, o);
    }
    for (int i = 0; i < g->n_ops; i++)
        json_object_set_new(placement, g->ops[i].name, json_string(g->devices[c->plan->device[i]].name));
    json_t *plan = json_object();
    json_object_set_new(plan, "algorithm", json_string(c->algo->name));
    json_object_set_new(plan, "devices", devices);
    json_object_set_new(plan, "placement", placement);
    return plan;
}

static json_t *result_json(const place_graph *g, const candidate *c, int n, const candidate *best)
{
    json_t *cands = json_array();
    for (int i = 0; i < n; i++)
        if (c[i].requested || c[i].feasible) json_array_append_new(cands, candidate_json(g, &c[i]));
    int used = 0;
    for (int d = 0; d < g->n_devices; d++)
        used += best->sim.ops[d] > 0;
    json_t *metrics = json_object();
    json_object_set_new(metrics, "makespan_us", jreal(best->sim.makespan_us));
    json_object_set_new(metrics, "ops", json_integer(g->n_ops));
    json_object_set_new(metrics, "devices", json_integer(g->n_devices));
    json_object_set_new(metrics, "devices_used", json_integer(used));
    json_t *r = json_object();
    json_object_set_new(r, "best", json_string(best->algo->name));
    json_object_set_new(r, "candidates", cands);
    json_object_set_new(r, "plan", plan_json(g, best));
    json_object_set_new(r, "metrics", metrics);
    return r;
}

/* ---- solve ---- */

static json_t *solve(const place_graph *g, const int *sel, int n_sel, char *err, size_t err_len)
{
    candidate c[N_ALGOS + 1];
    int n = 0, single = algo_find(SINGLE_ALGO), have_single = 0;
    for (int k = 0; k < n_sel; k++) {
        run_candidate(g, &ALGOS[sel[k]], 1, &c[n++]);
        have_single |= sel[k] == single;
    }
    if (!have_single) run_candidate(g, &ALGOS[single], 0, &c[n++]);
    const candidate *best = NULL;
    for (int i = 0; i < n; i++)
        if (c[i].feasible && (!best || c[i].sim.makespan_us < best->sim.makespan_us)) best = &c[i];
    json_t *r = NULL;
    if (best) {
        r = result_json(g, c, n, best);
        if (!r) snprintf(err, err_len, "out of memory");
    } else {
        const candidate *f = clearest_failure(c, n);
        snprintf(err, err_len, "no feasible placement; %s: %s", f->algo->name, f->reason);
    }
    for (int i = 0; i < n; i++)
        candidate_clear(&c[i]);
    return r;
}

json_t *place_solve(const json_t *spec, char *err, size_t err_len)
{
    char field[160], msg[320];
    verr e = {field, sizeof field, msg, sizeof msg};
    int sel[N_ALGOS], n_sel;
    if (check_options(&e, spec, sel, &n_sel) < 0) {
        snprintf(err, err_len, "%s: %s", field, msg);
        return NULL;
    }
    place_graph *g = place_graph_parse(json_object_get(spec, "graph"), "spec.graph", field, sizeof field, msg, sizeof msg);
    if (!g) {
        snprintf(err, err_len, "%s: %s", field, msg);
        return NULL;
    }
    json_t *r = solve(g, sel, n_sel, err, err_len);
    place_graph_free(g);
    return r;
}
