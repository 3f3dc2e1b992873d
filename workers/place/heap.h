/* heap.h - a binary min-heap of (key, tie, id) entries.
 *
 * Owns: its entry array (place_heap_clear releases it).  Ordered by key,
 * then tie, so callers get deterministic ties (the list schedulers use the
 * topological position as tie).  Used with lazy deletion: entries that went
 * stale are skipped or re-pushed by the caller when they reach the top. */
#ifndef GANTRY_PLACE_HEAP_H
#define GANTRY_PLACE_HEAP_H

typedef struct place_hent {
    double key;
    int tie;
    int id;
} place_hent;

typedef struct place_heap {
    place_hent *a;
    int n, cap;
} place_heap;

/* 0, or -1 when out of memory. */
int place_heap_push(place_heap *h, double key, int tie, int id);
/* The smallest entry; the heap must not be empty. */
static inline const place_hent *place_heap_top(const place_heap *h)
{
    return &h->a[0];
}
void place_heap_pop(place_heap *h);
void place_heap_clear(place_heap *h);

#endif
