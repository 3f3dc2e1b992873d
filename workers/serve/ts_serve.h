/* ts_serve.h - what a TorchScript replica computes: serve.h's contract for an uploaded TorchScript
 * model, run by the libtorch backend (torch_model.h) and checked against its signature
 * (signature.h).  No I/O but reading the model.
 *
 * ts_model_load loads the file, then runs a warm-up forward pass on a batch of 1 of zeros built
 * from the signature (a -1 dimension other than the batch: 1), twice (TorchScript's profiling
 * executor optimises on the second run).  Its outputs must be batched (first
 * dimension 1) and, when the metadata declares outputs, match their count, datatypes and fixed
 * dimensions: a model whose metadata lies is refused when the replica starts, with a message naming
 * the output, not at its first request.
 *
 * ts_batch has serve_batch's contract (serve.h): n OIP v2 request bodies in, n replies or 400
 * errors out (ts_request.h says what a request must hold).  Requests whose dimensions other than
 * the batch are equal for every input are concatenated along dimension 0 into one forward pass of
 * up to max_samples samples; others run in their own passes.  The outputs are split back along
 * dimension 0 into each request's reply.
 *
 * When the model is at fault (its forward throws, or an output is not batched along dimension 0 or
 * no longer matches the metadata) and the pass held several requests, each runs again alone, so
 * that one request the model cannot take (a sequence too long for it) does not fail the others.
 * A request the model still fails on alone is answered with status 400 and the model's message
 * ("the model's forward pass failed: ...", "the model's output 'y' has shape [1, 5] for a batch
 * of 3 samples: it is not batched ..."): serve_request carries 200 or 400 only, and the message
 * says that the model, not the request, is at fault.  An output value that is NaN or infinite is
 * a 400 for the request whose rows hold it (JSON cannot carry it), as in serve.c. */
#ifndef GANTRY_SERVE_TS_SERVE_H
#define GANTRY_SERVE_TS_SERVE_H

#include <stddef.h>

#include "workers/serve/serve.h"
#include "spec/serve_signature.h"

typedef struct ts_model ts_model;

/* loads path for batches of up to max_samples, libtorch's intra-op threads = threads (<= 0: its
 * default); NULL with err (the loader's message, or the warm-up's) */
ts_model *ts_model_load(const char *path, const model_sig *sig, int threads, int max_samples, char *err, size_t el);
void ts_model_free(ts_model *m);
/* the signature it serves (a copy of the one given to ts_model_load); nout == 0 when the metadata
 * declares no outputs (the replies then name them output0, output1, ...) */
const model_sig *ts_model_sig(const ts_model *m);

void ts_batch(ts_model *m, const char *name, int version, serve_request *reqs, int n);

#endif
