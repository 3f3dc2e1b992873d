/* ts_serve.c - a TorchScript replica's batches: requests parsed (ts_request.c), grouped by shape,
 * concatenated into input tensors, run by the libtorch backend, split back into replies. */
#include "workers/serve/ts_serve.h"

#include "common/alloc.h"
#include "workers/serve/torch_model.h"
#include "workers/serve/ts_request.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ts_model {
    tm_model *tm;
    model_sig sig;
    int cap;
    void *buf[SIG_MAX_TENSORS]; /* each input's batch, grown to the largest pass seen */
    size_t buf_len[SIG_MAX_TENSORS];
};

/* one forward pass on in (batch samples) with its outputs checked; 0, or -1 with err */
static int forward(ts_model *m, const tm_tensor *in, int64_t batch, tm_tensor **out, int *nout, char *err, size_t el)
{
    char e[192];
    *out = NULL, *nout = 0;
    if (tm_forward(m->tm, in, m->sig.nin, out, nout, e, sizeof e)) {
        snprintf(err, el, "the model's forward pass failed: %s", e);
        return -1;
    }
    if (ts_outputs_check(&m->sig, *out, *nout, batch, err, el)) {
        tm_tensors_free(*out, *nout);
        *out = NULL, *nout = 0;
        return -1;
    }
    return 0;
}

/* the warm-up: a batch of 1 of zeros */
static int warm_up(ts_model *m, char *err, size_t el)
{
    tm_tensor in[SIG_MAX_TENSORS];
    for (int k = 0; k < m->sig.nin; k++) {
        const sig_tensor *t = &m->sig.in[k];
        size_t count = 1;
        in[k] = (tm_tensor){.dtype = t->dtype, .ndim = t->ndim};
        for (int d = 0; d < t->ndim; d++) {
            in[k].shape[d] = d == 0 || t->shape[d] == -1 ? 1 : t->shape[d];
            count *= (size_t)in[k].shape[d];
        }
        in[k].data = xcalloc(count, sig_dtype_size(t->dtype));
    }
    /* twice: TorchScript's profiling executor optimises the graph on its second run, which would
     * otherwise be a client's */
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        tm_tensor *out;
        int nout;
        rc = forward(m, in, 1, &out, &nout, err, el);
        if (rc == 0) tm_tensors_free(out, nout);
    }
    for (int k = 0; k < m->sig.nin; k++)
        free(in[k].data);
    return rc;
}

ts_model *ts_model_load(const char *path, const model_sig *sig, int threads, int max_samples, char *err, size_t el)
{
    ts_model *m = xcalloc(1, sizeof(*m));
    m->sig = *sig;
    m->cap = max_samples > 0 ? max_samples : 1;
    m->tm = tm_load(path, threads, err, el);
    if (!m->tm) {
        ts_model_free(m);
        return NULL;
    }
    char e[192];
    if (warm_up(m, e, sizeof e)) {
        snprintf(err, el, "the model does not run as its metadata says (a warm-up pass on a batch of 1 of zeros): %s", e);
        ts_model_free(m);
        return NULL;
    }
    return m;
}

void ts_model_free(ts_model *m)
{
    if (!m) return;
    if (m->tm) tm_free(m->tm);
    for (int k = 0; k < SIG_MAX_TENSORS; k++)
        free(m->buf[k]);
    free(m);
}

const model_sig *ts_model_sig(const ts_model *m)
{
    return &m->sig;
}

static void refuse(serve_request *r, const char *msg)
{
    r->status = 400;
    snprintf(r->err, sizeof r->err, "%s", msg);
}

/* One forward pass over the requests idx[0..g) (all of the same shapes, at most m->cap samples in
 * all); each gets its reply or its 400.  A pass of several that the model fails runs each alone. */
static void run(ts_model *m, const char *name, int version, serve_request *reqs, ts_request *rs, const int *idx, int g)
{
    const model_sig *sig = &m->sig;
    const ts_request *first = &rs[idx[0]];
    tm_tensor in[SIG_MAX_TENSORS];
    size_t sample[SIG_MAX_TENSORS] = {0}, samples = 0;
    for (int j = 0; j < g; j++)
        samples += (size_t)rs[idx[j]].samples;
    for (int k = 0; k < sig->nin; k++) {
        in[k] = (tm_tensor){.dtype = sig->in[k].dtype, .ndim = sig->in[k].ndim};
        memcpy(in[k].shape, first->shape[k], sizeof in[k].shape);
        sample[k] = ts_request_sample_bytes(sig, first, k);
        size_t need = sample[k] * samples;
        if (m->buf_len[k] < need) {
            free(m->buf[k]);
            m->buf[k] = xmalloc(need), m->buf_len[k] = need;
        }
        in[k].data = m->buf[k];
    }
    /* the requests' rows, one after the other; one that fails to read leaves no rows */
    int64_t used = 0, *offset = xmalloc(sizeof(int64_t) * (size_t)g);
    int good = 0;
    for (int j = 0; j < g; j++) {
        serve_request *r = &reqs[idx[j]];
        const ts_request *p = &rs[idx[j]];
        offset[j] = -1;
        int k = 0;
        for (; k < sig->nin; k++) {
            const void *there = g == 1 ? ts_request_in_place(sig, p, r->body, k) : NULL;
            if (there) /* one request's binary tensor: the forward pass reads it where it is (from_blob) */
                in[k].data = (void *)there;
            else if (ts_request_fill(sig, p, r->body, k, (char *)m->buf[k] + (size_t)used * sample[k], r->err, sizeof r->err))
                break;
        }
        if (k < sig->nin) {
            r->status = 400;
            continue;
        }
        offset[j] = used, used += p->samples, good++;
    }
    if (good == 0) {
        free(offset);
        return;
    }
    for (int k = 0; k < sig->nin; k++)
        in[k].shape[0] = used;
    tm_tensor *out;
    int nout;
    char err[256];
    if (forward(m, in, used, &out, &nout, err, sizeof err) == 0) {
        for (int j = 0; j < g; j++)
            if (offset[j] >= 0) {
                serve_request *r = &reqs[idx[j]];
                r->reply = ts_reply(sig, name, version, &rs[idx[j]], out, nout, offset[j], r->err, sizeof r->err);
                if (!r->reply) r->status = 400;
            }
        tm_tensors_free(out, nout);
    } else if (good == 1) {
        for (int j = 0; j < g; j++)
            if (offset[j] >= 0) refuse(&reqs[idx[j]], err);
    } else { /* the model's fault: find the request it cannot take */
        for (int j = 0; j < g; j++)
            if (offset[j] >= 0) run(m, name, version, reqs, rs, &idx[j], 1);
    }
    free(offset);
}

void ts_batch(ts_model *m, const char *name, int version, serve_request *reqs, int n)
{
    ts_request *rs = xcalloc((size_t)n, sizeof(ts_request));
    bool *taken = xcalloc((size_t)n, sizeof(bool));
    int *idx = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) {
        reqs[i].reply = NULL, reqs[i].status = 200, reqs[i].err[0] = '\0';
        if (ts_request_parse(&m->sig, m->cap, reqs[i].body, reqs[i].len, reqs[i].json_len, &rs[i], reqs[i].err,
                             sizeof reqs[i].err)) {
            reqs[i].status = 400;
            taken[i] = true;
        }
    }
    /* in arrival order: each pass takes the first request left and the later ones of its shapes that fit */
    for (int i = 0; i < n; i++) {
        if (taken[i]) continue;
        int g = 0, samples = 0;
        for (int j = i; j < n; j++)
            if (!taken[j] && ts_request_same_shapes(&m->sig, &rs[i], &rs[j]) && samples + rs[j].samples <= m->cap) {
                idx[g++] = j, samples += rs[j].samples;
                taken[j] = true;
            }
        run(m, name, version, reqs, rs, idx, g);
    }
    for (int i = 0; i < n; i++)
        ts_request_free(&rs[i]);
    free(rs);
    free(taken);
    free(idx);
}
