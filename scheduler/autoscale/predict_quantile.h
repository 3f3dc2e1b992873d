/* predict_quantile.h - the seasonal quantile forecaster of per-minute load, pure.
 *
 * Owns the forecast Faro reads at a quantile by default (issue 33).  For each of the next
 * PRED_HORIZON minutes m, the point forecast blends two estimates:
 *   - the recent level: an exponentially weighted mean of the per-minute rate (alpha 0.5);
 *   - the seasonal profile scaled to that level: s(m) is the mean rate over the same minute
 *     (± PQ_WINDOW minutes) of up to PQ_PERIODS previous periods, multiplied by the ratio of the
 *     rates observed over the last PQ_RATIO_MIN minutes to the profile of those minutes (clamped to
 *     [1/4, 4]);
 * weighted by how well each did lately: each estimate's squared error at each horizon is averaged
 * exponentially (decay PQ_DECAY per minute) and the blend is w * seasonal + (1 - w) * level with
 * w = mse_level / (mse_level + mse_seasonal) (the level alone until a period is seen).  The
 * distribution around it is the empirical one of its own last PRED_ERRORS errors at each horizon
 * (predict.h's error book), so the forecast at quantile q is monotone in q and calibrated on the
 * series.  The constants were chosen on trace days 5-8 by pinball loss, never on the measured days 9-10
 * (docs/autoscaler.md). */
#ifndef GANTRY_AUTOSCALE_PREDICT_QUANTILE_H
#define GANTRY_AUTOSCALE_PREDICT_QUANTILE_H

#include "scheduler/autoscale/predict.h"

#define PQ_PERIODS 3    /* previous periods averaged */
#define PQ_WINDOW 0     /* ± minutes around the same minute (0: that minute only) */
#define PQ_RATIO_MIN 10 /* minutes of the level ratio */
#define PQ_DECAY 0.05   /* per minute, of the estimates' mean squared errors */
#define PQ_HIST (PQ_PERIODS * PRED_SEASON_MAX + PRED_HORIZON + PQ_WINDOW + 1)

typedef struct {
    int period;   /* seasonal period in minutes (0: none; at most PRED_SEASON_MAX) */
    double alpha; /* level smoothing (0.5) */
    double level;
    /* the two estimates made after each of the last PRED_HORIZON minutes (-1: none), and their errors */
    double made[PRED_HORIZON][2][PRED_HORIZON];
    double mse[2][PRED_HORIZON];
    long n; /* minutes observed */
    double history[PQ_HIST];
    pred_errors errors;
} pq_predictor;

void pq_init(pq_predictor *p, int period);
/* one more minute's rate (requests per second) */
void pq_observe(pq_predictor *p, double rate);
/* the point forecast of the next nh minutes (nh <= PRED_HORIZON) */
void pq_point(const pq_predictor *p, int nh, double *out);
/* the forecast of the next nh minutes at quantile q in (0,1) */
void pq_forecast(const pq_predictor *p, double q, int nh, double *out);

#endif
