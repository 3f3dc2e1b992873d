/* prog_run.h - one rank of a team's program as a worker runs it: what a program training job
 * (workers/exec_program.c) and a federated job's program site (workers/exec_fed_program.c) share.
 *
 * It owns the rank's directories on the worker (<state>/jobs/<job>/{checkpoint,output,logs,run-R}),
 * the workdir resolved under the task's roots, the launch in the sandbox (workers/program/prog_rank.h:
 * limits, the network fence, the tenant's roots read-only), and the supervision between polls: new
 * whole lines of output shipped to the job's log stream (workers/program_io.h), metrics lines read
 * (rank 0's are the job's progress points and result.metrics; another rank's are points marked with
 * its rank), the rank stopped (SIGTERM, SIGKILL after grace_s) when the job is cancelled, preempted or
 * resized.  What a rank's end means for the job, gangs and environments are the callers'.
 * docs/programs.md says what a program sees. */
#ifndef GANTRY_PROG_RUN_H
#define GANTRY_PROG_RUN_H

#include "common/strv.h"
#include "spec/program_spec.h"
#include "workers/executor.h"
#include "workers/program/prog_logcap.h"
#include "workers/program/prog_metrics.h"
#include "workers/program/prog_rank.h"
#include "workers/program_io.h"

#include <limits.h>
#include <stdbool.h>

#define PROG_RUN_MAX_ROOTS 32 /* of the tenant's, bound into the sandbox */

typedef struct {
    exec_ctx *ctx;
    program_settings set;
    int rank, generation;
    char init[PATH_MAX]; /* gantry-rank-init */
    char dir[PATH_MAX], ckpt[PATH_MAX + 16], out[PATH_MAX + 16], logs[PATH_MAX + 16], run[PATH_MAX + 16];
    char workdir[PATH_MAX];
    const char *const *peers; /* every rank's host (the network fence's peers; the caller's), npeers of them */
    int npeers;
    /* the running rank */
    prog_rank *pr;
    prog_logcap_follow follow;
    char pending[PROGRAM_IO_CHUNK_MAX]; /* output read but not shipped: a line not finished yet */
    size_t npending;
    prog_metrics *met;
    json_t *merged; /* every metrics point of rank 0 in this generation merged: result.metrics */
    double fraction;
    bool terminating;
    bool fenced;        /* this slot's network chain holds the job's rules (back to idle at the end) */
    bool by_worker;     /* stopped because the worker said so (ctx->cancelled): the worker decides what follows */
    char stop_why[320]; /* why this rank was stopped (a peer's end, ...) */
} prog_run;

/* Whether this worker can run programs (bwrap, gantry-rank-init beside it, a fenced or an opened network),
 * then spec's settings (spec: a program job spec, spec/program_spec.h, already validated) and its workdir
 * resolved under the task's roots.  0, or -1 with err ("this worker cannot run programs: ...",
 * "spec.program.workdir: ..."): the job fails. */
int prog_run_init(prog_run *r, exec_ctx *ctx, const json_t *spec, int rank, char *err, size_t errlen);
/* the job's directories: <state>/jobs/<job>/{checkpoint,output,logs,run-R}, this generation's metrics
 * file removed; 0, or -1 with err */
int prog_run_dirs(prog_run *r, char *err, size_t errlen);
/* a GPU worker's CUDA_VISIBLE_DEVICES and NCCL_* for the rank's environment (a CPU worker: none) */
void prog_run_device_env(const exec_ctx *ctx, strv *env);
/* starts the rank's program with env (NAME=VALUE: the caller's variables; prog_rank.h adds gantry's
 * directories); 0, or -1 with err (the launch failed: the rank's end) */
int prog_run_launch(prog_run *r, const strv *env, char *err, size_t errlen);
/* waits up to ms for the rank, ships its new output, reads its metrics, stops it when the job is
 * cancelled (by_worker); 1 when it has ended */
int prog_run_poll(prog_run *r, int ms);
/* SIGTERM now, SIGKILL after grace_s (prog_run_poll sends it); once */
void prog_run_stop(prog_run *r, const char *why);
/* after the end: what is left of its output shipped; its status */
const prog_rank_status *prog_run_finish(prog_run *r);
/* {"dir": dir, "files": [{"path", "bytes", "sha256"}], "truncated"?}: the regular files under dir */
json_t *prog_run_outputs(const char *dir);
/* the rank killed if it still runs, the network rules reset, everything freed */
void prog_run_free(prog_run *r);

#endif
