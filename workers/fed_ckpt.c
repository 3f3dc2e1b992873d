/* fed_ckpt.c - a federated job's global model checkpointed on a worker (fed_ckpt.h). */
#include "workers/fed_ckpt.h"
#include "common/paths.h"
#include "workers/fed_progfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPT_SLACK (16u << 20) /* bytes of a checkpoint beyond its values: the header */

/* the job's checkpoint directory on this worker, and this worker's file in it */
static void ckpt_place(const exec_ctx *ctx, char *dir, size_t dirlen, char *name, size_t namelen)
{
    snprintf(dir, dirlen, "%s/jobs/%s/fed", ctx->state_dir, ctx->task->job_id);
    int n = snprintf(name, namelen, "global-%.100s.safetensors", ctx->worker_id ? ctx->worker_id : "worker");
    for (int i = 7; i < n && (size_t)i < namelen; i++) /* the worker's id as a file name: nothing but [A-Za-z0-9_.-] */
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", name[i])) name[i] = '_';
}

int fed_ckpt_save(exec_ctx *ctx, const tensorfile_header *layout, const double *z, int round, int rounds, char *err, size_t errlen)
{
    char dir[4096], name[160];
    ckpt_place(ctx, dir, sizeof dir, name, sizeof name);
    if (path_mkdirs(dir) != 0) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    size_t len;
    unsigned char *bytes = fed_resume_encode(layout, z, ctx->task->job_id, round, rounds, &len);
    int rc = fed_progfile_put(dir, name, bytes, len, true, err, errlen);
    free(bytes);
    return rc;
}

int fed_ckpt_load(exec_ctx *ctx, const tensorfile_header *layout, int rounds, fed_resume_have *have, double **v, char *why,
                  size_t whylen)
{
    char dir[4096], name[160], e[500];
    ckpt_place(ctx, dir, sizeof dir, name, sizeof name);
    tensorfile_header h = {0};
    *why = '\0', *v = NULL;
    int got = fed_progfile_read(dir, name, CKPT_SLACK + 4 * layout->total, &h, v, e, sizeof e);
    if (got == 1 && fed_resume_check(&h, *v, layout, ctx->task->job_id, rounds, have, e, sizeof e) == 0) {
        tensorfile_header_free(&h);
        return 1;
    }
    if (got != 0) snprintf(why, whylen, "the checkpoint %s/%s is not used: %s", dir, name, e);
    tensorfile_header_free(&h);
    free(*v), *v = NULL;
    return 0;
}
