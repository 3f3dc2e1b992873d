/* pairmap.h - a map (op, device) -> time, for list schedulers.
 *
 * Owns: its table (place_pairmap_free).  m-ETF and m-SCT record here when a
 * producer's tensor arrives on a device, so later consumers there reuse the
 * transfer instead of paying for a new one.  Open addressing, linear
 * probing, grown at half load; entries are never removed. */
#ifndef GANTRY_PLACE_PAIRMAP_H
#define GANTRY_PLACE_PAIRMAP_H

typedef struct place_pairmap place_pairmap;

place_pairmap *place_pairmap_new(int n_devices);
void place_pairmap_free(place_pairmap *m);
/* 1 and *val when (op, dev) is present, else 0. */
int place_pairmap_get(const place_pairmap *m, int op, int dev, double *val);
/* 0, or -1 when out of memory. */
int place_pairmap_set(place_pairmap *m, int op, int dev, double val);

#endif
