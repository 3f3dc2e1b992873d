/* adapt.h - adaptation policies (KungFu): code that watches a training run and
 * changes it while it runs.
 *
 * Spec: "policies": [{"name": "gns", "every_steps": 10, "alpha": 0.05},
 *                    {"name": "adaptive_batch", "min": 32, "max": 1024, "every_steps": 100,
 *                     "warmup_steps": 100, "scale_lr": "none" | "linear" | "sqrt"},
 *                    {"name": "strategy_switch", "threshold": 0.8, "window_steps": 50}]
 *
 * A policy is a table of hooks (before/after the run, each epoch, each step)
 * that read the run's figures (train_adapt) and may ask for a change: a new
 * global batch, a learning-rate factor, or a vote for another all-reduce
 * strategy.  The loop applies the requests at the step boundary, identically
 * on every rank, because the inputs a policy decides on are the all-reduced
 * figures (the gradient noise scale, the step counter) — except throughput,
 * which each rank measures itself: that is why the strategy switch is a vote,
 * counted in the next step's all-reduce (a majority switches).
 *
 * Built in:
 * - gns: the gradient noise scale (gns.h) from the ranks' slice gradients and
 *   the global one, every every_steps steps (needs 2 workers or more); it is
 *   in the progress points as "gns".
 * - adaptive_batch: every every_steps steps after warmup_steps, doubles or
 *   halves the global batch toward the noise scale, within [min, max] and a
 *   multiple of the workers; the learning rate is scaled only when scale_lr
 *   asks for it.  Turns the gns monitor on.
 * - strategy_switch: the throughput of the first window after each start or
 *   switch is the reference; a rank whose window falls below threshold x the
 *   reference votes to move to the next strategy (ring -> tree -> star ->
 *   ring).
 * Learning-rate schedules are the spec's "schedule" (optim.h).  Every change is
 * an event (a metrics point with "event"), listed on the job page.  Pure: no
 * I/O. */
#ifndef GANTRY_TRAIN_ADAPT_H
#define GANTRY_TRAIN_ADAPT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "spec/train_spec.h"

typedef enum { TRAIN_RING, TRAIN_TREE, TRAIN_STAR, TRAIN_NSTRATEGIES } train_strategy;

const char *train_strategy_name(int s);

/* what policies read, and what they ask for */
typedef struct {
    long step, epoch;
    int world;
    long batch;           /* the global batch now */
    double lr;            /* the base learning rate now */
    double gns;           /* 0 until measured */
    double samples_per_s; /* this rank's view of the last step */
    int strategy;
    /* requests */
    long new_batch;   /* 0: no change */
    double lr_factor; /* 1: no change */
    bool vote_switch; /* this rank votes for the next strategy */
    /* an event for the change: name ("batch_size", "strategy") and a sentence */
    char event[32], detail[240];
} train_adapt;

typedef struct train_policies train_policies;

/* spec.policies' shape and validation: spec/train_spec.h (spec/train_spec_policies.c) */

/* NULL when the spec has no policies */
train_policies *train_policies_create(const json_t *spec);
void train_policies_free(train_policies *p);

/* the largest global batch a policy may ask for (buffers are sized for it) */
long train_policies_max_batch(const train_policies *p, long batch);
/* whether this step must measure the gradient norms for the noise scale */
bool train_policies_want_gns(const train_policies *p, long step);
/* a measurement: the mean over ranks of each slice gradient's squared norm
 * (slices of b samples) and the global gradient's (B samples) */
void train_policies_gns(train_policies *p, double small_sq, double b, double big_sq, double B);
double train_policies_gns_value(const train_policies *p);

/* the hooks; each may set requests in a */
void train_policies_before_train(train_policies *p, train_adapt *a);
void train_policies_after_step(train_policies *p, train_adapt *a);
void train_policies_after_epoch(train_policies *p, train_adapt *a);
void train_policies_after_train(train_policies *p, train_adapt *a);
/* the vote passed (votes > world / 2): every rank moves to the next strategy (sets the event) */
int train_policies_switch(train_policies *p, train_adapt *a);

#endif
