/* sim.h - event-driven replay of a placement plan.
 *
 * Owns: the arrays of a place_sim_result (place_sim_result_clear releases
 * them).  The model, the one workers follow:
 *  - an op starts when all its inputs are on its device and the device is
 *    free; ops on one device run one at a time in the plan's order;
 *  - a cross-device transfer takes latency + bytes / bytes_per_us, and holds
 *    the sender's send channel and the receiver's receive channel (one of
 *    each per device); a producer's tensor goes to a device once and every
 *    consumer there reuses it (xfer.h).  When the plan lists its transfers
 *    (plan.h), each channel serves them in that sequence: a transfer starts
 *    once its producer ended and it is next on both channels.  Otherwise
 *    channels are granted first come first served when producers end;
 *  - memory: persistent bytes of a device's ops are resident from the start;
 *    an op allocates output + temporary when it starts, frees temporary when
 *    it ends, and its output once every consumer on its device has run and
 *    every transfer of it has completed (outputs nobody consumes stay to the
 *    end of the step); a received copy is allocated when its transfer starts
 *    and freed after its last consumer on that device ran.
 * The replay checks the plan (devices in range, order a permutation, no op
 * ordered before a same-device input, a transfer sequence that lists every
 * needed transfer once, no deadlock) and memory against capacity at every
 * instant. */
#ifndef GANTRY_PLACE_SIM_H
#define GANTRY_PLACE_SIM_H

#include <stdint.h>

#include "spec/place_graph.h"
#include "workers/place/plan.h"

typedef struct place_sim_xfer {
    int src;      /* producer op */
    int from, to; /* devices */
    int64_t bytes;
    double start_us, end_us; /* -1 when it never ran */
} place_sim_xfer;

typedef struct place_mem_point {
    double t_us;
    int64_t bytes; /* live bytes on the device from t_us on */
} place_mem_point;

typedef struct place_sim_result {
    int feasible;     /* 0: memory exceeded a capacity, or the plan is invalid */
    char reason[320]; /* why not feasible (the first violation) */
    double makespan_us;
    int n_devices;
    double *busy_us;     /* per device: sum of its ops' run times */
    int64_t *peak_bytes; /* per device */
    int *ops;            /* per device: how many ops it runs */
    int64_t transfers, transfer_bytes;
    double *start_us, *end_us; /* per op; -1 for an op that never ran */
    int n_xfers;
    place_sim_xfer *xfers; /* every transfer the plan needs, grouped by producer */
    /* With PLACE_SIM_MEMORY: per device, the live bytes after every instant
     * at which they changed, in time order (the first point is t = 0). */
    place_mem_point **mem;
    int *n_mem;
} place_sim_result;

enum { PLACE_SIM_MEMORY = 1 };

/* Replays `plan` on `g` into `out` (which it initialises).  Returns 0 when the
 * replay ran (see out->feasible), -1 when out of memory or the plan is
 * malformed (reason in out->reason).  Release with place_sim_result_clear()
 * in both cases. */
int place_simulate(const place_graph *g, const place_plan *plan, place_sim_result *out);
/* The same, with flags (PLACE_SIM_MEMORY). */
int place_simulate_ex(const place_graph *g, const place_plan *plan, place_sim_result *out, int flags);
void place_sim_result_clear(place_sim_result *r);

#endif
