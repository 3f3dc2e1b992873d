/* shm_arena.h - the allocator of the request region a worker shares with its replica processes
 * (workers/serve/replica_shm.h maps it): offsets into a region of fixed size, no I/O.
 *
 * First fit from the start of the region, so that the pages ever touched stay about as many as the
 * bytes in flight at the busiest moment (requests read but not answered, a batch's reply space).
 * Its bookkeeping is the worker's own memory: the region itself is writable by the replica, a
 * tenant's code, so nothing in it is trusted or needed to allocate. */
#ifndef GANTRY_SERVE_SHM_ARENA_H
#define GANTRY_SERVE_SHM_ARENA_H

#include <stddef.h>

#define SA_NONE ((size_t)-1)

typedef struct {
    size_t off, len;
} sa_block;

typedef struct {
    size_t size;
    sa_block *used; /* sorted by offset */
    int n, cap;
} shm_arena;

void sa_init(shm_arena *a, size_t size);
void sa_fini(shm_arena *a);

/* len bytes at an offset off with (off + skew) a multiple of align (a power of two: a binary
 * tensor after a JSON head of skew bytes starts aligned), or SA_NONE when no gap has room */
size_t sa_alloc(shm_arena *a, size_t len, size_t align, size_t skew);

/* gives back the block at off (one sa_alloc returned); 0, or -1 when there is none */
int sa_free(shm_arena *a, size_t off);

/* bytes allocated */
size_t sa_used(const shm_arena *a);

#endif
