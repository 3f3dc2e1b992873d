/* place_spec.h - the placement job's spec module: its shape, the rule between its fields (a graph or a
 * strategy search, not both) and validation that parses the graph (place_graph.h) or the strategy
 * problem (amp_problem.h), naming the bad field.  Pure C over jansson (no BLAS), so the server links it
 * (place_spec_dep) and validates exactly what the worker's place_solve accepts.
 *
 * Spec fields: "graph" (docs/graph.schema.json) or "strategy" (docs/placement.md), "algorithms"
 * (optional array of names, default ["m-topo"]; "all" = every one), "fuse" and "coplace"
 * (optional booleans; either one given forces that graph variant, neither lets the solver weigh
 * them all: workers/place/variant.h). */
#ifndef GANTRY_PLACE_SPEC_H
#define GANTRY_PLACE_SPEC_H

#include <jansson.h>
#include <stddef.h>

#include "common/jobtypes.h"
#include "common/schema.h"

/* the algorithms spec.algorithms may name, in the order of place.c's table (which pairs each with
 * its function), and the one run when none is named */
#define PLACE_ALGO_NAME_0 "m-topo"
#define PLACE_ALGO_NAME_1 "m-etf"
#define PLACE_ALGO_NAME_2 "m-sct"
#define PLACE_ALGO_NAME_3 "single"
#define PLACE_N_ALGOS 4
#define PLACE_DEFAULT_ALGO PLACE_ALGO_NAME_0

/* the spec's shape (in the API document) */
extern const sch place_spec_shape;

/* The shape and the rule between the fields: 0 with exactly one of *graph and *strategy set (both
 * borrowed from spec), or -1 with the field and a message.  The contents are not parsed. */
int place_spec_check(const json_t *spec, const json_t **graph, const json_t **strategy, char *field, size_t field_len, char *msg,
                     size_t msg_len);

/* 0 when the placement job spec is valid (the above, then the graph or the strategy parsed); else
 * -1 with the JSON path of the bad field in `field` (e.g. "spec.graph.ops[2].name") and a human
 * message in `msg`, both cut at a UTF-8 character */
int place_spec_validate(const json_t *spec, char *field, size_t field_len, char *msg, size_t msg_len);

/* the placement row's spec module (common/jobtypes.h): one slot */
extern const job_spec place_job_spec;

#endif
