/* optim.h - SGD with momentum, Adam, and learning-rate schedules.
 *
 * Optimizer JSON: {"type":"sgd","lr":0.05,"momentum":0.9} or
 * {"type":"adam","lr":0.001,"beta1":0.9,"beta2":0.999,"eps":1e-8}.
 * Schedule JSON (optional): {"type":"constant"|"step"|"cosine",
 * "warmup_steps":N, "step_size":N, "gamma":0.1, "min_lr":0}.  Warm-up ramps
 * linearly from lr/warmup to lr over the first warmup_steps steps; cosine
 * decays from lr to min_lr over the remaining steps of the run. */
#ifndef GANTRY_TRAIN_OPTIM_H
#define GANTRY_TRAIN_OPTIM_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "workers/train/model.h"

typedef enum { TRAIN_SGD = 1, TRAIN_ADAM = 2 } train_optim_type;

typedef struct {
    train_optim_type type;
    float lr, momentum, beta1, beta2, eps;
    uint64_t t; /* steps taken */
    int n;
    train_param **params; /* borrowed from the model */
    float **m, **v;       /* per param: velocity (SGD) or moments (Adam); v NULL for SGD */
} train_optim;

typedef enum { TRAIN_SCHED_CONSTANT, TRAIN_SCHED_STEP, TRAIN_SCHED_COSINE } train_sched_type;

typedef struct {
    train_sched_type type;
    long warmup, step_size;
    float gamma, min_lr;
} train_schedule;

/* the optimizer's and the schedule's shapes and rules: spec/train_spec.h (spec/train_spec_optim.c) */

/* o must fit train_optim_shape; NULL when the backend cannot allocate the state (a GPU's memory) */
train_optim *train_optim_create(const json_t *o, train_model *m);
void train_optim_free(train_optim *o, const train_backend *be);
void train_optim_step(train_optim *o, const train_backend *be, float lr);
/* floats of state per param (0, 1 or 2 buffers of the param's size) */
int train_optim_buffers(const train_optim *o);

void train_schedule_init(train_schedule *s, const json_t *j); /* j may be NULL */
float train_schedule_lr(const train_schedule *s, float base, long step, long total);

#endif
