/* model.c - building a model from architecture JSON (validated by spec/train_spec_model.c: He-normal
 * weights, zero biases, drawn from the seed in layer order) and the sequential forward/backward
 * passes. */
#include "workers/train/model.h"

#include "common/alloc.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a member of a layer the architecture's validation has passed, or its shape's default */
static long get_int(const sch *shape, const json_t *o, const char *key)
{
    return (long)sch_number(shape, o, key, 0);
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

static void he_normal(train_param *p, int fan_in, rng_state *r)
{
    float sd = sqrtf(2.0f / (float)fan_in);
    for (size_t i = 0; i < p->n; i++)
        p->w[i] = sd * rng_normal(r);
}

static int layer_build(train_model *m, train_layer *l, const json_t *L, rng_state *init)
{
    const char *type = json_string_value(json_object_get(L, "type"));
    size_t in = (size_t)l->in_c * l->in_h * l->in_w;
    l->out_c = l->in_c, l->out_h = l->in_h, l->out_w = l->in_w;
    const train_backend *be = m->be;
    if (!strcmp(type, "dense")) {
        l->type = TRAIN_DENSE;
        l->units = (int)get_int(&train_dense_shape, L, "units");
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
        l->filters = (int)get_int(&train_conv2d_shape, L, "filters"), l->kernel = (int)get_int(&train_conv2d_shape, L, "kernel");
        l->stride = (int)get_int(&train_conv2d_shape, L, "stride"), l->pad = (int)get_int(&train_conv2d_shape, L, "padding");
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
        l->size = (int)get_int(&train_maxpool_shape, L, "size");
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
    train_model *m = xcalloc(1, sizeof *m);
    m->be = be ? be : train_backend_cpu();
    m->arch = json_deep_copy(arch);
    m->cap = cap < 1 ? 1 : cap;
    json_t *in = json_object_get(arch, "input");
    m->in_c = (int)json_integer_value(json_array_get(in, 0));
    m->in_h = (int)json_integer_value(json_array_get(in, 1));
    m->in_w = (int)json_integer_value(json_array_get(in, 2));
    json_t *layers = json_object_get(arch, "layers");
    m->nlayers = (int)json_array_size(layers);
    m->layers = xcalloc((size_t)m->nlayers, sizeof *m->layers);
    rng_state init;
    rng_seed(&init, rng_mix(seed, 1, 0));
    rng_seed(&m->rng, rng_mix(seed, 2, 0));
    int c = m->in_c, h = m->in_h, w = m->in_w;
    for (int i = 0; i < m->nlayers; i++) {
        train_layer *l = &m->layers[i];
        l->in_c = c, l->in_h = h, l->in_w = w;
        if (layer_build(m, l, json_array_get(layers, i), &init)) goto oom; /* the backend's memory (a GPU's) */
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
