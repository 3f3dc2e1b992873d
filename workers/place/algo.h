/* algo.h - the contract every placement algorithm follows.
 *
 * An algorithm reads a validated graph and fills a plan (every op's device
 * and the execution order).  It returns 0, or -1 when it finds no plan
 * within the devices' memory, with a reason naming the op that does not fit
 * and the bytes missing.  Algorithms are pure: no I/O, no globals (the
 * solver simulates every plan afterwards; only the single-device candidate
 * replays its own plan to check memory, see single.c).  Capacity is checked
 * against the ledger's bound (ledger.h).  place.c lists them in its
 * algorithm table; a new algorithm is one more file and one more row there. */
#ifndef GANTRY_PLACE_ALGO_H
#define GANTRY_PLACE_ALGO_H

#include <stddef.h>

#include "spec/place_graph.h"
#include "workers/place/plan.h"

typedef int (*place_algo_fn)(const place_graph *g, place_plan *plan, char *reason, size_t reason_len);

/* m-TOPO with real capacities (topo.c). */
int place_algo_topo(const place_graph *g, place_plan *plan, char *reason, size_t reason_len);
/* m-ETF: earliest start first, list scheduling with heaps (etf.c). */
int place_algo_etf(const place_graph *g, place_plan *plan, char *reason, size_t reason_len);
/* m-SCT: m-ETF plus favourite children from a greedy matching (sct.c). */
int place_algo_sct(const place_graph *g, place_plan *plan, char *reason, size_t reason_len);
/* Everything on the fastest device that holds it all (single.c). */
int place_algo_single(const place_graph *g, place_plan *plan, char *reason, size_t reason_len);

#endif
