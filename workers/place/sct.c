/* sct.c - m-SCT: m-ETF plus favourite children.
 *
 * Favourite pairs come from the greedy matching (matching.h) instead of
 * Baechi's LP.  The list scheduler (etf.c) then lets a device that just ran
 * u wait for u's favourite child when the child is ready and starts there no
 * later than anywhere else, unless another op is urgent (defined at
 * urgent() in etf.c), so the pair's tensor never crosses a link. */
#include "workers/place/algo.h"

#include "common/alloc.h"
#include "workers/place/etf.h"
#include "workers/place/levels.h"
#include "workers/place/matching.h"

#include <stdio.h>
#include <stdlib.h>

int place_algo_sct(const place_graph *g, place_plan *plan, char *reason, size_t reason_len)
{
    place_levels lv = {0};
    int *child = xmalloc((size_t)g->n_ops * sizeof *child), *parent = xmalloc((size_t)g->n_ops * sizeof *parent);
    int rc = -1;
    if (place_levels_compute(g, &lv) == 0 && place_favourites(g, &lv, child, parent) == 0) {
        place_etf_opts o = {.fav_child = child, .fav_parent = parent, .level = lv.bottom};
        rc = place_etf_schedule(g, &o, plan, reason, reason_len);
    } else {
        snprintf(reason, reason_len, "out of memory");
    }
    place_levels_clear(&lv);
    free(child);
    free(parent);
    return rc;
}
