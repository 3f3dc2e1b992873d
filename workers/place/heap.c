/* heap.c - binary min-heap on (key, tie). */
#include "workers/place/heap.h"

#include "common/alloc.h"

#include <stdlib.h>

static int before(const place_hent *a, const place_hent *b)
{
    if (a->key != b->key) return a->key < b->key;
    return a->tie < b->tie;
}

int place_heap_push(place_heap *h, double key, int tie, int id)
{
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 16;
        h->a = xreallocarray(h->a, (size_t)cap, sizeof *h->a);
        h->cap = cap;
    }
    place_hent e = {key, tie, id};
    int i = h->n++;
    while (i > 0 && before(&e, &h->a[(i - 1) / 2])) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = e;
    return 0;
}

void place_heap_pop(place_heap *h)
{
    place_hent last = h->a[--h->n];
    int i = 0, n = h->n;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(&h->a[c + 1], &h->a[c])) c++;
        if (!before(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (n > 0) h->a[i] = last;
}

void place_heap_clear(place_heap *h)
{
    free(h->a);
    h->a = NULL;
    h->n = h->cap = 0;
}
