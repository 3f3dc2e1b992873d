/* backend.h - the math a model needs, as a table of functions.
 *
 * Layers, the loss and the optimizers never compute on tensors directly: they
 * call through a train_backend, so a GPU backend (cuBLAS plus our kernels)
 * can replace the CPU one (CBLAS plus the loops in backend_cpu.c) without
 * touching layer code.  All matrices are row-major.  Buffers come from the
 * backend's alloc/free (host memory for the CPU backend); the PRNG and data
 * loading stay on the host, so the same seed gives the same model everywhere. */
#ifndef GANTRY_TRAIN_BACKEND_H
#define GANTRY_TRAIN_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct train_backend {
    const char *name;
    float *(*alloc)(size_t n); /* n floats, zeroed; NULL on failure */
    void (*free)(void *p);
    /* C = alpha * op(A) op(B) + beta * C; op(A) is M x K, op(B) is K x N */
    void (*gemm)(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                 float *C, int ldc);
    void (*axpy)(size_t n, float a, const float *x, float *y); /* y += a x */
    void (*fill)(size_t n, float v, float *x);
    void (*add_rows)(int rows, int cols, const float *bias, float *y);     /* y[r][c] += bias[c] */
    void (*add_planes)(int n, int c, int hw, const float *bias, float *y); /* y[i][c][*] += bias[c] */
    void (*sum_rows)(int rows, int cols, const float *dy, float *db);      /* db[c] = sum_r dy[r][c] */
    void (*sum_planes)(int n, int c, int hw, const float *dy, float *db);  /* db[c] = sum dy[*][c][*] */
    void (*relu_fwd)(size_t n, const float *x, float *y);
    void (*relu_bwd)(size_t n, const float *x, const float *dy, float *dx);
    void (*mul)(size_t n, const float *a, const float *b, float *y); /* y = a * b elementwise */
    /* one sample: x is c x h x w; col is (c k k) x (oh ow) */
    void (*im2col)(const float *x, int c, int h, int w, int k, int stride, int pad, int oh, int ow, float *col);
    void (*col2im)(const float *col, int c, int h, int w, int k, int stride, int pad, int oh, int ow, float *dx); /* dx += */
    /* planes of h x w, window and stride s; arg[i] = flat index of the max in x */
    void (*maxpool_fwd)(const float *x, int planes, int h, int w, int s, int oh, int ow, float *y, int32_t *arg);
    void (*maxpool_bwd)(const float *dy, const int32_t *arg, size_t nout, float *dx); /* dx zeroed first by the caller */
    /* mean softmax cross-entropy over n rows of k logits; dlogits = d(mean loss)/d logits (may be NULL) */
    double (*softmax_ce)(int n, int k, const float *logits, const int32_t *labels, float *dlogits, int *correct);
    void (*sgd)(size_t n, float lr, float momentum, float *w, const float *g, float *vel);
    void (*adam)(size_t n, float lr, float b1, float b2, float eps, float c1, float c2, float *w, const float *g, float *m,
                 float *v); /* c1 = 1 - b1^t, c2 = 1 - b2^t */
} train_backend;

const train_backend *train_backend_cpu(void);
/* The GPU backend (backend_cuda.cu: cuBLAS plus our kernels, on CUDA managed
 * memory so that host code may read weights between calls; every call ends
 * with a device synchronisation).  NULL when this build has no CUDA or no
 * device is usable. */
const train_backend *train_backend_cuda(void);

#endif
