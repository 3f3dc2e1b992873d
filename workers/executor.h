/* executor.h - what a worker runs for each job type.
 *
 * An executor is a function from a task (type, spec) to a result JSON object.
 * It reports progress and polls for cancellation through its context; it never
 * touches Redis itself (an inference replica moves its requests through ctx->redis
 * with workers/serve_io.c, a federated site its messages with workers/fed_io.c).
 * A tenant's code never runs in the worker: program ranks and model replicas are sandboxed
 * child processes (workers/program/prog_rank.h, workers/replica_proc.h).
 * The job type table (common/jobtypes.h) names each type's executor;
 * executor.c looks them up.  A new type's executor is declared below and
 * named in its row (docs/adding-a-job-type.md). */
#ifndef GANTRY_EXECUTOR_H
#define GANTRY_EXECUTOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "wire/msg.h"
#include "workers/rendezvous.h"

typedef struct exec_ctx {
    const task_msg *task;
    /* fraction in [0,1]; message and metrics (a progress point for the job's curves) may be NULL */
    void (*progress)(struct exec_ctx *ctx, double fraction, const char *message, const json_t *metrics);
    /* a message worth an event of its own, never coalesced as progress is (at most one per 0.5 s): a
     * replica that restarts, switches version, or cannot load one */
    void (*note)(struct exec_ctx *ctx, const char *message);
    bool (*cancelled)(struct exec_ctx *ctx);
    const char *state_dir; /* the worker's directory (checkpoints, the model store); shared by a gang's workers */
    /* gangs (task->slots > 1): joins this generation's rendezvous (workers/rendezvous.h) */
    int (*rendezvous)(struct exec_ctx *ctx, int world, const char *addr, int timeout_ms, rdv_members *out, char *err,
                      size_t errlen);
    /* a value shared by the gang's generation (rank 0's NCCL id): put, or wait for it */
    int (*gang_put)(struct exec_ctx *ctx, const char *field, const char *value);
    int (*gang_get)(struct exec_ctx *ctx, const char *field, int timeout_ms, char *out, size_t outlen, char *err, size_t errlen);
    const char *advertise_host; /* where other workers and the servers reach this one (the ring all-reduce and a
                                 * replica's direct endpoint listen there); never empty */
    rs_conn *redis;             /* for workers/serve_io.c and workers/fed_io.c: inference requests, federated messages */
    const char *worker_id;
    const char *worker_kind; /* "cpu" or "gpu": which backend a training job uses */
    void *opaque;
    const char *site; /* the worker's label site=NAME ("" none): federated sites labelled site=NAME run here */
    /* --fed-secret: the cluster secret federated sites authenticate their keys with (NULL: none) */
    const unsigned char *fed_secret;
    size_t fed_secret_len;
    /* --site-key: this worker's Ed25519 identity key (raw, NULL: none) and its public key's text form ("" none):
     * a federated site whose spec pins a public_key runs only on the worker holding it (docs/federated.md) */
    const unsigned char *site_key;
    const char *site_key_text;
    /* set by an executor that counts its own restarts (a program job: max_restarts + 1): the failures a
     * requeue after EXEC_RETRY allows before the job fails; 0: the worker's --max-attempts */
    int max_failures;
    int threads;         /* CPU threads this slot's compute may use (--threads; default the machine's cores) */
    const char *bin_dir; /* the worker binary's directory: gantry-rank-init and gantry-replica are beside it */
    /* program jobs (workers/exec_program.c): the uid and gid this slot's ranks run as (--sandbox-uid), and
     * whether their network is fenced (workers/program/prog_netfence.h): net_fenced true, or net_why says why
     * not and net_open whether programs run anyway (--program-network open) */
    unsigned sandbox_uid;
    bool net_fenced, net_open;
    const char *net_why;
} exec_ctx;

/* What an executor returns: */
#define EXEC_OK 0      /* *result set (a JSON object with a "metrics" object) */
#define EXEC_FAILED -1 /* reason in err: the job fails */
#define EXEC_SILENT 1  /* done, but another member of the gang reports the job's result */
#define EXEC_RETRY 2   /* a gang member was lost (reason in err): the job is requeued as its next generation */
typedef int (*exec_fn)(exec_ctx *ctx, json_t **result, char *err, size_t errlen);

typedef struct {
    const char *type;
    exec_fn run;
} executor;

/* NULL when this worker has no executor for the type */
const executor *executor_find(const char *type);

/* Frees what executors keep between generations of a job (a training job's hand-off state and
 * dataset), except what belongs to job_id, the job about to run (NULL: everything).  Job ids are
 * unique across types, so the id of a job of another type frees everything. */
void executor_release(const char *job_id);

int exec_placement(exec_ctx *ctx, json_t **result, char *err, size_t errlen);
int exec_training(exec_ctx *ctx, json_t **result, char *err, size_t errlen);
/* a training job whose spec names the team's own program (spec.program): exec_training calls it */
int exec_program(exec_ctx *ctx, json_t **result, char *err, size_t errlen);
/* frees what the training executor keeps between generations of a job (its
 * hand-off state, the dataset) unless job_id is that job; NULL: always */
void exec_training_release(const char *job_id);
int exec_inference(exec_ctx *ctx, json_t **result, char *err, size_t errlen);
int exec_federated(exec_ctx *ctx, json_t **result, char *err, size_t errlen);
/* a federated job whose spec names the team's program (spec.program): exec_federated calls it */
int exec_fed_program(exec_ctx *ctx, json_t **result, char *err, size_t errlen);

#endif
