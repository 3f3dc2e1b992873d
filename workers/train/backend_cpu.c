/* backend_cpu.c - the CPU backend: CBLAS (OpenBLAS) for gemm, plain
 * loops for everything else.  Loops are written so the compiler vectorises
 * them; they dominate only in conv/pool layers, where im2col feeds gemm. */
#include "workers/train/backend.h"

#include "common/alloc.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *cpu_alloc(size_t n)
{
    return xcalloc(n ? n : 1, sizeof(float)); /* host memory: out of it aborts (docs/errors.md) */
}

static void cpu_free(void *p)
{
    free(p);
}

static void cpu_gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                     float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta,
                C, ldc);
}

static void cpu_axpy(size_t n, float a, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

static void cpu_fill(size_t n, float v, float *x)
{
    for (size_t i = 0; i < n; i++)
        x[i] = v;
}

static void cpu_add_rows(int rows, int cols, const float *bias, float *y)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            y[(size_t)r * cols + c] += bias[c];
}

static void cpu_add_planes(int n, int c, int hw, const float *bias, float *y)
{
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < c; ch++) {
            float *p = y + ((size_t)i * c + ch) * hw;
            for (int j = 0; j < hw; j++)
                p[j] += bias[ch];
        }
}

static void cpu_sum_rows(int rows, int cols, const float *dy, float *db)
{
    memset(db, 0, sizeof(float) * cols);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            db[c] += dy[(size_t)r * cols + c];
}

static void cpu_sum_planes(int n, int c, int hw, const float *dy, float *db)
{
    memset(db, 0, sizeof(float) * c);
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < c; ch++) {
            const float *p = dy + ((size_t)i * c + ch) * hw;
            float s = 0;
            for (int j = 0; j < hw; j++)
                s += p[j];
            db[ch] += s;
        }
}

static void cpu_relu_fwd(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0 ? x[i] : 0;
}

static void cpu_relu_bwd(size_t n, const float *x, const float *dy, float *dx)
{
    for (size_t i = 0; i < n; i++)
        dx[i] = x[i] > 0 ? dy[i] : 0;
}

static void cpu_mul(size_t n, const float *a, const float *b, float *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] * b[i];
}

static void cpu_im2col(const float *x, int c, int h, int w, int k, int stride, int pad, int oh, int ow, float *col)
{
    for (int ch = 0; ch < c; ch++)
        for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++) {
                float *row = col + ((size_t)(ch * k + ky) * k + kx) * oh * ow;
                for (int oy = 0; oy < oh; oy++) {
                    int iy = oy * stride - pad + ky;
                    for (int ox = 0; ox < ow; ox++) {
                        int ix = ox * stride - pad + kx;
                        row[oy * ow + ox] = (iy >= 0 && iy < h && ix >= 0 && ix < w) ? x[((size_t)ch * h + iy) * w + ix] : 0.0f;
                    }
                }
            }
}

static void cpu_col2im(const float *col, int c, int h, int w, int k, int stride, int pad, int oh, int ow, float *dx)
{
    for (int ch = 0; ch < c; ch++)
        for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++) {
                const float *row = col + ((size_t)(ch * k + ky) * k + kx) * oh * ow;
                for (int oy = 0; oy < oh; oy++) {
                    int iy = oy * stride - pad + ky;
                    if (iy < 0 || iy >= h) continue;
                    for (int ox = 0; ox < ow; ox++) {
                        int ix = ox * stride - pad + kx;
                        if (ix >= 0 && ix < w) dx[((size_t)ch * h + iy) * w + ix] += row[oy * ow + ox];
                    }
                }
            }
}

static void cpu_maxpool_fwd(const float *x, int planes, int h, int w, int s, int oh, int ow, float *y, int32_t *arg)
{
    for (int p = 0; p < planes; p++) {
        const float *xp = x + (size_t)p * h * w;
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                int best = (oy * s) * w + ox * s;
                for (int dy = 0; dy < s; dy++)
                    for (int dx = 0; dx < s; dx++) {
                        int i = (oy * s + dy) * w + ox * s + dx;
                        if (xp[i] > xp[best]) best = i;
                    }
                size_t o = ((size_t)p * oh + oy) * ow + ox;
                y[o] = xp[best];
                arg[o] = (int32_t)((size_t)p * h * w + best);
            }
    }
}

static void cpu_maxpool_bwd(const float *dy, const int32_t *arg, size_t nout, float *dx)
{
    for (size_t i = 0; i < nout; i++)
        dx[arg[i]] += dy[i];
}

static double cpu_softmax_ce(int n, int k, const float *logits, const int32_t *labels, float *dlogits, int *correct)
{
    double loss = 0;
    int ok = 0;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * k;
        int arg = 0;
        for (int j = 1; j < k; j++)
            if (z[j] > z[arg]) arg = j;
        double sum = 0;
        for (int j = 0; j < k; j++)
            sum += exp((double)z[j] - z[arg]);
        double lse = z[arg] + log(sum);
        loss += lse - z[labels[i]];
        ok += arg == labels[i];
        if (dlogits)
            for (int j = 0; j < k; j++)
                dlogits[(size_t)i * k + j] = (float)((exp(z[j] - lse) - (j == labels[i])) / n);
    }
    if (correct) *correct = ok;
    return n ? loss / n : 0;
}

static void cpu_sgd(size_t n, float lr, float momentum, float *w, const float *g, float *vel)
{
    for (size_t i = 0; i < n; i++) {
        vel[i] = momentum * vel[i] + g[i];
        w[i] -= lr * vel[i];
    }
}

static void cpu_adam(size_t n, float lr, float b1, float b2, float eps, float c1, float c2, float *w, const float *g, float *m,
                     float *v)
{
    for (size_t i = 0; i < n; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        w[i] -= lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
    }
}

static const train_backend cpu_backend = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .gemm = cpu_gemm,
    .axpy = cpu_axpy,
    .fill = cpu_fill,
    .add_rows = cpu_add_rows,
    .add_planes = cpu_add_planes,
    .sum_rows = cpu_sum_rows,
    .sum_planes = cpu_sum_planes,
    .relu_fwd = cpu_relu_fwd,
    .relu_bwd = cpu_relu_bwd,
    .mul = cpu_mul,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .maxpool_fwd = cpu_maxpool_fwd,
    .maxpool_bwd = cpu_maxpool_bwd,
    .softmax_ce = cpu_softmax_ce,
    .sgd = cpu_sgd,
    .adam = cpu_adam,
};

const train_backend *train_backend_cpu(void)
{
    return &cpu_backend;
}
