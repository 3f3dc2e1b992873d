/* test_backend_gpu.c - the CUDA backend against the CPU backend: every function of
 * the train_backend table on seeded random inputs, then a short training run on both.
 * Without a usable GPU (this machine, CI) every test is skipped, not failed; where a
 * GPU is lent (the device tool) they run and their figures go in docs/training.md. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workers/train/backend.h"
#include "workers/train/train.h"

static const train_backend *C, *G;

static int setup(void **state)
{
    (void)state;
    C = train_backend_cpu();
    G = train_backend_cuda();
    return 0;
}

#define NEED_GPU()                                                                                                                 \
    do {                                                                                                                           \
        if (!G) skip();                                                                                                            \
    } while (0)

static uint64_t rng = 1;
static float rnd(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) / 16777216.0) * 2 - 1;
}

/* the same random buffer on both backends */
static void pair(size_t n, float **c, float **g)
{
    *c = C->alloc(n);
    *g = G->alloc(n);
    for (size_t i = 0; i < n; i++)
        (*c)[i] = (*g)[i] = rnd();
}

static void same(const float *a, const float *b, size_t n, double rel, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (fabs(a[i] - b[i]) > rel * (1 + fabs(a[i]))) fail_msg("%s[%zu]: cpu %g gpu %g", what, i, a[i], b[i]);
}

static void test_elementwise(void **state)
{
    (void)state;
    NEED_GPU();
    size_t n = 10007;
    float *xc, *xg, *yc, *yg, *zc, *zg;
    pair(n, &xc, &xg), pair(n, &yc, &yg), pair(n, &zc, &zg);
    C->axpy(n, 0.3f, xc, yc), G->axpy(n, 0.3f, xg, yg);
    same(yc, yg, n, 1e-6, "axpy");
    C->relu_fwd(n, xc, zc), G->relu_fwd(n, xg, zg);
    same(zc, zg, n, 0, "relu_fwd");
    C->relu_bwd(n, xc, yc, zc), G->relu_bwd(n, xg, yg, zg);
    same(zc, zg, n, 1e-6, "relu_bwd");
    C->mul(n, xc, yc, zc), G->mul(n, xg, yg, zg);
    same(zc, zg, n, 1e-6, "mul");
    C->fill(n, 2.5f, zc), G->fill(n, 2.5f, zg);
    same(zc, zg, n, 0, "fill");
    C->sgd(n, 0.1f, 0.9f, xc, yc, zc), G->sgd(n, 0.1f, 0.9f, xg, yg, zg);
    same(xc, xg, n, 1e-5, "sgd");
    C->adam(n, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.001f, xc, yc, zc, zc),
        G->adam(n, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.001f, xg, yg, zg, zg);
    same(xc, xg, n, 1e-4, "adam");
    C->free(xc), C->free(yc), C->free(zc), G->free(xg), G->free(yg), G->free(zg);
}

static void test_gemm_and_sums(void **state)
{
    (void)state;
    NEED_GPU();
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        int M = 37, N = 29, K = 53;
        float *ac, *ag, *bc, *bg, *cc, *cg;
        pair((size_t)M * K, &ac, &ag), pair((size_t)K * N, &bc, &bg), pair((size_t)M * N, &cc, &cg);
        C->gemm(ta, tb, M, N, K, 1.5f, ac, ta ? M : K, bc, tb ? K : N, 0.5f, cc, N);
        G->gemm(ta, tb, M, N, K, 1.5f, ag, ta ? M : K, bg, tb ? K : N, 0.5f, cg, N);
        same(cc, cg, (size_t)M * N, 1e-4, "gemm");
        C->free(ac), C->free(bc), C->free(cc), G->free(ag), G->free(bg), G->free(cg);
    }
    float *dc, *dg, *bc, *bg, *yc, *yg;
    pair(6 * 5 * 49, &dc, &dg), pair(5, &bc, &bg), pair(6 * 5 * 49, &yc, &yg);
    C->sum_rows(30, 49, dc, yc), G->sum_rows(30, 49, dg, yg);
    same(yc, yg, 49, 1e-5, "sum_rows");
    C->sum_planes(6, 5, 49, dc, bc), G->sum_planes(6, 5, 49, dg, bg);
    same(bc, bg, 5, 1e-5, "sum_planes");
    C->add_rows(30, 49, yc, dc), G->add_rows(30, 49, yg, dg);
    same(dc, dg, 30 * 49, 1e-6, "add_rows");
    C->add_planes(6, 5, 49, bc, dc), G->add_planes(6, 5, 49, bg, dg);
    same(dc, dg, 6 * 5 * 49, 1e-6, "add_planes");
    C->free(dc), C->free(bc), C->free(yc), G->free(dg), G->free(bg), G->free(yg);
}

static void test_conv_pool_loss(void **state)
{
    (void)state;
    NEED_GPU();
    int c = 3, h = 9, w = 7, k = 3;
    for (int v = 0; v < 3; v++) {
        int stride = v == 2 ? 2 : 1, pad = v == 0 ? 0 : 1;
        int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
        size_t ncol = (size_t)c * k * k * oh * ow;
        float *xc, *xg, *colc, *colg, *dxc, *dxg;
        pair((size_t)c * h * w, &xc, &xg), pair(ncol, &colc, &colg), pair((size_t)c * h * w, &dxc, &dxg);
        C->im2col(xc, c, h, w, k, stride, pad, oh, ow, colc), G->im2col(xg, c, h, w, k, stride, pad, oh, ow, colg);
        same(colc, colg, ncol, 0, "im2col");
        C->col2im(colc, c, h, w, k, stride, pad, oh, ow, dxc), G->col2im(colg, c, h, w, k, stride, pad, oh, ow, dxg);
        same(dxc, dxg, (size_t)c * h * w, 1e-5, "col2im");
        C->free(xc), C->free(colc), C->free(dxc), G->free(xg), G->free(colg), G->free(dxg);
    }
    float *xc, *xg, *yc, *yg, *dc, *dg;
    pair(4 * 8 * 8, &xc, &xg), pair(4 * 4 * 4, &yc, &yg), pair(4 * 8 * 8, &dc, &dg);
    int32_t *ac = (int32_t *)C->alloc(64), *ag = (int32_t *)G->alloc(64);
    C->maxpool_fwd(xc, 4, 8, 8, 2, 4, 4, yc, ac), G->maxpool_fwd(xg, 4, 8, 8, 2, 4, 4, yg, ag);
    same(yc, yg, 64, 0, "maxpool_fwd");
    assert_memory_equal(ac, ag, 64 * sizeof(int32_t));
    C->fill(256, 0, dc), G->fill(256, 0, dg);
    C->maxpool_bwd(yc, ac, 64, dc), G->maxpool_bwd(yg, ag, 64, dg);
    same(dc, dg, 256, 0, "maxpool_bwd");
    /* softmax cross-entropy: loss, correct count, gradient */
    int n = 50, kk = 10, okc, okg;
    float *lc, *lg, *gc = C->alloc(500), *gg = G->alloc(500);
    pair(500, &lc, &lg);
    int32_t *labc = (int32_t *)C->alloc(50), *labg = (int32_t *)G->alloc(50);
    for (int i = 0; i < n; i++)
        labc[i] = labg[i] = i % kk;
    double lossc = C->softmax_ce(n, kk, lc, labc, gc, &okc), lossg = G->softmax_ce(n, kk, lg, labg, gg, &okg);
    assert_true(fabs(lossc - lossg) < 1e-6 * (1 + fabs(lossc)));
    assert_int_equal(okc, okg);
    same(gc, gg, 500, 1e-5, "softmax_ce gradient");
}

/* the same short training run on both backends ends at the same test loss, within tolerance */
static void test_training_run(void **state)
{
    (void)state;
    NEED_GPU();
    const char *spec_text =
        "{\"model\":{\"input\":[1,28,28],\"layers\":[{\"type\":\"conv2d\",\"filters\":4,\"kernel\":3,\"padding\":1},"
        "{\"type\":\"relu\"},{\"type\":\"maxpool\",\"size\":2},{\"type\":\"flatten\"},{\"type\":\"dense\",\"units\":10}]},"
        "\"dataset\":{\"name\":\"fashion-mnist\"},\"optimizer\":{\"type\":\"sgd\",\"lr\":0.05,\"momentum\":0.9},"
        "\"batch_size\":64,\"steps\":60,\"seed\":3}";
    json_t *spec = json_loads(spec_text, 0, NULL);
    double loss[2], secs[2];
    for (int b = 0; b < 2; b++) {
        train_hooks hooks = {.backend = b ? G : C};
        json_t *res = NULL;
        char err[512];
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (train_run(spec, NULL, &hooks, &res, err, sizeof err) != 0) fail_msg("%s: %s", b ? "gpu" : "cpu", err);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        secs[b] = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
        loss[b] = json_real_value(json_object_get(json_object_get(res, "metrics"), "test_loss"));
        json_decref(res);
    }
    printf("60 CNN steps: cpu %.2f s test loss %.5f, gpu %.2f s test loss %.5f\n", secs[0], loss[0], secs[1], loss[1]);
    assert_true(fabs(loss[0] - loss[1]) < 1e-3 * loss[0]);
    json_decref(spec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_gemm_and_sums),
        cmocka_unit_test(test_conv_pool_loss),
        cmocka_unit_test(test_training_run),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
