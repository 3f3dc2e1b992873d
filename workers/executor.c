/* executor.c - the executor of each job type: the executor column of the job type table
 * (common/jobtypes.h). */
#include "workers/executor.h"

#include "common/jobtypes.h"

#include <string.h>

#define X(name, title, spec, executor, traits) {#name, executor},
static const executor executors[] = {JOB_TYPE_TABLE(X)};
#undef X

const executor *executor_find(const char *type)
{
    for (size_t i = 0; type && i < sizeof(executors) / sizeof(executors[0]); i++)
        if (strcmp(executors[i].type, type) == 0) return &executors[i];
    return NULL;
}

void executor_release(const char *job_id)
{
    exec_training_release(job_id);
}
