/* torch_model.h - a TorchScript model run by libtorch, behind a C API.
 *
 * All libtorch code is in torch_model.cpp, the one C++ source of the project; it is compiled only
 * when meson finds libtorch (option `torch`, auto: Debian's libtorch-dev).  Without it,
 * torch_model_stub.c provides the same functions: tm_available() is false and tm_load refuses
 * with a message saying the worker was built without libtorch.  Nothing else in gantry includes
 * a libtorch header.
 *
 * A model is loaded once per replica (torch::jit::load, eval mode) and run with
 * torch::NoGradGuard on CPU tensors; libtorch's intra-op thread pool is set to `threads` (the
 * worker's cores).  Inputs and outputs are dense row-major tensors of the signature's datatypes
 * (signature.h).  The model's forward may return a tensor, or a tuple or list of tensors. */
#ifndef GANTRY_SERVE_TORCH_MODEL_H
#define GANTRY_SERVE_TORCH_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spec/serve_signature.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tm_model tm_model;

typedef struct {
    sig_dtype dtype;
    int ndim;
    int64_t shape[SIG_MAX_DIMS];
    void *data; /* ndim-product elements of dtype, row-major */
} tm_tensor;

/* whether this build has libtorch */
bool tm_available(void);
/* loads a TorchScript file; threads <= 0 leaves libtorch's default.  The model checks of
 * docs/inference.md, "Model checks", run before it returns: the archive's code (tscode.h) before
 * torch::jit::load, then every op of every method and function against the allow list and every
 * tensor the model holds against its storage.  NULL with err (the loader's message: "not a
 * TorchScript archive", "PytorchStreamReader failed ..."; or the check's: "the model calls
 * aten::resize_ in Model.forward: not allowed (uninitialised memory; ...)") */
tm_model *tm_load(const char *path, int threads, char *err, size_t err_len);
/* Runs forward on n inputs (the caller keeps them).  0 with *out = a malloc'd array of *nout
 * tensors whose data are malloc'd (free with tm_tensors_free); -1 with err on any failure: a
 * wrong input count, dtype or shape for the model, an output that is not a tensor or a tuple or
 * list of them, an output datatype other than the four, an exception in the model. */
int tm_forward(tm_model *m, const tm_tensor *in, int n, tm_tensor **out, int *nout, char *err, size_t err_len);
void tm_tensors_free(tm_tensor *t, int n);
void tm_free(tm_model *m);

#ifdef __cplusplus
}
#endif

#endif
