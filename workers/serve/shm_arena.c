/* shm_arena.c - first-fit offsets in a shared region (shm_arena.h). */
#include "workers/serve/shm_arena.h"
#include "common/alloc.h"

#include <stdlib.h>
#include <string.h>

void sa_init(shm_arena *a, size_t size)
{
    *a = (shm_arena){.size = size};
}

void sa_fini(shm_arena *a)
{
    free(a->used);
    *a = (shm_arena){0};
}

/* the first offset at or after at with (off + skew) % align == 0 */
static size_t aligned(size_t at, size_t align, size_t skew)
{
    size_t m = (at + skew) & (align - 1);
    return m ? at + (align - m) : at;
}

size_t sa_alloc(shm_arena *a, size_t len, size_t align, size_t skew)
{
    if (align == 0 || (align & (align - 1))) align = 1;
    if (len == 0) len = 1;
    size_t at = 0;
    int i = 0;
    for (;; i++) { /* the gap before used[i] (or the end) */
        size_t limit = i < a->n ? a->used[i].off : a->size;
        size_t off = aligned(at, align, skew);
        if (off >= at && off <= limit && limit - off >= len) {
            at = off;
            break;
        }
        if (i == a->n) return SA_NONE;
        at = a->used[i].off + a->used[i].len;
    }
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 16;
        a->used = xrealloc(a->used, sizeof(*a->used) * (size_t)a->cap);
    }
    memmove(&a->used[i + 1], &a->used[i], sizeof(*a->used) * (size_t)(a->n - i));
    a->used[i] = (sa_block){at, len};
    a->n++;
    return at;
}

int sa_free(shm_arena *a, size_t off)
{
    int lo = 0, hi = a->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (a->used[mid].off == off) {
            memmove(&a->used[mid], &a->used[mid + 1], sizeof(*a->used) * (size_t)(a->n - mid - 1));
            a->n--;
            return 0;
        }
        if (a->used[mid].off < off)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

size_t sa_used(const shm_arena *a)
{
    size_t s = 0;
    for (int i = 0; i < a->n; i++)
        s += a->used[i].len;
    return s;
}
