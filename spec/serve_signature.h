/* serve_signature.h - a served model's signature: the named, typed tensors it takes and returns, as an
 * uploaded model's metadata declares them (POST /v1/models/{name}/versions, the `metadata` part)
 * and as the Open Inference Protocol v2 describes them (GET /v2/models/{name}).  jansson only: the
 * server checks an upload's metadata with it, a TorchScript replica checks requests against it.
 *
 * Metadata (every member but inputs optional; unknown members refused):
 *   {"inputs":  [{"name":"x", "datatype":"FP32", "shape":[-1, 3, 224, 224]}],
 *    "outputs": [{"name":"logits", "datatype":"FP32", "shape":[-1, 1000]}],
 *    "description": "ResNet-18, ImageNet classes", "metrics": {"top1": 0.697}}
 * - 1..SIG_MAX_TENSORS inputs and 0..SIG_MAX_TENSORS outputs (none: the outputs are named
 *   "output0", "output1", ... in the model's order, with the datatype and shape it returns);
 * - name: 1..64 characters of [A-Za-z0-9_.-], unique among the inputs (and among the outputs);
 * - datatype: FP32, FP64, INT32 or INT64 (the OIP v2 names);
 * - shape: 1..SIG_MAX_DIMS dimensions; the first is the batch and must be -1; the others are -1
 *   (any size, e.g. a sequence length) or 1..2^31-1;
 * - description: a string of at most 4096 bytes without control characters but \n and \t;
 * - metrics: an object of at most 64 finite numbers. */
#ifndef GANTRY_SERVE_SIGNATURE_H
#define GANTRY_SERVE_SIGNATURE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define SIG_MAX_TENSORS 16
#define SIG_MAX_DIMS 8
#define SIG_NAME_MAX 64

typedef enum { SIG_FP32 = 0, SIG_FP64 = 1, SIG_INT32 = 2, SIG_INT64 = 3 } sig_dtype;

typedef struct {
    char name[SIG_NAME_MAX + 1];
    sig_dtype dtype;
    int ndim;
    int64_t shape[SIG_MAX_DIMS]; /* shape[0] == -1 (the batch); -1 elsewhere: any size */
} sig_tensor;

typedef struct {
    int nin, nout;
    sig_tensor in[SIG_MAX_TENSORS], out[SIG_MAX_TENSORS];
} model_sig;

/* Checks an upload's metadata object (above) and fills *out from its inputs and outputs.  0, or -1
 * with the field ("metadata.inputs[0].shape[0]", "metadata.description", "metadata" for a
 * non-object) and a message saying what is expected. */
int sig_parse(const json_t *metadata, model_sig *out, char *field, size_t field_len, char *msg, size_t msg_len);
/* {"inputs":[{name, datatype, shape}], "outputs":[...]}: what sig_parse reads back (the registry
 * stores it, the OIP metadata answer shows it); a new reference */
json_t *sig_to_json(const model_sig *s);

/* "FP32", ...; sig_dtype_parse: 0, or -1 for another name */
const char *sig_dtype_name(sig_dtype t);
int sig_dtype_parse(const char *name, sig_dtype *out);
/* bytes of one element */
size_t sig_dtype_size(sig_dtype t);

#endif
