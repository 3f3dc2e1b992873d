/* model.c - architecture JSON: validation with field-named errors, shape
 * inference, building a model (He-normal weights, zero biases, drawn from
 * the seed in layer order) and the sequential forward/backward passes. */
#include "workers/train/model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LAYERS 64
#define MAX_DIM 100000

static int bad(char *field, size_t field_len, char *msg, size_t msg_len, const char *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(field, field_len, fmt, ap);
    va_end(ap);
    snprintf(msg, msg_len, "%s", m);
    return -1;
}

/* ---- the shape (common/schema.h): validation, defaults and the API document ---- */

static const char *const dense_v[] = {"dense", NULL}, *const relu_v[] = {"relu", NULL}, *const dropout_v[] = {"dropout", NULL},
                         *const conv_v[] = {"conv2d", NULL}, *const pool_v[] = {"maxpool", NULL},
                         *const flatten_v[] = {"flatten", NULL};
static const sch dense_t = {SCH_STR, .values = dense_v}, relu_t = {SCH_STR, .values = relu_v},
                 dropout_t = {SCH_STR, .values = dropout_v}, conv_t = {SCH_STR, .values = conv_v},
                 pool_t = {SCH_STR, .values = pool_v}, flatten_t = {SCH_STR, .values = flatten_v};
static const sch units_s = {SCH_INT, SCH_IN(1, MAX_DIM), .desc = "outputs"};
static const sch rate_s = {SCH_NUM, SCH_IN_HI_OPEN(0, 1), .desc = "the share of activations dropped in training"};
static const sch filters_s = {SCH_INT, SCH_IN(1, 4096)};
static const sch kernel_s = {SCH_INT, SCH_IN(1, 64), .desc = "the square kernel's side; at most the padded input's"};
static const sch stride_s = {SCH_INT, SCH_IN(1, 64), .dflt = "1"};
static const sch padding_s = {SCH_INT, SCH_IN(0, 64), .dflt = "0"};
static const sch size_s = {SCH_INT, SCH_IN(1, 64), .dflt = "2", .desc = "the square window's side (and stride)"};
static const sch_member dense_m[] = {{"type", &dense_t, 1}, {"units", &units_s, 1}, {0}};
static const sch_member relu_m[] = {{"type", &relu_t, 1}, {0}};
static const sch_member dropout_m[] = {{"type", &dropout_t, 1}, {"rate", &rate_s, 1}, {0}};
static const sch_member conv_m[] = {{"type", &conv_t, 1},     {"filters", &filters_s, 1}, {"kernel", &kernel_s, 1},
                                    {"stride", &stride_s, 0}, {"padding", &padding_s, 0}, {0}};
static const sch_member pool_m[] = {{"type", &pool_t, 1}, {"size", &size_s, 0}, {0}};
static const sch_member flatten_m[] = {{"type", &flatten_t, 1}, {0}};
static const sch dense_s = {SCH_OBJECT, .members = dense_m, .desc = "fully connected (flattens its input)"};
static const sch relu_s = {SCH_OBJECT, .members = relu_m};
static const sch dropout_s = {SCH_OBJECT, .members = dropout_m};
static const sch conv_s = {SCH_OBJECT, .members = conv_m, .desc = "2-D convolution"};
static const sch pool_s = {SCH_OBJECT, .members = pool_m, .desc = "max pooling"};
static const sch flatten_s = {SCH_OBJECT, .members = flatten_m};
static const sch *const layer_alts[] = {&dense_s, &relu_s, &dropout_s, &conv_s, &pool_s, &flatten_s, NULL};
static const sch layer_s = {SCH_ONEOF, .alts = layer_alts, .tag = "type"};
static const sch dim_s = {SCH_INT, SCH_IN(1, 65536)};
static const sch input_s = {SCH_ARRAY, SCH_IN(3, 3), .items = &dim_s, .desc = "[channels, height, width] of one sample",
                            .msg = "must be [channels, height, width]"};
static const sch layers_s = {SCH_ARRAY, SCH_IN(1, MAX_LAYERS), .items = &layer_s,
                             .desc = "in order; the last one's outputs are the class logits"};
static const sch_member arch_m[] = {{"input", &input_s, 1}, {"layers", &layers_s, 1}, {0}};
const sch train_arch_shape = {SCH_OBJECT, .members = arch_m,
                              .desc = "A sequential model. Beyond the shape: at least one dense or conv2d layer, at least 2 "
                                      "outputs, kernels and windows no larger than their input, at most 1e9 weights in a dense "
                                      "layer and 1e8 values in any layer's output."};

/* a member the shape has checked, or its default */
static long get_int(const sch *shape, const json_t *o, const char *key)
{
    return (long)sch_number(shape, o, key, 0);
}

typedef struct {
    int c, h, w;
} shape3;

/* infers layer i's output shape (L fits layer_s) and checks it fits */
static int layer_check(const json_t *L, int i, shape3 *s, const char *prefix, char *field, size_t fl, char *msg, size_t ml)
{
    const char *type = json_string_value(json_object_get(L, "type"));
    if (!strcmp(type, "dense")) {
        long v = get_int(&dense_s, L, "units");
        if ((double)s->c * s->h * s->w * v > 1e9)
            return bad(field, fl, msg, ml, "too many weights (more than 1e9)", "%s.layers[%d].units", prefix, i);
        *s = (shape3){(int)v, 1, 1};
    } else if (!strcmp(type, "flatten")) {
        *s = (shape3){s->c * s->h * s->w, 1, 1};
    } else if (!strcmp(type, "conv2d")) {
        long v = get_int(&conv_s, L, "filters"), k = get_int(&conv_s, L, "kernel"), st = get_int(&conv_s, L, "stride"),
             pad = get_int(&conv_s, L, "padding");
        long oh = (s->h + 2 * pad - k) / st + 1, ow = (s->w + 2 * pad - k) / st + 1;
        if (s->h + 2 * pad < k || s->w + 2 * pad < k || oh < 1 || ow < 1)
            return bad(field, fl, msg, ml, "is larger than the padded input", "%s.layers[%d].kernel", prefix, i);
        *s = (shape3){(int)v, (int)oh, (int)ow};
    } else if (!strcmp(type, "maxpool")) {
        long v = get_int(&pool_s, L, "size");
        if (s->h < v || s->w < v) return bad(field, fl, msg, ml, "is larger than the input", "%s.layers[%d].size", prefix, i);
        *s = (shape3){s->c, s->h / (int)v, s->w / (int)v};
    } /* relu and dropout keep the shape */
    return 0;
}

int train_arch_validate(const json_t *arch, const char *prefix, char *field, size_t fl, char *msg, size_t ml)
{
    if (sch_check(&train_arch_shape, arch, prefix, field, fl, msg, ml)) return -1;
    json_t *in = json_object_get(arch, "input");
    long d[3];
    for (int i = 0; i < 3; i++)
        d[i] = (long)json_integer_value(json_array_get(in, i));
    if ((double)d[0] * d[1] * d[2] > 1e8) return bad(field, fl, msg, ml, "input too large", "%s.input", prefix);
    json_t *layers = json_object_get(arch, "layers");
    shape3 s = {(int)d[0], (int)d[1], (int)d[2]};
    int nparam = 0;
    for (size_t i = 0; i < json_array_size(layers); i++) {
        json_t *L = json_array_get(layers, i);
        if (layer_check(L, (int)i, &s, prefix, field, fl, msg, ml)) return -1;
        const char *t = json_string_value(json_object_get(L, "type"));
        nparam += (!strcmp(t, "dense") || !strcmp(t, "conv2d")) ? 2 : 0;
        if ((double)s.c * s.h * s.w > 1e8) return bad(field, fl, msg, ml, "output too large", "%s.layers[%zu]", prefix, i);
    }
    if (nparam == 0) return bad(field, fl, msg, ml, "needs at least one dense or conv2d layer", "%s.layers", prefix);
    if (s.c * s.h * s.w < 2) return bad(field, fl, msg, ml, "the last layer must output at least 2 classes", "%s.layers", prefix);
    return 0;
}

static int param_init(train_model *m, train_param *p, int ndim, const int *dims)
{
    p->ndim = ndim;
    p->n = 1;
    for (int i = 0; i < ndim; i++) {
        p->dims[i] = dims[i];
        p->n *= (size_t)dims[i];
    }
    p->w = m->be->alloc(p->n);
    p->g = m->be->alloc(p->n);
    m->params[m->nparams++] = p;
    return p->w && p->g ? 0 : -1;
}

static void he_normal(train_param *p, int fan_in, train_rng *r)
{
    float sd = sqrtf(2.0f / (float)fan_in);
    for (size_t i = 0; i < p->n; i++)
        p->w[i] = sd * train_rng_normal(r);
}

static int layer_build(train_model *m, train_layer *l, const json_t *L, train_rng *init)
{
    const char *type = json_string_value(json_object_get(L, "type"));
    size_t in = (size_t)l->in_c * l->in_h * l->in_w;
    l->out_c = l->in_c, l->out_h = l->in_h, l->out_w = l->in_w;
    const train_backend *be = m->be;
    if (!strcmp(type, "dense")) {
        l->type = TRAIN_DENSE;
        l->units = (int)get_int(&dense_s, L, "units");
        l->out_c = l->units, l->out_h = 1, l->out_w = 1;
        if (param_init(m, &l->W, 2, (int[]){l->units, (int)in}) || param_init(m, &l->b, 1, (int[]){l->units})) return -1;
        he_normal(&l->W, (int)in, init);
    } else if (!strcmp(type, "relu")) {
        l->type = TRAIN_RELU;
    } else if (!strcmp(type, "dropout")) {
        l->type = TRAIN_DROPOUT;
        l->rate = (float)json_number_value(json_object_get(L, "rate"));
        if (!(l->mask = be->alloc((size_t)m->cap * in))) return -1;
    } else if (!strcmp(type, "conv2d")) {
        l->type = TRAIN_CONV2D;
        l->filters = (int)get_int(&conv_s, L, "filters"), l->kernel = (int)get_int(&conv_s, L, "kernel");
        l->stride = (int)get_int(&conv_s, L, "stride"), l->pad = (int)get_int(&conv_s, L, "padding");
        l->out_c = l->filters;
        l->out_h = (l->in_h + 2 * l->pad - l->kernel) / l->stride + 1;
        l->out_w = (l->in_w + 2 * l->pad - l->kernel) / l->stride + 1;
        int ckk = l->in_c * l->kernel * l->kernel;
        if (param_init(m, &l->W, 4, (int[]){l->filters, l->in_c, l->kernel, l->kernel}) ||
            param_init(m, &l->b, 1, (int[]){l->filters}))
            return -1;
        he_normal(&l->W, ckk, init);
        if (!(l->col = be->alloc((size_t)m->cap * ckk * l->out_h * l->out_w))) return -1;
    } else if (!strcmp(type, "maxpool")) {
        l->type = TRAIN_MAXPOOL;
        l->size = (int)get_int(&pool_s, L, "size");
        l->out_h = l->in_h / l->size, l->out_w = l->in_w / l->size;
        size_t out = (size_t)l->out_c * l->out_h * l->out_w;
        if (!(l->arg = (int32_t *)be->alloc((size_t)m->cap * out))) return -1; /* int32 and float have one size */
    } else {
        l->type = TRAIN_FLATTEN;
        l->out_c = (int)in, l->out_h = 1, l->out_w = 1;
    }
    size_t out = (size_t)l->out_c * l->out_h * l->out_w;
    if (l->type != TRAIN_FLATTEN) {
        l->y = be->alloc((size_t)m->cap * out);
        l->dx = be->alloc((size_t)m->cap * in);
        if (!l->y || !l->dx) return -1;
    }
    return 0;
}

train_model *train_model_create(const json_t *arch, const train_backend *be, uint64_t seed, int cap, char *err, size_t err_len)
{
    char field[128], msg[128];
    if (train_arch_validate(arch, "model", field, sizeof field, msg, sizeof msg)) {
        snprintf(err, err_len, "%s: %s", field, msg);
        return NULL;
    }
    train_model *m = calloc(1, sizeof *m);
    if (!m) goto oom;
    m->be = be ? be : train_backend_cpu();
    m->arch = json_deep_copy(arch);
    m->cap = cap < 1 ? 1 : cap;
    json_t *in = json_object_get(arch, "input");
    m->in_c = (int)json_integer_value(json_array_get(in, 0));
    m->in_h = (int)json_integer_value(json_array_get(in, 1));
    m->in_w = (int)json_integer_value(json_array_get(in, 2));
    json_t *layers = json_object_get(arch, "layers");
    m->nlayers = (int)json_array_size(layers);
    m->layers = calloc((size_t)m->nlayers, sizeof *m->layers);
    if (!m->arch || !m->layers) goto oom;
    train_rng init;
    train_rng_seed(&init, train_rng_mix(seed, 1, 0));
    train_rng_seed(&m->rng, train_rng_mix(seed, 2, 0));
    int c = m->in_c, h = m->in_h, w = m->in_w;
    for (int i = 0; i < m->nlayers; i++) {
        train_layer *l = &m->layers[i];
        l->in_c = c, l->in_h = h, l->in_w = w;
        if (layer_build(m, l, json_array_get(layers, i), &init)) goto oom;
        c = l->out_c, h = l->out_h, w = l->out_w;
    }
    return m;
oom:
    snprintf(err, err_len, "out of memory building the model");
    train_model_free(m);
    return NULL;
}

void train_model_free(train_model *m)
{
    if (!m) return;
    for (int i = 0; m->layers && i < m->nlayers; i++) {
        train_layer *l = &m->layers[i];
        m->be->free(l->W.w), m->be->free(l->W.g), m->be->free(l->b.w), m->be->free(l->b.g);
        m->be->free(l->y), m->be->free(l->dx), m->be->free(l->col), m->be->free(l->mask);
        if (l->arg) m->be->free(l->arg);
    }
    free(m->layers);
    json_decref(m->arch);
    free(m);
}

size_t train_model_in_size(const train_model *m)
{
    return (size_t)m->in_c * m->in_h * m->in_w;
}

size_t train_model_out_size(const train_model *m)
{
    const train_layer *l = &m->layers[m->nlayers - 1];
    return (size_t)l->out_c * l->out_h * l->out_w;
}

size_t train_model_param_count(const train_model *m)
{
    size_t n = 0;
    for (int i = 0; i < m->nparams; i++)
        n += m->params[i]->n;
    return n;
}

const float *train_model_forward(train_model *m, const float *x, int n, bool training)
{
    for (int i = 0; i < m->nlayers; i++)
        x = train_layer_forward(m, &m->layers[i], x, n, training);
    return x;
}

void train_model_backward(train_model *m, const float *dy, int n)
{
    for (int i = m->nlayers - 1; i >= 0; i--)
        dy = train_layer_backward(m, &m->layers[i], dy, n, i > 0);
}

double train_model_grad(train_model *m, const float *x, const int32_t *y, int n, float *dlogits, int *correct)
{
    const float *logits = train_model_forward(m, x, n, true);
    double loss = m->be->softmax_ce(n, (int)train_model_out_size(m), logits, y, dlogits, correct);
    train_model_backward(m, dlogits, n);
    return loss;
}

void train_model_params_out(const train_model *m, double *v)
{
    size_t o = 0;
    for (int p = 0; p < m->nparams; p++)
        for (size_t i = 0; i < m->params[p]->n; i++)
            v[o++] = m->params[p]->w[i];
}

void train_model_params_in(train_model *m, const double *v)
{
    size_t o = 0;
    for (int p = 0; p < m->nparams; p++)
        for (size_t i = 0; i < m->params[p]->n; i++)
            m->params[p]->w[i] = (float)v[o++];
}
