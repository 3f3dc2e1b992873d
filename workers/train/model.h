/* model.h - layers and a sequential model built from architecture JSON.
 *
 * Architecture: {"input":[c,h,w], "layers":[{"type":"dense","units":128},
 * {"type":"relu"}, {"type":"dropout","rate":0.1}, {"type":"conv2d","filters":8,
 * "kernel":3,"stride":1,"padding":1}, {"type":"maxpool","size":2},
 * {"type":"flatten"}]}.  The last layer's output is the logits; the loss
 * (softmax cross-entropy) is applied by the caller.  A model owns its
 * parameters, gradients and per-batch activations, sized for up to `cap`
 * samples per forward pass.  Gradients are overwritten (not accumulated) by
 * each backward pass. */
#ifndef GANTRY_TRAIN_MODEL_H
#define GANTRY_TRAIN_MODEL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "workers/train/backend.h"
#include "common/rng.h"
#include "spec/train_spec.h"

typedef enum { TRAIN_DENSE, TRAIN_RELU, TRAIN_DROPOUT, TRAIN_CONV2D, TRAIN_MAXPOOL, TRAIN_FLATTEN } train_layer_type;

/* one parameter tensor and its gradient */
typedef struct {
    float *w, *g;
    size_t n;
    int ndim;
    int dims[4];
} train_param;

typedef struct {
    train_layer_type type;
    int in_c, in_h, in_w;    /* per-sample input shape */
    int out_c, out_h, out_w; /* per-sample output shape */
    int units, filters, kernel, stride, pad, size;
    float rate;
    train_param W, b;
    float *y, *dx, *col, *mask;
    int32_t *arg;
    const float *x; /* input of the last forward pass */
    bool dropped;   /* dropout applied on the last forward pass */
} train_layer;

typedef struct train_model {
    const train_backend *be;
    json_t *arch; /* own reference */
    int in_c, in_h, in_w;
    int nlayers;
    train_layer *layers;
    int cap;
    int nparams;
    train_param *params[128]; /* pointers into layers */
    rng_state rng;            /* dropout masks */
} train_model;

/* the architecture's shape and validation: spec/train_spec.h (spec/train_spec_model.c) */

/* NULL with err on an invalid architecture or out of memory */
train_model *train_model_create(const json_t *arch, const train_backend *be, uint64_t seed, int cap, char *err, size_t err_len);
void train_model_free(train_model *m);

size_t train_model_in_size(const train_model *m);  /* floats per input sample */
size_t train_model_out_size(const train_model *m); /* logits per sample */
size_t train_model_param_count(const train_model *m);

/* x: n x in_size (n <= cap); returns n x out_size logits owned by the model */
const float *train_model_forward(train_model *m, const float *x, int n, bool training);
/* dy: n x out_size, gradient of the loss w.r.t. the logits; fills every param's g */
void train_model_backward(train_model *m, const float *dy, int n);

/* forward (training mode), softmax cross-entropy against y, backward: every
 * param's g holds the batch's mean gradient.  dlogits: n x out_size scratch.
 * Returns the mean loss; *correct the argmax hits. */
double train_model_grad(train_model *m, const float *x, const int32_t *y, int n, float *dlogits, int *correct);

/* all parameters as one vector of train_model_param_count doubles (federated averaging works on them) */
void train_model_params_out(const train_model *m, double *v);
void train_model_params_in(train_model *m, const double *v);

/* layer-level entry points (used by the model and by the gradient checks) */
const float *train_layer_forward(train_model *m, train_layer *l, const float *x, int n, bool training);
const float *train_layer_backward(train_model *m, train_layer *l, const float *dy, int n, bool need_dx);

#endif
