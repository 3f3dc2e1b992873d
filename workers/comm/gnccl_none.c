/* gnccl_none.c - the NCCL wrapper in a build without CUDA: every call says so. */
#include "workers/comm/gnccl.h"

#include <stdio.h>

static const char none[] = "nccl: this build has no CUDA/NCCL (the gpu feature is off)";

int gnccl_unique_id(char hex[GNCCL_ID_HEX], char *err, size_t errlen)
{
    hex[0] = '\0';
    snprintf(err, errlen, "%s", none);
    return -1;
}

gnccl *gnccl_init(const char *hex, int rank, int world, int timeout_ms, char *err, size_t errlen)
{
    (void)hex, (void)rank, (void)world, (void)timeout_ms;
    snprintf(err, errlen, "%s", none);
    return NULL;
}

int gnccl_allreduce(gnccl *g, float *buf, size_t n, int timeout_ms, char *err, size_t errlen)
{
    (void)g, (void)buf, (void)n, (void)timeout_ms;
    snprintf(err, errlen, "%s", none);
    return -1;
}

int gnccl_broadcast(gnccl *g, void *buf, size_t bytes, int root, int timeout_ms, char *err, size_t errlen)
{
    (void)g, (void)buf, (void)bytes, (void)root, (void)timeout_ms;
    snprintf(err, errlen, "%s", none);
    return -1;
}

void gnccl_destroy(gnccl *g)
{
    (void)g;
}
