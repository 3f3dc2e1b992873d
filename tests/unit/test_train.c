/* test_train.c - unit tests of the training library (workers/train):
 * finite-difference gradient checks of every layer and of softmax
 * cross-entropy, optimizers on a quadratic, schedules, the IDX and CSV
 * readers (good and malformed files), checkpoints (round trip, corruption,
 * mismatch), shuffles and shards, spec validation, and short training runs
 * (loss goes down; stop and resume gives the uninterrupted result). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testjson.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "workers/train/adapt.h"
#include "workers/train/ckpt.h"
#include "workers/train/data.h"
#include "workers/train/gns.h"
#include "workers/train/model.h"
#include "workers/train/mop.h"
#include "workers/train/optim.h"
#include "workers/train/train.h"

/* ---- helpers ---- */

static train_model *model(const char *arch, int cap)
{
    char err[256];
    json_t *a = J(arch);
    train_model *m = train_model_create(a, train_backend_cpu(), 7, cap, err, sizeof err);
    json_decref(a);
    if (!m) fail_msg("model: %s", err);
    return m;
}

static char tmpdir[256];

static void mk_tmpdir(void)
{
    if (tmpdir[0]) return;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_train.XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
}

static const char *tmp(const char *name)
{
    static char buf[8][512];
    static int k;
    mk_tmpdir();
    char *b = buf[k++ % 8];
    snprintf(b, 512, "%s/%s", tmpdir, name);
    return b;
}

/* loss = sum_i r_i y_i for fixed random r, in double */
static double proj(const float *y, const float *r, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)y[i] * r[i];
    return s;
}

static void randomize(float *x, size_t n, rng_state *r, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = scale * (2 * rng_uniform(r) - 1);
}

static int close_enough(double a, double b)
{
    return fabs(a - b) <= 2e-2 * fmax(fabs(a), fabs(b)) + 2e-3;
}

/* checks one layer's input and parameter gradients against central differences */
static void gradcheck(const char *arch, int n)
{
    train_model *m = model(arch, n);
    train_layer *l = &m->layers[0];
    size_t in = (size_t)l->in_c * l->in_h * l->in_w * n, out = (size_t)l->out_c * l->out_h * l->out_w * n;
    float *x = malloc(sizeof(float) * in), *r = malloc(sizeof(float) * out);
    rng_state rng = {42};
    /* distinct inputs at least 4 eps apart and from 0, so no relu kink or
     * max-pool tie lies within a finite-difference step */
    for (size_t i = 0; i < in; i++)
        x[i] = ((float)((i * 37) % in) + 0.5f - (float)in / 2) * 0.02f;
    randomize(r, out, &rng, 1.0f);
    train_layer_forward(m, l, x, n, false);
    const float *dx = train_layer_backward(m, l, r, n, true);
    float *dxc = malloc(sizeof(float) * in);
    memcpy(dxc, dx, sizeof(float) * in);
    const float eps = 4e-3f;
    int bad = 0;
    for (size_t i = 0; i < in; i++) {
        float keep = x[i];
        x[i] = keep + eps;
        double up = proj(train_layer_forward(m, l, x, n, false), r, out);
        x[i] = keep - eps;
        double dn = proj(train_layer_forward(m, l, x, n, false), r, out);
        x[i] = keep;
        double num = (up - dn) / (2 * eps);
        if (!close_enough(num, dxc[i]) && bad++ < 5) print_error("%s dx[%zu]: numeric %g analytic %g\n", arch, i, num, dxc[i]);
    }
    for (int p = 0; p < m->nparams; p++) {
        train_param *pp = m->params[p];
        float *g = malloc(sizeof(float) * pp->n);
        memcpy(g, pp->g, sizeof(float) * pp->n);
        for (size_t i = 0; i < pp->n; i++) {
            float keep = pp->w[i];
            pp->w[i] = keep + eps;
            double up = proj(train_layer_forward(m, l, x, n, false), r, out);
            pp->w[i] = keep - eps;
            double dn = proj(train_layer_forward(m, l, x, n, false), r, out);
            pp->w[i] = keep;
            double num = (up - dn) / (2 * eps);
            if (!close_enough(num, g[i]) && bad++ < 5)
                print_error("%s param %d[%zu]: numeric %g analytic %g\n", arch, p, i, num, g[i]);
        }
        free(g);
    }
    assert_int_equal(bad, 0);
    free(x), free(r), free(dxc);
    train_model_free(m);
}

/* ---- gradient checks ---- */

static void test_grad_dense(void **state)
{
    (void)state;
    gradcheck("{'input':[2,3,2],'layers':[{'type':'dense','units':5}]}", 3);
}

static void test_grad_relu(void **state)
{
    (void)state;
    gradcheck("{'input':[1,4,5],'layers':[{'type':'relu'},{'type':'dense','units':2}]}", 3);
}

static void test_grad_conv(void **state)
{
    (void)state;
    gradcheck("{'input':[2,5,5],'layers':[{'type':'conv2d','filters':3,'kernel':3,'stride':1,'padding':1}]}", 2);
    gradcheck("{'input':[3,6,7],'layers':[{'type':'conv2d','filters':2,'kernel':2,'stride':2,'padding':0}]}", 2);
    gradcheck("{'input':[1,5,5],'layers':[{'type':'conv2d','filters':2,'kernel':3,'stride':2,'padding':1}]}", 1);
}

static void test_grad_maxpool_flatten(void **state)
{
    (void)state;
    gradcheck("{'input':[2,4,6],'layers':[{'type':'maxpool','size':2},{'type':'dense','units':2}]}", 2);
    gradcheck("{'input':[1,5,5],'layers':[{'type':'maxpool','size':2},{'type':'dense','units':2}]}", 2);
    gradcheck("{'input':[2,3,3],'layers':[{'type':'flatten'},{'type':'dense','units':2}]}", 2);
}

/* the piecewise-linear region the last forward pass was in: relu signs and max-pool choices */
static uint64_t region(const train_model *m, int n)
{
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < m->nlayers; i++) {
        const train_layer *l = &m->layers[i];
        size_t out = (size_t)l->out_c * l->out_h * l->out_w * n;
        for (size_t k = 0; k < out; k++) {
            uint64_t v = l->type == TRAIN_RELU ? (uint64_t)(l->y[k] > 0) : l->type == TRAIN_MAXPOOL ? (uint64_t)l->arg[k] : 0;
            h = (h ^ v) * 1099511628211ULL;
        }
    }
    return h;
}

/* the whole model (conv, pool, flatten, dense, relu) through train_model_backward;
 * a coordinate whose finite difference crosses a kink is skipped (counted) */
static void test_grad_model(void **state)
{
    (void)state;
    train_model *m = model("{'input':[1,6,6],'layers':[{'type':'conv2d','filters':2,'kernel':3,'padding':1},{'type':'relu'},"
                           "{'type':'maxpool','size':2},{'type':'flatten'},{'type':'dense','units':4},{'type':'relu'},"
                           "{'type':'dense','units':3}]}",
                           2);
    float x[72];
    int32_t y[2] = {1, 2};
    rng_state rng = {3};
    randomize(x, 72, &rng, 1.0f);
    float dl[6];
    m->be->softmax_ce(2, 3, train_model_forward(m, x, 2, true), y, dl, NULL);
    train_model_backward(m, dl, 2);
    uint64_t base = region(m, 2);
    const float eps = 1e-3f;
    int skipped = 0, checked = 0;
    for (int p = 0; p < m->nparams; p++) {
        train_param *pp = m->params[p];
        for (size_t i = 0; i < pp->n; i++) {
            float keep = pp->w[i], g = pp->g[i];
            pp->w[i] = keep + eps;
            double up = m->be->softmax_ce(2, 3, train_model_forward(m, x, 2, false), y, NULL, NULL);
            int same = region(m, 2) == base;
            pp->w[i] = keep - eps;
            double dn = m->be->softmax_ce(2, 3, train_model_forward(m, x, 2, false), y, NULL, NULL);
            same = same && region(m, 2) == base;
            pp->w[i] = keep;
            if (!same) {
                skipped++;
                continue;
            }
            checked++;
            double num = (up - dn) / (2 * eps);
            if (!close_enough(num, g)) fail_msg("param %d[%zu]: numeric %g analytic %g", p, i, num, g);
        }
    }
    assert_true(checked > 4 * skipped);
    train_model_free(m);
}

static void test_softmax_ce(void **state)
{
    (void)state;
    const train_backend *be = train_backend_cpu();
    float z[12], d[12];
    int32_t y[3] = {0, 3, 2};
    rng_state rng = {5};
    randomize(z, 12, &rng, 3.0f);
    int correct;
    double loss = be->softmax_ce(3, 4, z, y, d, &correct);
    assert_true(loss > 0);
    for (int i = 0; i < 12; i++) {
        float keep = z[i];
        const double eps = 1e-3;
        z[i] = keep + (float)eps;
        double up = be->softmax_ce(3, 4, z, y, NULL, NULL);
        z[i] = keep - (float)eps;
        double dn = be->softmax_ce(3, 4, z, y, NULL, NULL);
        z[i] = keep;
        assert_true(close_enough((up - dn) / (2 * eps), d[i]));
    }
    /* known value: uniform logits give log(k), huge logits stay finite */
    float u[4] = {0, 0, 0, 0}, h[4] = {1000, -1000, 0, 0};
    int32_t l0 = 0;
    assert_true(fabs(be->softmax_ce(1, 4, u, &l0, NULL, NULL) - log(4.0)) < 1e-6);
    assert_true(fabs(be->softmax_ce(1, 4, h, &l0, NULL, &correct)) < 1e-6);
    assert_int_equal(correct, 1);
}

static void test_dropout(void **state)
{
    (void)state;
    train_model *m = model("{'input':[1,1,1000],'layers':[{'type':'dropout','rate':0.25},{'type':'dense','units':2}]}", 2);
    train_layer *l = &m->layers[0];
    float x[2000], dy[2000];
    for (int i = 0; i < 2000; i++)
        x[i] = 1.0f, dy[i] = 2.0f;
    assert_ptr_equal(train_layer_forward(m, l, x, 2, false), x); /* identity in evaluation */
    const float *y = train_layer_forward(m, l, x, 2, true);
    int kept = 0;
    for (int i = 0; i < 2000; i++) {
        assert_true(y[i] == 0.0f || fabsf(y[i] - 1.0f / 0.75f) < 1e-6);
        kept += y[i] != 0;
    }
    assert_in_range(kept, 1400, 1600);
    const float *dx = train_layer_backward(m, l, dy, 2, true);
    for (int i = 0; i < 2000; i++)
        assert_true(fabsf(dx[i] - 2.0f * y[i]) < 1e-6);
    /* same seed, same masks */
    train_model *m2 = model("{'input':[1,1,1000],'layers':[{'type':'dropout','rate':0.25},{'type':'dense','units':2}]}", 2);
    const float *y2 = train_layer_forward(m2, &m2->layers[0], x, 2, true);
    assert_memory_equal(y, y2, sizeof(float) * 2000);
    train_model_free(m);
    train_model_free(m2);
}

static void test_init_deterministic(void **state)
{
    (void)state;
    train_model *a = model("{'input':[1,8,8],'layers':[{'type':'dense','units':16},{'type':'dense','units':4}]}", 1);
    train_model *b = model("{'input':[1,8,8],'layers':[{'type':'dense','units':16},{'type':'dense','units':4}]}", 1);
    assert_int_equal(train_model_param_count(a), 64 * 16 + 16 + 16 * 4 + 4);
    for (int p = 0; p < a->nparams; p++)
        assert_memory_equal(a->params[p]->w, b->params[p]->w, sizeof(float) * a->params[p]->n);
    /* He-normal: variance about 2/64 */
    double s = 0;
    for (size_t i = 0; i < a->params[0]->n; i++)
        s += a->params[0]->w[i] * a->params[0]->w[i];
    assert_true(fabs(s / a->params[0]->n - 2.0 / 64) < 0.006);
    train_model_free(a);
    train_model_free(b);
}

/* ---- optimizers and schedules ---- */

static double quad_run(const char *opt, int steps)
{
    train_model *m = model("{'input':[1,1,4],'layers':[{'type':'dense','units':2}]}", 1);
    json_t *o = J(opt);
    train_optim *op = train_optim_create(o, m);
    double err = 0; /* f = 0.5 sum (w - 3)^2 */
    for (int s = 0; s < steps; s++) {
        for (int p = 0; p < m->nparams; p++)
            for (size_t i = 0; i < m->params[p]->n; i++)
                m->params[p]->g[i] = m->params[p]->w[i] - 3.0f;
        train_optim_step(op, m->be, op->lr);
    }
    for (int p = 0; p < m->nparams; p++)
        for (size_t i = 0; i < m->params[p]->n; i++)
            err = fmax(err, fabs(m->params[p]->w[i] - 3.0));
    json_decref(o);
    train_optim_free(op, m->be);
    train_model_free(m);
    return err;
}

static void test_optimizers(void **state)
{
    (void)state;
    /* plain SGD step: w' = w - lr g exactly */
    train_model *m = model("{'input':[1,1,1],'layers':[{'type':'dense','units':2}]}", 1);
    json_t *o = J("{'type':'sgd','lr':0.5,'momentum':0.9}");
    train_optim *op = train_optim_create(o, m);
    m->params[0]->w[0] = 1.0f, m->params[0]->g[0] = 2.0f;
    train_optim_step(op, m->be, 0.5f);
    assert_true(fabsf(m->params[0]->w[0] - 0.0f) < 1e-6);
    train_optim_step(op, m->be, 0.5f); /* velocity 0.9*2 + 2 = 3.8 */
    assert_true(fabsf(m->params[0]->w[0] + 1.9f) < 1e-6);
    train_optim_free(op, m->be);
    json_decref(o);
    /* Adam's first step moves each weight by lr (bias-corrected) */
    o = J("{'type':'adam','lr':0.1}");
    op = train_optim_create(o, m);
    m->params[0]->w[0] = 1.0f, m->params[0]->g[0] = 123.0f;
    train_optim_step(op, m->be, 0.1f);
    assert_true(fabsf(m->params[0]->w[0] - 0.9f) < 1e-5);
    train_optim_free(op, m->be);
    json_decref(o);
    train_model_free(m);
    /* both converge on a quadratic */
    assert_true(quad_run("{'type':'sgd','lr':0.1,'momentum':0.9}", 200) < 1e-3);
    assert_true(quad_run("{'type':'sgd','lr':0.1}", 200) < 1e-3);
    assert_true(quad_run("{'type':'adam','lr':0.05}", 600) < 1e-2);
}

static void test_schedules(void **state)
{
    (void)state;
    train_schedule s;
    train_schedule_init(&s, NULL);
    assert_true(train_schedule_lr(&s, 0.1f, 500, 1000) == 0.1f);
    json_t *j = J("{'type':'step','step_size':10,'gamma':0.5}");
    train_schedule_init(&s, j);
    assert_true(fabsf(train_schedule_lr(&s, 1.0f, 9, 100) - 1.0f) < 1e-7);
    assert_true(fabsf(train_schedule_lr(&s, 1.0f, 25, 100) - 0.25f) < 1e-7);
    json_decref(j);
    j = J("{'type':'cosine','warmup_steps':10,'min_lr':0.1}");
    train_schedule_init(&s, j);
    assert_true(fabsf(train_schedule_lr(&s, 1.0f, 0, 110) - 0.1f) < 1e-6); /* warm-up 1/10 */
    assert_true(fabsf(train_schedule_lr(&s, 1.0f, 9, 110) - 1.0f) < 1e-6);
    assert_true(fabsf(train_schedule_lr(&s, 1.0f, 10, 110) - 1.0f) < 1e-6);
    assert_true(fabsf(train_schedule_lr(&s, 1.0f, 60, 110) - 0.55f) < 1e-5);
    assert_true(fabsf(train_schedule_lr(&s, 1.0f, 110, 110) - 0.1f) < 1e-6);
    json_decref(j);
}

/* ---- data ---- */

static void write_bytes(const char *path, const void *p, size_t n, int gz)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, p, (unsigned)n), (int)n);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(p, 1, n, f), n);
        fclose(f);
    }
}

/* IDX images n x h x w with pixel (i, j) = i + j, labels i % 3 */
static void write_idx(const char *img, const char *lab, int n, int h, int w, int gz)
{
    size_t len = 16 + (size_t)n * h * w;
    unsigned char *b = calloc(1, len);
    b[2] = 8, b[3] = 3;
    b[7] = (unsigned char)n, b[11] = (unsigned char)h, b[15] = (unsigned char)w;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < h * w; j++)
            b[16 + (size_t)i * h * w + j] = (unsigned char)(i + j);
    write_bytes(img, b, len, gz);
    unsigned char l[8 + 256] = {0, 0, 8, 1, 0, 0, 0, (unsigned char)n};
    for (int i = 0; i < n; i++)
        l[8 + i] = (unsigned char)(i % 3);
    write_bytes(lab, l, 8 + (size_t)n, gz);
    free(b);
}

static void test_idx_reader(void **state)
{
    (void)state;
    char err[512];
    train_data d;
    for (int gz = 0; gz < 2; gz++) {
        write_idx(tmp("i.idx"), tmp("l.idx"), 5, 3, 4, gz);
        assert_int_equal(train_data_load_idx(tmp("i.idx"), tmp("l.idx"), &d, err, sizeof err), 0);
        assert_int_equal(d.n, 5);
        assert_int_equal(d.dim, 12);
        assert_int_equal(d.h, 3);
        assert_int_equal(d.w, 4);
        assert_int_equal(d.classes, 3);
        assert_true(fabsf(d.x[2 * 12 + 5] - 7.0f / 255) < 1e-7);
        assert_int_equal(d.y[4], 1);
        train_data_free(&d);
    }
}

static void expect_idx_error(const char *what, const void *img, size_t n, const char *needle)
{
    char err[512] = "";
    train_data d;
    write_bytes(tmp("bad.idx"), img, n, 0);
    write_idx(tmp("ok-i.idx"), tmp("ok-l.idx"), 5, 3, 4, 0);
    int rc = train_data_load_idx(tmp("bad.idx"), tmp("ok-l.idx"), &d, err, sizeof err);
    if (rc != -1 || !strstr(err, needle)) fail_msg("%s: rc %d err '%s' (want '%s')", what, rc, err, needle);
    assert_null(d.x);
}

static void test_idx_malformed(void **state)
{
    (void)state;
    char err[512];
    train_data d;
    assert_int_equal(train_data_load_idx("/nonexistent/x.gz", "/nonexistent/y.gz", &d, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/x.gz"));
    expect_idx_error("empty", "", 0, "not an IDX file");
    expect_idx_error("text", "hello world, not idx", 20, "bad magic");
    expect_idx_error("floats", "\0\0\x0d\x03", 4, "element type");
    expect_idx_error("dims", "\0\0\x08\x07", 4, "dimensions");
    expect_idx_error("header", "\0\0\x08\x03\0\0\0\x05\0\0", 10, "truncated IDX header");
    expect_idx_error("zero dim", "\0\0\x08\x03\0\0\0\x00\0\0\0\3\0\0\0\4", 16, "zero");
    expect_idx_error("huge", "\0\0\x08\x03\xff\xff\xff\xff\xff\xff\xff\xff\0\0\0\4", 16, "too large");
    expect_idx_error("short data", "\0\0\x08\x03\0\0\0\x05\0\0\0\3\0\0\0\4\1\2\3", 19, "truncated IDX data");
    /* label count mismatch */
    write_idx(tmp("i6.idx"), tmp("l6.idx"), 6, 3, 4, 0);
    assert_int_equal(train_data_load_idx(tmp("i6.idx"), tmp("ok-l.idx"), &d, err, sizeof err), -1);
    assert_non_null(strstr(err, "6 images but"));
    /* a truncated gzip stream */
    write_idx(tmp("gz-i.idx"), tmp("gz-l.idx"), 5, 3, 4, 1);
    FILE *f = fopen(tmp("gz-i.idx"), "r+");
    assert_int_equal(ftruncate(fileno(f), 20), 0);
    fclose(f);
    assert_int_equal(train_data_load_idx(tmp("gz-i.idx"), tmp("gz-l.idx"), &d, err, sizeof err), -1);
    assert_non_null(strstr(err, "truncated"));
}

static void test_csv_reader(void **state)
{
    (void)state;
    char err[512];
    train_data d;
    const char *good = "label,a,b,c,d\n1, 0.5,2,3,4\n\n0,1,1,1,1\r\n2,0,0,0,255\n";
    write_bytes(tmp("g.csv"), good, strlen(good), 0);
    assert_int_equal(train_data_load_csv(tmp("g.csv"), 1, 2, 2, 0.5f, &d, err, sizeof err), 0);
    assert_int_equal(d.n, 3);
    assert_int_equal(d.classes, 3);
    assert_true(d.x[0] == 0.25f && d.x[11] == 127.5f);
    assert_int_equal(d.y[2], 2);
    train_data_free(&d);
    struct {
        const char *text, *needle;
    } bad[] = {
        {"1,2,3,4\n", "expected 4 values"},
        {"1,2,3,4,5,6\n", "more than 4"},
        {"1,2,x,4,5\n", "column 3 is not a number"},
        {"1,2,3,4,5\nx,1,2,3,4\n", ":2: the first column"},
        {"-1,2,3,4,5\n", "out of range"},
        {"", "no samples"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_bytes(tmp("b.csv"), bad[i].text, strlen(bad[i].text), 0);
        err[0] = 0;
        assert_int_equal(train_data_load_csv(tmp("b.csv"), 1, 2, 2, 1.0f, &d, err, sizeof err), -1);
        if (!strstr(err, bad[i].needle)) fail_msg("case %zu: '%s'", i, err);
    }
    assert_int_equal(train_data_load_csv("/nonexistent.csv", 1, 2, 2, 1.0f, &d, err, sizeof err), -1);
    /* a shape without values: refused, not read (rows of zero values once grew the set with realloc(x, 0),
     * which frees x, and then freed it again); more than 1024 rows, so that the set would have grown twice */
    FILE *f = fopen(tmp("z.csv"), "w");
    assert_non_null(f);
    for (int i = 0; i < 1500; i++)
        fprintf(f, "%d\n", i % 3);
    fclose(f);
    const int shapes[][3] = {{0, 2, 2}, {1, 0, 2}, {1, 2, 0}, {-1, 2, 2}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        err[0] = 0;
        assert_int_equal(train_data_load_csv(tmp("z.csv"), shapes[i][0], shapes[i][1], shapes[i][2], 1.0f, &d, err, sizeof err),
                         -1);
        if (!strstr(err, "no values")) fail_msg("shape %zu: '%s'", i, err);
        assert_null(d.x);
    }
}

static void test_shuffle_shard(void **state)
{
    (void)state;
    size_t a[1000], b[1000], c[1000];
    train_shuffle(a, 1000, 9, 0);
    train_shuffle(b, 1000, 9, 0);
    train_shuffle(c, 1000, 9, 1);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
    char seen[1000] = {0};
    for (int i = 0; i < 1000; i++) {
        assert_true(a[i] < 1000 && !seen[a[i]]);
        seen[a[i]] = 1;
    }
    /* shards of a global batch partition it, in rank order, for any world */
    for (size_t len = 0; len <= 13; len++)
        for (int w = 1; w <= 5; w++) {
            size_t next = 0;
            for (int r = 0; r < w; r++) {
                size_t lo, hi;
                train_shard(len, r, w, &lo, &hi);
                assert_int_equal(lo, next);
                assert_true(hi >= lo && hi - lo <= (len + w - 1) / w);
                next = hi;
            }
            assert_int_equal(next, len);
        }
}

/* ---- checkpoints ---- */

#define CKPT_ARCH                                                                                                                  \
    "{'input':[1,4,4],'layers':[{'type':'conv2d','filters':2,'kernel':3,'padding':1},{'type':'flatten'},{'type':'dense','units':"  \
    "3}]}"

static void test_ckpt_roundtrip(void **state)
{
    (void)state;
    char err[512];
    train_model *a = model(CKPT_ARCH, 2);
    json_t *oj = J("{'type':'adam','lr':0.01}");
    train_optim *oa = train_optim_create(oj, a);
    for (int p = 0; p < a->nparams; p++)
        for (size_t i = 0; i < a->params[p]->n; i++)
            a->params[p]->g[i] = 0.1f * (float)i;
    train_optim_step(oa, a->be, 0.01f);
    train_ckpt_state st = {12, 3, 7, 40, 99}, st2;
    assert_int_equal(train_ckpt_save(tmp("c.ckpt"), a, oa, &st, err, sizeof err), 0);
    assert_int_not_equal(access(tmp("c.ckpt.tmp"), F_OK), 0);

    char err2[256];
    json_t *arch = J(CKPT_ARCH);
    train_model *b = train_model_create(arch, NULL, 1234, 2, err2, sizeof err2);
    train_optim *ob = train_optim_create(oj, b);
    assert_int_equal(train_ckpt_load(tmp("c.ckpt"), b, ob, &st2, err, sizeof err), 0);
    assert_memory_equal(&st, &st2, sizeof st);
    assert_int_equal(ob->t, 1);
    for (int p = 0; p < a->nparams; p++) {
        assert_memory_equal(a->params[p]->w, b->params[p]->w, sizeof(float) * a->params[p]->n);
        assert_memory_equal(oa->m[p], ob->m[p], sizeof(float) * a->params[p]->n);
        assert_memory_equal(oa->v[p], ob->v[p], sizeof(float) * a->params[p]->n);
    }
    json_t *stored = train_ckpt_arch(tmp("c.ckpt"), err, sizeof err);
    assert_true(json_equal(stored, arch));
    json_decref(stored);

    /* SGD optimizer against an Adam checkpoint: refused */
    json_t *sj = J("{'type':'sgd','lr':0.01}");
    train_optim *os = train_optim_create(sj, b);
    assert_int_equal(train_ckpt_load(tmp("c.ckpt"), b, os, &st2, err, sizeof err), -1);
    assert_non_null(strstr(err, "optimizer"));
    /* a model file (no optimizer state) loads into any optimizer */
    assert_int_equal(train_ckpt_save(tmp("c.model"), a, NULL, &st, err, sizeof err), 0);
    assert_int_equal(train_ckpt_load(tmp("c.model"), b, os, &st2, err, sizeof err), 0);
    train_optim_free(os, b->be);
    json_decref(sj);

    /* a different architecture: refused, model untouched */
    train_model *c = model("{'input':[1,4,4],'layers':[{'type':'dense','units':3}]}", 1);
    float before = c->params[0]->w[0];
    assert_int_equal(train_ckpt_load(tmp("c.ckpt"), c, NULL, &st2, err, sizeof err), -1);
    assert_non_null(strstr(err, "different model"));
    assert_true(c->params[0]->w[0] == before);
    train_model_free(c);

    json_decref(arch);
    json_decref(oj);
    train_optim_free(oa, a->be);
    train_optim_free(ob, b->be);
    train_model_free(a);
    train_model_free(b);
}

static void test_ckpt_corrupt(void **state)
{
    (void)state;
    char err[512];
    train_model *a = model(CKPT_ARCH, 1);
    train_ckpt_state st = {1, 0, 7, 0, 0};
    assert_int_equal(train_ckpt_save(tmp("k.ckpt"), a, NULL, &st, err, sizeof err), 0);
    FILE *f = fopen(tmp("k.ckpt"), "rb");
    unsigned char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 100 && n < sizeof buf);
    /* every single flipped byte is detected */
    for (size_t i = 0; i < n; i += 7) {
        buf[i] ^= 0x40;
        write_bytes(tmp("k2.ckpt"), buf, n, 0);
        buf[i] ^= 0x40;
        err[0] = 0;
        assert_int_equal(train_ckpt_load(tmp("k2.ckpt"), a, NULL, NULL, err, sizeof err), -1);
        assert_true(strstr(err, "corrupt") || strstr(err, "magic") || strstr(err, "version"));
    }
    /* truncations */
    for (size_t len = 0; len < n; len += 13) {
        write_bytes(tmp("k3.ckpt"), buf, len, 0);
        assert_int_equal(train_ckpt_load(tmp("k3.ckpt"), a, NULL, NULL, err, sizeof err), -1);
    }
    assert_int_equal(train_ckpt_load(tmp("missing.ckpt"), a, NULL, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot open"));
    train_model_free(a);
}

/* ---- spec validation ---- */

#define SPEC_OK                                                                                                                    \
    "{'model':{'input':[1,28,28],'layers':[{'type':'dense','units':16},{'type':'relu'},{'type':'dense','units':10}]},"             \
    "'dataset':{'name':'fashion-mnist'},'optimizer':{'type':'sgd','lr':0.1,'momentum':0.9},'batch_size':64,'epochs':1,'seed':1}"

static void expect_field(const char *spec, const char *path, const char *val, const char *want)
{
    json_t *s = J(spec);
    if (path) {
        /* path like "optimizer.lr" or "model.layers.2": set val there */
        json_t *v = val ? J(val) : NULL;
        char *p = strdup(path), *save, *tok = strtok_r(p, ".", &save);
        json_t *cur = s;
        for (char *next; (next = strtok_r(NULL, ".", &save)); tok = next)
            cur = json_is_array(cur) ? json_array_get(cur, (size_t)atoi(tok)) : json_object_get(cur, tok);
        if (json_is_array(cur)) {
            if (v) json_array_set(cur, (size_t)atoi(tok), v);
        } else if (v) {
            json_object_set(cur, tok, v);
        } else {
            json_object_del(cur, tok);
        }
        json_decref(v);
        free(p);
    }
    char field[160] = "", msg[256] = "";
    int rc = train_spec_validate(s, field, sizeof field, msg, sizeof msg);
    if (!want) {
        if (rc != 0) fail_msg("valid spec refused: %s: %s", field, msg);
    } else if (rc != -1 || strcmp(field, want)) {
        fail_msg("%s=%s: got rc %d field '%s' (%s), want '%s'", path, val ? val : "(deleted)", rc, field, msg, want);
    }
    json_decref(s);
}

static void test_spec_validate(void **state)
{
    (void)state;
    expect_field(SPEC_OK, NULL, NULL, NULL);
    expect_field(SPEC_OK, "model.layers.0", "{'type':'dense','units':0}", "spec.model.layers[0].units");
    expect_field(SPEC_OK, "model.layers.2", "{'type':'dense','units':'x'}", "spec.model.layers[2].units");
    expect_field(SPEC_OK, "model.layers.1", "{'type':'softmax'}", "spec.model.layers[1].type");
    expect_field(SPEC_OK, "model.layers.1", "{'type':'dropout','rate':1}", "spec.model.layers[1].rate");
    expect_field(SPEC_OK, "model.layers.0", "{'type':'conv2d','filters':4,'kernel':30}", "spec.model.layers[0].kernel");
    expect_field(SPEC_OK, "model.layers.0", "{'type':'conv2d','filters':4}", "spec.model.layers[0].kernel");
    expect_field(SPEC_OK, "model.layers.0", "{'type':'maxpool','size':0}", "spec.model.layers[0].size");
    expect_field(SPEC_OK, "model.input", "[1,28]", "spec.model.input");
    expect_field(SPEC_OK, "model.input", "[1,0,28]", "spec.model.input[1]");
    expect_field(SPEC_OK, "model.layers", "[]", "spec.model.layers");
    expect_field(SPEC_OK, "model.layers", "[{'type':'relu'}]", "spec.model.layers");
    expect_field(SPEC_OK, "optimizer.lr", "0", "spec.optimizer.lr");
    expect_field(SPEC_OK, "optimizer.type", "'rmsprop'", "spec.optimizer.type");
    expect_field(SPEC_OK, "optimizer.momentum", "1.5", "spec.optimizer.momentum");
    expect_field(SPEC_OK, "batch_size", "0", "spec.batch_size");
    expect_field(SPEC_OK, "batch_size", NULL, "spec.batch_size");
    expect_field(SPEC_OK, "epochs", NULL, "spec.epochs");
    expect_field(SPEC_OK, "steps", "10", "spec.epochs");
    expect_field(SPEC_OK, "seed", "-1", "spec.seed");
    expect_field(SPEC_OK, "dataset", "{'name':'cifar'}", "spec.dataset.name");
    expect_field(SPEC_OK, "dataset", "{'format':'idx','train_images':'a'}", "spec.dataset.train_labels");
    expect_field(SPEC_OK, "dataset", "{'format':'parquet'}", "spec.dataset.format");
    expect_field(SPEC_OK, "schedule", "{'type':'step'}", "spec.schedule.step_size");
    expect_field(SPEC_OK, "schedule", "{'type':'cosine','warmup_steps':-3}", "spec.schedule.warmup_steps");
    expect_field(SPEC_OK, "eval_every_steps", "0", "spec.eval_every_steps");
    expect_field(SPEC_OK, "checkpoint_every_steps", "'x'", "spec.checkpoint_every_steps");
    expect_field(SPEC_OK, "model", NULL, "spec.model");
}

/* ---- training ---- */

/* two classes of 6x6 images: a bright top half or a bright bottom half, plus noise */
static void write_blobs(const char *img, const char *lab, int n, uint64_t seed)
{
    size_t len = 16 + (size_t)n * 36;
    unsigned char *b = calloc(1, len), *l = calloc(1, 8 + (size_t)n);
    b[2] = 8, b[3] = 3, b[6] = (unsigned char)(n >> 8), b[7] = (unsigned char)n, b[11] = 6, b[15] = 6;
    l[2] = 8, l[3] = 1, l[6] = (unsigned char)(n >> 8), l[7] = (unsigned char)n;
    rng_state r = {seed};
    for (int i = 0; i < n; i++) {
        int c = (int)rng_below(&r, 2);
        l[8 + i] = (unsigned char)c;
        for (int p = 0; p < 36; p++) {
            int on = (p < 18) == (c == 0);
            b[16 + (size_t)i * 36 + p] = (unsigned char)((on ? 100 : 0) + rng_below(&r, 156));
        }
    }
    write_bytes(img, b, len, 1);
    write_bytes(lab, l, 8 + (size_t)n, 1);
    free(b);
    free(l);
}

static json_t *blob_spec(const char *layers, const char *extra)
{
    write_blobs(tmp("tr-i.gz"), tmp("tr-l.gz"), 512, 1);
    write_blobs(tmp("te-i.gz"), tmp("te-l.gz"), 200, 2);
    char buf[2048];
    snprintf(buf, sizeof buf,
             "{'model':{'input':[1,6,6],'layers':%s},'dataset':{'format':'idx','train_images':'%s','train_labels':'%s',"
             "'test_images':'%s','test_labels':'%s'},'optimizer':{'type':'sgd','lr':0.05,'momentum':0.9},"
             "'batch_size':32,'seed':3%s}",
             layers, tmp("tr-i.gz"), tmp("tr-l.gz"), tmp("te-i.gz"), tmp("te-l.gz"), extra);
    return J(buf);
}

typedef struct {
    int events, stop_after, polls;
    double first_loss, last_loss;
} hook_log;

static void on_progress(void *ctx, const json_t *m)
{
    hook_log *h = ctx;
    double loss = json_real_value(json_object_get(m, "loss"));
    if (h->events++ == 0) h->first_loss = loss;
    h->last_loss = loss;
    assert_non_null(json_object_get(m, "samples_per_s"));
    assert_non_null(json_object_get(m, "compute_s"));
    assert_non_null(json_object_get(m, "data_s"));
    assert_non_null(json_object_get(m, "accuracy"));
}

static int should_stop(void *ctx)
{
    hook_log *h = ctx;
    return h->stop_after && ++h->polls > h->stop_after;
}

#define MLP "[{'type':'dense','units':16},{'type':'relu'},{'type':'dropout','rate':0.1},{'type':'dense','units':2}]"
#define CNN                                                                                                                        \
    "[{'type':'conv2d','filters':4,'kernel':3,'padding':1},{'type':'relu'},{'type':'maxpool','size':2},{'type':'flatten'},"        \
    "{'type':'dense','units':2}]"

static void test_train_reduces_loss(void **state)
{
    (void)state;
    const char *archs[] = {MLP, CNN};
    for (int a = 0; a < 2; a++) {
        json_t *spec = blob_spec(archs[a], ",'epochs':3,'progress_every_steps':4,'schedule':{'type':'cosine','warmup_steps':4}");
        hook_log h = {0};
        train_hooks hooks = {.progress = on_progress, .should_stop = should_stop, .ctx = &h};
        json_t *res = NULL;
        char err[512] = "";
        unlink(tmp("run.ckpt"));
        int rc = train_run(spec, tmp("run.ckpt"), &hooks, &res, err, sizeof err);
        if (rc != 0) fail_msg("train_run: %s", err);
        json_t *mt = json_object_get(res, "metrics");
        assert_true(h.events >= 10);
        assert_true(h.last_loss < h.first_loss * 0.5);
        assert_true(json_real_value(json_object_get(mt, "test_accuracy")) > 0.9);
        assert_int_equal(json_integer_value(json_object_get(mt, "steps")), 48);
        assert_true(json_real_value(json_object_get(mt, "epochs")) == 3.0);
        assert_true(json_integer_value(json_object_get(json_object_get(res, "model"), "parameters")) > 0);
        assert_int_equal(access(tmp("run.ckpt.model"), F_OK), 0);
        json_decref(res);
        json_decref(spec);
    }
}

static void test_train_stop_resume(void **state)
{
    (void)state;
    char err[512] = "";
    json_t *spec = blob_spec(MLP, ",'steps':40,'checkpoint_every_steps':5");
    /* uninterrupted */
    unlink(tmp("a.ckpt"));
    json_t *full = NULL;
    assert_int_equal(train_run(spec, tmp("a.ckpt"), NULL, &full, err, sizeof err), 0);
    /* stopped after 23 steps, then resumed */
    unlink(tmp("b.ckpt"));
    hook_log h = {.stop_after = 23};
    train_hooks hooks = {.should_stop = should_stop, .ctx = &h};
    json_t *res = NULL;
    assert_int_equal(train_run(spec, tmp("b.ckpt"), &hooks, &res, err, sizeof err), 1);
    assert_null(res);
    assert_int_equal(train_run(spec, tmp("b.ckpt"), NULL, &res, err, sizeof err), 0);
    json_t *m1 = json_object_get(full, "metrics"), *m2 = json_object_get(res, "metrics");
    assert_true(json_real_value(json_object_get(m1, "test_loss")) == json_real_value(json_object_get(m2, "test_loss")));
    assert_int_equal(json_integer_value(json_object_get(m2, "steps")), 40);
    json_decref(full);
    json_decref(res);
    /* a corrupt checkpoint fails the run with a clear error */
    FILE *f = fopen(tmp("b.ckpt"), "r+b");
    fseek(f, 100, SEEK_SET);
    fputc('!', f);
    fclose(f);
    assert_int_equal(train_run(spec, tmp("b.ckpt"), NULL, &res, err, sizeof err), -1);
    assert_non_null(strstr(err, "corrupt"));
    json_decref(spec);
}

static void test_train_errors(void **state)
{
    (void)state;
    char err[512];
    json_t *res = NULL;
    json_t *spec = blob_spec(MLP, ",'steps':1");
    json_object_set_new(json_object_get(spec, "dataset"), "train_images", json_string("/nonexistent/imgs.gz"));
    assert_int_equal(train_run(spec, NULL, NULL, &res, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/imgs.gz"));
    json_decref(spec);
    spec = blob_spec(MLP, ",'steps':1");
    json_array_set_new(json_object_get(json_object_get(spec, "model"), "input"), 1, json_integer(5));
    assert_int_equal(train_run(spec, NULL, NULL, &res, err, sizeof err), -1);
    assert_non_null(strstr(err, "spec.model.input"));
    json_decref(spec);
    spec = blob_spec("[{'type':'dense','units':1},{'type':'dense','units':1}]", ",'steps':1");
    assert_int_equal(train_run(spec, NULL, NULL, &res, err, sizeof err), -1);
    assert_non_null(strstr(err, "spec.model.layers"));
    json_decref(spec);
    spec = blob_spec("[{'type':'dense','units':2}]", ",'steps':1,'optimizer':{'type':'adam','lr':-1}");
    assert_int_equal(train_run(spec, NULL, NULL, &res, err, sizeof err), -1);
    assert_non_null(strstr(err, "spec.optimizer.lr"));
    json_decref(spec);
}

/* ---- data parallelism: ranks as threads, an in-process all-reduce ---- */

#define DP_MAX 4

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int world, arrived, gen, broken;
    void *bufs[DP_MAX];
    const void *sends[DP_MAX]; /* shift: what each rank sends, and what it receives */
    size_t slens[DP_MAX];
    void *recvs[DP_MAX];
    size_t rlens[DP_MAX];
    int fail_rank, fail_after; /* that rank's all-reduce fails after this many calls (0: never) */
} dp_shared;

typedef struct {
    dp_shared *s;
    int rank, calls, polls, stop_after;
    int slow_after_polls; /* sleeps 3 ms per step from then on (a slower network, for the strategy switch) */
    int strategy_calls, strategy_last;
    int events_batch; /* adaptation events seen (rank 0) */
    long last_batch;
    const json_t *spec;
    const char *ckpt;
    const unsigned char *handoff; /* offered at the start */
    size_t handoff_len;
    unsigned char *kept; /* kept at an unfinished end */
    size_t kept_len;
    train_start_info info; /* rank 0 */
    json_t *result;        /* model selection */
    int started;
    int rc;
    double test_loss;
    long steps;
    char err[512];
} dp_rank;

#define DP_SHIFT -2

/* root -1: an in-place sum of n floats; DP_SHIFT: each rank's sends[] to the next rank's
 * recvs[]; else root's n bytes copied to every rank */
static int dp_collective(void *ctx, void *buf, size_t n, int root, char *err, size_t el)
{
    dp_rank *me = ctx;
    dp_shared *s = me->s;
    pthread_mutex_lock(&s->mu);
    if (s->broken || (me->rank == s->fail_rank && s->fail_after && ++me->calls > s->fail_after)) {
        s->broken = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        snprintf(err, el, "rank %d: peer lost", me->rank);
        return -1;
    }
    int gen = s->gen;
    s->bufs[me->rank] = buf;
    if (++s->arrived == s->world && root == DP_SHIFT) {
        for (int r = 0; r < s->world; r++) {
            int from = (r + s->world - 1) % s->world;
            s->rlens[r] = s->slens[from];
            s->recvs[r] = s->slens[from] ? malloc(s->slens[from]) : NULL;
            if (s->slens[from]) memcpy(s->recvs[r], s->sends[from], s->slens[from]);
        }
        s->arrived = 0;
        s->gen++;
        pthread_cond_broadcast(&s->cv);
    } else if (s->arrived == s->world && root >= 0) {
        for (int r = 0; r < s->world; r++)
            if (r != root) memcpy(s->bufs[r], s->bufs[root], n);
        s->arrived = 0;
        s->gen++;
        pthread_cond_broadcast(&s->cv);
    } else if (s->arrived == s->world) { /* the last to arrive sums in rank order for everyone */
        for (size_t i = 0; i < n; i++) {
            float acc = 0;
            for (int r = 0; r < s->world; r++)
                acc += ((float *)s->bufs[r])[i];
            for (int r = 0; r < s->world; r++)
                ((float *)s->bufs[r])[i] = acc;
        }
        s->arrived = 0;
        s->gen++;
        pthread_cond_broadcast(&s->cv);
    } else {
        while (s->gen == gen && !s->broken)
            pthread_cond_wait(&s->cv, &s->mu);
    }
    int ok = s->gen != gen;
    pthread_mutex_unlock(&s->mu);
    if (!ok) snprintf(err, el, "rank %d: peer lost", me->rank);
    return ok ? 0 : -1;
}

static int dp_allreduce(void *ctx, float *buf, size_t n, char *err, size_t el)
{
    return dp_collective(ctx, buf, n, -1, err, el);
}

static int dp_broadcast(void *ctx, void *buf, size_t bytes, int root, char *err, size_t el)
{
    return dp_collective(ctx, buf, bytes, root, err, el);
}

static void dp_keep(void *ctx, unsigned char *blob, size_t len)
{
    dp_rank *me = ctx;
    free(me->kept);
    me->kept = blob, me->kept_len = len;
}

static void dp_started(void *ctx, const train_start_info *info)
{
    dp_rank *me = ctx;
    me->info = *info;
    me->started++;
}

static int dp_shift(void *ctx, const void *send, size_t len, void **recv, size_t *recv_len, char *err, size_t el)
{
    dp_rank *me = ctx;
    pthread_mutex_lock(&me->s->mu);
    me->s->sends[me->rank] = send, me->s->slens[me->rank] = len;
    pthread_mutex_unlock(&me->s->mu);
    int rc = dp_collective(ctx, NULL, 0, DP_SHIFT, err, el);
    *recv = rc ? NULL : me->s->recvs[me->rank], *recv_len = rc ? 0 : me->s->rlens[me->rank];
    return rc;
}

static int dp_should_stop(void *ctx)
{
    dp_rank *me = ctx;
    ++me->polls;
    if (me->slow_after_polls && me->polls > me->slow_after_polls) usleep(3000);
    return me->stop_after && me->polls > me->stop_after;
}

static int dp_set_strategy(void *ctx, int strategy)
{
    dp_rank *me = ctx;
    me->strategy_calls++, me->strategy_last = strategy;
    return 0;
}

static void dp_progress(void *ctx, const json_t *m)
{
    dp_rank *me = ctx;
    const char *ev = json_string_value(json_object_get(m, "event"));
    if (ev && !strcmp(ev, "batch_size")) me->events_batch++;
    if (json_object_get(m, "batch_size")) me->last_batch = (long)json_integer_value(json_object_get(m, "batch_size"));
}

static void *dp_thread(void *arg)
{
    dp_rank *me = arg;
    train_hooks hooks = {.should_stop = dp_should_stop,
                         .progress = dp_progress,
                         .set_strategy = dp_set_strategy,
                         .ctx = me,
                         .rank = me->rank,
                         .world = me->s->world,
                         .allreduce = dp_allreduce,
                         .broadcast = dp_broadcast,
                         .handoff = me->handoff,
                         .handoff_len = me->handoff_len,
                         .keep = dp_keep,
                         .started = dp_started,
                         .shift = dp_shift};
    json_t *res = NULL;
    if (json_object_get(me->spec, "search"))
        me->rc = mop_run(me->spec, me->ckpt, &hooks, &res, me->err, sizeof me->err);
    else
        me->rc = train_run(me->spec, me->ckpt, &hooks, &res, me->err, sizeof me->err);
    if (json_object_get(me->spec, "search")) me->result = json_incref(res);
    json_t *m = json_object_get(res, "metrics");
    me->test_loss = json_real_value(json_object_get(m, "test_loss"));
    me->steps = (long)json_integer_value(json_object_get(m, "steps"));
    json_decref(res);
    return NULL;
}

/* runs `world` ranks as prepared in ranks[] (spec, ckpt, hand-off, stop_after) */
static void dp_start(int world, int fail_rank, int fail_after, dp_rank *ranks)
{
    dp_shared s = {.mu = PTHREAD_MUTEX_INITIALIZER,
                   .cv = PTHREAD_COND_INITIALIZER,
                   .world = world,
                   .fail_rank = fail_rank,
                   .fail_after = fail_after};
    pthread_t th[DP_MAX];
    for (int r = 0; r < world; r++) {
        ranks[r].s = &s, ranks[r].rank = r;
        pthread_create(&th[r], NULL, dp_thread, &ranks[r]);
    }
    for (int r = 0; r < world; r++)
        pthread_join(th[r], NULL);
}

static void dp_free(dp_rank *ranks, int world)
{
    for (int r = 0; r < world; r++) {
        free(ranks[r].kept), ranks[r].kept = NULL;
        json_decref(ranks[r].result), ranks[r].result = NULL;
    }
}

/* runs `world` ranks; stop_rank (or -1) votes to stop after stop_after polls */
static void dp_run(const json_t *spec, const char *ckpt, int world, int fail_rank, int fail_after, int stop_rank, int stop_after,
                   dp_rank *ranks)
{
    for (int r = 0; r < world; r++)
        ranks[r] = (dp_rank){.spec = spec, .ckpt = ckpt, .stop_after = r == stop_rank ? stop_after : 0};
    dp_start(world, fail_rank, fail_after, ranks);
    dp_free(ranks, world);
}

#define MLP_NODROP "[{'type':'dense','units':16},{'type':'relu'},{'type':'dense','units':2}]"

static void test_train_data_parallel(void **state)
{
    (void)state;
    json_t *spec = blob_spec(MLP_NODROP, ",'steps':40,'eval_every_steps':10");
    dp_rank one[1], many[DP_MAX];
    unlink(tmp("dp1.ckpt"));
    dp_run(spec, tmp("dp1.ckpt"), 1, -1, 0, -1, 0, one);
    assert_int_equal(one[0].rc, 0);
    for (int world = 2; world <= 4; world++) {
        unlink(tmp("dpw.ckpt"));
        dp_run(spec, tmp("dpw.ckpt"), world, -1, 0, -1, 0, many);
        for (int r = 0; r < world; r++) {
            if (many[r].rc != 0) fail_msg("world %d rank %d: %s", world, r, many[r].err);
            assert_int_equal(many[r].steps, 40);
            /* every rank holds the same model, bit for bit */
            assert_true(many[r].test_loss == many[0].test_loss);
        }
        /* the same global batches: the single-process result up to float summation order */
        assert_true(fabs(many[0].test_loss - one[0].test_loss) < 1e-3 * fabs(one[0].test_loss));
    }
    json_decref(spec);
}

static void test_train_dp_peer_lost_and_stop(void **state)
{
    (void)state;
    json_t *spec = blob_spec(MLP_NODROP, ",'steps':40,'checkpoint_every_steps':5");
    dp_rank ranks[DP_MAX], again[DP_MAX], full[DP_MAX];
    /* rank 2's all-reduce fails at its 12th call: every rank ends with -2 (retry), none hangs */
    unlink(tmp("dpf.ckpt"));
    dp_run(spec, tmp("dpf.ckpt"), 3, 2, 12, -1, 0, ranks);
    for (int r = 0; r < 3; r++) {
        assert_int_equal(ranks[r].rc, -2);
        assert_non_null(strstr(ranks[r].err, "peer lost"));
    }
    /* uninterrupted two-rank run */
    unlink(tmp("dpa.ckpt"));
    dp_run(spec, tmp("dpa.ckpt"), 2, -1, 0, -1, 0, full);
    assert_int_equal(full[0].rc, 0);
    /* rank 1 alone votes to stop: both stop at the same step, rank 0 checkpoints, a resume finishes identically */
    unlink(tmp("dpb.ckpt"));
    dp_run(spec, tmp("dpb.ckpt"), 2, -1, 0, 1, 17, ranks);
    assert_int_equal(ranks[0].rc, 1);
    assert_int_equal(ranks[1].rc, 1);
    dp_run(spec, tmp("dpb.ckpt"), 2, -1, 0, -1, 0, again);
    assert_int_equal(again[0].rc, 0);
    assert_int_equal(again[1].rc, 0);
    assert_true(again[0].test_loss == full[0].test_loss);
    json_decref(spec);
}

/* Elastic hand-off: survivors of a lost peer keep the state of their last step
 * (newer than the checkpoint) and the next generation continues from it; ranks
 * without a shared directory get the state by broadcast. */
static void test_train_handoff(void **state)
{
    (void)state;
    json_t *spec = blob_spec(MLP_NODROP, ",'steps':40,'checkpoint_every_steps':5");
    dp_rank lost[DP_MAX], next[DP_MAX], full[DP_MAX], a[DP_MAX], b[DP_MAX];
    /* three ranks; rank 2 is lost after 13 all-reduces (the agreement, then steps 1..12) */
    unlink(tmp("ho.ckpt"));
    for (int r = 0; r < 3; r++)
        lost[r] = (dp_rank){.spec = spec, .ckpt = tmp("ho.ckpt")};
    dp_start(3, 2, 13, lost);
    for (int r = 0; r < 3; r++) {
        assert_int_equal(lost[r].rc, -2);
        assert_non_null(lost[r].kept); /* every rank kept its state */
    }
    assert_int_equal(lost[0].started, 1);
    assert_string_equal(lost[0].info.from, "fresh");
    /* the next generation: rank 0 is a newcomer (no hand-off), rank 1 the survivor that was rank 1 */
    for (int r = 0; r < 2; r++)
        next[r] = (dp_rank){.spec = spec, .ckpt = tmp("ho.ckpt")};
    next[1].handoff = lost[1].kept, next[1].handoff_len = lost[1].kept_len;
    dp_start(2, -1, 0, next);
    for (int r = 0; r < 2; r++)
        if (next[r].rc != 0) fail_msg("rank %d: %s", r, next[r].err);
    assert_string_equal(next[0].info.from, "survivor");
    assert_int_equal(next[0].info.source, 1);
    assert_int_equal(next[0].info.step, 12); /* newer than the checkpoint (step 10) */
    assert_true(next[0].info.bytes > 0);
    assert_int_equal(next[0].steps, 40);
    assert_true(next[0].test_loss == next[1].test_loss);
    dp_free(lost, 3), dp_free(next, 2);

    /* no shared directory: a stopped two-rank run checkpoints on rank 0's directory only; the
     * resumed ranks each have their own directory, and the result is the uninterrupted run's */
    unlink(tmp("hf.ckpt"));
    dp_run(spec, tmp("hf.ckpt"), 2, -1, 0, -1, 0, full);
    unlink(tmp("h0.ckpt")), unlink(tmp("h1.ckpt"));
    for (int r = 0; r < 2; r++)
        a[r] = (dp_rank){.spec = spec, .ckpt = tmp(r ? "h1.ckpt" : "h0.ckpt"), .stop_after = r ? 17 : 0};
    dp_start(2, -1, 0, a);
    assert_int_equal(a[0].rc, 1);
    assert_int_equal(access(tmp("h1.ckpt"), F_OK), -1);
    for (int r = 0; r < 2; r++) /* swap: the new rank 1 holds the checkpoint; no hand-offs */
        b[r] = (dp_rank){.spec = spec, .ckpt = tmp(r ? "h0.ckpt" : "h1.ckpt")};
    dp_start(2, -1, 0, b);
    for (int r = 0; r < 2; r++)
        if (b[r].rc != 0) fail_msg("rank %d: %s", r, b[r].err);
    assert_string_equal(b[0].info.from, "checkpoint");
    assert_int_equal(b[0].info.source, 1);
    assert_true(b[0].test_loss == full[0].test_loss);
    dp_free(a, 2), dp_free(b, 2);
    json_decref(spec);
}

/* ---- adaptation policies ---- */

static double normal(rng_state *r)
{
    return (double)rng_normal(r);
}

/* synthetic gradients with a known noise: per-sample gradient G + N(0, sigma^2 I) in d dimensions,
 * so B_noise = d sigma^2 / |G|^2; w slices of b samples each, as data parallelism sees them */
static void test_gns_estimator(void **state)
{
    (void)state;
    enum { D = 2000, W = 4, B = 16 };
    static double G[D], big[D];
    rng_state r = {5};
    double g2 = 0, sigma = 2.0;
    for (int i = 0; i < D; i++)
        G[i] = 0.05 * normal(&r), g2 += G[i] * G[i];
    double truth = D * sigma * sigma / g2;
    train_gns g;
    train_gns_init(&g, 0.002);
    for (int it = 0; it < 4000; it++) {
        double small_sq = 0, big_sq = 0;
        memset(big, 0, sizeof big);
        for (int w = 0; w < W; w++) {
            double sq = 0;
            for (int i = 0; i < D; i++) {
                double x = G[i] + sigma / sqrt((double)B) * normal(&r); /* a slice mean over B samples */
                sq += x * x, big[i] += x / W;
            }
            small_sq += sq / W;
        }
        for (int i = 0; i < D; i++)
            big_sq += big[i] * big[i];
        train_gns_update(&g, small_sq, B, big_sq, (double)B * W);
    }
    double est = train_gns_value(&g);
    print_message("gradient noise scale: estimated %.1f, true %.1f (%.2f%% off)\n", est, truth, 100 * fabs(est - truth) / truth);
    if (fabs(est - truth) > 0.05 * truth) fail_msg("noise scale %.1f, true %.1f", est, truth);
}

static void test_policies(void **state)
{
    (void)state;
    char field[160], msg[200];
    json_t *spec = J("{'policies':[{'name':'adaptive_batch','min':32,'max':256,'every_steps':10,'warmup_steps':20,"
                     "'scale_lr':'linear'},{'name':'strategy_switch','threshold':0.8,'window_steps':5}]}");
    assert_int_equal(train_policies_validate(spec, field, sizeof field, msg, sizeof msg), 0);
    train_policies *p = train_policies_create(spec);
    assert_non_null(p);
    assert_true(train_policies_max_batch(p, 64) >= 256);
    train_adapt a = {.step = 10, .world = 3, .batch = 64, .gns = 500, .lr_factor = 1};
    train_policies_after_step(p, &a); /* still warming up */
    assert_int_equal(a.new_batch, 0);
    a.step = 30, a.samples_per_s = 0;
    train_policies_after_step(p, &a); /* doubles toward the noise scale, a multiple of the workers */
    assert_int_equal(a.new_batch, 129);
    assert_true(a.lr_factor > 2.0 && a.lr_factor < 2.1);
    assert_string_equal(a.event, "batch_size");
    a = (train_adapt){.step = 40, .world = 1, .batch = 64, .gns = 10, .lr_factor = 1};
    train_policies_after_step(p, &a); /* halves, not below min */
    assert_int_equal(a.new_batch, 32);
    a = (train_adapt){.step = 41, .world = 1, .batch = 256, .gns = 5000, .lr_factor = 1};
    train_policies_after_step(p, &a); /* at max: no change */
    assert_int_equal(a.new_batch, 0);
    /* the strategy switch: a reference window, a window at 90% (no vote), one at 70% (a vote) */
    train_adapt s = {.step = 1, .world = 2, .batch = 64, .lr_factor = 1, .strategy = TRAIN_RING};
    train_policies_before_train(p, &s);
    double sps[15] = {1000, 1000, 1000, 1000, 1000, 900, 900, 900, 900, 900, 700, 700, 700, 700, 700};
    for (int i = 0; i < 15; i++) {
        s.samples_per_s = sps[i], s.vote_switch = false, s.step = 101 + i; /* off the adaptive batch's steps */
        train_policies_after_step(p, &s);
        assert_int_equal(s.vote_switch, i == 14);
    }
    assert_int_equal(train_policies_switch(p, &s), TRAIN_TREE);
    assert_string_equal(s.event, "strategy");
    train_policies_free(p);
    json_decref(spec);
    static const struct {
        const char *spec, *field;
    } bad[] = {
        {"{'policies':{}}", "spec.policies"},
        {"{'policies':[{'name':'nope'}]}", "spec.policies[0].name"},
        {"{'policies':[{'name':'gns','alpha':2}]}", "spec.policies[0].alpha"},
        {"{'policies':[{'name':'adaptive_batch','min':64,'max':32}]}", "spec.policies[0].max"},
        {"{'policies':[{'name':'adaptive_batch','scale_lr':'cube'}]}", "spec.policies[0].scale_lr"},
        {"{'policies':[{'name':'strategy_switch','threshold':1.5}]}", "spec.policies[0].threshold"},
        {"{'policies':[{'name':'gns'},{'name':'gns'}]}", "spec.policies[1].name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        spec = J(bad[i].spec);
        assert_int_equal(train_policies_validate(spec, field, sizeof field, msg, sizeof msg), -1);
        if (strcmp(field, bad[i].field)) fail_msg("case %zu: %s: %s", i, field, msg);
        json_decref(spec);
    }
}

/* Policies in a two-rank run: the adaptive batch moves the global batch toward the noise scale (the
 * same on both ranks; about 1 on this easy problem, so it shrinks) and the run still ends after its
 * epochs; a throughput drop on both ranks makes
 * them vote, together, to switch the all-reduce strategy. */
static void test_policies_in_a_run(void **state)
{
    (void)state;
    json_t *spec = blob_spec(MLP_NODROP, ","
                                         "'epochs':6,'batch_size':32,'progress_every_steps':1,'policies':[{'name':'adaptive_batch',"
                                         "'min':8,'max':128,'every_steps':5,'warmup_steps':10}]");
    dp_rank ranks[DP_MAX];
    for (int r = 0; r < 2; r++)
        ranks[r] = (dp_rank){.spec = spec};
    dp_start(2, -1, 0, ranks);
    for (int r = 0; r < 2; r++)
        if (ranks[r].rc != 0) fail_msg("rank %d: %s", r, ranks[r].err);
    assert_true(ranks[0].test_loss == ranks[1].test_loss);
    assert_true(ranks[0].events_batch >= 1);
    assert_int_equal(ranks[0].last_batch, 8);
    assert_true(ranks[0].steps > 6 * 512 / 32); /* smaller batches: more steps for the same 6 epochs */
    dp_free(ranks, 2);
    json_decref(spec);
    spec = blob_spec(MLP_NODROP, ",'steps':120,'policies':[{'name':'strategy_switch','threshold':0.8,'window_steps':20}]");
    for (int r = 0; r < 2; r++)
        ranks[r] = (dp_rank){.spec = spec, .slow_after_polls = 60};
    dp_start(2, -1, 0, ranks);
    for (int r = 0; r < 2; r++) {
        if (ranks[r].rc != 0) fail_msg("rank %d: %s", r, ranks[r].err);
        assert_true(ranks[r].strategy_calls >= 1);
        assert_int_equal(ranks[r].strategy_calls, ranks[0].strategy_calls); /* together */
    }
    dp_free(ranks, 2);
    json_decref(spec);
}

/* ---- model selection by model hopping ---- */

static void test_mop_schedule(void **state)
{
    (void)state;
    for (int n = 1; n <= 12; n++)
        for (int w = 1; w <= 6; w++) {
            int K = mop_per_worker(n, w), M = K * w, pairs[12][6] = {{0}};
            for (int t = 0; t < M; t++) {
                int on[12] = {0};
                for (int v = 0; v < w; v++) { /* worker v trains the model at its first position */
                    int m = mop_model_at(n, w, t, v * K);
                    if (m < 0) continue;
                    assert_int_equal(on[m]++, 0); /* a model is on one worker at a time */
                    pairs[m][v]++;
                }
                for (int pos = 0; pos < M; pos++) /* a model's next position is the next one */
                    assert_int_equal(mop_model_at(n, w, t + 1, (pos + 1) % M), mop_model_at(n, w, t, pos));
            }
            for (int m = 0; m < n; m++) {
                int order[6], seen[6] = {0};
                assert_int_equal(mop_partition_order(n, w, m, order), w);
                for (int v = 0; v < w; v++) {
                    if (pairs[m][v] != 1) fail_msg("n %d w %d: model %d on partition %d %d times", n, w, m, v, pairs[m][v]);
                    seen[order[v]]++;
                }
                for (int v = 0; v < w; v++)
                    assert_int_equal(seen[v], 1);
            }
            /* the schedule takes no more sub-epochs than needed: max(n, w) rounded up to whole rows */
            assert_true(M >= n && M >= w && M < n + w);
        }
}

static void test_mop_expand(void **state)
{
    (void)state;
    char field[160], msg[200];
    json_t *configs;
    json_t *spec = blob_spec(MLP_NODROP, ",'epochs':1,'search':{'type':'grid','params':{'optimizer.lr':[0.01,0.1],"
                                         "'model.layers.0.units':[4,8,16]}}");
    assert_int_equal(mop_expand(spec, &configs, field, sizeof field, msg, sizeof msg), 0);
    assert_int_equal(json_array_size(configs), 6);
    json_t *c5 = json_object_get(json_array_get(configs, 5), "spec"); /* the last parameter varies fastest */
    assert_true(json_real_value(json_object_get(json_object_get(c5, "optimizer"), "lr")) == 0.1);
    assert_int_equal(
        json_integer_value(json_object_get(json_array_get(json_object_get(json_object_get(c5, "model"), "layers"), 0), "units")),
        16);
    assert_null(json_object_get(c5, "search"));
    json_decref(configs), json_decref(spec);
    spec = blob_spec(MLP_NODROP, ",'epochs':1,'search':{'type':'random','configurations':20,'seed':4,"
                                 "'params':{'optimizer.lr':{'min':0.001,'max':0.1,'log':true},'batch_size':{'min':8,'max':64}}}");
    assert_int_equal(mop_expand(spec, &configs, field, sizeof field, msg, sizeof msg), 0);
    assert_int_equal(json_array_size(configs), 20);
    for (size_t i = 0; i < 20; i++) {
        json_t *c = json_object_get(json_array_get(configs, i), "spec");
        double lr = json_real_value(json_object_get(json_object_get(c, "optimizer"), "lr"));
        json_int_t b = json_integer_value(json_object_get(c, "batch_size"));
        assert_true(lr >= 0.001 && lr <= 0.1 && b >= 8 && b <= 64);
    }
    json_decref(configs), json_decref(spec);
    static const struct {
        const char *search, *field, *needle;
    } bad[] = {
        {"{'type':'grid','params':{'optimizer.nope.lr':[1]}}", "spec.search.params.optimizer.nope.lr", "names no field"},
        {"{'type':'grid','params':{'optimizer.lr':[0.1,-1]}}", "spec.search.params", "configuration 1"},
        {"{'type':'grid','params':{'optimizer.lr':{'min':1,'max':2}}}", "spec.search.params.optimizer.lr", "list"},
        {"{'type':'random','params':{'optimizer.lr':[1]}}", "spec.search.configurations", "random"},
        {"{'type':'bayes','params':{}}", "spec.search.type", "grid"},
        {"{'type':'grid','params':{'seed':[1]},'early_stop':{'after_epochs':1,'keep':1}}", "spec.search.early_stop.keep",
         "fraction"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char extra[512];
        snprintf(extra, sizeof extra, ",'epochs':1,'search':%s", bad[i].search);
        spec = blob_spec(MLP_NODROP, extra);
        assert_int_equal(train_spec_validate(spec, field, sizeof field, msg, sizeof msg), -1);
        if (strcmp(field, bad[i].field) || !strstr(msg, bad[i].needle)) fail_msg("case %zu: %s: %s", i, field, msg);
        json_decref(spec);
    }
}

/* Model hopping on 1, 2 and 3 workers gives every configuration exactly what training it alone in
 * the same data order gives (bit for bit); early stopping halves the running configurations after
 * every epoch from the first. */
static void test_mop_equals_alone(void **state)
{
    (void)state;
    json_t *spec =
        blob_spec("[{'type':'dense','units':8},{'type':'relu'},{'type':'dropout','rate':0.2},{'type':'dense','units':2}]",
                  ",'epochs':2,'search':{'type':'grid','params':{'optimizer.lr':[0.01,0.05,0.2],'batch_size':[16,32]}},"
                  "'optimizer':{'type':'adam','lr':0.01}");
    for (int world = 1; world <= 3; world++) {
        dp_rank ranks[DP_MAX];
        for (int r = 0; r < world; r++)
            ranks[r] = (dp_rank){.spec = spec, .ckpt = tmp("mop.model")};
        unlink(tmp("mop.model"));
        dp_start(world, -1, 0, ranks);
        for (int r = 0; r < world; r++)
            if (ranks[r].rc != 0) fail_msg("world %d rank %d: %s", world, r, ranks[r].err);
        json_t *rows = json_object_get(ranks[0].result, "configurations");
        assert_int_equal(json_array_size(rows), 6);
        for (int c = 0; c < 6; c++) {
            json_t *alone;
            char err[256];
            assert_int_equal(mop_alone(spec, world, c, &alone, err, sizeof err), 0);
            json_t *row = json_array_get(rows, (size_t)c);
            double a = json_real_value(json_object_get(alone, "test_loss")), m = json_real_value(json_object_get(row, "test_loss"));
            if (a != m) fail_msg("world %d configuration %d: test loss %.9g alone, %.9g hopping", world, c, a, m);
            assert_true(json_real_value(json_object_get(row, "epochs")) == 2);
            json_decref(alone);
        }
        int best = (int)json_integer_value(json_object_get(json_object_get(ranks[0].result, "metrics"), "best"));
        assert_true(best >= 0 && best < 6);
        assert_int_equal(access(tmp("mop.model"), F_OK), 0); /* the best model, written by rank 0 */
        dp_free(ranks, world);
    }
    json_decref(spec);
    spec = blob_spec(MLP_NODROP, ",'epochs':3,'search':{'type':'grid','params':{'optimizer.lr':[0.001,0.01,0.05,0.1]},"
                                 "'early_stop':{'after_epochs':1,'keep':0.5}}");
    dp_rank ranks[DP_MAX];
    for (int r = 0; r < 2; r++)
        ranks[r] = (dp_rank){.spec = spec, .ckpt = NULL};
    dp_start(2, -1, 0, ranks);
    assert_int_equal(ranks[0].rc, 0);
    json_t *rows = json_object_get(ranks[0].result, "configurations");
    int at[4] = {0}; /* successive halving: 4 run epoch 1, 2 run epoch 2, 1 runs epoch 3 */
    for (size_t i = 0; i < 4; i++) {
        json_t *row = json_array_get(rows, i), *st = json_object_get(row, "stopped");
        double ep = json_real_value(json_object_get(row, "epochs"));
        int when = json_is_integer(st) ? (int)json_integer_value(st) : 3;
        assert_true(when >= 1 && when <= 3 && ep == when);
        at[when]++;
    }
    assert_int_equal(at[1], 2);
    assert_int_equal(at[2], 1);
    assert_int_equal(at[3], 1);
    dp_free(ranks, 2);
    json_decref(spec);
}

/* The data state of elastic training (Tenplex's idea): (seed, epoch, samples consumed, global batch)
 * decides every sample's place; the world may change at any step.  Property: over random sequences
 * of resizes every sample is used exactly once per epoch, every step takes one global batch (the last
 * of an epoch may be short), and the ranks' slices of a step partition it. */
static void test_data_state_under_resizes(void **state)
{
    (void)state;
    rng_state r = {99};
    for (int trial = 0; trial < 200; trial++) {
        size_t n = 1 + rng_below(&r, 300), batch = 1 + rng_below(&r, 40);
        size_t *order = malloc(sizeof(size_t) * n);
        int *seen = calloc(n, sizeof(int));
        uint64_t seed = rng_below(&r, 1000);
        for (uint64_t epoch = 0; epoch < 3; epoch++) {
            train_shuffle(order, n, seed, epoch);
            memset(seen, 0, sizeof(int) * n);
            size_t pos = 0; /* the data state: samples of the epoch consumed */
            int world = 1 + (int)rng_below(&r, 8);
            while (pos < n) {
                if (rng_below(&r, 4) == 0) world = 1 + (int)rng_below(&r, 8); /* a resize */
                size_t len = n - pos < batch ? n - pos : batch, covered = 0;
                if (len < batch) assert_true(pos + len == n); /* only the epoch's last batch is short */
                for (int rank = 0; rank < world; rank++) {
                    size_t b, e;
                    train_shard(len, rank, world, &b, &e);
                    assert_true(b <= e && e <= len);
                    assert_int_equal(b, covered); /* slices in rank order, no gap, no overlap */
                    covered = e;
                    for (size_t i = b; i < e; i++)
                        seen[order[pos + i]]++;
                }
                assert_int_equal(covered, len);
                pos += len;
            }
            for (size_t i = 0; i < n; i++)
                if (seen[i] != 1) fail_msg("trial %d epoch %d: sample %zu used %d times", trial, (int)epoch, i, seen[i]);
        }
        free(order);
        free(seen);
    }
}

static int cleanup(void **state)
{
    (void)state;
    if (tmpdir[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) return -1;
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_dense),
        cmocka_unit_test(test_grad_relu),
        cmocka_unit_test(test_grad_conv),
        cmocka_unit_test(test_grad_maxpool_flatten),
        cmocka_unit_test(test_grad_model),
        cmocka_unit_test(test_softmax_ce),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_init_deterministic),
        cmocka_unit_test(test_optimizers),
        cmocka_unit_test(test_schedules),
        cmocka_unit_test(test_idx_reader),
        cmocka_unit_test(test_idx_malformed),
        cmocka_unit_test(test_csv_reader),
        cmocka_unit_test(test_shuffle_shard),
        cmocka_unit_test(test_ckpt_roundtrip),
        cmocka_unit_test(test_ckpt_corrupt),
        cmocka_unit_test(test_spec_validate),
        cmocka_unit_test(test_train_reduces_loss),
        cmocka_unit_test(test_train_stop_resume),
        cmocka_unit_test(test_train_errors),
        cmocka_unit_test(test_train_data_parallel),
        cmocka_unit_test(test_train_dp_peer_lost_and_stop),
        cmocka_unit_test(test_train_handoff),
        cmocka_unit_test(test_gns_estimator),
        cmocka_unit_test(test_policies),
        cmocka_unit_test(test_policies_in_a_run),
        cmocka_unit_test(test_mop_schedule),
        cmocka_unit_test(test_mop_expand),
        cmocka_unit_test(test_mop_equals_alone),
        cmocka_unit_test(test_data_state_under_resizes),
    };
    return cmocka_run_group_tests(tests, NULL, cleanup);
}
