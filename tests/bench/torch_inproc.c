/* torch_inproc.c - a TorchScript model run in-process through torch_model.h, the same tm_* calls a
 * replica makes: the libtorch baseline that gantry's served throughput and latency are compared with
 * (issue 21's benchmark).  Built only when meson finds libtorch; not installed.
 *
 *   build/tests/bench/torch_inproc MODEL.pt --shape 1,3,224,224 [--dtype FP32] [--threads T] [--seconds S]
 *
 * One input of that shape (the first dimension is the batch) filled once with fixed pseudo-random
 * values (FP32/FP64 in [-1, 1), INT32/INT64 in [0, 10)); 5 warm-up forwards (TorchScript's profiling
 * executor optimises the graph after its first runs), then forwards back to back for S seconds
 * (default 10).  T: libtorch's intra-op threads (default: libtorch's own choice).  Prints one JSON line:
 *   {"batch":1,"threads":2,"iterations":812,"per_s":81.1,"p50_ms":12.2,"p99_ms":13.9}
 * per_s is samples (batch x iterations) per second; p50/p99 are of one forward's wall time. */
#include "workers/serve/torch_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"

#define WARMUP 5

static void usage(void)
{
    fprintf(stderr, "usage: torch_inproc MODEL.pt --shape 1,3,224,224 [--dtype FP32|FP64|INT32|INT64] [--threads T] "
                    "[--seconds S]\n");
    exit(2);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "1,3,224,224" into t's shape; -1 on anything but 1..SIG_MAX_DIMS positive integers */
static int parse_shape(const char *s, tm_tensor *t)
{
    t->ndim = 0;
    for (const char *p = s;;) {
        char *end;
        errno = 0;
        long long d = strtoll(p, &end, 10);
        if (end == p || errno || d < 1 || t->ndim == SIG_MAX_DIMS) return -1;
        t->shape[t->ndim++] = d;
        if (*end == '\0') return 0;
        if (*end != ',') return -1;
        p = end + 1;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the q-quantile of n sorted values (nearest rank) */
static double quantile(const double *v, size_t n, double q)
{
    size_t i = (size_t)(q * (double)n + 0.999999);
    return v[i ? i - 1 : 0];
}

/* fills t's data with fixed pseudo-random values (an LCG: the same input every run) */
static void fill(tm_tensor *t)
{
    size_t n = 1;
    for (int k = 0; k < t->ndim; k++)
        n *= (size_t)t->shape[k];
    t->data = xmalloc(n * sig_dtype_size(t->dtype));
    uint64_t x = 42;
    for (size_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(x >> 11) / 9007199254740992.0; /* [0, 1) */
        switch (t->dtype) {
        case SIG_FP32:
            ((float *)t->data)[i] = (float)(2 * u - 1);
            break;
        case SIG_FP64:
            ((double *)t->data)[i] = 2 * u - 1;
            break;
        case SIG_INT32:
            ((int32_t *)t->data)[i] = (int32_t)(u * 10);
            break;
        case SIG_INT64:
            ((int64_t *)t->data)[i] = (int64_t)(u * 10);
            break;
        }
    }
}

/* one forward; exits with the backend's message on failure */
static void forward(tm_model *m, const tm_tensor *in)
{
    tm_tensor *out;
    int nout;
    char err[512];
    if (tm_forward(m, in, 1, &out, &nout, err, sizeof err) != 0) {
        fprintf(stderr, "torch_inproc: forward: %s\n", err);
        exit(1);
    }
    tm_tensors_free(out, nout);
}

int main(int argc, char **argv)
{
    const char *path = NULL, *shape = NULL, *dtype = "FP32";
    int threads = 0;
    double seconds = 10;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-' && !path)
            path = argv[i];
        else if (i + 1 < argc && !strcmp(argv[i], "--shape"))
            shape = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--dtype"))
            dtype = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--threads"))
            threads = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--seconds"))
            seconds = atof(argv[++i]);
        else
            usage();
    }
    tm_tensor in = {0};
    if (!path || !shape || parse_shape(shape, &in) != 0 || sig_dtype_parse(dtype, &in.dtype) != 0 || threads < 0 || !(seconds > 0))
        usage();
    fill(&in);

    char err[512];
    tm_model *m = tm_load(path, threads, err, sizeof err);
    if (!m) {
        fprintf(stderr, "torch_inproc: %s: %s\n", path, err);
        return 1;
    }
    for (int i = 0; i < WARMUP; i++)
        forward(m, &in);

    size_t n = 0, cap = 1024;
    double *lat = xmalloc(cap * sizeof *lat);
    double start = now_s(), t = start;
    while (t - start < seconds) {
        forward(m, &in);
        double t2 = now_s();
        if (n == cap) lat = xreallocarray(lat, cap *= 2, sizeof *lat);
        lat[n++] = (t2 - t) * 1e3;
        t = t2;
    }
    qsort(lat, n, sizeof *lat, cmp_double);
    printf("{\"batch\":%lld,\"threads\":%d,\"iterations\":%zu,\"per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f}\n",
           (long long)in.shape[0], threads, n, (double)n * (double)in.shape[0] / (t - start), quantile(lat, n, 0.5),
           quantile(lat, n, 0.99));
    free(lat);
    free(in.data);
    tm_free(m);
    return 0;
}
