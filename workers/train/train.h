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

typedef struct {
    void (*progress)(void *ctx,
                     const json_t *metrics); /* {"epoch","step","loss","accuracy","samples_per_s","compute_s","data_s"} */
    int (*should_stop)(void *ctx);           /* nonzero: stop (cancel/preempt); train_run returns 1 */
    void *ctx;
} train_hooks;

/* 0 when the spec is valid; else -1 with field (e.g. "spec.optimizer.lr") and message */
int train_spec_validate(const json_t *spec, char *field, size_t field_len, char *msg, size_t msg_len);

/* Runs the spec single-process, checkpointing to ckpt_path (resumed from when
 * it exists; a corrupt or mismatched checkpoint is an error).  When stopped
 * by should_stop a checkpoint is written first.  On success also writes the
 * final model (architecture + weights, no optimizer state) to
 * ckpt_path + ".model".  Returns 0 with *result =
 * {"metrics":{"test_accuracy","test_loss","train_loss","epochs","steps","samples_per_s"},
 *  "model":{"architecture":{...},"parameters":N}}, 1 when stopped, -1 with err. */
int train_run(const json_t *spec, const char *ckpt_path, const train_hooks *hooks, json_t **result, char *err, size_t err_len);

#endif
