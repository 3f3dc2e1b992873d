/* test_place_common.c - helpers shared by the placement test programs
 * (#included, not built on its own): JSON with single quotes, parsing,
 * running an algorithm and replaying its plan, and checking a replay. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workers/place/algo.h"
#include "spec/place_graph.h"
#include "workers/place/place.h"
#include "workers/place/plan.h"
#include "workers/place/sim.h"

#define UNUSED __attribute__((unused))

/* JSON written with single quotes for readability. */
static UNUSED json_t *J(const char *text)
{
    char *s = strdup(text);
    for (char *p = s; *p; p++)
        if (*p == '\'') *p = '"';
    json_error_t err;
    json_t *j = json_loads(s, 0, &err);
    if (!j) fail_msg("bad test JSON at %d:%d: %s\n%s", err.line, err.column, err.text, s);
    free(s);
    return j;
}

static UNUSED place_graph *parse_json(const json_t *j)
{
    char field[160] = "", msg[320] = "";
    place_graph *g = place_graph_parse(j, "spec.graph", field, sizeof field, msg, sizeof msg);
    if (!g) fail_msg("unexpected parse error: %s: %s", field, msg);
    return g;
}

static UNUSED place_graph *parse_ok(const char *text)
{
    json_t *j = J(text);
    place_graph *g = parse_json(j);
    json_decref(j);
    return g;
}

static UNUSED int op_index(const place_graph *g, const char *name)
{
    for (int i = 0; i < g->n_ops; i++)
        if (strcmp(g->ops[i].name, name) == 0) return i;
    fail_msg("no op %s", name);
    return -1;
}

static UNUSED void assert_close(double got, double want)
{
    if (got < want - 1e-6 || got > want + 1e-6) fail_msg("got %.9f, want %.9f", got, want);
}

/* Runs `algo` and replays its plan; fails the test when either fails. */
static UNUSED place_plan *place_ok(const place_graph *g, place_algo_fn algo, place_sim_result *r)
{
    char reason[512];
    place_plan *p = place_plan_new(g->n_ops);
    assert_non_null(p);
    if (algo(g, p, reason, sizeof reason) < 0) fail_msg("placement failed: %s", reason);
    if (place_simulate(g, p, r) < 0) fail_msg("replay failed: %s", r->reason);
    if (!r->feasible) fail_msg("plan infeasible: %s", r->reason);
    return p;
}

/* Checks a replay against the model: precedence with transfers, one op at a
 * time per device, one transfer at a time per channel, peaks within
 * capacity.  Returns a message or NULL. */
static UNUSED const char *replay_violation(const place_graph *g, const place_plan *p, const place_sim_result *r)
{
    static char msg[256];
    const double eps = 1e-6;
    for (int e = 0; e < g->n_edges; e++) {
        const place_edge *ed = &g->edges[e];
        if (p->device[ed->src] == p->device[ed->dst] && r->start_us[ed->dst] < r->end_us[ed->src] - eps)
            return snprintf(msg, sizeof msg, "edge %d: local consumer starts before its producer ends", e), msg;
    }
    for (int x = 0; x < r->n_xfers; x++) {
        const place_sim_xfer *xf = &r->xfers[x];
        if (xf->start_us < r->end_us[xf->src] - eps)
            return snprintf(msg, sizeof msg, "transfer %d starts before its producer ends", x), msg;
        for (int k = g->out_off[xf->src]; k < g->out_off[xf->src + 1]; k++) {
            int dst = g->edges[g->out_edge[k]].dst;
            if (p->device[dst] == xf->to && r->start_us[dst] < xf->end_us - eps)
                return snprintf(msg, sizeof msg, "op %s starts before its input arrives", g->ops[dst].name), msg;
        }
    }
    /* channel and device exclusivity: sort intervals per resource */
    int D = g->n_devices;
    double *last = calloc((size_t)D, sizeof *last);
    for (int i = 0; i < g->n_ops; i++) {
        int op = p->order[i], d = p->device[op];
        if (r->start_us[op] < last[d] - eps)
            return free(last), snprintf(msg, sizeof msg, "device %d overlaps at op %s", d, g->ops[op].name), msg;
        last[d] = r->end_us[op];
    }
    free(last);
    for (int a = 0; a < r->n_xfers; a++)
        for (int b = a + 1; b < r->n_xfers && r->n_xfers < 4000; b++) {
            const place_sim_xfer *x = &r->xfers[a], *y = &r->xfers[b];
            int share = x->from == y->from || x->to == y->to;
            if (share && x->start_us < y->end_us - eps && y->start_us < x->end_us - eps)
                return snprintf(msg, sizeof msg, "transfers %d and %d overlap on a channel", a, b), msg;
        }
    for (int d = 0; d < D; d++)
        if (r->peak_bytes[d] > g->devices[d].memory_bytes) return snprintf(msg, sizeof msg, "device %d over capacity", d), msg;
    return NULL;
}

/* ---- random DAGs with fixed seeds ---- */

typedef struct dag_shape {
    int min_ops, max_ops, devices;
    int hetero;        /* random device speeds (else all 1.0) */
    int link_matrix;   /* random per-link latency and bandwidth */
    int groups;        /* some ops in colocation groups */
    double mem_factor; /* device memory = total op memory / devices / mem_factor (0: plenty) */
    int max_in;        /* inputs per op at most (0: 3) */
} dag_shape;

static uint64_t dag_rng;

static UNUSED uint32_t dag_rand(uint32_t n)
{
    dag_rng = dag_rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(dag_rng >> 33) % n;
}

static UNUSED json_t *matrix(int D, double lo, double span)
{
    json_t *m = json_array();
    for (int a = 0; a < D; a++) {
        json_t *row = json_array();
        for (int b = 0; b < D; b++)
            json_array_append_new(row, json_real(a == b ? lo : lo + span * dag_rand(1000) / 1000.0));
        json_array_append_new(m, row);
    }
    return m;
}

/* A random DAG: ops in index order, each reading 0-3 earlier ops (mostly
 * recent ones, so there are long chains and wide layers). */
static UNUSED json_t *random_dag(uint64_t seed, const dag_shape *sh)
{
    dag_rng = seed * 2654435761ULL + 12345;
    int n = sh->min_ops + (int)dag_rand((uint32_t)(sh->max_ops - sh->min_ops + 1));
    json_t *ops = json_array(), *edges = json_array(), *devs = json_array();
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        json_int_t out = (json_int_t)dag_rand(200) * 5000, temp = (json_int_t)dag_rand(4) * 10000,
                   pers = (json_int_t)dag_rand(5) * 40000;
        total += out + temp + pers;
        json_t *op = json_pack("{s:s,s:f,s:I,s:I,s:[I]}", "name", name, "compute_us", 1.0 + dag_rand(400), "temp_bytes", temp,
                               "persistent_bytes", pers, "output_bytes", out);
        if (sh->groups && dag_rand(6) == 0) {
            char grp[16];
            snprintf(grp, sizeof grp, "g%u", dag_rand(3));
            json_object_set_new(op, "group", json_string(grp));
        }
        json_array_append_new(ops, op);
        int max_in = sh->max_in ? sh->max_in : 3;
        int k = i == 0 ? 0 : (int)dag_rand((uint32_t)max_in + 1);
        for (int j = 0; j < k; j++) {
            int back = 1 + (int)(dag_rand(8) < 6 ? dag_rand(4) : dag_rand((uint32_t)i));
            if (back > i) back = i;
            char src[16];
            snprintf(src, sizeof src, "n%d", i - back);
            json_array_append_new(edges, json_pack("{s:s,s:s}", "src", src, "dst", name));
        }
    }
    for (int d = 0; d < sh->devices; d++) {
        char name[16];
        snprintf(name, sizeof name, "d%d", d);
        double speed = sh->hetero ? 0.5 + dag_rand(4) * 0.5 : 1.0;
        json_int_t mem =
            sh->mem_factor > 0 ? (json_int_t)((double)total / sh->devices / sh->mem_factor) : (json_int_t)total * 4 + 1;
        json_array_append_new(devs, json_pack("{s:s,s:I,s:f}", "name", name, "memory_bytes", mem, "speed", speed));
    }
    json_t *comm =
        sh->link_matrix
            ? json_pack("{s:o,s:o}", "latency_us", matrix(sh->devices, 5, 200), "bytes_per_us", matrix(sh->devices, 500, 20000))
            : json_pack("{s:f,s:f}", "latency_us", 5.0 + dag_rand(200), "bytes_per_us", 500.0 + dag_rand(20000));
    return json_pack("{s:o,s:o,s:o,s:o}", "ops", ops, "edges", edges, "devices", devs, "comm", comm);
}
