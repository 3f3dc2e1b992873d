/* place_spec.c - the placement job's spec (place_spec.h). */
#include "spec/place_spec.h"
#include "common/fielderr.h"

#include "common/utf8.h"
#include "spec/amp_problem.h"
#include "spec/place_graph.h"

#include <stdio.h>

/* ---- the shape (common/schema.h): validation and the API document ---- */

/* what spec.algorithms may name: the table's rows, then "all" */
static const char *const algo_values[] = {PLACE_ALGO_NAME_0, PLACE_ALGO_NAME_1, PLACE_ALGO_NAME_2, PLACE_ALGO_NAME_3, "all", NULL};
_Static_assert(sizeof algo_values / sizeof algo_values[0] == PLACE_N_ALGOS + 2, "algo_values lists every algorithm");
static const sch algo_s = {SCH_STR, .values = algo_values};
static const sch algos_s = {SCH_ARRAY,
                            .flags = SCH_LO | SCH_NULLABLE,
                            .lo = 1,
                            .items = &algo_s,
                            .dflt = "[\"" PLACE_DEFAULT_ALGO "\"]",
                            .desc = "placement algorithms to run (all: every one); the fastest feasible plan wins, and "
                                    "m-topo and single are always weighed"};
static const sch graph_s = {SCH_OBJECT, .flags = SCH_OPEN,
                            .desc = "the operator graph: {ops, edges, devices, comm}, in the format of docs/graph.schema.json "
                                    "(op and device names unique, edges between existing ops, acyclic)"};
static const sch strategy_s = {SCH_OBJECT, .flags = SCH_OPEN,
                               .desc = "an AMP parallel strategy search instead of a graph (docs/placement.md)"};
static const sch fuse_s = {SCH_BOOL, .flags = SCH_NULLABLE,
                           .desc = "fuse chains of ops before placing (fewer, larger ops), or not; with neither fuse nor "
                                   "coplace given, the solver weighs the graph with both, each and neither, and keeps the "
                                   "fastest plan"};
static const sch coplace_s = {SCH_BOOL, .flags = SCH_NULLABLE,
                              .desc = "keep each op with the ops it must share a device with (m-TOPO's co-placement), or "
                                      "not; with neither fuse nor coplace given, every combination is weighed"};
static const sch_member spec_m[] = {{"graph", &graph_s, 0}, {"strategy", &strategy_s, 0}, {"algorithms", &algos_s, 0},
                                    {"fuse", &fuse_s, 0},   {"coplace", &coplace_s, 0},   {0}};
const sch place_spec_shape = {SCH_OBJECT, .members = spec_m,
                              .desc = "A placement job: split an operator graph over memory-limited devices and simulate "
                                      "the plan's step time; give a graph or a strategy search, not both."};

int place_spec_check(const json_t *spec, const json_t **graph, const json_t **strategy, char *field, size_t fl, char *msg,
                     size_t ml)
{
    if (sch_check(&place_spec_shape, spec, "spec", field, fl, msg, ml)) return -1;
    *graph = json_object_get(spec, "graph");
    *strategy = json_object_get(spec, "strategy");
    if (*graph && *strategy)
        return field_fail(field, fl, msg, ml, "spec.strategy", "give either a graph or a strategy search, not both");
    if (!*graph && !*strategy)
        return field_fail(field, fl, msg, ml, "spec.graph", "is required (or spec.strategy for a parallel strategy search)");
    return 0;
}

static int validate(const json_t *spec, char *field, size_t fl, char *msg, size_t ml)
{
    const json_t *graph, *strategy;
    if (place_spec_check(spec, &graph, &strategy, field, fl, msg, ml)) return -1;
    if (strategy) {
        amp_problem *p = amp_problem_parse(strategy, "spec.strategy", field, fl, msg, ml);
        amp_problem_free(p);
        return p ? 0 : -1;
    }
    place_graph *g = place_graph_parse(graph, "spec.graph", field, fl, msg, ml);
    if (!g) return -1;
    place_graph_free(g);
    return 0;
}

/* names copied from the graph into messages are cut to fixed buffers, possibly inside a UTF-8
 * character; the text that leaves is trimmed */
int place_spec_validate(const json_t *spec, char *field, size_t field_len, char *msg, size_t msg_len)
{
    int rc = validate(spec, field, field_len, msg, msg_len);
    if (rc != 0) {
        utf8_trim(field);
        utf8_trim(msg);
    }
    return rc;
}

static int slots(const json_t *spec)
{
    (void)spec;
    return 1;
}

const job_spec place_job_spec = {.shape = &place_spec_shape, .validate = place_spec_validate, .slots = slots};
