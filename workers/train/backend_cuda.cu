/* backend_cuda.cu - the GPU backend: cuBLAS for gemm, our kernels for the rest.
 *
 * Buffers are CUDA managed memory, so the host code of the library (data
 * loading into the batch buffers, checkpoints, packing gradients for an
 * all-reduce) reads and writes them directly; every call synchronises the
 * device before it returns.  That costs throughput, not correctness: a first
 * GPU backend whose results match the CPU's within float tolerance
 * (tests/unit/test_backend_gpu.c).  Reductions are written without float
 * atomics where the order matters (one thread per output), so results are
 * deterministic; maxpool's backward scatter uses atomicAdd, which only ever
 * adds once per element when windows do not overlap (stride = size). */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

extern "C" {
#include "workers/train/backend.h"
}

#define THREADS 256

static cublasHandle_t blas;
static double *loss_scratch; /* per-row losses of softmax_ce */
static int *correct_scratch;
static int scratch_rows;

static unsigned blocks(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

#define LOOP(i, n) for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)blockDim.x * gridDim.x)

static void sync(void)
{
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) fprintf(stderr, "gantry cuda backend: %s\n", cudaGetErrorString(e));
}

static float *g_alloc(size_t n)
{
    void *p = NULL;
    if (cudaMallocManaged(&p, (n ? n : 1) * sizeof(float), cudaMemAttachGlobal) != cudaSuccess) return NULL;
    cudaMemset(p, 0, (n ? n : 1) * sizeof(float));
    sync();
    return (float *)p;
}

static void g_free(void *p)
{
    sync();
    cudaFree(p);
}

static void g_gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                   float *C, int ldc)
{
    /* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T */
    cublasSgemm(blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc);
    sync();
}

__global__ void k_axpy(size_t n, float a, const float *x, float *y)
{
    LOOP(i, n) y[i] += a * x[i];
}
static void g_axpy(size_t n, float a, const float *x, float *y)
{
    k_axpy<<<blocks(n), THREADS>>>(n, a, x, y);
    sync();
}

__global__ void k_fill(size_t n, float v, float *x)
{
    LOOP(i, n) x[i] = v;
}
static void g_fill(size_t n, float v, float *x)
{
    k_fill<<<blocks(n), THREADS>>>(n, v, x);
    sync();
}

__global__ void k_add_rows(size_t n, int cols, const float *bias, float *y)
{
    LOOP(i, n) y[i] += bias[i % cols];
}
static void g_add_rows(int rows, int cols, const float *bias, float *y)
{
    size_t n = (size_t)rows * cols;
    k_add_rows<<<blocks(n), THREADS>>>(n, cols, bias, y);
    sync();
}

__global__ void k_add_planes(size_t n, int c, int hw, const float *bias, float *y)
{
    LOOP(i, n) y[i] += bias[(i / hw) % c];
}
static void g_add_planes(int n, int c, int hw, const float *bias, float *y)
{
    size_t total = (size_t)n * c * hw;
    k_add_planes<<<blocks(total), THREADS>>>(total, c, hw, bias, y);
    sync();
}

/* one thread per output column: the sum runs in the CPU's order */
__global__ void k_sum_rows(int rows, int cols, const float *dy, float *db)
{
    LOOP(c, (size_t)cols)
    {
        float s = 0;
        for (int r = 0; r < rows; r++)
            s += dy[(size_t)r * cols + c];
        db[c] = s;
    }
}
static void g_sum_rows(int rows, int cols, const float *dy, float *db)
{
    k_sum_rows<<<blocks((size_t)cols), THREADS>>>(rows, cols, dy, db);
    sync();
}

__global__ void k_sum_planes(int n, int c, int hw, const float *dy, float *db)
{
    LOOP(ch, (size_t)c)
    {
        float t = 0;
        for (int i = 0; i < n; i++) {
            const float *p = dy + ((size_t)i * c + ch) * hw;
            float s = 0;
            for (int j = 0; j < hw; j++)
                s += p[j];
            t += s;
        }
        db[ch] = t;
    }
}
static void g_sum_planes(int n, int c, int hw, const float *dy, float *db)
{
    k_sum_planes<<<blocks((size_t)c), THREADS>>>(n, c, hw, dy, db);
    sync();
}

__global__ void k_relu_fwd(size_t n, const float *x, float *y)
{
    LOOP(i, n) y[i] = x[i] > 0 ? x[i] : 0;
}
static void g_relu_fwd(size_t n, const float *x, float *y)
{
    k_relu_fwd<<<blocks(n), THREADS>>>(n, x, y);
    sync();
}

__global__ void k_relu_bwd(size_t n, const float *x, const float *dy, float *dx)
{
    LOOP(i, n) dx[i] = x[i] > 0 ? dy[i] : 0;
}
static void g_relu_bwd(size_t n, const float *x, const float *dy, float *dx)
{
    k_relu_bwd<<<blocks(n), THREADS>>>(n, x, dy, dx);
    sync();
}

__global__ void k_mul(size_t n, const float *a, const float *b, float *y)
{
    LOOP(i, n) y[i] = a[i] * b[i];
}
static void g_mul(size_t n, const float *a, const float *b, float *y)
{
    k_mul<<<blocks(n), THREADS>>>(n, a, b, y);
    sync();
}

/* one thread per element of col: row (ch, ky, kx), column (oy, ox) */
__global__ void k_im2col(const float *x, int c, int h, int w, int k, int stride, int pad, int oh, int ow, float *col)
{
    size_t n = (size_t)c * k * k * oh * ow;
    LOOP(i, n)
    {
        int ox = (int)(i % ow), oy = (int)(i / ow % oh);
        size_t row = i / ((size_t)oh * ow);
        int kx = (int)(row % k), ky = (int)(row / k % k), ch = (int)(row / ((size_t)k * k));
        int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
        col[i] = (iy >= 0 && iy < h && ix >= 0 && ix < w) ? x[((size_t)ch * h + iy) * w + ix] : 0.0f;
    }
}
static void g_im2col(const float *x, int c, int h, int w, int k, int stride, int pad, int oh, int ow, float *col)
{
    k_im2col<<<blocks((size_t)c * k * k * oh * ow), THREADS>>>(x, c, h, w, k, stride, pad, oh, ow, col);
    sync();
}

/* one thread per input element gathers every (ky, kx) that read it: no atomics */
__global__ void k_col2im(const float *col, int c, int h, int w, int k, int stride, int pad, int oh, int ow, float *dx)
{
    size_t n = (size_t)c * h * w;
    LOOP(i, n)
    {
        int ix = (int)(i % w), iy = (int)(i / w % h), ch = (int)(i / ((size_t)h * w));
        float s = 0;
        for (int ky = 0; ky < k; ky++) {
            int ty = iy + pad - ky;
            if (ty < 0 || ty % stride) continue;
            int oy = ty / stride;
            if (oy >= oh) continue;
            for (int kx = 0; kx < k; kx++) {
                int tx = ix + pad - kx;
                if (tx < 0 || tx % stride) continue;
                int ox = tx / stride;
                if (ox >= ow) continue;
                s += col[(((size_t)ch * k + ky) * k + kx) * oh * ow + (size_t)oy * ow + ox];
            }
        }
        dx[i] += s;
    }
}
static void g_col2im(const float *col, int c, int h, int w, int k, int stride, int pad, int oh, int ow, float *dx)
{
    k_col2im<<<blocks((size_t)c * h * w), THREADS>>>(col, c, h, w, k, stride, pad, oh, ow, dx);
    sync();
}

__global__ void k_maxpool_fwd(const float *x, int planes, int h, int w, int s, int oh, int ow, float *y, int32_t *arg)
{
    size_t n = (size_t)planes * oh * ow;
    LOOP(o, n)
    {
        int ox = (int)(o % ow), oy = (int)(o / ow % oh);
        size_t p = o / ((size_t)oh * ow);
        const float *xp = x + p * h * w;
        int best = (oy * s) * w + ox * s;
        for (int dy = 0; dy < s; dy++)
            for (int dx = 0; dx < s; dx++) {
                int i = (oy * s + dy) * w + ox * s + dx;
                if (xp[i] > xp[best]) best = i;
            }
        y[o] = xp[best];
        arg[o] = (int32_t)(p * h * w + best);
    }
}
static void g_maxpool_fwd(const float *x, int planes, int h, int w, int s, int oh, int ow, float *y, int32_t *arg)
{
    k_maxpool_fwd<<<blocks((size_t)planes * oh * ow), THREADS>>>(x, planes, h, w, s, oh, ow, y, arg);
    sync();
}

__global__ void k_maxpool_bwd(const float *dy, const int32_t *arg, size_t nout, float *dx)
{
    LOOP(i, nout) atomicAdd(&dx[arg[i]], dy[i]);
}
static void g_maxpool_bwd(const float *dy, const int32_t *arg, size_t nout, float *dx)
{
    k_maxpool_bwd<<<blocks(nout), THREADS>>>(dy, arg, nout, dx);
    sync();
}

/* one thread per row, in double as on the CPU; the host adds the rows in order */
__global__ void k_softmax_ce(int n, int k, const float *logits, const int32_t *labels, float *dlogits, double *loss, int *ok)
{
    LOOP(r, (size_t)n)
    {
        const float *z = logits + r * k;
        int arg = 0;
        for (int j = 1; j < k; j++)
            if (z[j] > z[arg]) arg = j;
        double sum = 0;
        for (int j = 0; j < k; j++)
            sum += exp((double)z[j] - z[arg]);
        double lse = z[arg] + log(sum);
        loss[r] = lse - z[labels[r]];
        ok[r] = arg == labels[r];
        if (dlogits)
            for (int j = 0; j < k; j++)
                dlogits[r * k + j] = (float)((exp(z[j] - lse) - (j == labels[r])) / n);
    }
}
static double g_softmax_ce(int n, int k, const float *logits, const int32_t *labels, float *dlogits, int *correct)
{
    if (n > scratch_rows) {
        cudaFree(loss_scratch), cudaFree(correct_scratch);
        cudaMallocManaged((void **)&loss_scratch, sizeof(double) * (size_t)n, cudaMemAttachGlobal);
        cudaMallocManaged((void **)&correct_scratch, sizeof(int) * (size_t)n, cudaMemAttachGlobal);
        scratch_rows = n;
    }
    if (n > 0) k_softmax_ce<<<blocks((size_t)n), THREADS>>>(n, k, logits, labels, dlogits, loss_scratch, correct_scratch);
    sync();
    double loss = 0;
    int ok = 0;
    for (int r = 0; r < n; r++)
        loss += loss_scratch[r], ok += correct_scratch[r];
    if (correct) *correct = ok;
    return n ? loss / n : 0;
}

__global__ void k_sgd(size_t n, float lr, float momentum, float *w, const float *g, float *vel)
{
    LOOP(i, n)
    {
        vel[i] = momentum * vel[i] + g[i];
        w[i] -= lr * vel[i];
    }
}
static void g_sgd(size_t n, float lr, float momentum, float *w, const float *g, float *vel)
{
    k_sgd<<<blocks(n), THREADS>>>(n, lr, momentum, w, g, vel);
    sync();
}

__global__ void k_adam(size_t n, float lr, float b1, float b2, float eps, float c1, float c2, float *w, const float *g, float *m,
                       float *v)
{
    LOOP(i, n)
    {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        w[i] -= lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
    }
}
static void g_adam(size_t n, float lr, float b1, float b2, float eps, float c1, float c2, float *w, const float *g, float *m,
                   float *v)
{
    k_adam<<<blocks(n), THREADS>>>(n, lr, b1, b2, eps, c1, c2, w, g, m, v);
    sync();
}

static train_backend cuda_backend;
static int probed, usable;

extern "C" const train_backend *train_backend_cuda(void)
{
    if (!probed) {
        probed = 1;
        int n = 0;
        /* no GPU: cudaGetDeviceCount fails (insufficient driver) or finds none */
        if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0 && cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS) {
            cublasSetMathMode(blas, CUBLAS_PEDANTIC_MATH); /* no TF32: results comparable with the CPU's */
            cuda_backend.name = "cuda";
            cuda_backend.alloc = g_alloc;
            cuda_backend.free = g_free;
            cuda_backend.gemm = g_gemm;
            cuda_backend.axpy = g_axpy;
            cuda_backend.fill = g_fill;
            cuda_backend.add_rows = g_add_rows;
            cuda_backend.add_planes = g_add_planes;
            cuda_backend.sum_rows = g_sum_rows;
            cuda_backend.sum_planes = g_sum_planes;
            cuda_backend.relu_fwd = g_relu_fwd;
            cuda_backend.relu_bwd = g_relu_bwd;
            cuda_backend.mul = g_mul;
            cuda_backend.im2col = g_im2col;
            cuda_backend.col2im = g_col2im;
            cuda_backend.maxpool_fwd = g_maxpool_fwd;
            cuda_backend.maxpool_bwd = g_maxpool_bwd;
            cuda_backend.softmax_ce = g_softmax_ce;
            cuda_backend.sgd = g_sgd;
            cuda_backend.adam = g_adam;
            usable = 1;
        } else {
            cudaGetLastError(); /* clear the probe's error */
        }
    }
    return usable ? &cuda_backend : NULL;
}
