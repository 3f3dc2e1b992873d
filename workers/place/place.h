/* place.h - the placement job: validate a spec, run the algorithms,
 * simulate every plan, return the best as JSON.
 *
 * Owns nothing between calls: each call parses the spec's graph, and
 * place_solve() returns a new JSON object the caller releases with
 * json_decref().  Spec fields: "graph" (required, DESIGN.md "Graph format"),
 * "algorithms" (optional array of names, default ["m-topo"]; "all" = every
 * implemented one), "fuse" and "coplace" (optional booleans, accepted and not
 * yet acted on), anything else is ignored.  docs/placement.md describes the
 * result. */
#ifndef GANTRY_PLACE_H
#define GANTRY_PLACE_H

#include <jansson.h>
#include <stddef.h>

/* 0 when the placement job spec is valid; else -1 with the JSON path of the bad field in `field` (e.g. "spec.graph.ops[2].name")
 * and a human message in `msg`. */
int place_spec_validate(const json_t *spec, char *field, size_t field_len, char *msg, size_t msg_len);

/* Runs the requested algorithms (spec.algorithms, default ["m-topo"]; names "m-topo", "single"; unknown names are a validation
 * error at field "spec.algorithms[i]"; "all" means every implemented algorithm), ALWAYS also evaluates "single" when it fits,
 * simulates every candidate, and returns a new JSON result or NULL with a message in err. */
json_t *place_solve(const json_t *spec, char *err, size_t err_len);

/* Name of the i-th implemented algorithm (table order), NULL past the end. */
const char *place_algorithm_name(int i);

#endif
