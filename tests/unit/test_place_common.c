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
#include "workers/place/graph.h"
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
