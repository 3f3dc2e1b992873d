/* serve.h - what an inference replica computes, with no I/O but reading the model.
 *
 * Inference spec (POST /v1/jobs {"type":"inference","spec":{...}}):
 *   {"model":"fashion-mlp", "version":2 (optional: the latest),
 *    "slo":{"latency_ms":100, "percentile":99},
 *    "replicas":{"min":1,"max":4} | N, "weight":1,
 *    "max_batch":32, "batch_delay_ms":2, "queue_limit":1000, "timeout_ms":5000}
 * The server resolves the model in the tenant's registry when the job is
 * submitted and adds "resolved":{"version","artifact","input":[c,h,w],"outputs":k}
 * (a client may not set it).
 *
 * Requests and responses follow the Open Inference Protocol v2 (KServe):
 *   request  {"id"?, "inputs":[{"name","shape":[n, ...],"datatype":"FP32","data":[...]}]}
 *            (data flat or nested; the per-sample size must be the model's input size)
 *   response {"model_name","model_version","id"?,
 *             "outputs":[{"name":"probabilities","shape":[n,k],"datatype":"FP32","data":[...]},
 *                        {"name":"label","shape":[n],"datatype":"INT64","data":[...]}]} */
#ifndef GANTRY_SERVE_H
#define GANTRY_SERVE_H

#include <jansson.h>
#include <stddef.h>

#include "spec/serve_spec.h"
#include "workers/train/model.h"

typedef struct serve_model serve_model;
/* loads a model file (train's ".model" format) for batches of up to max_samples; NULL with err */
serve_model *serve_model_load(const char *path, int max_samples, char *err, size_t err_len);
void serve_model_free(serve_model *m);
size_t serve_model_in_size(const serve_model *m);
size_t serve_model_out_size(const serve_model *m);

/* One OIP request body (text) -> the response body (malloc'd text) for model
 * (name, version).  On a client error returns NULL with *status 400 and err;
 * never crashes on any input.  Batching: serve_batch runs several requests in
 * one forward pass (each request's samples contiguous). */
typedef struct {
    const char *body; /* in */
    size_t len;
    /* in: the bytes at the start of body that are JSON; after them, binary tensor data (the Open
     * Inference Protocol's binary extension, TorchScript models only: ts_request.h); 0: all */
    size_t json_len;
    char *reply;   /* out: malloc'd response body, or NULL */
    int status;    /* out: 200 or 400 */
    char err[256]; /* out, when status != 200 */
} serve_request;
void serve_batch(serve_model *m, const char *name, int version, serve_request *reqs, int n);

/* the body of a 400 for err (a refused request's message: "inputs[0].shape: ..."), in the API's one
 * error shape {"error":{"code","message","field"}}; never NULL: a replica is never silent (free it) */
char *serve_error_body(const char *err);

#endif
