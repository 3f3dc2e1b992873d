/* program_spec.h - a program job's spec: a training job whose spec names the team's own program
 * (argv, workdir, environment) instead of a layer list; a variant of the training type, not a
 * row of its own (spec/train_spec.c dispatches on the presence of "program").  jansson only
 * (+ common/schema, common/utf8): the server validates with it, the worker (exec_program.c)
 * reads the settings with their defaults from it.  docs/programs.md "The job spec".
 *
 *   {"program": {"command": ["python3", "train.py", "--epochs", "3"],  argv; argv[0] on the sandbox's PATH
 *                "workdir": "pytorch",        relative to the tenant's first root, or absolute under a root
 *                "env": {"LR": "0.01"}},      not the variables gantry sets (RANK, MASTER_*, GANTRY_*, ...)
 *    "workers": 2 | {"min": 1, "max": 3},     ranks, as for built-in training
 *    "max_runtime_s": 3600, "grace_s": 30, "max_restarts": 3, "rendezvous_timeout_s": 60,
 *    "resources": {"memory_mb": 4096, "processes": 1024, "open_files": 4096, "cpus": 2.5},   per rank
 *    "register_model": {"output": "model.pt", "format": "torchscript"}, "model_name": "fashion-cnn"}
 *
 * What the shape cannot say is checked after it, by program_spec_validate: command[0] names a
 * program, env names are variable names and not gantry's, workdir and register_model.output have
 * no "..", output is relative, workers.max >= workers.min, model_name only with register_model and
 * without control characters.  What needs the tenant is the server's: the workdir confined to the
 * tenant's roots and a directory (common/paths.h path_confine_dir; the worker resolves it again),
 * memory_mb within the tenant's max_memory_bytes (server/limits.c). */
#ifndef GANTRY_PROGRAM_SPEC_H
#define GANTRY_PROGRAM_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/schema.h"

#define PROG_MAX_RANKS 64
#define PROG_MAX_ARGS 256
#define PROG_MAX_ENV 128
#define PROG_DEFAULT_MEMORY_MB 8192 /* when neither the spec nor the tenant's max_memory_bytes says */
#define PROG_MAX_CPUS 1024          /* resources.cpus at most (the worker caps it at its slot's share) */

/* the whole spec's shape (the program variant of TrainingSpec in the API document), and spec.program's */
extern const sch program_spec_shape, program_shape;
/* its members resources, max_runtime_s and grace_s (a federated job's program variant has them too: spec/fed_spec.h) */
extern const sch program_resources_shape, program_runtime_shape, program_grace_shape;

/* 0 when spec is a valid program spec (its shape, then the rules above); else -1 with the field
 * ("spec.program.command[0]", "spec.program.env.RANK", "spec.resources.memory_mb") and a message */
int program_spec_validate(const json_t *spec, char *field, size_t field_len, char *msg, size_t msg_len);

/* whether name may be set through spec.program.env: [A-Za-z_][A-Za-z0-9_]* and none of the names
 * gantry sets (RANK, WORLD_SIZE, MASTER_*, LOCAL_*, GANTRY_*, CUDA_VISIBLE_DEVICES, PWD); PATH, HOME
 * and LANG may be replaced.  NULL when it may, else why not */
const char *program_env_refusal(const char *name);

/* A valid spec's settings, defaults applied.  Strings and JSON are borrowed from spec. */
typedef struct {
    const json_t *command;           /* the argv: an array of strings, at least one, command[0] non-empty */
    const char *workdir;             /* as written; resolve with path_confine_dir (common/paths.h) under the task's roots */
    const json_t *env;               /* {NAME: "value"}; NULL when absent */
    int min_workers, max_workers;    /* the ranks: equal unless elastic */
    long max_runtime_s;              /* the job's wall clock per generation; 0: none (the tenant's limit still applies) */
    int grace_s;                     /* SIGTERM -> SIGKILL */
    int max_restarts;                /* new generations after a lost rank before the job fails */
    int rendezvous_timeout_s;        /* how long a gang waits for its members */
    long long memory_bytes;          /* per rank: memory_mb, else the tenant's max_memory_bytes, else 8192 MiB; never above
                                        the tenant's max_memory_bytes */
    int processes, open_files;       /* per rank */
    double cpus;                     /* per rank, cores of CPU time; 0: absent (the worker's slot share applies) */
    const char *register_output;     /* a file under GANTRY_OUTPUT_DIR to register as a model version; NULL: none */
    const char *register_format;     /* "torchscript" */
    const json_t *register_metadata; /* its signature, description, metrics (serve_signature.h), or NULL */
    const char *model_name;          /* spec.model_name; NULL: the job's name */
} program_settings;

/* tenant_max_memory_bytes: the task's max_memory_bytes (wire/msg.h), 0 or less when none */
void program_settings_get(const json_t *spec, long long tenant_max_memory_bytes, program_settings *out);

#endif
