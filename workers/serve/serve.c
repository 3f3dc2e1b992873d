/* serve.c - a built-in model's replica: requests checked, batched forward passes, replies (serve.h). */
#include "workers/serve/serve.h"
#include "common/alloc.h"
#include "common/utf8.h"

#include "workers/serve/reply_text.h"
#include "workers/serve/scan.h"
#include "workers/train/ckpt.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct serve_model {
    train_model *m;
    int cap;
    float *x;     /* cap x in */
    float *probs; /* scratch for one row of softmax */
};

serve_model *serve_model_load(const char *path, int max_samples, char *err, size_t el)
{
    json_t *arch = train_ckpt_arch(path, err, el);
    if (!arch) return NULL;
    serve_model *s = xcalloc(1, sizeof(*s));
    s->cap = max_samples;
    s->m = train_model_create(arch, train_backend_cpu(), 1, max_samples, err, el);
    json_decref(arch);
    train_ckpt_state st;
    if (!s->m || train_ckpt_load(path, s->m, NULL, &st, err, el) != 0) {
        serve_model_free(s);
        return NULL;
    }
    s->x = xmalloc(sizeof(float) * (size_t)max_samples * train_model_in_size(s->m));
    s->probs = xmalloc(sizeof(float) * train_model_out_size(s->m)); /* max_samples <= SERVE_MAX_SAMPLES (spec.c) */
    return s;
}

void serve_model_free(serve_model *s)
{
    if (!s) return;
    if (s->m) train_model_free(s->m);
    free(s->x);
    free(s->probs);
    free(s);
}

size_t serve_model_in_size(const serve_model *s)
{
    return train_model_in_size(s->m);
}

size_t serve_model_out_size(const serve_model *s)
{
    return train_model_out_size(s->m);
}

/* ---- request parsing ---- */

/* flattens nested arrays of numbers into out (at most cap); -1 on a non-number or overflow */
static int flatten(const json_t *v, float *out, size_t cap, size_t *n, int depth)
{
    if (json_is_number(v)) {
        if (*n >= cap) return -1;
        double d = json_number_value(v);
        if (!isfinite(d)) return -1;
        out[(*n)++] = (float)d;
        return 0;
    }
    if (!json_is_array(v) || depth > 8) return -1;
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) if (flatten(e, out, cap, n, depth + 1)) return -1;
    return 0;
}

typedef struct {
    json_t *doc; /* without inputs[0].data when data_end > 0 */
    int samples;
    size_t offset;               /* first sample in the batch */
    size_t data_start, data_end; /* the byte range of inputs[0].data in the body (scan.h), or 0 */
} parsed;

static int fail(serve_request *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(serve_request *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof(r->err), fmt, ap);
    va_end(ap);
    utf8_scrub(r->err); /* jansson's message may quote the broken bytes it stopped at */
    r->status = 400;
    return -1;
}

/* parses and checks r's JSON and shape; 0 with p->samples set */
static int parse_doc(serve_model *s, serve_request *r, parsed *p)
{
    json_error_t jerr;
    size_t ds, de;
    p->data_end = 0;
    p->doc = NULL;
    if (r->json_len && r->json_len < r->len)
        return fail(r, "inputs: binary tensor data (Inference-Header-Content-Length) is taken by TorchScript models only; "
                       "send this model's inputs as JSON numbers");
    if (scan_data(r->body, r->len, &ds, &de) == 0) { /* the numbers are read later, straight into the batch */
        char *rest = xmalloc(r->len + 3);
        memcpy(rest, r->body, ds);
        rest[ds] = '[', rest[ds + 1] = ']'; /* not a string: json_loadb takes the length */
        memcpy(rest + ds + 2, r->body + de, r->len - de);
        p->doc = json_loadb(rest, ds + 2 + (r->len - de), 0, &jerr);
        free(rest);
        p->data_start = ds, p->data_end = de;
    } else {
        p->doc = json_loadb(r->body, r->len, 0, &jerr);
    }
    if (!p->doc) return fail(r, "the body is not valid JSON: %s", jerr.text);
    json_t *inputs = json_object_get(p->doc, "inputs");
    if (!json_is_array(inputs) || json_array_size(inputs) != 1)
        return fail(r, "inputs: must be an array with one tensor {name, shape, datatype, data}");
    json_t *in = json_array_get(inputs, 0), *shape = json_object_get(in, "shape");
    const char *dt = json_string_value(json_object_get(in, "datatype"));
    if (dt && strcmp(dt, "FP32") != 0 && strcmp(dt, "FP64") != 0)
        return fail(r, "inputs[0].datatype: must be FP32 (or FP64), not %s", dt);
    if (!json_is_array(shape) || json_array_size(shape) < 1 || !json_is_integer(json_array_get(shape, 0)))
        return fail(r, "inputs[0].shape: must be [batch, ...] integers");
    size_t per = serve_model_in_size(s), prod = 1;
    json_int_t n = json_integer_value(json_array_get(shape, 0));
    for (size_t i = 1; i < json_array_size(shape); i++) {
        json_t *d = json_array_get(shape, i);
        if (!json_is_integer(d) || json_integer_value(d) < 1 || json_integer_value(d) > (json_int_t)per)
            return fail(r, "inputs[0].shape[%zu]: must be a positive integer (the model takes %zu values per sample)", i, per);
        prod *= (size_t)json_integer_value(d);
    }
    if (prod != per) return fail(r, "inputs[0].shape: each sample must have %zu values (the model's input), not %zu", per, prod);
    if (n < 1 || n > s->cap) return fail(r, "inputs[0].shape[0]: must be in [1, %d] samples per request", s->cap);
    p->samples = (int)n;
    return 0;
}

/* copies the samples into x */
static int fill(serve_model *s, serve_request *r, const parsed *p, float *x)
{
    size_t per = serve_model_in_size(s), got = 0, want = (size_t)p->samples * per;
    json_t *data = json_object_get(json_array_get(json_object_get(p->doc, "inputs"), 0), "data");
    int rc = p->data_end ? scan_numbers(r->body + p->data_start, p->data_end - p->data_start, x, want, &got)
                         : flatten(data, x, want, &got, 0);
    if (rc != 0 || got != want) return fail(r, "inputs[0].data: must hold %d x %zu finite numbers", p->samples, per);
    return 0;
}

/* ---- response text ---- */

static char *reply(serve_model *s, const char *name, int version, const parsed *p, const float *logits)
{
    size_t k = serve_model_out_size(s);
    reply_text o = reply_text_start(name, version, p->doc);
    reply_text_put(&o, ",\"outputs\":[{\"name\":\"probabilities\",\"shape\":[%d,%zu],\"datatype\":\"FP32\",\"data\":[", p->samples,
                   k);
    int64_t *labels = xmalloc(sizeof(int64_t) * (size_t)p->samples);
    for (int i = 0; i < p->samples; i++) {
        const float *z = logits + (p->offset + (size_t)i) * k;
        size_t arg = 0;
        for (size_t j = 1; j < k; j++)
            if (z[j] > z[arg]) arg = j;
        double sum = 0;
        for (size_t j = 0; j < k; j++)
            sum += exp((double)z[j] - z[arg]);
        for (size_t j = 0; j < k; j++)
            reply_text_put(&o, "%s%.6g", i || j ? "," : "", exp((double)z[j] - z[arg]) / sum);
        labels[i] = (int64_t)arg;
    }
    reply_text_put(&o, "]},{\"name\":\"label\",\"shape\":[%d],\"datatype\":\"INT64\",\"data\":[", p->samples);
    for (int i = 0; i < p->samples; i++)
        reply_text_put(&o, "%s%lld", i ? "," : "", (long long)labels[i]);
    reply_text_put(&o, "]}]}");
    free(labels);
    return o.b;
}

/* huge inputs can overflow the model (inf - inf): a clear 400 rather than NaN in the reply */
static int finite_outputs(serve_model *s, serve_request *r, const parsed *p, const float *logits)
{
    size_t k = serve_model_out_size(s);
    for (size_t i = 0; i < (size_t)p->samples * k; i++)
        if (!isfinite(logits[p->offset * k + i])) {
            fail(r, "inputs[0].data: sample %zu makes the model's outputs overflow (values too large?)", i / k);
            return 0;
        }
    return 1;
}

void serve_batch(serve_model *s, const char *name, int version, serve_request *reqs, int n)
{
    size_t per = serve_model_in_size(s);
    parsed *ps = xcalloc((size_t)n, sizeof(parsed));
    for (int i = 0; i < n; i++) {
        reqs[i].reply = NULL, reqs[i].status = 200, reqs[i].err[0] = '\0';
        parse_doc(s, &reqs[i], &ps[i]);
    }
    /* as many requests per forward pass as fit in the model's capacity */
    int first = 0, used = 0;
    for (int i = 0; i <= n; i++) {
        if ((i == n || (reqs[i].status == 200 && used + ps[i].samples > s->cap)) && used > 0) {
            const float *logits = train_model_forward(s->m, s->x, used, false);
            for (int j = first; j < i; j++)
                if (reqs[j].status == 200 && finite_outputs(s, &reqs[j], &ps[j], logits))
                    reqs[j].reply = reply(s, name, version, &ps[j], logits);
            used = 0, first = i;
        }
        if (i == n) break;
        if (reqs[i].status != 200) continue;
        ps[i].offset = (size_t)used;
        if (fill(s, &reqs[i], &ps[i], s->x + (size_t)used * per) == 0) used += ps[i].samples;
    }
    for (int i = 0; i < n; i++)
        json_decref(ps[i].doc);
    free(ps);
}

char *serve_error_body(const char *err)
{
    /* "inputs[0].shape: must be ..." names its field; "the body is not valid JSON: ..." does not */
    const char *colon = strstr(err, ": ");
    bool named = colon && colon > err && !memchr(err, ' ', (size_t)(colon - err));
    bool syntax = strncmp(err, "the body is not valid JSON", 26) == 0;
    json_t *e = json_pack("{s:{s:s, s:s, s:o}}", "error", "code", syntax ? "invalid_json" : "invalid_field", "message", err,
                          "field", named ? json_stringn(err, (size_t)(colon - err)) : json_null());
    char *body = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    /* never silent: the client would wait for its timeout and get a 504 */
    return body ? body : xstrdup("{\"error\":{\"code\":\"invalid_field\",\"message\":\"the request is invalid\",\"field\":null}}");
}
