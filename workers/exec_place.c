/* exec_place.c - the placement executor: the pure library in workers/place does the work. */
#include "workers/executor.h"
#include "workers/place/place.h"

int exec_placement(exec_ctx *ctx, json_t **result, char *err, size_t errlen)
{
    ctx->progress(ctx, 0.0, "placing", NULL);
    *result = place_solve(ctx->task->spec, err, errlen);
    return *result ? 0 : -1;
}
