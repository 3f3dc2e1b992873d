/* backend_nocuda.c - train_backend_cuda() in a build without CUDA: there is no GPU backend. */
#include "workers/train/backend.h"

#include <stddef.h>

const train_backend *train_backend_cuda(void)
{
    return NULL;
}
