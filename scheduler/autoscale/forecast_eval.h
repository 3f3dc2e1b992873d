/* forecast_eval.h - forecast quality of Faro's predictors on a trace, pure.
 *
 * Owns the scoring of a probabilistic forecast read at one quantile q: every job's predictor is fed
 * the trace minute by minute; from the end of the warm-up on, at every minute, the forecast of the
 * next PRED_HORIZON minutes at q is compared with the trace: the pinball (quantile) loss
 * max(q (y - f), (q - 1) (y - f)) in requests per second, and the coverage (the share of minutes
 * with y <= f, which should be q).  Minutes whose truth lies beyond the window are not scored. */
#ifndef GANTRY_AUTOSCALE_FORECAST_EVAL_H
#define GANTRY_AUTOSCALE_FORECAST_EVAL_H

#include "scheduler/autoscale/predict.h"

typedef struct {
    double pinball, coverage;                                 /* over every job, minute and horizon */
    double pinball_h[PRED_HORIZON], coverage_h[PRED_HORIZON]; /* per horizon h = 1..PRED_HORIZON */
    double mean_rate;                                         /* the scored minutes' mean rate (scale of the loss) */
    long scored;                                              /* forecasts scored (job, minute, horizon) */
} fe_result;

/* the pinball loss of forecast f for truth y at quantile q */
double fe_pinball(double y, double f, double q);

/* counts[m * njobs + j]: requests of job j in minute m of the window (minutes 0 .. minutes-1); the
 * first `warmup` minutes only feed the predictors.  which: an as_predictor (autoscale_policy.h). */
void fe_evaluate(const double *counts, int njobs, int minutes, int warmup, int period, double q, int which, fe_result *out);

#endif
