/* xfer.h - how many bytes a device receives from a producer op.
 *
 * Owns: the sizing rule for cross-device tensors, shared by the placement
 * algorithms (capacity accounting) and the simulator (transfers and memory),
 * so that a plan an algorithm accepts never exceeds memory in simulation;
 * and place_xfer_acc, a map (producer, device) -> edge bytes seen so far.
 *
 * The graph format does not say which output port an edge reads, so edges
 * from one op to consumers on one device are merged into one transfer: a
 * tensor sent to a device once is reused there.  Its size is the sum of those
 * edges' bytes (different ports), capped by the producer's total output
 * bytes (edges re-reading the same tensor cannot need more than all of it). */
#ifndef GANTRY_PLACE_XFER_H
#define GANTRY_PLACE_XFER_H

#include <stddef.h>
#include <stdint.h>

#include "spec/place_graph.h"

static inline int64_t place_xfer_bytes(const place_graph *g, int src, int64_t edge_sum)
{
    int64_t out = g->ops[src].output_bytes;
    return out > 0 && edge_sum > out ? out : edge_sum;
}

typedef struct place_xfer_acc place_xfer_acc;

place_xfer_acc *place_xfer_acc_new(int n_devices);
void place_xfer_acc_free(place_xfer_acc *a);
/* Edge bytes recorded for (src, dev); 0 when none. */
int64_t place_xfer_acc_get(const place_xfer_acc *a, int src, int dev);
/* Records edge bytes for (src, dev); -1 when out of memory. */
int place_xfer_acc_set(place_xfer_acc *a, int src, int dev, int64_t edge_sum);

#endif
