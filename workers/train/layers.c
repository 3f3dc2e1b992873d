/* layers.c - forward and backward of each layer type, through the backend.
 *
 * Shapes are NCHW per batch.  Dense flattens its input (c*h*w features) and
 * stores W as units x in, so forward is Y = X W^T + b.  Conv2d runs im2col
 * per sample and one gemm per sample (W is filters x (c k k)); the columns of
 * every sample in the batch are kept for the backward pass.  Max-pool uses
 * non-overlapping size x size windows and remembers the argmax.  Dropout is
 * inverted (kept units scaled by 1/(1-rate)) and an identity in evaluation. */
#include "workers/train/model.h"

#include <string.h>

static size_t in_size(const train_layer *l)
{
    return (size_t)l->in_c * l->in_h * l->in_w;
}

static size_t out_size(const train_layer *l)
{
    return (size_t)l->out_c * l->out_h * l->out_w;
}

const float *train_layer_forward(train_model *m, train_layer *l, const float *x, int n, bool training)
{
    const train_backend *be = m->be;
    size_t in = in_size(l), out = out_size(l);
    l->x = x;
    switch (l->type) {
    case TRAIN_DENSE:
        be->gemm(false, true, n, l->units, (int)in, 1.0f, x, (int)in, l->W.w, (int)in, 0.0f, l->y, l->units);
        be->add_rows(n, l->units, l->b.w, l->y);
        return l->y;
    case TRAIN_RELU:
        be->relu_fwd((size_t)n * in, x, l->y);
        return l->y;
    case TRAIN_DROPOUT:
        l->dropped = training && l->rate > 0;
        if (!l->dropped) return x;
        {
            float keep = 1.0f - l->rate, scale = 1.0f / keep;
            for (size_t i = 0; i < (size_t)n * in; i++)
                l->mask[i] = rng_uniform(&m->rng) < keep ? scale : 0.0f;
        }
        be->mul((size_t)n * in, x, l->mask, l->y);
        return l->y;
    case TRAIN_CONV2D: {
        int ckk = l->in_c * l->kernel * l->kernel, ohw = l->out_h * l->out_w;
        for (int i = 0; i < n; i++) {
            float *col = l->col + (size_t)i * ckk * ohw;
            be->im2col(x + (size_t)i * in, l->in_c, l->in_h, l->in_w, l->kernel, l->stride, l->pad, l->out_h, l->out_w, col);
            be->gemm(false, false, l->filters, ohw, ckk, 1.0f, l->W.w, ckk, col, ohw, 0.0f, l->y + (size_t)i * out, ohw);
        }
        be->add_planes(n, l->filters, ohw, l->b.w, l->y);
        return l->y;
    }
    case TRAIN_MAXPOOL:
        be->maxpool_fwd(x, n * l->in_c, l->in_h, l->in_w, l->size, l->out_h, l->out_w, l->y, l->arg);
        return l->y;
    case TRAIN_FLATTEN:
        return x;
    }
    return x;
}

const float *train_layer_backward(train_model *m, train_layer *l, const float *dy, int n, bool need_dx)
{
    const train_backend *be = m->be;
    size_t in = in_size(l), out = out_size(l);
    switch (l->type) {
    case TRAIN_DENSE:
        /* dW = dY^T X, db = column sums of dY, dX = dY W */
        be->gemm(true, false, l->units, (int)in, n, 1.0f, dy, l->units, l->x, (int)in, 0.0f, l->W.g, (int)in);
        be->sum_rows(n, l->units, dy, l->b.g);
        if (need_dx) be->gemm(false, false, n, (int)in, l->units, 1.0f, dy, l->units, l->W.w, (int)in, 0.0f, l->dx, (int)in);
        return l->dx;
    case TRAIN_RELU:
        be->relu_bwd((size_t)n * in, l->x, dy, l->dx);
        return l->dx;
    case TRAIN_DROPOUT:
        if (!l->dropped) return dy;
        be->mul((size_t)n * in, dy, l->mask, l->dx);
        return l->dx;
    case TRAIN_CONV2D: {
        int ckk = l->in_c * l->kernel * l->kernel, ohw = l->out_h * l->out_w;
        be->fill(l->W.n, 0.0f, l->W.g);
        be->sum_planes(n, l->filters, ohw, dy, l->b.g);
        if (need_dx) be->fill((size_t)n * in, 0.0f, l->dx);
        for (int i = 0; i < n; i++) {
            const float *dyi = dy + (size_t)i * out;
            float *col = l->col + (size_t)i * ckk * ohw;
            /* dW += dY_i col_i^T */
            be->gemm(false, true, l->filters, ckk, ohw, 1.0f, dyi, ohw, col, ohw, 1.0f, l->W.g, ckk);
            if (!need_dx) continue;
            /* dcol = W^T dY_i, reusing col (no longer needed for this sample) */
            be->gemm(true, false, ckk, ohw, l->filters, 1.0f, l->W.w, ckk, dyi, ohw, 0.0f, col, ohw);
            be->col2im(col, l->in_c, l->in_h, l->in_w, l->kernel, l->stride, l->pad, l->out_h, l->out_w, l->dx + (size_t)i * in);
        }
        return l->dx;
    }
    case TRAIN_MAXPOOL:
        be->fill((size_t)n * in, 0.0f, l->dx);
        be->maxpool_bwd(dy, l->arg, (size_t)n * out, l->dx);
        return l->dx;
    case TRAIN_FLATTEN:
        return dy;
    }
    return dy;
}
