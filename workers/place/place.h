/* place.h - the placement job: run the algorithms on a spec's graph,
 * simulate every plan, return the best as JSON; or, for a spec with
 * "strategy", the AMP strategy search (amp.h).  The spec and its
 * validation: spec.h.
 *
 * Owns nothing between calls: each call parses the spec, and place_solve()
 * returns a new JSON object the caller releases with json_decref().
 * docs/placement.md describes the result. */
#ifndef GANTRY_PLACE_H
#define GANTRY_PLACE_H

#include <jansson.h>
#include <stddef.h>

#include "spec/place_spec.h"

/* Runs the requested algorithms (names "m-topo", "m-etf", "m-sct", "single"; "all" means every one) on the graph, after
 * co-placement and fusion when asked, ALWAYS also weighs "m-topo" and "single", simulates every candidate, and returns a new
 * JSON result with the best plan and its schedule; for a "strategy" spec, the ranked strategies.  NULL with a message in err:
 * "field: message" for an invalid spec, or "no feasible placement; <algorithm>: <reason naming the op and missing bytes>". */
json_t *place_solve(const json_t *spec, char *err, size_t err_len);

/* Name of the i-th implemented algorithm (table order), NULL past the end. */
const char *place_algorithm_name(int i);

#endif
