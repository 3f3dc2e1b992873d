/* gnccl.c - the GPU collectives over NCCL, with deadlines so a gang never hangs (gnccl.h). */
#include "workers/comm/gnccl.h"
#include "common/alloc.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct gnccl {
    ncclComm_t comm;
    cudaStream_t stream;
    int aborted;
};

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_briefly(void)
{
    struct timespec ts = {0, 200000}; /* 0.2 ms */
    nanosleep(&ts, NULL);
}

int gnccl_unique_id(char hex[GNCCL_ID_HEX], char *err, size_t errlen)
{
    ncclUniqueId id;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
        snprintf(err, errlen, "nccl: no unique id: %s", ncclGetErrorString(r));
        return -1;
    }
    for (size_t i = 0; i < sizeof(id.internal); i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)id.internal[i]);
    return 0;
}

/* waits until the communicator's pending operation settles; 0, or -1 with err */
static int settle(gnccl *g, long long deadline, const char *what, char *err, size_t errlen)
{
    for (;;) {
        ncclResult_t state;
        ncclResult_t r = ncclCommGetAsyncError(g->comm, &state);
        if (r != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
            snprintf(err, errlen, "nccl %s: %s", what, ncclGetErrorString(r != ncclSuccess ? r : state));
            return -1;
        }
        if (state == ncclSuccess) return 0;
        if (now_ms() > deadline) {
            snprintf(err, errlen, "nccl %s: no progress before the deadline (a peer is gone or hung)", what);
            return -1;
        }
        pause_briefly();
    }
}

static void abort_comm(gnccl *g)
{
    if (!g->aborted) ncclCommAbort(g->comm);
    g->aborted = 1;
}

gnccl *gnccl_init(const char *hex, int rank, int world, int timeout_ms, char *err, size_t errlen)
{
    ncclUniqueId id;
    if (strlen(hex) != 2 * sizeof(id.internal)) {
        snprintf(err, errlen, "nccl: a unique id of %zu hex digits expected", 2 * sizeof(id.internal));
        return NULL;
    }
    for (size_t i = 0; i < sizeof(id.internal); i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
            snprintf(err, errlen, "nccl: the unique id is not hex");
            return NULL;
        }
        id.internal[i] = (char)v;
    }
    gnccl *g = xcalloc(1, sizeof(*g));
    if (cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking) != cudaSuccess) {
        snprintf(err, errlen, "nccl: no CUDA stream (no usable device?)");
        free(g);
        return NULL;
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; /* every wait below has a deadline */
    ncclResult_t r = ncclCommInitRankConfig(&g->comm, world, id, rank, &config);
    if ((r != ncclSuccess && r != ncclInProgress) || settle(g, now_ms() + timeout_ms, "init", err, errlen) != 0) {
        if (r != ncclSuccess && r != ncclInProgress) snprintf(err, errlen, "nccl init: %s", ncclGetErrorString(r));
        if (r == ncclSuccess || r == ncclInProgress) abort_comm(g);
        cudaStreamDestroy(g->stream);
        free(g);
        return NULL;
    }
    return g;
}

/* waits for a collective just enqueued (r is what enqueuing returned), under the deadline */
static int finish(gnccl *g, ncclResult_t r, long long deadline, const char *what, char *err, size_t errlen)
{
    if ((r != ncclSuccess && r != ncclInProgress) || settle(g, deadline, what, err, errlen) != 0) {
        if (r != ncclSuccess && r != ncclInProgress) snprintf(err, errlen, "nccl %s: %s", what, ncclGetErrorString(r));
        abort_comm(g);
        return -1;
    }
    for (;;) { /* the kernel was enqueued: wait for the stream, still under the deadline */
        cudaError_t s = cudaStreamQuery(g->stream);
        if (s == cudaSuccess) return 0;
        if (s != cudaErrorNotReady || settle(g, deadline, what, err, errlen) != 0 || now_ms() > deadline) {
            if (s != cudaErrorNotReady)
                snprintf(err, errlen, "nccl %s: %s", what, cudaGetErrorString(s));
            else if (now_ms() > deadline)
                snprintf(err, errlen, "nccl %s: not done before the deadline (a peer is gone or hung)", what);
            abort_comm(g);
            return -1;
        }
        pause_briefly();
    }
}

static int usable(const gnccl *g, const char *what, char *err, size_t errlen)
{
    if (!g->aborted) return 0;
    snprintf(err, errlen, "nccl %s: the communicator was aborted by an earlier error", what);
    return -1;
}

int gnccl_allreduce(gnccl *g, float *buf, size_t n, int timeout_ms, char *err, size_t errlen)
{
    if (usable(g, "all-reduce", err, errlen)) return -1;
    long long deadline = now_ms() + timeout_ms;
    return finish(g, ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, g->comm, g->stream), deadline, "all-reduce", err, errlen);
}

int gnccl_broadcast(gnccl *g, void *buf, size_t bytes, int root, int timeout_ms, char *err, size_t errlen)
{
    if (usable(g, "broadcast", err, errlen)) return -1;
    long long deadline = now_ms() + timeout_ms;
    return finish(g, ncclBroadcast(buf, buf, bytes, ncclChar, root, g->comm, g->stream), deadline, "broadcast", err, errlen);
}

void gnccl_destroy(gnccl *g)
{
    if (!g) return;
    if (!g->aborted) ncclCommDestroy(g->comm);
    cudaStreamDestroy(g->stream);
    free(g);
}
