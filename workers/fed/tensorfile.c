/* tensorfile.c - the safetensors-layout model files of a federated program's exchange (tensorfile.h). */
#include "workers/fed/tensorfile.h"
#include "common/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t le64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static float le_float(const unsigned char *b)
{
    uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void put_float(unsigned char *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    b[0] = (unsigned char)u, b[1] = (unsigned char)(u >> 8), b[2] = (unsigned char)(u >> 16), b[3] = (unsigned char)(u >> 24);
}

void tensorfile_f32_bytes(const double *v, size_t n, unsigned char *out)
{
    for (size_t i = 0; i < n; i++)
        put_float(out + 4 * i, (float)v[i]);
}

void tensorfile_header_free(tensorfile_header *h)
{
    for (size_t i = 0; h->t && i < h->n; i++)
        free(h->t[i].name);
    free(h->t);
    json_decref(h->meta);
    memset(h, 0, sizeof *h);
}

/* a non-negative JSON integer that fits size_t */
static int as_size(const json_t *v, size_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
    *out = (size_t)json_integer_value(v);
    return 0;
}

/* one tensor's entry into t (its name set by the caller); begin and end of its bytes */
static int parse_entry(const char *name, const json_t *e, tensorfile_tensor *t, size_t *begin, size_t *end, char *err,
                       size_t errlen)
{
    const json_t *dtype = json_object_get(e, "dtype"), *shape = json_object_get(e, "shape"),
                 *offs = json_object_get(e, "data_offsets");
    if (!json_is_object(e) || !json_is_string(dtype) || !json_is_array(shape) || !json_is_array(offs)) {
        snprintf(err, errlen, "tensor '%.200s': must be {\"dtype\", \"shape\", \"data_offsets\"}", name);
        return -1;
    }
    if (strcmp(json_string_value(dtype), "F32") != 0) {
        snprintf(err, errlen, "tensor '%.200s': dtype %.20s: only F32 is accepted (convert with .float())", name,
                 json_string_value(dtype));
        return -1;
    }
    size_t nd = json_array_size(shape);
    if (nd > TENSORFILE_MAX_DIMS) {
        snprintf(err, errlen, "tensor '%.200s': %zu dimensions, at most %d", name, nd, TENSORFILE_MAX_DIMS);
        return -1;
    }
    size_t count = 1;
    for (size_t d = 0; d < nd; d++) {
        size_t v;
        if (as_size(json_array_get(shape, d), &v) || v > ((size_t)1 << 40)) {
            snprintf(err, errlen, "tensor '%.200s': shape[%zu] must be an integer in [0, 2^40]", name, d);
            return -1;
        }
        if (v && count > SIZE_MAX / 4 / v) {
            snprintf(err, errlen, "tensor '%.200s': its shape has too many values", name);
            return -1;
        }
        count *= v;
        t->shape[d] = (int64_t)v;
    }
    t->ndim = (int)nd, t->count = count;
    if (json_array_size(offs) != 2 || as_size(json_array_get(offs, 0), begin) || as_size(json_array_get(offs, 1), end) ||
        *end < *begin) {
        snprintf(err, errlen, "tensor '%.200s': data_offsets must be [begin, end], 0 <= begin <= end", name);
        return -1;
    }
    if (*end - *begin != count * 4) {
        snprintf(err, errlen, "tensor '%.200s': data_offsets span %zu bytes, its shape needs %zu (4 per value)", name,
                 *end - *begin, count * 4);
        return -1;
    }
    return 0;
}

typedef struct {
    tensorfile_tensor t;
    size_t begin, end;
} entry;

static int by_begin(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

int tensorfile_parse(const unsigned char *buf, size_t len, size_t max_values, tensorfile_header *h, const unsigned char **data,
                     char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    if (len < 8) {
        snprintf(err, errlen, "%zu bytes: shorter than the 8-byte header length", len);
        return -1;
    }
    uint64_t hl = le64(buf);
    if (hl < 2 || hl > TENSORFILE_MAX_HEADER || hl > len - 8) {
        snprintf(err, errlen, "the header length %llu is not within the file (%zu bytes) and %u", (unsigned long long)hl, len,
                 TENSORFILE_MAX_HEADER);
        return -1;
    }
    json_error_t je;
    json_t *root = json_loadb((const char *)buf + 8, (size_t)hl, JSON_REJECT_DUPLICATES | JSON_DISABLE_EOF_CHECK, &je);
    if (!root || !json_is_object(root)) {
        snprintf(err, errlen, "the header is not a JSON object: %s", root ? "another JSON value" : je.text);
        json_decref(root);
        return -1;
    }
    for (size_t i = (size_t)je.position; i < hl; i++) /* only padding after the object (jansson's position: bytes read) */
        if (buf[8 + i] != ' ' && buf[8 + i] != '\n' && buf[8 + i] != '\t' && buf[8 + i] != '\r') {
            snprintf(err, errlen, "the header has bytes after its JSON object (at %zu)", i);
            json_decref(root);
            return -1;
        }
    const unsigned char *region = buf + 8 + hl;
    size_t rlen = len - 8 - (size_t)hl;
    size_t n = json_object_size(root);
    json_t *meta = json_object_get(root, TENSORFILE_META);
    if (meta) n--;
    if (n > TENSORFILE_MAX_TENSORS) {
        snprintf(err, errlen, "%zu tensors: at most %d", n, TENSORFILE_MAX_TENSORS);
        json_decref(root);
        return -1;
    }
    if (meta) {
        const char *k;
        json_t *v;
        int ok = json_is_object(meta);
        json_object_foreach(meta, k, v) ok = ok && json_is_string(v);
        if (!ok) {
            snprintf(err, errlen, "__metadata__ must be an object of strings");
            json_decref(root);
            return -1;
        }
    }
    entry *e = xcalloc(n ? n : 1, sizeof *e);
    size_t k = 0;
    const char *name;
    json_t *v;
    int rc = 0;
    json_object_foreach(root, name, v)
    {
        if (!strcmp(name, TENSORFILE_META)) continue;
        size_t nl = strlen(name);
        if (nl == 0 || nl > TENSORFILE_MAX_NAME) {
            snprintf(err, errlen, "a tensor's name must have 1 to %d bytes", TENSORFILE_MAX_NAME);
            rc = -1;
            break;
        }
        if (parse_entry(name, v, &e[k].t, &e[k].begin, &e[k].end, err, errlen)) {
            rc = -1;
            break;
        }
        e[k++].t.name = xstrdup(name);
    }
    if (rc == 0) {
        qsort(e, k, sizeof *e, by_begin);
        size_t at = 0, total = 0;
        for (size_t i = 0; i < k && rc == 0; i++) {
            if (e[i].begin != at) {
                snprintf(err, errlen,
                         "tensor '%.200s': its bytes start at %zu, the data so far ends at %zu (tensors must tile the data)",
                         e[i].t.name, e[i].begin, at);
                rc = -1;
            }
            e[i].t.offset = total;
            total += e[i].t.count;
            at = e[i].end;
        }
        if (rc == 0 && at != rlen) {
            snprintf(err, errlen, "the tensors cover %zu bytes of data, the file has %zu", at, rlen);
            rc = -1;
        }
        if (rc == 0 && max_values && total > max_values) {
            snprintf(err, errlen, "%zu values: at most %zu", total, max_values);
            rc = -1;
        }
        h->total = total;
    }
    if (rc) {
        for (size_t i = 0; i < k; i++)
            free(e[i].t.name);
        free(e);
        json_decref(root);
        memset(h, 0, sizeof *h);
        return -1;
    }
    h->t = xcalloc(k ? k : 1, sizeof *h->t);
    for (size_t i = 0; i < k; i++)
        h->t[i] = e[i].t;
    h->n = k;
    free(e);
    h->meta = meta ? json_incref(meta) : json_object();
    json_decref(root);
    if (data) *data = region;
    return 0;
}

void tensorfile_values(const tensorfile_header *h, const unsigned char *data, double *out)
{
    for (size_t i = 0; i < h->total; i++)
        out[i] = (double)le_float(data + 4 * i);
}

static void shape_text(const tensorfile_tensor *t, char *out, size_t outlen)
{
    size_t n = (size_t)snprintf(out, outlen, "[");
    for (int d = 0; d < t->ndim && n < outlen; d++)
        n += (size_t)snprintf(out + n, outlen - n, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (n < outlen) snprintf(out + n, outlen - n, "]");
}

int tensorfile_same_layout(const tensorfile_header *a, const tensorfile_header *b, char *err, size_t errlen)
{
    for (size_t i = 0; i < a->n || i < b->n; i++) {
        if (i >= b->n) {
            snprintf(err, errlen, "tensor '%.200s' is missing (%zu tensors, the model has %zu)", a->t[i].name, b->n, a->n);
            return -1;
        }
        if (i >= a->n) {
            snprintf(err, errlen, "tensor '%.200s' is not in the model (%zu tensors, the model has %zu)", b->t[i].name, b->n, a->n);
            return -1;
        }
        if (strcmp(a->t[i].name, b->t[i].name) != 0) {
            snprintf(err, errlen, "tensor %zu is '%.200s', the model's is '%.200s'", i, b->t[i].name, a->t[i].name);
            return -1;
        }
        if (a->t[i].ndim != b->t[i].ndim || memcmp(a->t[i].shape, b->t[i].shape, sizeof(int64_t) * (size_t)a->t[i].ndim) != 0) {
            char sa[160], sb[160];
            shape_text(&a->t[i], sa, sizeof sa), shape_text(&b->t[i], sb, sizeof sb);
            snprintf(err, errlen, "tensor '%.200s' has shape %s, the model's is %s", b->t[i].name, sb, sa);
            return -1;
        }
    }
    return 0;
}

unsigned char *tensorfile_write(const tensorfile_header *layout, const json_t *meta, const double *v, size_t *len)
{
    json_t *hdr = json_object();
    size_t at = 0;
    for (size_t i = 0; i < layout->n; i++) {
        const tensorfile_tensor *t = &layout->t[i];
        json_t *shape = json_array();
        for (int d = 0; d < t->ndim; d++)
            json_array_append_new(shape, json_integer((json_int_t)t->shape[d]));
        size_t end = at + t->count * 4;
        json_object_set_new(
            hdr, t->name,
            json_pack("{s:s, s:o, s:[I, I]}", "dtype", "F32", "shape", shape, "data_offsets", (json_int_t)at, (json_int_t)end));
        at = end;
    }
    if (meta && json_object_size(meta)) json_object_set(hdr, TENSORFILE_META, (json_t *)meta);
    char *text = json_dumps(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(hdr);
    size_t tl = strlen(text), pad = (8 - tl % 8) % 8, hl = tl + pad; /* the data 8-byte aligned, as safetensors pads */
    unsigned char *out = xmalloc(8 + hl + at + 1); /* + 1: the text's NUL, copied, then padded over or left past the end */
    for (int i = 0; i < 8; i++)
        out[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(out + 8, text, tl + 1);
    memset(out + 8 + tl, ' ', pad);
    free(text);
    tensorfile_f32_bytes(v, layout->total, out + 8 + hl);
    *len = 8 + hl + at;
    return out;
}

char *tensorfile_layout_text(const tensorfile_header *h)
{
    json_t *a = json_array();
    for (size_t i = 0; i < h->n; i++) {
        json_t *shape = json_array();
        for (int d = 0; d < h->t[i].ndim; d++)
            json_array_append_new(shape, json_integer((json_int_t)h->t[i].shape[d]));
        json_array_append_new(a, json_pack("[s, o]", h->t[i].name, shape));
    }
    char *s = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    return s;
}

long tensorfile_find_out_of_range(const double *v, size_t n, double max_abs)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]) || fabs(v[i]) > max_abs) return (long)i;
    return -1;
}

const tensorfile_tensor *tensorfile_tensor_at(const tensorfile_header *h, size_t i)
{
    size_t lo = 0, hi = h->n; /* the last tensor whose offset is <= i */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (h->t[mid].offset <= i)
            lo = mid;
        else
            hi = mid;
    }
    return h->n ? &h->t[lo] : NULL;
}
