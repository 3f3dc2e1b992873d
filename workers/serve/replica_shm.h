/* replica_shm.h - the memory a worker shares with the replica processes of one inference job: the
 * request bodies a batch holds and the space its replies come back in, so that a request's bytes
 * go from the socket (workers/serve_direct.c reads them straight in) to the input tensor the
 * replica wraps (from_blob) with no copy in between, and the replies back the same way.
 *
 * A memfd of RS_SIZE bytes, mapped by the worker and, through its inherited descriptor, by each
 * replica process before it locks itself down (workers/replica_main.c).  Pages are allocated as
 * they are first written (shm_arena.h keeps what is used at the front).  The replica is a
 * tenant's code and can write anywhere in it: the worker keeps its bookkeeping outside, places
 * only that job's requests in it, and copies a reply out before reading it (replica_wire.h). */
#ifndef GANTRY_SERVE_REPLICA_SHM_H
#define GANTRY_SERVE_REPLICA_SHM_H

#include <stdbool.h>
#include <stddef.h>

#include "workers/serve/shm_arena.h"

#define RS_SIZE ((size_t)256 << 20) /* bigger batches go through the pipe, as before */
#define RS_ALIGN 64                 /* binary tensors start on a cache line */
#define RS_TRIM ((size_t)16 << 20)  /* pages kept while idle at most (a few ResNet batches' worth) */

typedef struct {
    int fd;
    char *base;
    size_t size;
    shm_arena arena; /* the worker's side only */
    size_t touched;  /* the end of the furthest block since the region was last emptied */
} replica_shm;

/* the worker's: a new region of size bytes; NULL (with err) when the system has no memfd or map */
replica_shm *rs_create(size_t size, char *err, size_t errlen);
void rs_free(replica_shm *s);

/* len bytes in the region with (p + skew) aligned to RS_ALIGN, or NULL when it is full */
char *rs_alloc(replica_shm *s, size_t len, size_t skew);
/* whether p is in the region */
bool rs_owns(const replica_shm *s, const void *p);
/* gives p back: to the region when it is there, else to free() (a body read before the region had
 * room); NULL does nothing.  When the region empties after a burst (more than RS_TRIM bytes touched),
 * its pages go back to the system. */
void rs_release(replica_shm *s, void *p);

/* the replica's: maps the region whose descriptor it inherited (and closes it); 0, or -1 */
int rs_attach(int fd, char **base, size_t *size);

#endif
