/* ledger.h - the conservative memory charge every placement algorithm uses.
 *
 * Owns: per-device bytes charged so far and the (producer, device) -> edge
 * bytes map of tensors a device receives (xfer.h sizes them).  A device is
 * charged, for every unit (an op or a whole colocation group) placed on it,
 * persistent + output + temporary bytes of its ops as if all were live at
 * once, plus every tensor it receives from another device.  That sum bounds
 * the device's memory at every instant of any execution order, so a plan the
 * ledger accepts never exceeds capacity in the simulator nor on the workers,
 * whatever the timing (the price is headroom; the simulator reports the real
 * peak).  Why conservative: the algorithms decide placement before timing is
 * final (transfers are granted first come first served at run time), so a
 * time-aware charge could be invalidated by the replay.
 *
 * An attempt (place_ledger_try) is pending until committed or aborted; a
 * failed attempt is aborted by try itself.  The ledger reads the caller's
 * live op -> device array (-1 = unplaced) to find producers and consumers
 * already placed. */
#ifndef GANTRY_PLACE_LEDGER_H
#define GANTRY_PLACE_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "workers/place/graph.h"

/* The attempt that came closest to fitting, for error messages. */
typedef struct place_miss {
    int dev;            /* device the unit was tried on; -1: no attempt recorded */
    int over_dev;       /* device that overflowed (dev, or a receiver of the unit's outputs) */
    int64_t missing;    /* bytes over capacity on over_dev */
    int64_t need;       /* bytes charged to dev */
    int64_t inbound;    /* of which tensors received from other devices */
    int64_t free_bytes; /* free bytes on over_dev before the attempt */
} place_miss;

typedef struct place_ledger place_ledger;

place_ledger *place_ledger_new(const place_graph *g, const int *where);
void place_ledger_free(place_ledger *l);

/* Charges the unit ops[0..n) to `dev` (their own memory, tensors they receive
 * from placed producers elsewhere, tensors placed consumers elsewhere receive
 * from them; edges inside the unit cost nothing).  Returns 1 when every
 * touched device stays within capacity (the attempt is then pending: commit
 * or abort it), 0 when not (aborted; *miss updated when this attempt came
 * closer than the one recorded; miss may be NULL), -1 when out of memory. */
int place_ledger_try(place_ledger *l, const int *ops, int n, int dev, place_miss *miss);
void place_ledger_commit(place_ledger *l);
void place_ledger_abort(place_ledger *l);

/* Devices charged by the pending attempt, and devices whose charge changed
 * through commits since the last call (which resets it), as bit masks with
 * bit (dev % 64): the list schedulers' candidate caches use them. */
uint64_t place_ledger_touched_mask(const place_ledger *l);
uint64_t place_ledger_take_changed(place_ledger *l);

/* Capacity minus bytes charged (and reserved). */
int64_t place_ledger_free_bytes(const place_ledger *l, int dev);
/* Adds `bytes` (may be negative) to a device's charge without an attempt:
 * how m-ETF holds room for a pinned unit until it is placed. */
void place_ledger_reserve(place_ledger *l, int dev, int64_t bytes);

/* Own memory of a unit: persistent + output + temporary of its ops. */
int64_t place_unit_memory(const place_graph *g, const int *ops, int n);

/* "op 'x' (group 'g', 5 ops) needs N bytes ... (missing K bytes)". */
void place_miss_explain(const place_graph *g, const int *ops, int n, const place_miss *m, char *reason, size_t len);

#endif
