/* jobtypes.h - the job types: one table, and the interface each type's spec module implements.
 *
 * A job type is one row of JOB_TYPE_TABLE.  Every part of gantry that treats types differently
 * reads this table and nothing else names a type:
 *   - the server (server/spec.c) takes the spec column: the type's spec module (below), which
 *     validates a submission, gives its slots, the labels people read, the dataset paths to
 *     confine, what it asks of the tenant's limits and the registered model it serves; the API
 *     document's schemas come from the module's shape, under the title column;
 *   - the workers (workers/executor.c) take the executor column: the function that runs a task;
 *   - the scheduler and the workers' run loop ask job_type_traits() for the traits column.
 * A row's macro arguments are tokens: each side expands only the columns it needs, so the common
 * library links no spec module and no executor.  docs/adding-a-job-type.md walks through a new row.
 *
 * Spec modules are jansson-only libraries beside the type's implementation (spec/place_spec.c,
 * spec/train_spec.c, spec/serve_spec.c, spec/fed_spec.c): the server links them without
 * the code that runs the job (no BLAS, CUDA or NCCL in gantry-server). */
#ifndef GANTRY_JOBTYPES_H
#define GANTRY_JOBTYPES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/schema.h"

/* Traits: how the scheduler and the workers treat a type's jobs. */
enum {
    /* its slots are one group (a gang) that starts together, and a member that stops (preempted, lost)
     * stops the whole generation, which is requeued */
    JT_GANG = 1 << 0,
    /* long-running replicas that serve until cancelled: no max_runtime_s, each slot independent,
     * replicas above the job's minimum (its slots) may be given back to a waiting gang */
    JT_SERVING = 1 << 1,
    /* short: may backfill the workers a waiting gang holds in reserve */
    JT_BACKFILL = 1 << 2,
    /* one slot per entry of spec.sites, each pinned by its "label" (site=NAME) when it has one */
    JT_PER_SITE = 1 << 3,
    /* a job that succeeds registers the model of its result (result.model) in the tenant's registry */
    JT_REGISTERS_MODEL = 1 << 4,
};

/* X(name, Title, spec, executor, traits):
 *   name      the type as the API spells it ("type": "training")
 *   Title     the spec's schema name in the API document (components.schemas.TrainingSpec)
 *   spec      the spec module's job_spec object (a jansson-only library; the server links it)
 *   executor  the worker's exec_fn (workers/executor.h) that runs a task of this type
 *   traits    JT_* flags */
#define JOB_TYPE_TABLE(X)                                                                                                          \
    X(placement, PlacementSpec, place_job_spec, exec_placement, JT_BACKFILL)                                                       \
    X(training, TrainingSpec, train_job_spec, exec_training, JT_GANG | JT_REGISTERS_MODEL)                                         \
    X(inference, InferenceSpec, serve_job_spec, exec_inference, JT_SERVING)                                                        \
    X(federated, FederatedSpec, fed_job_spec, exec_federated, JT_GANG | JT_PER_SITE | JT_REGISTERS_MODEL)

/* whether type is a row of the table (NULL: false) */
bool job_type_valid(const char *type);
/* the row's traits; 0 for an unknown type */
unsigned job_type_traits(const char *type);
/* "placement, training, inference, federated": the names in table order, for messages */
const char *job_type_list(void);

/* ---- the spec module's interface ---- */

/* the message for a name people read (printed by the dashboard and the CLI) with control characters */
#define JOB_NO_CONTROL_MSG "must not contain control characters (C0 such as ESC, CR, LF or tab; DEL; U+0080 to U+009F)"

/* what a path a spec names must be under the tenant's roots */
typedef enum {
    JOB_PATH_FILE, /* a file the job reads (a dataset): it must exist */
    JOB_PATH_DIR,  /* a directory (a program's workdir): it must exist and be one */
} job_path_kind;

/* called once for every path a spec names (field: "spec.dataset.train_images"); 0, or -1 to stop */
typedef int (*job_path_fn)(void *ctx, const char *path, const char *field, job_path_kind kind);

/* What a spec asks of the tenant's limits (server/limits.c), each with the field a refusal names and
 * how the message names the figure ("epochs", "rounds x local_steps ="). */
typedef struct {
    long long asked; /* < 0: not asked */
    const char *field, *what;
} job_cost_item;

typedef struct {
    job_cost_item epochs, steps;
    job_cost_item memory; /* bytes per worker (a program's ranks: max_memory_bytes) */
} job_cost;

/* A registered model the spec runs: the server resolves it at submission (the artifact, fixed then)
 * and stores the answer as spec.resolved (JOB_SPEC_RESOLVED; the shape documents it, admit refuses
 * it in a submission). */
#define JOB_SPEC_RESOLVED "resolved"
typedef struct {
    const char *model; /* its name */
    int version;       /* 0: the latest */
    const char *field; /* what an unknown model's error names ("spec.model" or "spec.version") */
} job_model_ref;

typedef struct {
    /* the spec's shape: validation, defaults and its JSON Schema in the API document */
    const sch *shape;
    /* 0 when the spec is valid (its shape, then the rules between fields); else -1 with the field
     * ("spec.optimizer.lr") and a message.  Workers run the same check before they run a task. */
    int (*validate)(const json_t *spec, char *field, size_t field_len, char *msg, size_t msg_len);
    /* rules only a submission obeys, after validate (NULL: none): names people read carry no control
     * characters, members the server sets are not given.  0, or -1 with the field and a message. */
    int (*admit)(const json_t *spec, char *field, size_t field_len, char *msg, size_t msg_len);
    /* the slots (workers) a valid spec takes at once */
    int (*slots)(const json_t *spec);
    /* calls fn for every path the spec names, to be confined under the tenant's roots (NULL: none);
     * 0, or the first nonzero fn returned */
    int (*paths)(const json_t *spec, job_path_fn fn, void *ctx);
    /* what the spec asks of the tenant's limits (NULL: nothing); an item it leaves alone is not asked
     * (the server sets each to -1 first) */
    void (*cost)(const json_t *spec, job_cost *out);
    /* the registered model the spec runs: 1 with *out, or 0 (NULL: never) */
    int (*model)(const json_t *spec, job_model_ref *out);
} job_spec;

#endif
