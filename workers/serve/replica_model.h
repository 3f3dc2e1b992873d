/* replica_model.h - the model an inference replica serves, whatever its format, as the job's
 * spec.resolved names it (server/models.h models_resolve): a gantry model (workers/train's
 * ".model" file, serve.h) or a TorchScript file with its signature (ts_serve.h).  No I/O but
 * reading the model file; the replica loop (workers/exec_infer.c) owns the Redis side. */
#ifndef GANTRY_SERVE_REPLICA_MODEL_H
#define GANTRY_SERVE_REPLICA_MODEL_H

#include <jansson.h>
#include <stddef.h>

#include "workers/serve/serve.h"

typedef struct replica_model replica_model;

/* loads resolved {"version","artifact","format", "signature" (TorchScript)}; threads: the CPU
 * threads its forward passes may use.  NULL with err. */
replica_model *replica_model_load(const json_t *resolved, int threads, char *err, size_t err_len);
/* the version it is (resolved.version) */
int replica_model_version(const replica_model *m);
/* serve_batch's contract (serve.h) for either format: n requests -> n replies or 400s */
void replica_model_batch(replica_model *m, const char *name, serve_request *reqs, int n);
void replica_model_free(replica_model *m);

#endif
