/* torch_model_stub.c - torch_model.h in a build without libtorch (meson option `torch` found no
 * libtorch-dev): the worker still builds and runs every other job type, and a TorchScript replica
 * fails at load with a message that says what to install. */
#include "workers/serve/torch_model.h"

#include <stdio.h>
#include <stdlib.h>

static const char no_torch[] = "this worker was built without libtorch (install libtorch-dev and rebuild)";

bool tm_available(void)
{
    return false;
}

tm_model *tm_load(const char *path, int threads, char *err, size_t err_len)
{
    (void)path;
    (void)threads;
    if (err && err_len) snprintf(err, err_len, "%s", no_torch);
    return NULL;
}

int tm_forward(tm_model *m, const tm_tensor *in, int n, tm_tensor **out, int *nout, char *err, size_t err_len)
{
    (void)m;
    (void)in;
    (void)n;
    *out = NULL;
    *nout = 0;
    if (err && err_len) snprintf(err, err_len, "%s", no_torch);
    return -1;
}

void tm_tensors_free(tm_tensor *t, int n)
{
    for (int i = 0; t && i < n; i++)
        free(t[i].data);
    free(t);
}

void tm_free(tm_model *m)
{
    (void)m; /* tm_load never returned one */
}
