/* serve_signature.c - an uploaded model's metadata checked and read into a model_sig (serve_signature.h).
 *
 * Every refusal names the exact field ("metadata.inputs[1].datatype") so the upload route can answer
 * a 400 that points at it; nothing here allocates but the JSON that sig_to_json returns. */
#include "spec/serve_signature.h"

#include "common/fielderr.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define SIG_DESCRIPTION_MAX 4096
#define SIG_METRICS_MAX 64
#define SIG_DIM_MAX 2147483647LL

static const char *const dtype_names[] = {"FP32", "FP64", "INT32", "INT64"};
static const size_t dtype_sizes[] = {4, 8, 4, 8};

const char *sig_dtype_name(sig_dtype t)
{
    return (unsigned)t < 4 ? dtype_names[t] : "?";
}

int sig_dtype_parse(const char *name, sig_dtype *out)
{
    for (int i = 0; name && i < 4; i++)
        if (strcmp(name, dtype_names[i]) == 0) {
            *out = (sig_dtype)i;
            return 0;
        }
    return -1;
}

size_t sig_dtype_size(sig_dtype t)
{
    return (unsigned)t < 4 ? dtype_sizes[t] : 0;
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > SIG_NAME_MAX) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("_.-", *p))) return false;
    return true;
}

/* one {name, datatype, shape} at `path` ("metadata.inputs[0]") */
static int parse_tensor(const json_t *t, const char *path, sig_tensor *out, const fielderr *r)
{
    char f[128]; /* path is at most "metadata.outputs[15]" */
    if (!json_is_object(t)) return fielderr_fail(r, path, "must be an object {name, datatype, shape}");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)t, key, v) if (strcmp(key, "name") && strcmp(key, "datatype") && strcmp(key, "shape"))
    {
        snprintf(f, sizeof f, "%.32s.%.64s", path, key);
        return fielderr_fail(r, f, "unknown member (a tensor has name, datatype and shape)");
    }
    const char *name = json_string_value(json_object_get(t, "name"));
    snprintf(f, sizeof f, "%.32s.name", path);
    if (!name || !name_ok(name))
        return fielderr_fail(r, f, "must be a string of 1 to %d characters of A-Z a-z 0-9 _ . -", SIG_NAME_MAX);
    snprintf(out->name, sizeof out->name, "%s", name);
    snprintf(f, sizeof f, "%.32s.datatype", path);
    if (sig_dtype_parse(json_string_value(json_object_get(t, "datatype")), &out->dtype))
        return fielderr_fail(r, f, "must be one of FP32, FP64, INT32, INT64");
    json_t *shape = json_object_get(t, "shape");
    snprintf(f, sizeof f, "%.32s.shape", path);
    if (!json_is_array(shape) || json_array_size(shape) < 1 || json_array_size(shape) > SIG_MAX_DIMS)
        return fielderr_fail(r, f, "must be an array of 1 to %d dimensions, the first -1 (the batch)", SIG_MAX_DIMS);
    out->ndim = (int)json_array_size(shape);
    for (int i = 0; i < out->ndim; i++) {
        json_t *d = json_array_get(shape, (size_t)i);
        json_int_t k = json_is_integer(d) ? json_integer_value(d) : 0;
        snprintf(f, sizeof f, "%.32s.shape[%d]", path, i);
        if (i == 0 && k != -1) return fielderr_fail(r, f, "must be -1 (the batch dimension, any number of samples)");
        if (k != -1 && (k < 1 || k > SIG_DIM_MAX))
            return fielderr_fail(r, f, "must be -1 (any size) or an integer in [1, %lld]", (long long)SIG_DIM_MAX);
        out->shape[i] = k;
    }
    return 0;
}

/* metadata.inputs or metadata.outputs: min..SIG_MAX_TENSORS tensors with unique names */
static int parse_list(const json_t *list, const char *what, int min, sig_tensor *out, int *n, const fielderr *r)
{
    char path[64];
    snprintf(path, sizeof path, "metadata.%s", what);
    if (!json_is_array(list) || json_array_size(list) < (size_t)min || json_array_size(list) > SIG_MAX_TENSORS)
        return fielderr_fail(r, path, "must be an array of %d to %d tensors {name, datatype, shape}", min, SIG_MAX_TENSORS);
    *n = (int)json_array_size(list);
    for (int i = 0; i < *n; i++) {
        char at[96];
        snprintf(at, sizeof at, "%s[%d]", path, i);
        if (parse_tensor(json_array_get(list, (size_t)i), at, &out[i], r)) return -1;
        for (int j = 0; j < i; j++)
            if (strcmp(out[i].name, out[j].name) == 0) {
                snprintf(at, sizeof at, "%s[%d].name", path, i);
                return fielderr_fail(r, at, "'%s' is already the name of %s[%d]", out[i].name, what, j);
            }
    }
    return 0;
}

static int check_description(const json_t *d, const fielderr *r)
{
    const char *s = json_string_value(d);
    if (!s || json_string_length(d) > SIG_DESCRIPTION_MAX)
        return fielderr_fail(r, "metadata.description", "must be a string of at most %d bytes", SIG_DESCRIPTION_MAX);
    for (size_t i = 0; i < json_string_length(d); i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
            return fielderr_fail(r, "metadata.description",
                                 "must not hold control characters (but newline and tab): byte %zu is 0x%02x", i, c);
    }
    return 0;
}

static int check_metrics(const json_t *m, const fielderr *r)
{
    if (!json_is_object(m) || json_object_size(m) > SIG_METRICS_MAX)
        return fielderr_fail(r, "metadata.metrics", "must be an object of at most %d named numbers", SIG_METRICS_MAX);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)m, key, v) if (!json_is_number(v) || !isfinite(json_number_value(v)))
    {
        char f[96];
        snprintf(f, sizeof f, "metadata.metrics.%.64s", key);
        return fielderr_fail(r, f, "must be a finite number");
    }
    return 0;
}

int sig_parse(const json_t *metadata, model_sig *out, char *field, size_t field_len, char *msg, size_t msg_len)
{
    const fielderr r = {"", field, field_len, msg, msg_len};
    memset(out, 0, sizeof(*out));
    if (!json_is_object(metadata))
        return fielderr_fail(&r, "metadata", "must be an object {inputs, outputs, description, metrics}");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)metadata, key, v) if (strcmp(key, "inputs") && strcmp(key, "outputs") &&
                                                        strcmp(key, "description") && strcmp(key, "metrics"))
    {
        char f[96];
        snprintf(f, sizeof f, "metadata.%.64s", key);
        return fielderr_fail(&r, f, "unknown member (the metadata has inputs, outputs, description and metrics)");
    }
    if (parse_list(json_object_get(metadata, "inputs"), "inputs", 1, out->in, &out->nin, &r)) return -1;
    json_t *outputs = json_object_get(metadata, "outputs");
    if (outputs && parse_list(outputs, "outputs", 0, out->out, &out->nout, &r)) return -1;
    json_t *d = json_object_get(metadata, "description");
    if (d && check_description(d, &r)) return -1;
    json_t *m = json_object_get(metadata, "metrics");
    if (m && check_metrics(m, &r)) return -1;
    return 0;
}

static json_t *tensors_json(const sig_tensor *t, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_t *shape = json_array();
        for (int j = 0; j < t[i].ndim; j++)
            json_array_append_new(shape, json_integer(t[i].shape[j]));
        json_array_append_new(
            a, json_pack("{s:s, s:s, s:o}", "name", t[i].name, "datatype", sig_dtype_name(t[i].dtype), "shape", shape));
    }
    return a;
}

json_t *sig_to_json(const model_sig *s)
{
    return json_pack("{s:o, s:o}", "inputs", tensors_json(s->in, s->nin), "outputs", tensors_json(s->out, s->nout));
}
