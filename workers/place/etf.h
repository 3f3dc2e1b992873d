/* etf.h - the list scheduler behind m-ETF and m-SCT.
 *
 * Owns nothing between calls.  Schedules ops in simulated time: among the
 * ready (op, device) pairs whose unit fits the device's memory (ledger.h),
 * commit the one with the earliest start (ties: topological order, then the
 * earliest finish, then the lower device index), reserve the transfers it
 * needs on one send and one receive channel per device, and go on.  A
 * colocation group is placed whole when its first op is placed.  m-SCT
 * passes favourite children (sct.c) and the devices then wait for them. */
#ifndef GANTRY_PLACE_ETF_H
#define GANTRY_PLACE_ETF_H

#include <stddef.h>

#include "spec/place_graph.h"
#include "workers/place/plan.h"

typedef struct place_etf_opts {
    const int *fav_child;  /* op -> favourite child or -1; NULL: plain m-ETF */
    const int *fav_parent; /* op -> favourite parent or -1 (the inverse) */
    const double *level;   /* op -> bottom level (us), for urgency; needed with fav_child */
    int no_cache;          /* tests: recompute every device's candidate at every step */
} place_etf_opts;

/* Fills plan (devices and order).  0, or -1 with a reason naming the op
 * that fits nowhere, the bytes missing and the rules tried (or "out of
 * memory").  Every pass keeps a memory reserve for the units still to
 * come; when a pass gets stuck it is rerun with the stuck units pinned,
 * with their inputs, to devices whose room is held for them (see etf.c),
 * and plan->note says so.  Never another algorithm's plan. */
int place_etf_schedule(const place_graph *g, const place_etf_opts *opts, place_plan *plan, char *reason, size_t reason_len);

#endif
