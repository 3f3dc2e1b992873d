/* ts_request.h - the pure parts of a TorchScript replica (ts_serve.h): an OIP v2 request body
 * checked against the model's signature and read into batch tensors, and a reply's text made from
 * the output tensors of the forward pass it was in.  No libtorch here (only tm_tensor's layout).
 *
 * A request must hold exactly the signature's inputs, matched by name in any order:
 *   {"id"?: "r1", "inputs": [{"name":"x", "datatype":"FP32", "shape":[n, ...], "data":[...]}, ...]}
 * - datatype: the input's own; an FP32 input also takes "FP64" (JSON numbers are decimal text
 *   either way: each value is rounded to the nearest float, as the built-in replica does).  No
 *   other substitution: INT32 for an INT64 input, or FP32 for an FP64 one, is refused;
 * - shape: the signature's number of dimensions; the first (the batch) in [1, max_samples] and the
 *   same for every input; a fixed dimension equal to the signature's; a -1 one any positive size;
 * - data: flat or nested, exactly the shape's element count; FP32/FP64: finite numbers (after
 *   rounding to the type); INT32/INT64: integer literals read exactly (never through a double) and
 *   in the type's range ("1.0" is refused).
 * Each refusal is a 400 message naming the field: "inputs[1].shape[2]: must be 224 (the model's
 * input 'x' is [-1, 3, 224, 224])", "inputs: missing input 'ids' (the model takes x, ids)".
 *
 * The numbers are not read into jansson values: scan.h finds each input's data in the body, the
 * rest of the body is parsed by jansson (duplicate keys refused: one reading of the body), and
 * ts_request_fill reads the numbers straight into the batch tensor at the request's rows. */
#ifndef GANTRY_SERVE_TS_REQUEST_H
#define GANTRY_SERVE_TS_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "workers/serve/scan.h"
#include "spec/serve_signature.h"
#include "workers/serve/torch_model.h"

/* one parsed request; every array is indexed by the signature's input (sig->in[k]) */
typedef struct {
    json_t *doc;                                  /* the body, each scanned data value replaced by [] */
    int samples;                                  /* shape[0], the same for every input */
    int64_t shape[SIG_MAX_TENSORS][SIG_MAX_DIMS]; /* input k's shape as sent (shape[k][0] == samples) */
    size_t count[SIG_MAX_TENSORS];                /* its elements */
    int at[SIG_MAX_TENSORS];                      /* its index in the request's inputs array */
    scan_range range[SIG_MAX_TENSORS];            /* its data's text in the body (end > 0), */
    const json_t *data[SIG_MAX_TENSORS];          /* or else its data value in doc, */
    size_t json_len;                              /* the body's JSON part; the binary part follows */
    bool binary[SIG_MAX_TENSORS];                 /* or else its bytes in the body's binary part: */
    size_t bin_off[SIG_MAX_TENSORS];              /* where they start (count x the datatype's size) */
} ts_request;

/* Checks a body against sig (above); 0, or -1 with the 400 message in err.  Free r with
 * ts_request_free either way.
 *
 * Binary data (the Open Inference Protocol's binary tensor extension, as KServe and Triton have it):
 * when json_len (> 0) is less than len, the body is json_len bytes of JSON and then the tensors'
 * bytes; an input sent that way has "parameters": {"binary_data_size": B} and no "data", its
 * datatype exactly the model's, and B = its element count x the datatype's size; the inputs' bytes
 * follow one another in the order of the request's inputs array, little-endian, row-major, and
 * fill the binary part exactly.  Floats must be finite there too.  json_len 0: all JSON. */
int ts_request_parse(const model_sig *sig, int max_samples, const char *body, size_t len, size_t json_len, ts_request *r, char *err,
                     size_t el);
void ts_request_free(ts_request *r);
/* whether a and b can share a forward pass: every input's dimensions but the batch are equal */
bool ts_request_same_shapes(const model_sig *sig, const ts_request *a, const ts_request *b);
/* bytes of one sample of input k (its elements / samples x the datatype's size) */
size_t ts_request_sample_bytes(const model_sig *sig, const ts_request *r, int k);
/* reads input k's values (r->count[k] of sig->in[k].dtype) into out; 0, or -1 with the 400
 * message ("inputs[0].data: value 7 is not a finite FP32 number") */
int ts_request_fill(const model_sig *sig, const ts_request *r, const char *body, int k, void *out, char *err, size_t el);
/* Input k's values where they are in the body, for a forward pass on them without a copy: when the
 * input came binary, starts aligned for its datatype and holds only finite floats; NULL otherwise
 * (then ts_request_fill copies it, or says what is wrong) */
const void *ts_request_in_place(const model_sig *sig, const ts_request *r, const char *body, int k);

/* The outputs of a forward pass of `batch` samples against sig: each batched along its first
 * dimension (shape[0] == batch), and when sig declares outputs, their count, datatypes, number of
 * dimensions and fixed dimensions.  0, or -1 with err naming the output ("the model's output
 * 'logits' is INT64, its metadata declares FP32"). */
int ts_outputs_check(const model_sig *sig, const tm_tensor *out, int nout, int64_t batch, char *err, size_t el);
/* The reply body (malloc'd) of request r whose samples are rows [offset, offset + r->samples) of
 * the outputs (checked by ts_outputs_check):
 *   {"model_name","model_version","id"?,"outputs":[{"name","datatype","shape":[n,...],"data":[...]}]}
 * names from sig (output0, output1, ... when it declares none), datatypes from the tensors, FP32
 * printed with %.9g and FP64 with %.17g (both read back exactly), integers exactly.  NULL with err
 * when one of its values is NaN or infinite (JSON cannot carry them). */
char *ts_reply(const model_sig *sig, const char *name, int version, const ts_request *r, const tm_tensor *out, int nout,
               int64_t offset, char *err, size_t el);

/* "[-1, 3, 224, 224]" into buf */
const char *ts_shape_text(const int64_t *shape, int ndim, char *buf, size_t len);

#endif
