/* train.h - the training job API the worker executor calls.
 *
 * Spec: spec.h (the training spec module, which validates it).
 * Paths are used as given (the caller resolves them under the tenant's data
 * roots).  Unknown top-level keys are ignored (the executor's own fields). */
#ifndef GANTRY_TRAIN_TRAIN_H
#define GANTRY_TRAIN_TRAIN_H

#include <jansson.h>
#include <stddef.h>

#include "workers/train/data.h"
#include "spec/train_spec.h"

#define TRAIN_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* how the ranks of a run came to hold the same state (reported by rank 0) */
typedef struct {
    const char *from; /* "survivor" (a worker's state kept from an earlier generation), "checkpoint" or "fresh" */
    int source;       /* the rank whose state every rank took (-1 fresh) */
    unsigned long long step;
    size_t bytes;    /* the state broadcast to the other ranks (0 alone or fresh) */
    double seconds;  /* agreeing on the source and broadcasting */
    double taken_at; /* CLOCK_REALTIME when the source's state was taken (0 fresh) */
    double load_s;   /* this rank's loading of the dataset (0 when given by the caller) */
} train_start_info;

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
    /* copies root's bytes (backend memory) to every rank; required when world > 1 */
    int (*broadcast)(void *ctx, void *buf, size_t bytes, int root, char *err, size_t err_len);
    /* Elastic hand-off.  handoff: the state this worker kept when an earlier
     * generation of the job ended (an encoded checkpoint, ckpt.h; NULL none),
     * taken at handoff_at (CLOCK_REALTIME).  Every rank offers its hand-off or
     * else the checkpoint; the newest step wins and its rank broadcasts it, so
     * the ranks need no shared directory and survivors lose no step. */
    const unsigned char *handoff;
    size_t handoff_len;
    double handoff_at;
    /* when the run ends unfinished (stopped, or a peer lost): the state to keep
     * for the next generation (the callee takes the malloc'd blob) */
    void (*keep)(void *ctx, unsigned char *blob, size_t len);
    /* rank 0, once every rank holds the same state */
    void (*started)(void *ctx, const train_start_info *info);
    /* the strategy_switch policy (adapt.h): every rank switches its all-reduce to
     * strategy (a train_strategy) at the same step; 0, or -1 when unsupported (NULL: unsupported) */
    int (*set_strategy)(void *ctx, int strategy);
    /* model hopping (mop.h): sends len bytes to rank + 1 while receiving what rank - 1
     * sends (*recv malloc'd, NULL when empty); required when world > 1 */
    int (*shift)(void *ctx, const void *send, size_t len, void **recv, size_t *recv_len, char *err, size_t err_len);
    /* the spec's dataset already in memory (train_dataset_load; borrowed), or NULL: train_run loads it */
    const train_data *train_set, *test_set;
} train_hooks;

/* the spec's shapes, train_spec_validate and train_spec_long: spec.h (the jansson-only spec module) */

/* Loads the training and test sets of a valid spec (spec.dataset; a CSV's shape
 * from spec.model.input).  0, or -1 with err naming the file. */
int train_dataset_load(const json_t *spec, train_data *train, train_data *test, char *err, size_t err_len);

/* Runs the spec as rank hooks->rank of hooks->world (alone when hooks is NULL),
 * checkpointing to ckpt_path (resumed from when it exists; a corrupt or
 * mismatched checkpoint is an error).  Rank 0 writes the checkpoints; at the
 * start the ranks agree on the newest state any of them has (a hand-off or
 * its checkpoint) and its rank broadcasts it.  When stopped by should_stop a
 * checkpoint is written first.  On success rank 0 also writes the final model
 * (architecture + weights, no optimizer state) to ckpt_path + ".model".
 * Returns 0 with *result =
 * {"metrics":{"test_accuracy","test_loss","train_loss","epochs","steps","samples_per_s"},
 *  "model":{"architecture":{...},"parameters":N}} (on every rank), 1 when stopped,
 * -1 with err, -2 with err when the all-reduce failed (a peer was lost: retry). */
int train_run(const json_t *spec, const char *ckpt_path, const train_hooks *hooks, json_t **result, char *err, size_t err_len);

#endif
