/* train.h - the training job API the worker executor calls.
 *
 * Spec: {"model":{"input":[1,28,28],"layers":[...]},
 *        "dataset":{"format":"idx","train_images","train_labels","test_images","test_labels"}
 *                | {"format":"csv","train","test","scale":1}
 *                | {"name":"fashion-mnist"},
 *        "optimizer":{"type":"sgd"|"adam","lr",...}, "schedule":{...} (optional),
 *        "batch_size":64, "epochs":N | "steps":N, "seed":1,
 *        "eval_every_steps":N (optional), "checkpoint_every_steps":N (optional)}
 * Paths are used as given (the caller resolves them under the tenant's data
 * roots).  Unknown top-level keys are ignored (the executor's own fields). */
#ifndef GANTRY_TRAIN_TRAIN_H
#define GANTRY_TRAIN_TRAIN_H

#include <jansson.h>
#include <stddef.h>

#define TRAIN_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

#define TRAIN_MAX_WORKERS 64

typedef struct {
    /* {"epoch","step","loss","accuracy","samples_per_s","compute_s","comm_s","data_s","lr","workers"
     *  [,"test_loss","test_accuracy"]}: global figures (every rank computes the same) */
    void (*progress)(void *ctx, const json_t *metrics);
    int (*should_stop)(void *ctx); /* nonzero: stop (cancel/preempt); every rank stops at the same step, returns 1 */
    void *ctx;
    /* Data parallelism: world > 1 ranks each run train_run with their rank and an
     * in-place sum of n floats over all ranks (identical results on every rank;
     * 0, or -1 with err when a peer is lost or too slow).  world 0 or 1: alone. */
    int rank, world;
    int (*allreduce)(void *ctx, float *buf, size_t n, char *err, size_t err_len);
    /* the math: NULL for the CPU backend; train_backend_cuda() on a GPU worker */
    const struct train_backend *backend;
} train_hooks;

/* 0 when the spec is valid; else -1 with field (e.g. "spec.optimizer.lr") and message */
int train_spec_validate(const json_t *spec, char *field, size_t field_len, char *msg, size_t msg_len);

/* Runs the spec as rank hooks->rank of hooks->world (alone when hooks is NULL),
 * checkpointing to ckpt_path (resumed from when it exists; a corrupt or
 * mismatched checkpoint is an error).  Every rank reads the checkpoint; only
 * rank 0 writes it, so ranks on several hosts need a shared directory (checked:
 * ranks that start from different states fail).  When stopped by should_stop a
 * checkpoint is written first.  On success rank 0 also writes the final model
 * (architecture + weights, no optimizer state) to ckpt_path + ".model".
 * Returns 0 with *result =
 * {"metrics":{"test_accuracy","test_loss","train_loss","epochs","steps","samples_per_s"},
 *  "model":{"architecture":{...},"parameters":N}} (on every rank), 1 when stopped,
 * -1 with err, -2 with err when the all-reduce failed (a peer was lost: retry). */
int train_run(const json_t *spec, const char *ckpt_path, const train_hooks *hooks, json_t **result, char *err, size_t err_len);

#endif
