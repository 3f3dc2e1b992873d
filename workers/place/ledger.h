/* ledger.h - the memory bound every placement algorithm checks capacity
 * against.
 *
 * Owns: per device, a profile of its memory over the steps of its
 * execution order (profile.h), and the bookkeeping behind it: where each op
 * runs in that order, which outputs are still needed, which tensors each
 * device receives (sized by xfer.h).  The bound, for a device whose ops run
 * in a known order (the order ops are appended here):
 *   - persistent bytes of its ops: from the start;
 *   - an op's output: from its own step until the step of its last
 *     consumer when every consumer runs on the same device; when some
 *     consumer is elsewhere, the tensor is held until its transfers finish,
 *     which depends on timing, so until the first later step of its device
 *     whose op surely starts after them (it has, on every receiving device,
 *     an ancestor that ran no earlier than the first consumer there), or to
 *     the end when there is none;
 *   - an op's temporary bytes: during its step only;
 *   - a received copy: from the first step of the device that may begin
 *     before the copy exists (the step after the last of the producer's
 *     ancestors on the device; the start when none) until the step of its
 *     last consumer on the device.
 * Both causal bounds need, per op, the latest step of its ancestors on each
 * device (an op x device table of ints, kept up to 32 devices; above that
 * copies are held from the start and such outputs to the end).
 * The replay allocates each of these no earlier and frees them no later,
 * whatever the timing (sim.h), so a plan the ledger accepts never exceeds
 * capacity in the simulator nor on the workers.  Baechi, and this ledger's
 * first version, charge every op's memory for the whole step; that wastes
 * most of a device on chains whose outputs die young.
 *
 * Use: place_ledger_try assigns a unit (an op or a whole colocation group)
 * to a device and holds its ops' outputs and temporaries from the device's
 * next step on (pending until commit or abort); place_ledger_append then
 * gives each op its step when it is its turn to run, which replaces the
 * hold by the exact intervals (never more) and frees the outputs and copies
 * it was the last reader of.  The ledger reads the caller's live op ->
 * device array (-1 = unplaced). */
#ifndef GANTRY_PLACE_LEDGER_H
#define GANTRY_PLACE_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "spec/place_graph.h"

/* The attempt that came closest to fitting, for error messages. */
typedef struct place_miss {
    int dev;            /* device the unit was tried on; -1: no attempt recorded */
    int over_dev;       /* device that overflowed (dev, or a receiver of the unit's outputs) */
    int64_t missing;    /* bytes over capacity on over_dev */
    int64_t need;       /* how much the unit raised dev's peak */
    int64_t inbound;    /* bytes of tensors dev would receive from other devices */
    int64_t free_bytes; /* capacity minus peak of over_dev before the attempt */
} place_miss;

typedef struct place_ledger place_ledger;

place_ledger *place_ledger_new(const place_graph *g, const int *where);
void place_ledger_free(place_ledger *l);

/* Assigns the unit ops[0..n) to `dev`.  Returns 1 when every touched
 * device stays within capacity (the attempt is then pending: commit or
 * abort it), 0 when not (aborted; *miss updated when this attempt came
 * closer than the one recorded; miss may be NULL), -1 when out of memory.
 * The caller sets where[] for the unit after committing. */
int place_ledger_try(place_ledger *l, const int *ops, int n, int dev, place_miss *miss);
void place_ledger_commit(place_ledger *l);
void place_ledger_abort(place_ledger *l);

/* `op`, assigned, runs next on its device.  Never raises a peak.  0, or -1
 * when out of memory. */
int place_ledger_append(place_ledger *l, int op);

/* The same summed over every device, the pending attempt included (O(1)):
 * the room left for the persistent bytes of ops not placed yet, which the
 * list schedulers' memory reserve weighs (etf.c). */
int64_t place_ledger_free_total(const place_ledger *l);
/* Bytes freed so far on any device (frees, holds shrunk to their exact
 * intervals, reserves released; never aborted attempts).  It only grows,
 * and adding charges never makes room, so a unit refused for lack of N
 * bytes, on one device or in total, cannot fit before N more were freed. */
int64_t place_ledger_freed_total(const place_ledger *l);
/* Holds `bytes` (negative: releases) on a device for the whole step: how
 * m-ETF keeps room for a pinned unit until it is placed. */
int place_ledger_reserve(place_ledger *l, int dev, int64_t bytes);

/* Devices charged by the pending attempt, and devices charged by commits
 * since the last call (which resets it), as bit masks with bit (dev % 64):
 * the list schedulers' candidate caches use them. */
uint64_t place_ledger_touched_mask(const place_ledger *l);
uint64_t place_ledger_take_changed(place_ledger *l);
/* Bytes freed on dev since the last call: a unit that did not fit there
 * may fit once at least its missing bytes were freed. */
int64_t place_ledger_take_freed(place_ledger *l, int dev);

/* Own memory of a unit: persistent + output + temporary of its ops. */
int64_t place_unit_memory(const place_graph *g, const int *ops, int n);

/* "op 'x' (group 'g', 5 ops) needs N bytes ... (missing K bytes)". */
void place_miss_explain(const place_graph *g, const int *ops, int n, const place_miss *m, char *reason, size_t len);

#endif
