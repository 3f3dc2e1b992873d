/* train_spec_model.c - the model's architecture in a training spec ("model"): its shape and the rules
 * the shape cannot say (output sizes inferred layer by layer: kernels and windows fit their input,
 * sizes bounded).  Part of the jansson-only training spec module (spec.h); model.c builds the
 * model from an architecture this file has passed. */
#include "spec/train_spec.h"

#include "common/fielderr.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_LAYERS 64
#define MAX_DIM 100000

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
const sch train_dense_shape = {SCH_OBJECT, .members = dense_m, .desc = "fully connected (flattens its input)"};
static const sch relu_s = {SCH_OBJECT, .members = relu_m};
static const sch dropout_s = {SCH_OBJECT, .members = dropout_m};
const sch train_conv2d_shape = {SCH_OBJECT, .members = conv_m, .desc = "2-D convolution"};
const sch train_maxpool_shape = {SCH_OBJECT, .members = pool_m, .desc = "max pooling"};
static const sch flatten_s = {SCH_OBJECT, .members = flatten_m};
static const sch *const layer_alts[] = {&train_dense_shape,   &relu_s,    &dropout_s, &train_conv2d_shape,
                                        &train_maxpool_shape, &flatten_s, NULL};
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
    char at[160];
    snprintf(at, sizeof at, "%s.layers[%d]", prefix, i);
    const fielderr e = {at, field, fl, msg, ml};
    const char *type = json_string_value(json_object_get(L, "type"));
    if (!strcmp(type, "dense")) {
        long v = get_int(&train_dense_shape, L, "units");
        if ((double)s->c * s->h * s->w * v > 1e9) return fielderr_fail(&e, ".units", "too many weights (more than 1e9)");
        *s = (shape3){(int)v, 1, 1};
    } else if (!strcmp(type, "flatten")) {
        *s = (shape3){s->c * s->h * s->w, 1, 1};
    } else if (!strcmp(type, "conv2d")) {
        long v = get_int(&train_conv2d_shape, L, "filters"), k = get_int(&train_conv2d_shape, L, "kernel"),
             st = get_int(&train_conv2d_shape, L, "stride"), pad = get_int(&train_conv2d_shape, L, "padding");
        long oh = (s->h + 2 * pad - k) / st + 1, ow = (s->w + 2 * pad - k) / st + 1;
        if (s->h + 2 * pad < k || s->w + 2 * pad < k || oh < 1 || ow < 1)
            return fielderr_fail(&e, ".kernel", "is larger than the padded input");
        *s = (shape3){(int)v, (int)oh, (int)ow};
    } else if (!strcmp(type, "maxpool")) {
        long v = get_int(&train_maxpool_shape, L, "size");
        if (s->h < v || s->w < v) return fielderr_fail(&e, ".size", "is larger than the input");
        *s = (shape3){s->c, s->h / (int)v, s->w / (int)v};
    } /* relu and dropout keep the shape */
    return 0;
}

int train_arch_validate(const json_t *arch, const char *prefix, char *field, size_t fl, char *msg, size_t ml)
{
    if (sch_check(&train_arch_shape, arch, prefix, field, fl, msg, ml)) return -1;
    const fielderr e = {prefix, field, fl, msg, ml};
    json_t *in = json_object_get(arch, "input");
    long d[3];
    for (int i = 0; i < 3; i++)
        d[i] = (long)json_integer_value(json_array_get(in, i));
    if ((double)d[0] * d[1] * d[2] > 1e8) return fielderr_fail(&e, ".input", "input too large");
    json_t *layers = json_object_get(arch, "layers");
    shape3 s = {(int)d[0], (int)d[1], (int)d[2]};
    int nparam = 0;
    for (size_t i = 0; i < json_array_size(layers); i++) {
        json_t *L = json_array_get(layers, i);
        if (layer_check(L, (int)i, &s, prefix, field, fl, msg, ml)) return -1;
        const char *t = json_string_value(json_object_get(L, "type"));
        nparam += (!strcmp(t, "dense") || !strcmp(t, "conv2d")) ? 2 : 0;
        if ((double)s.c * s.h * s.w > 1e8) {
            char at[48];
            snprintf(at, sizeof at, ".layers[%zu]", i);
            return fielderr_fail(&e, at, "output too large");
        }
    }
    if (nparam == 0) return fielderr_fail(&e, ".layers", "needs at least one dense or conv2d layer");
    if (s.c * s.h * s.w < 2) return fielderr_fail(&e, ".layers", "the last layer must output at least 2 classes");
    return 0;
}
