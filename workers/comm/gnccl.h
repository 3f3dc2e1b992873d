/* gnccl.h - the GPU collectives of a data-parallel gang: an NCCL communicator
 * that never hangs.
 *
 * Rank 0 makes the unique id (gnccl_unique_id) and publishes it under the
 * gang's generation in the rendezvous; every rank then joins with it.  The
 * communicator is non-blocking: initialisation and every all-reduce are polled
 * (ncclCommGetAsyncError, cudaStreamQuery) against a deadline, and on an error
 * or a timeout the communicator is aborted (ncclCommAbort), so a dead or hung
 * peer costs the step, never the process.  Buffers are device-accessible
 * (the CUDA backend's managed memory).  In a build without CUDA every call
 * fails with a clear error (gnccl_none.c). */
#ifndef GANTRY_COMM_GNCCL_H
#define GANTRY_COMM_GNCCL_H

#include <stddef.h>

#define GNCCL_ID_HEX 257 /* 128 bytes as hex, and a NUL */

typedef struct gnccl gnccl;

/* 0 with the id as hex, or -1 with err */
int gnccl_unique_id(char hex[GNCCL_ID_HEX], char *err, size_t errlen);
/* NULL with err (aborted) when the others do not join by the deadline */
gnccl *gnccl_init(const char *hex, int rank, int world, int timeout_ms, char *err, size_t errlen);
/* in-place sum of n floats; 0, or -1 with err (the communicator is then aborted) */
int gnccl_allreduce(gnccl *g, float *buf, size_t n, int timeout_ms, char *err, size_t errlen);
/* copies root's bytes to every rank; as gnccl_allreduce */
int gnccl_broadcast(gnccl *g, void *buf, size_t bytes, int root, int timeout_ms, char *err, size_t errlen);
void gnccl_destroy(gnccl *g);

#endif
