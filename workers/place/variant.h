/* variant.h - the graph variants the solver weighs: the user's graph with
 * co-placement and fusion, with co-placement only, with fusion only, and as
 * it is ("plain").
 *
 * Owns nothing: a constant table and the rules the search reads from it.
 * Without spec.coplace and spec.fuse the solver (place.c) builds each
 * variant's view (view.h) in table order, runs every requested algorithm
 * (and m-TOPO and single) on it, and returns the fastest feasible plan of
 * them all, labelled with its algorithm and its variant.  A spec that sets
 * either flag, true or false, forces exactly that one variant (what
 * --fuse, --coplace and --plain do).
 *
 * Why several: under memory pressure the list schedulers often need the
 * merged, larger units (a chain that must share a device is placed as one
 * unit, fused ops hold less memory between members), while on a roomy
 * graph the plain ops leave them the most freedom; which wins depends on
 * the graph, and each variant costs one more run of the algorithms.
 *
 * Order: the search runs in two rounds.  First the cheap algorithms
 * (m-TOPO, single) on every variant; then the list schedulers variant by
 * variant in table order, plainest first, and it stops once the best plan
 * so far is within PLACE_SEARCH_CLOSE of the lower bound (nothing left can
 * gain more than that); every requested algorithm runs on the plainest
 * variant at least.  Where the plain graph's plan is at the bound, the list
 * schedulers run once.  A tie goes to the plainer variant.  A variant whose
 * view turns out to equal a plainer one (no op joined a group, or none was
 * fused) is dropped, since the plainer one is weighed. */
#ifndef GANTRY_PLACE_VARIANT_H
#define GANTRY_PLACE_VARIANT_H

#include "workers/place/view.h"

typedef struct place_variant {
    const char *name; /* "plain", "coplace", "fuse", "coplace+fuse" */
    int coplace, fuse;
} place_variant;

#define PLACE_N_VARIANTS 4
extern const place_variant place_variants[PLACE_N_VARIANTS];

/* The search stops once the best plan so far is within this factor of the lower bound. */
#define PLACE_SEARCH_CLOSE 1.01

/* The table's row with these flags. */
const place_variant *place_variant_of(int coplace, int fuse);

/* 1 when v, the view built for x, is the view of a plainer variant: co-placement joined no op
 * or fusion merged none. */
int place_variant_redundant(const place_variant *x, const place_view *v);

#endif
