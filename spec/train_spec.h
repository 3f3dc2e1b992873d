/* train_spec.h - the training job's spec module: jansson only (no BLAS, no CUDA), so the server and the
 * federated spec link it without the training library, and the training library checks a spec
 * with these same functions before it runs one.
 *
 * Spec (docs/training.md): {"model":{"input":[1,28,28],"layers":[...]},
 *        "dataset":{"format":"idx","train_images","train_labels","test_images","test_labels"}
 *                | {"format":"csv","train","test","scale":1}
 *                | {"name":"fashion-mnist"},
 *        "optimizer":{"type":"sgd"|"adam","lr",...}, "schedule":{...} (optional),
 *        "batch_size":64, "epochs":N | "steps":N, "seed":1, "workers":N | {"min","max"},
 *        "eval_every_steps":N, "checkpoint_every_steps":N, "policies":[...], "search":{...} (optional)}
 *
 * The program variant (a team's own program instead of the layer list): a spec with "program",
 * validated by spec/program_spec.h (train_spec_validate dispatches; built-in members such as
 * dataset or optimizer are refused by name); train_job_spec's shape is either variant.  Which
 * variant a spec is, is decided in one place, train_spec_variant: the validator, the job_spec
 * functions, the executor (workers/exec_train.c) and the logs route (server/logs.c) ask it.
 *
 * Files: train_spec.c (the top level, the dataset, train_job_spec), train_spec_model.c (the
 * architecture), train_spec_optim.c (optimizer and schedule), train_spec_policies.c (adaptation
 * policies, workers/train/adapt.h), train_spec_search.c (model selection's search,
 * workers/train/mop.h).  Each shape validates, gives the defaults (sch_number) and is written
 * into the API document. */
#ifndef GANTRY_TRAIN_SPEC_H
#define GANTRY_TRAIN_SPEC_H

#include <jansson.h>
#include <stddef.h>

#include "common/jobtypes.h"
#include "common/schema.h"

#define TRAIN_MAX_WORKERS 64
#define TRAIN_MAX_POLICIES 8
#define MOP_MAX_CONFIGS 256

/* ---- the spec (train_spec.c) ---- */

/* the variants of a training spec: built-in training (a layer list) or a team's own program */
typedef enum { TRAIN_BUILTIN, TRAIN_PROGRAM } train_variant;

/* which variant spec is (TRAIN_PROGRAM: it has a "program" member; anything else, a non-object
 * included, is TRAIN_BUILTIN); the one place that decides it */
train_variant train_spec_variant(const json_t *spec);

/* built-in training's shape and its dataset's (the federated spec reuses the dataset) */
extern const sch train_spec_shape, train_dataset_shape;
/* spec.batch_size and spec.seed (the federated spec has them too) */
extern const sch train_batch_shape, train_seed_shape;

/* 0 when the spec is valid: its shape, then the rules between fields (every configuration of a
 * search valid too; a program spec: program_spec_validate); else -1 with field (e.g.
 * "spec.optimizer.lr") and message */
int train_spec_validate(const json_t *spec, char *field, size_t field_len, char *msg, size_t msg_len);

/* a numeric member of a valid spec, or the default its shape documents */
long train_spec_long(const json_t *spec, const char *key);

/* calls fn for each file a (valid) dataset object names, the field named under prefix
 * ("spec.dataset" -> "spec.dataset.train_images"); 0 or fn's first nonzero answer */
int train_dataset_paths(const json_t *dataset, const char *prefix, job_path_fn fn, void *ctx);

/* the training row's spec module (common/jobtypes.h) */
extern const job_spec train_job_spec;

/* ---- the model's architecture (train_spec_model.c) ---- */

extern const sch train_arch_shape;
/* the layers whose members have defaults (model.c reads them) */
extern const sch train_dense_shape, train_conv2d_shape, train_maxpool_shape;

/* 0 when arch is a valid architecture; else -1, with field named under prefix
 * (e.g. "spec.model.layers[2].units") and msg */
int train_arch_validate(const json_t *arch, const char *prefix, char *field, size_t field_len, char *msg, size_t msg_len);

/* ---- optimizer and learning-rate schedule (train_spec_optim.c) ---- */

extern const sch train_optim_shape, train_sgd_shape, train_adam_shape, train_schedule_shape;
/* what the schedule's shape cannot say (a step schedule needs step_size); s fits its shape */
int train_schedule_rules(const json_t *s, const char *prefix, char *field, size_t fl, char *msg, size_t ml);

/* ---- adaptation policies (train_spec_policies.c; what they do: workers/train/adapt.h) ---- */

typedef enum { TRAIN_POLICY_GNS, TRAIN_POLICY_ADAPTIVE_BATCH, TRAIN_POLICY_STRATEGY_SWITCH, TRAIN_NPOLICIES } train_policy_kind;

/* spec.policies' shape, and each policy's (its parameters' defaults) */
extern const sch train_policies_shape;
extern const sch *const train_policy_shapes[TRAIN_NPOLICIES];
/* the train_policy_kind of a policy's name, or -1 */
int train_policy_find(const char *name);
/* 0 when spec.policies is absent or valid; else -1 with field and msg */
int train_policies_validate(const json_t *spec, char *field, size_t fl, char *msg, size_t ml);

/* ---- model selection's search (train_spec_search.c; the schedule and the run: workers/train/mop.h) ---- */

extern const sch mop_search_shape;

/* The configurations of a spec's search: *out an array of {"params": {name: value},
 * "spec": the full spec of that configuration (without "search")}, each one a valid training
 * spec.  0, or -1 with field (e.g. "spec.search.params.optimizer.lr") and msg. */
int mop_expand(const json_t *spec, json_t **out, char *field, size_t field_len, char *msg, size_t msg_len);

#endif
