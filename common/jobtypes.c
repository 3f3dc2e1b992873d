/* jobtypes.c - lookups over the job type table (jobtypes.h): names and traits only, so the
 * common library links no spec module and no executor. */
#include "common/jobtypes.h"

#include <string.h>

typedef struct {
    const char *name;
    unsigned traits;
} row;

#define X(name, title, spec, executor, traits) {#name, traits},
static const row rows[] = {JOB_TYPE_TABLE(X)};
#undef X
#define NROWS (sizeof rows / sizeof rows[0])

/* the names joined by ", ", written by the preprocessor: each row adds ", name", the first ", " is skipped */
#define X(name, title, spec, executor, traits) ", " #name
static const char names_joined[] = JOB_TYPE_TABLE(X);
#undef X

static const row *find(const char *type)
{
    for (size_t i = 0; type && i < NROWS; i++)
        if (strcmp(rows[i].name, type) == 0) return &rows[i];
    return NULL;
}

bool job_type_valid(const char *type)
{
    return find(type) != NULL;
}

unsigned job_type_traits(const char *type)
{
    const row *r = find(type);
    return r ? r->traits : 0;
}

const char *job_type_list(void)
{
    return names_joined + 2;
}
