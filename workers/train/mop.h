/* mop.h - model selection by model hopper parallelism (Cerebro).
 *
 * A training spec with "search" trains N configurations of itself on W workers:
 *
 *   "search": {"type": "grid", "params": {"optimizer.lr": [0.001, 0.003], "model.layers.1.units": [64, 128]}}
 *   "search": {"type": "random", "configurations": 8, "seed": 7,
 *              "params": {"optimizer.lr": {"min": 1e-4, "max": 1e-2, "log": true}, "batch_size": [32, 64]},
 *              "early_stop": {"after_epochs": 1, "keep": 0.5}}
 *
 * A parameter name is a path into the spec (keys, and array indices as
 * numbers); grid takes every combination (in the order of the params, the
 * last varying fastest), random draws "configurations" of them from a list
 * or a {min, max[, log]} range.  "epochs" gives the length; early_stop stops,
 * after each epoch from after_epochs on, all but the best `keep` fraction of
 * the configurations still running (by test accuracy).
 *
 * The schedule: the training set is cut once into W partitions (from the
 * seed); worker w keeps partition w, and no data moves.  There are
 * M = ceil(N/W)·W positions, K = M/W per worker (worker w holds positions
 * [wK, (w+1)K)); configuration m starts at position m (positions ≥ N are
 * empty).  In each sub-epoch t every worker trains the model at its first
 * position on its partition, then every model moves one position on: worker w
 * sends the model at its last position to worker w+1 (a ring shift), so each
 * worker sends one model per sub-epoch.  After M sub-epochs (an epoch) every
 * model has been trained exactly once on every partition and is back home.
 * Within a partition the order is a shuffle from (seed, partition, epoch), the
 * same for every model. */
#ifndef GANTRY_TRAIN_MOP_H
#define GANTRY_TRAIN_MOP_H

#include <jansson.h>
#include <stddef.h>

#include "spec/train_spec.h"
#include "workers/train/train.h"

/* spec.search's shape and its expansion into configurations (mop_expand): spec/train_spec.h (spec/train_spec_search.c) */

/* positions per worker (K) for n configurations on w workers */
int mop_per_worker(int n, int w);
/* the configuration at position pos in sub-epoch t, or -1 when empty */
int mop_model_at(int n, int w, int t, int pos);
/* the partitions configuration m is trained on, in order, during an epoch; returns how many (w for
 * 0 <= m < n, 0 for no such configuration) */
int mop_partition_order(int n, int w, int m, int *order);

/* Runs the search as rank hooks->rank of hooks->world (alone when hooks is NULL
 * or world 1); models move with hooks->shift.  Rank 0 writes the best model to
 * model_path.  Returns 0 with *result = {"metrics": {the best configuration's
 * "test_accuracy", "test_loss", "train_loss", "epochs", "configurations",
 * "best"}, "best_params", "configurations": [{"index", "params", "test_accuracy", "test_loss",
 * "train_loss", "epochs", "stopped"}], "model": {"architecture", "parameters"}},
 * 1 when stopped, -1 with err, -2 with err when a peer was lost. */
int mop_run(const json_t *spec, const char *model_path, const train_hooks *hooks, json_t **result, char *err, size_t err_len);

/* Trains configuration `config` alone in one process, in the data order model
 * hopping on `world` workers gives it: the reference MOP's results must equal.
 * *result as one entry of mop_run's "configurations". */
int mop_alone(const json_t *spec, int world, int config, json_t **result, char *err, size_t err_len);

#endif
