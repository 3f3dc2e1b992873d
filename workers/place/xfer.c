/* xfer.c - the (producer, device) -> bytes accumulator, on top of the
 * (op, device) map of pairmap.c.  Byte counts are kept as doubles there: exact
 * up to 2^53 bytes, far above any device.  Entries are never removed; setting 0
 * is how an entry is undone. */
#include "workers/place/xfer.h"

#include "common/alloc.h"
#include "workers/place/pairmap.h"

#include <stdlib.h>

struct place_xfer_acc {
    place_pairmap *m;
};

place_xfer_acc *place_xfer_acc_new(int n_devices)
{
    place_xfer_acc *a = xcalloc(1, sizeof *a);
    a->m = place_pairmap_new(n_devices);
    return a;
}

void place_xfer_acc_free(place_xfer_acc *a)
{
    if (!a) return;
    place_pairmap_free(a->m);
    free(a);
}

int64_t place_xfer_acc_get(const place_xfer_acc *a, int src, int dev)
{
    double v = 0;
    return place_pairmap_get(a->m, src, dev, &v) ? (int64_t)v : 0;
}

int place_xfer_acc_set(place_xfer_acc *a, int src, int dev, int64_t edge_sum)
{
    return place_pairmap_set(a->m, src, dev, (double)edge_sum);
}
