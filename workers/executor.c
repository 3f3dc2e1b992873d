#include "workers/executor.h"

#include <string.h>

static const executor executors[] = {
    {"placement", exec_placement},
    {"training", exec_training},
    {"inference", exec_inference},
    {"federated", exec_federated},
};

const executor *executor_find(const char *type)
{
    for (size_t i = 0; i < sizeof(executors) / sizeof(executors[0]); i++)
        if (strcmp(executors[i].type, type) == 0) return &executors[i];
    return NULL;
}
