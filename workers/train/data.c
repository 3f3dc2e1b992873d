/* data.c - dataset readers (zlib's gzread reads gzip and raw files alike),
 * Fisher-Yates shuffles from the seed, and shards of a global batch. */
#include "workers/train/data.h"

#include "common/rng.h"
#include "common/alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define IDX_MAX_BYTES ((size_t)1 << 31)

static int read_full(gzFile f, void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        unsigned chunk = n > (1u << 30) ? (1u << 30) : (unsigned)n;
        int got = gzread(f, p, chunk);
        if (got <= 0) return -1;
        p += got, n -= (size_t)got;
    }
    return 0;
}

/* reads an IDX ubyte file: its dims and its payload (malloc'd) */
static int idx_read(const char *path, int want_min, int want_max, uint32_t *dims, int *ndims, unsigned char **data, char *err,
                    size_t err_len)
{
    *data = NULL;
    gzFile f = gzopen(path, "rb");
    if (!f) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno ? errno : ENOENT));
        return -1;
    }
    unsigned char h[4];
    if (read_full(f, h, 4)) {
        snprintf(err, err_len, "%s: not an IDX file (shorter than its 4-byte magic)", path);
        goto fail;
    }
    if (h[0] != 0 || h[1] != 0) {
        snprintf(err, err_len, "%s: not an IDX file (bad magic %02x%02x%02x%02x)", path, h[0], h[1], h[2], h[3]);
        goto fail;
    }
    if (h[2] != 0x08) {
        snprintf(err, err_len, "%s: IDX element type 0x%02x is not supported (only unsigned bytes, 0x08)", path, h[2]);
        goto fail;
    }
    if (h[3] < want_min || h[3] > want_max) {
        snprintf(err, err_len, "%s: IDX file has %d dimensions, expected %d to %d", path, h[3], want_min, want_max);
        goto fail;
    }
    *ndims = h[3];
    size_t total = 1;
    for (int i = 0; i < *ndims; i++) {
        unsigned char b[4];
        if (read_full(f, b, 4)) {
            snprintf(err, err_len, "%s: truncated IDX header", path);
            goto fail;
        }
        dims[i] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
        if (dims[i] == 0 || dims[i] > IDX_MAX_BYTES || (total *= dims[i]) > IDX_MAX_BYTES) {
            snprintf(err, err_len, "%s: IDX dimension %d (%u) is zero or the file is too large", path, i, dims[i]);
            goto fail;
        }
    }
    *data = xmalloc(total); /* at most IDX_MAX_BYTES, checked above */
    if (read_full(f, *data, total)) {
        snprintf(err, err_len, "%s: truncated IDX data (expected %zu bytes after the header)", path, total);
        goto fail;
    }
    gzclose(f);
    return 0;
fail:
    free(*data);
    *data = NULL;
    gzclose(f);
    return -1;
}

int train_data_load_idx(const char *images, const char *labels, train_data *d, char *err, size_t err_len)
{
    memset(d, 0, sizeof *d);
    uint32_t id[4], ld[4];
    int ni, nl;
    unsigned char *ib = NULL, *lb = NULL;
    if (idx_read(images, 3, 4, id, &ni, &ib, err, err_len)) return -1;
    if (idx_read(labels, 1, 1, ld, &nl, &lb, err, err_len)) {
        free(ib);
        return -1;
    }
    if (ld[0] != id[0]) {
        snprintf(err, err_len, "%s has %u images but %s has %u labels", images, id[0], labels, ld[0]);
        goto fail;
    }
    d->n = id[0];
    d->c = ni == 4 ? (int)id[1] : 1;
    d->h = (int)id[ni - 2];
    d->w = (int)id[ni - 1];
    d->dim = (size_t)d->c * d->h * d->w;
    d->x = xmalloc(sizeof(float) * d->n * d->dim);
    d->y = xmalloc(sizeof(int32_t) * d->n);
    for (size_t i = 0; i < d->n * d->dim; i++)
        d->x[i] = ib[i] * (1.0f / 255.0f);
    for (size_t i = 0; i < d->n; i++) {
        d->y[i] = lb[i];
        if (lb[i] + 1 > d->classes) d->classes = lb[i] + 1;
    }
    free(ib);
    free(lb);
    return 0;
fail:
    free(ib);
    free(lb);
    train_data_free(d);
    return -1;
}

int train_data_load_csv(const char *path, int c, int h, int w, float scale, train_data *d, char *err, size_t err_len)
{
    memset(d, 0, sizeof *d);
    if (c < 1 || h < 1 || w < 1) { /* rows of no values would grow the set by 0 bytes */
        snprintf(err, err_len, "%s: the input shape %dx%dx%d has no values", path, c, h, w);
        return -1;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    d->c = c, d->h = h, d->w = w;
    d->dim = (size_t)c * h * w;
    size_t cap = 0, lineno = 0;
    char *line = NULL;
    size_t linecap = 0;
    while (getline(&line, &linecap, f) > 0) {
        lineno++;
        char *p = line, *end;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\n' || *p == '\r' || *p == 0) continue;
        long label = strtol(p, &end, 10);
        if (end == p) {
            if (lineno == 1) continue; /* header */
            snprintf(err, err_len, "%s:%zu: the first column must be an integer label", path, lineno);
            goto fail;
        }
        if (label < 0 || label > 65535) {
            snprintf(err, err_len, "%s:%zu: label %ld out of range [0, 65535]", path, lineno, label);
            goto fail;
        }
        if (d->n == cap) {
            cap = cap ? cap * 2 : 1024;
            d->x = xreallocarray(d->x, cap, sizeof(float) * d->dim);
            d->y = xreallocarray(d->y, cap, sizeof(int32_t));
        }
        float *row = d->x + d->n * d->dim;
        p = end;
        for (size_t j = 0; j < d->dim; j++) {
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p != ',') {
                snprintf(err, err_len, "%s:%zu: expected %zu values after the label, found %zu", path, lineno, d->dim, j);
                goto fail;
            }
            p++;
            float v = strtof(p, &end);
            if (end == p) {
                snprintf(err, err_len, "%s:%zu: column %zu is not a number", path, lineno, j + 2);
                goto fail;
            }
            row[j] = v * scale;
            p = end;
        }
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
            p++;
        if (*p) {
            snprintf(err, err_len, "%s:%zu: more than %zu values after the label", path, lineno, d->dim);
            goto fail;
        }
        d->y[d->n++] = (int32_t)label;
        if (label + 1 > d->classes) d->classes = (int)label + 1;
    }
    free(line);
    fclose(f);
    if (d->n == 0) {
        snprintf(err, err_len, "%s: no samples", path);
        train_data_free(d);
        return -1;
    }
    return 0;
fail:
    free(line);
    fclose(f);
    train_data_free(d);
    return -1;
}

void train_data_free(train_data *d)
{
    free(d->x);
    free(d->y);
    memset(d, 0, sizeof *d);
}

void train_shuffle(size_t *order, size_t n, uint64_t seed, uint64_t epoch)
{
    rng_state r;
    rng_seed(&r, rng_mix(seed, 3, epoch));
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rng_below(&r, i);
        size_t t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
}

void train_shard(size_t len, int rank, int world, size_t *begin, size_t *end)
{
    if (world < 1) world = 1;
    size_t k = (len + (size_t)world - 1) / (size_t)world;
    size_t b = (size_t)rank * k, e = b + k;
    if (b > len) b = len;
    if (e > len) e = len;
    *begin = b;
    *end = e;
}
