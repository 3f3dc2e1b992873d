/* ts_request.c - an OIP v2 request checked against a signature, its numbers read into batch
 * tensors, and a reply's text from output tensors (ts_request.h says the rules). */
#include "workers/serve/ts_request.h"

#include "common/alloc.h"
#include "common/utf8.h"
#include "workers/serve/reply_text.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIM_MAX 2147483647LL

static int fail(char *err, size_t el, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t el, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, el, fmt, ap);
    va_end(ap);
    utf8_scrub(err); /* jansson's message may quote the broken bytes it stopped at */
    return -1;
}

const char *ts_shape_text(const int64_t *shape, int ndim, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < ndim && k < len; i++) {
        int w = snprintf(buf + k, len - k, "%s%" PRId64, i ? ", " : "[", shape[i]);
        k += w > 0 ? (size_t)w : 0;
    }
    if (k < len) snprintf(buf + k, len - k, "%s", ndim ? "]" : "[]");
    return buf;
}

/* "x, ids" */
static const char *input_names(const model_sig *sig, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < sig->nin && k < len; i++) {
        int w = snprintf(buf + k, len - k, "%s%s", i ? ", " : "", sig->in[i].name);
        k += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

/* the body as jansson reads it: with the scanned data values replaced by [] when scan.h found
 * them all (rg[i]: request input i's data, else zeros), else the whole text */
static json_t *load_doc(const char *body, size_t len, scan_range *rg, char *err, size_t el)
{
    int n = 0;
    json_error_t jerr;
    json_t *doc;
    if (scan_inputs_data(body, len, rg, SIG_MAX_TENSORS, &n) == 0) {
        char *rest = xmalloc(len + 2 * (size_t)n + 1);
        size_t k = 0, from = 0;
        for (int i = 0; i < n; i++) {
            memcpy(rest + k, body + from, rg[i].start - from);
            k += rg[i].start - from;
            rest[k++] = '[', rest[k++] = ']';
            from = rg[i].end;
        }
        memcpy(rest + k, body + from, len - from);
        doc = json_loadb(rest, k + len - from, JSON_REJECT_DUPLICATES, &jerr);
        free(rest);
    } else {
        n = 0;
        doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    }
    if (!doc) {
        fail(err, el, "the body is not valid JSON: %s", jerr.text);
        return NULL;
    }
    for (int i = n; i < SIG_MAX_TENSORS; i++)
        rg[i] = (scan_range){0, 0};
    return doc;
}

/* the shape of request input i (the signature's input k): its dimensions, batch and size */
static int parse_shape(const model_sig *sig, int max_samples, size_t len, ts_request *r, int i, int k, const json_t *shape,
                       char *err, size_t el)
{
    const sig_tensor *t = &sig->in[k];
    char want[160];
    ts_shape_text(t->shape, t->ndim, want, sizeof want);
    if (!json_is_array(shape) || json_array_size(shape) != (size_t)t->ndim)
        return fail(err, el, "inputs[%d].shape: must have %d dimensions (the model's input '%s' is %s)", i, t->ndim, t->name, want);
    for (int d = 0; d < t->ndim; d++) {
        json_t *dj = json_array_get(shape, (size_t)d);
        json_int_t v = json_is_integer(dj) ? json_integer_value(dj) : 0;
        if (d == 0) {
            if (v < 1 || v > max_samples)
                return fail(err, el, "inputs[%d].shape[0]: must be in [1, %d] samples per request", i, max_samples);
            if (r->samples && v != r->samples)
                return fail(err, el, "inputs[%d].shape[0]: must be %d, the batch of the inputs before it", i, r->samples);
            r->samples = (int)v;
        } else if (t->shape[d] != -1 && v != t->shape[d]) {
            return fail(err, el, "inputs[%d].shape[%d]: must be %" PRId64 " (the model's input '%s' is %s)", i, d, t->shape[d],
                        t->name, want);
        } else if (v < 1 || v > DIM_MAX) {
            return fail(err, el, "inputs[%d].shape[%d]: must be a positive integer (the model's input '%s' is %s)", i, d, t->name,
                        want);
        }
        r->shape[k][d] = v;
    }
    /* each value takes at least a byte of the body: a larger shape cannot be what was sent */
    size_t count = 1;
    for (int d = 0; d < t->ndim; d++) {
        if ((size_t)r->shape[k][d] > len / count)
            return fail(err, el, "inputs[%d].shape: more values than a body of %zu bytes can hold", i, len);
        count *= (size_t)r->shape[k][d];
    }
    r->count[k] = count;
    return 0;
}

/* request input i: its name (the signature's input it is), datatype, shape and data */
static int parse_input(const model_sig *sig, int max_samples, size_t len, ts_request *r, int i, const json_t *in, scan_range rg,
                       size_t *bin_at, size_t bin_len, char *err, size_t el)
{
    char names[SIG_MAX_TENSORS * (SIG_NAME_MAX + 2) + 1];
    if (!json_is_object(in)) return fail(err, el, "inputs[%d]: must be an object {name, datatype, shape, data}", i);
    const char *name = json_string_value(json_object_get(in, "name"));
    if (!name)
        return fail(err, el, "inputs[%d].name: must be a string (the model takes %s)", i, input_names(sig, names, sizeof names));
    int k = 0;
    while (k < sig->nin && strcmp(sig->in[k].name, name) != 0)
        k++;
    if (k == sig->nin) {
        char shown[SIG_NAME_MAX + 4];
        snprintf(shown, sizeof shown, "%.*s%s", SIG_NAME_MAX, name, strlen(name) > SIG_NAME_MAX ? "..." : "");
        return fail(err, el, "inputs[%d].name: the model has no input '%s' (it takes %s)", i, shown,
                    input_names(sig, names, sizeof names));
    }
    if (r->at[k] >= 0) return fail(err, el, "inputs[%d].name: input '%s' is already inputs[%d]", i, name, r->at[k]);
    const sig_tensor *t = &sig->in[k];
    sig_dtype dt;
    const char *dts = json_string_value(json_object_get(in, "datatype"));
    if (!dts || sig_dtype_parse(dts, &dt) || (dt != t->dtype && !(t->dtype == SIG_FP32 && dt == SIG_FP64)))
        return fail(err, el, "inputs[%d].datatype: must be %s%s (the model's input '%s')", i, sig_dtype_name(t->dtype),
                    t->dtype == SIG_FP32 ? " (or FP64)" : "", t->name);
    if (parse_shape(sig, max_samples, len, r, i, k, json_object_get(in, "shape"), err, el)) return -1;
    r->at[k] = i;
    r->data[k] = json_object_get(in, "data");
    const json_t *bsize = json_object_get(json_object_get(in, "parameters"), "binary_data_size");
    if (bsize) { /* its bytes follow the JSON (ts_request_parse) */
        size_t want = r->count[k] * sig_dtype_size(t->dtype);
        if (rg.end || r->data[k])
            return fail(err, el, "inputs[%d].data: give the values either as data or as binary_data_size bytes, not both", i);
        if (dt != t->dtype)
            return fail(err, el, "inputs[%d].datatype: binary data must be %s, the model's input '%s' itself", i,
                        sig_dtype_name(t->dtype), t->name);
        if (!json_is_integer(bsize) || (size_t)json_integer_value(bsize) != want)
            return fail(err, el, "inputs[%d].parameters.binary_data_size: must be %zu (%zu %s values)", i, want, r->count[k],
                        sig_dtype_name(t->dtype));
        if (want > bin_len - *bin_at)
            return fail(err, el,
                        "inputs[%d].parameters.binary_data_size: the body's binary part holds %zu bytes after the "
                        "inputs before it, not %zu",
                        i, bin_len - *bin_at, want);
        r->binary[k] = true;
        r->bin_off[k] = *bin_at;
        *bin_at += want;
        return 0;
    }
    if (!rg.end && !r->data[k]) return fail(err, el, "inputs[%d].data: missing (the values, flat or nested)", i);
    r->range[k] = rg;
    return 0;
}

int ts_request_parse(const model_sig *sig, int max_samples, const char *body, size_t len, size_t json_len, ts_request *r, char *err,
                     size_t el)
{
    memset(r, 0, sizeof(*r));
    for (int k = 0; k < SIG_MAX_TENSORS; k++)
        r->at[k] = -1;
    if (json_len == 0 || json_len > len) json_len = len;
    r->json_len = json_len;
    size_t bin_at = 0, bin_len = len - json_len; /* the binary part, after the JSON */
    scan_range rg[SIG_MAX_TENSORS];              /* by the request's index */
    r->doc = load_doc(body, json_len, rg, err, el);
    if (!r->doc) return -1;
    json_t *inputs = json_object_get(r->doc, "inputs");
    char names[SIG_MAX_TENSORS * (SIG_NAME_MAX + 2) + 1];
    if (!json_is_array(inputs))
        return fail(err, el, "inputs: must be an array of the model's %d input%s (%s)", sig->nin, sig->nin > 1 ? "s" : "",
                    input_names(sig, names, sizeof names));
    if (json_array_size(inputs) > (size_t)sig->nin)
        return fail(err, el, "inputs: must hold the model's %d input%s (%s), not %zu", sig->nin, sig->nin > 1 ? "s" : "",
                    input_names(sig, names, sizeof names), json_array_size(inputs));
    for (int i = 0; i < (int)json_array_size(inputs); i++)
        if (parse_input(sig, max_samples, len, r, i, json_array_get(inputs, (size_t)i), rg[i], &bin_at, bin_len, err, el))
            return -1;
    if (bin_at != bin_len)
        return fail(err, el,
                    "inputs: the body has %zu bytes of binary data after its JSON, the inputs' binary_data_size "
                    "add up to %zu",
                    bin_len, bin_at);
    for (int k = 0; k < sig->nin; k++)
        if (r->at[k] < 0)
            return fail(err, el, "inputs: missing input '%s' (the model takes %s)", sig->in[k].name,
                        input_names(sig, names, sizeof names));
    return 0;
}

void ts_request_free(ts_request *r)
{
    json_decref(r->doc);
    r->doc = NULL;
}

bool ts_request_same_shapes(const model_sig *sig, const ts_request *a, const ts_request *b)
{
    for (int k = 0; k < sig->nin; k++)
        for (int d = 1; d < sig->in[k].ndim; d++)
            if (a->shape[k][d] != b->shape[k][d]) return false;
    return true;
}

size_t ts_request_sample_bytes(const model_sig *sig, const ts_request *r, int k)
{
    return r->count[k] / (size_t)r->samples * sig_dtype_size(sig->in[k].dtype);
}

/* whether the n values of type t at p are all finite (integers always are) */
static bool all_finite(sig_dtype t, const void *p, size_t n)
{
    size_t i = 0;
    if (t == SIG_FP32)
        while (i < n && isfinite(((const float *)p)[i]))
            i++;
    else if (t == SIG_FP64)
        while (i < n && isfinite(((const double *)p)[i]))
            i++;
    else
        i = n;
    return i == n;
}

const void *ts_request_in_place(const model_sig *sig, const ts_request *r, const char *body, int k)
{
    sig_dtype t = sig->in[k].dtype;
    if (!r->binary[k]) return NULL;
    const char *p = body + r->json_len + r->bin_off[k];
    if ((uintptr_t)p % sig_dtype_size(t) || !all_finite(t, p, r->count[k])) return NULL;
    return p;
}

int ts_request_fill(const model_sig *sig, const ts_request *r, const char *body, int k, void *out, char *err, size_t el)
{
    sig_dtype t = sig->in[k].dtype;
    size_t got = 0, want = r->count[k];
    int rc;
    if (r->binary[k]) { /* the bytes as sent (little-endian, as this host: x86-64, aarch64) */
        memcpy(out, body + r->json_len + r->bin_off[k], want * sig_dtype_size(t));
        for (got = 0; got < want && all_finite(t, (const char *)out + got * sig_dtype_size(t), 1); got++)
            ;
        rc = got == want ? 0 : -1;
    } else if (r->range[k].end) {
        rc = scan_values(body + r->range[k].start, r->range[k].end - r->range[k].start, t, out, want, &got);
    } else { /* the general parser's value: its text, read by the same reader */
        char *text = json_dumps(r->data[k], JSON_ENCODE_ANY | JSON_COMPACT);
        rc = text ? scan_values(text, strlen(text), t, out, want, &got) : -1;
        free(text);
    }
    char shape[160];
    ts_shape_text(r->shape[k], sig->in[k].ndim, shape, sizeof shape);
    int i = r->at[k];
    if (rc == -3) return fail(err, el, "inputs[%d].data: not a JSON array of numbers (after value %zu)", i, got);
    if (rc == -1)
        return fail(err, el, "inputs[%d].data: value %zu is not %s", i, got,
                    t == SIG_FP32    ? "a finite FP32 number"
                    : t == SIG_FP64  ? "a finite FP64 number"
                    : t == SIG_INT32 ? "an integer in the INT32 range"
                                     : "an integer in the INT64 range");
    if (rc == -2 || got != want)
        return fail(err, el, "inputs[%d].data: must hold %zu values (shape %s), not %s%zu", i, want, shape,
                    rc == -2 ? "more than " : "", got);
    return 0;
}

static const char *output_name(const model_sig *sig, int i, char *buf, size_t len)
{
    if (sig->nout > 0) return sig->out[i].name;
    snprintf(buf, len, "output%d", i);
    return buf;
}

int ts_outputs_check(const model_sig *sig, const tm_tensor *out, int nout, int64_t batch, char *err, size_t el)
{
    if (sig->nout > 0 && nout != sig->nout)
        return fail(err, el, "the model returned %d output%s, its metadata declares %d", nout, nout == 1 ? "" : "s", sig->nout);
    for (int i = 0; i < nout; i++) {
        char nm[32], got[160], want[160];
        const char *name = output_name(sig, i, nm, sizeof nm);
        ts_shape_text(out[i].shape, out[i].ndim, got, sizeof got);
        if (out[i].ndim < 1 || out[i].shape[0] != batch)
            return fail(err, el,
                        "the model's output '%s' has shape %s for a batch of %" PRId64
                        " samples: it is not batched along its first dimension",
                        name, got, batch);
        if (sig->nout == 0) continue;
        const sig_tensor *t = &sig->out[i];
        if (out[i].dtype != t->dtype)
            return fail(err, el, "the model's output '%s' is %s, its metadata declares %s", name, sig_dtype_name(out[i].dtype),
                        sig_dtype_name(t->dtype));
        bool same = out[i].ndim == t->ndim;
        for (int d = 1; same && d < t->ndim; d++)
            same = t->shape[d] == -1 || t->shape[d] == out[i].shape[d];
        if (!same)
            return fail(err, el, "the model's output '%s' has shape %s, its metadata declares %s", name, got,
                        ts_shape_text(t->shape, t->ndim, want, sizeof want));
    }
    return 0;
}

/* ---- the reply's text ---- */

/* values [from, from + n) of t, comma-separated; each printed into a small buffer (a number is
 * at most 24 characters), not through a growing vsnprintf */
static void put_values(reply_text *o, const tm_tensor *t, size_t from, size_t n)
{
    reply_text_reserve(o, n * 26 + 1);
    char *p = o->b + o->len;
    for (size_t j = 0; j < n; j++) {
        if (j) *p++ = ',';
        size_t i = from + j;
        switch (t->dtype) {
        case SIG_FP32:
            p += sprintf(p, "%.9g", (double)((const float *)t->data)[i]);
            break;
        case SIG_FP64:
            p += sprintf(p, "%.17g", ((const double *)t->data)[i]);
            break;
        case SIG_INT32:
            p += sprintf(p, "%" PRId32, ((const int32_t *)t->data)[i]);
            break;
        case SIG_INT64:
            p += sprintf(p, "%" PRId64, ((const int64_t *)t->data)[i]);
            break;
        }
    }
    o->len = (size_t)(p - o->b);
}

/* elements of one sample of t */
static size_t row_size(const tm_tensor *t)
{
    size_t n = 1;
    for (int d = 1; d < t->ndim; d++)
        n *= (size_t)t->shape[d];
    return n;
}

char *ts_reply(const model_sig *sig, const char *name, int version, const ts_request *r, const tm_tensor *out, int nout,
               int64_t offset, char *err, size_t el)
{
    char nm[32];
    for (int i = 0; i < nout; i++) {
        size_t row = row_size(&out[i]), from = (size_t)offset * row, n = (size_t)r->samples * row;
        for (size_t j = 0; j < n && (out[i].dtype == SIG_FP32 || out[i].dtype == SIG_FP64); j++) {
            double v = out[i].dtype == SIG_FP32 ? ((const float *)out[i].data)[from + j] : ((const double *)out[i].data)[from + j];
            if (!isfinite(v)) {
                fail(err, el,
                     "inputs: the model's output '%s' is %s for sample %zu of this request (JSON cannot carry it; values too "
                     "large?)",
                     output_name(sig, i, nm, sizeof nm), isnan(v) ? "NaN" : "infinite", j / row);
                return NULL;
            }
        }
    }
    reply_text o = reply_text_start(name, version, r->doc);
    reply_text_put(&o, ",\"outputs\":[");
    for (int i = 0; i < nout; i++) {
        reply_text_put(&o, "%s{\"name\":\"%s\",\"datatype\":\"%s\",\"shape\":[%d", i ? "," : "", output_name(sig, i, nm, sizeof nm),
                       sig_dtype_name(out[i].dtype), r->samples);
        for (int d = 1; d < out[i].ndim; d++)
            reply_text_put(&o, ",%" PRId64, out[i].shape[d]);
        reply_text_put(&o, "],\"data\":[");
        size_t row = row_size(&out[i]);
        put_values(&o, &out[i], (size_t)offset * row, (size_t)r->samples * row);
        reply_text_put(&o, "]}");
    }
    reply_text_put(&o, "]}");
    return o.b;
}
