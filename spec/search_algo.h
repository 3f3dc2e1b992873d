/* search_algo.h - the algorithms of a hyper-parameter search (docs/search.md), pure: no I/O, no clock,
 * no state of their own.  The server's search controller (server/search.c) keeps what they need in
 * SQLite and asks them:
 *
 *   - which parameters trial i gets: random and asha draw them from a stream seeded by (seed, i)
 *     alone (the same trial gets the same parameters after a restart, whatever ran before); grid
 *     enumerates the points in the parameters' name order, the last name fastest;
 *   - the rungs of asha: the resources min x reduction^k below max;
 *   - asha's rule when a trial reports its metric at a rung: of the n results recorded at that rung
 *     (its own included), the best ceil(n / reduction) continue; a trial worse than the last of them
 *     (the cut) is stopped.  Asynchronous and stopping-based, as Ray Tune's ASHA scheduler is: the
 *     first trial at a rung always continues, and a decision is never revisited;
 *   - with pause (the paper's ASHA), which paused trial to promote when a slot is free:
 *     search_asha_promotable;
 *   - how many trials to start: while fewer than parallel are live and fewer than max_trials started. */
#ifndef GANTRY_SEARCH_ALGO_H
#define GANTRY_SEARCH_ALGO_H

#include <jansson.h>
#include <stdbool.h>

#include "spec/search_spec.h"

/* trial index's parameters {name: value} (a new object) */
json_t *search_trial_params(const search_settings *s, int index);

/* asha's rungs into rungs[] (ascending, at most max); how many.  Without a budget: none. */
int search_rungs(const search_settings *s, double *rungs, int max);

/* whether metric a is better than b */
bool search_better(double a, double b, bool maximize);

typedef struct {
    bool stop;  /* the trial is below the cut */
    double cut; /* the worst value that continues */
    int keep;   /* how many of the n continue: ceil(n / reduction) */
    int n;      /* results at the rung, this one included */
} asha_verdict;

/* asha's rule at one rung: value against the nrecorded results recorded there before it */
asha_verdict search_asha_rule(const double *recorded, int nrecorded, double value, bool maximize, int reduction);

/* One trial's result at a rung, for the paused variant (spec "pause": true) */
typedef struct {
    int trial;     /* the trial's number */
    double value;  /* its metric when its run ended at the rung */
    bool promoted; /* promoted past the rung already */
} asha_record;

/* The paper's promotion at one rung (Li et al. 2020, Algorithm 2's get_job, for one k): of the n
 * records, the best floor(n / reduction) (ties: the lower trial number first) are promotable; the
 * first of them, best first, not yet promoted is the one to promote: its index in recs, or -1.  The
 * server asks from the top rung down and starts a new trial when no rung has one. */
int search_asha_promotable(const asha_record *recs, int n, bool maximize, int reduction);

/* how many trials to start now, with started begun so far and live not finished */
int search_to_start(const search_settings *s, int started, int live);

#endif
