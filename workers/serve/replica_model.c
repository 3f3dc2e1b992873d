/* replica_model.c - the model a replica serves, gantry or TorchScript, loaded from the resolved spec (replica_model.h). */
#include "workers/serve/replica_model.h"
#include "common/alloc.h"
#include "spec/serve_signature.h"
#include "workers/serve/ts_serve.h"

#include <stdio.h>
#include <string.h>

struct replica_model {
    int version;
    serve_model *gantry; /* one of the two */
    ts_model *torch;
};

replica_model *replica_model_load(const json_t *resolved, int threads, char *err, size_t el)
{
    const char *artifact = json_string_value(json_object_get(resolved, "artifact"));
    const char *format = json_string_value(json_object_get(resolved, "format"));
    if (!artifact) {
        snprintf(err, el, "the job has no resolved model artifact (submit it through the API)");
        return NULL;
    }
    replica_model *m = xcalloc(1, sizeof(*m));
    m->version = (int)json_integer_value(json_object_get(resolved, "version"));
    if (format && !strcmp(format, "torchscript")) {
        model_sig sig;
        char field[128], msg[256];
        if (sig_parse(json_object_get(resolved, "signature"), &sig, field, sizeof(field), msg, sizeof(msg)) != 0) {
            snprintf(err, el, "the model's signature is invalid (%s: %s)", field, msg);
            free(m);
            return NULL;
        }
        m->torch = ts_model_load(artifact, &sig, threads, SERVE_MAX_SAMPLES, err, el);
    } else {
        m->gantry = serve_model_load(artifact, SERVE_MAX_SAMPLES, err, el);
    }
    if (!m->torch && !m->gantry) {
        free(m);
        return NULL;
    }
    return m;
}

int replica_model_version(const replica_model *m)
{
    return m->version;
}

void replica_model_batch(replica_model *m, const char *name, serve_request *reqs, int n)
{
    if (m->torch)
        ts_batch(m->torch, name, m->version, reqs, n);
    else
        serve_batch(m->gantry, name, m->version, reqs, n);
}

void replica_model_free(replica_model *m)
{
    if (!m) return;
    if (m->torch) ts_model_free(m->torch);
    if (m->gantry) serve_model_free(m->gantry);
    free(m);
}
