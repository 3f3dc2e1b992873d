/* predict.h - a probabilistic per-minute load predictor (Holt's), and the error book that makes a
 * point forecaster probabilistic; pure.
 *
 * The error book (pred_errors): the forecasts a predictor made for the next PRED_HORIZON minutes,
 * and, once each minute is observed, the errors they had at each horizon h = 1..PRED_HORIZON; the
 * forecast at quantile q is the point forecast plus the q-quantile of the last PRED_ERRORS errors
 * made at that horizon.  Quantiles are therefore ordered in q, and calibrated on the series itself.
 * predict_quantile.h's seasonal forecaster uses it too.
 *
 * Holt's predictor (predictor): linear smoothing (level + trend) of the per-minute arrival rate,
 * optionally blended with a seasonal profile (the same minute one period earlier, e.g. 1440 for
 * daily traffic), with an error book. */
#ifndef GANTRY_AUTOSCALE_PREDICT_H
#define GANTRY_AUTOSCALE_PREDICT_H

#define PRED_HORIZON 7
#define PRED_ERRORS 240
#define PRED_SEASON_MAX 1440

typedef struct {
    /* forecasts made h minutes ago for the minute now being observed, and errors */
    double pending[PRED_HORIZON][PRED_HORIZON];
    double err[PRED_HORIZON][PRED_ERRORS];
    int nerr[PRED_HORIZON], ierr[PRED_HORIZON];
} pred_errors;

/* minute n (0-based) was observed at `rate`: records the errors of the forecasts made for it */
void pred_errors_observe(pred_errors *e, long n, double rate);
/* the point forecasts for minutes n+1 .. n+PRED_HORIZON, made after observing minute n */
void pred_errors_remember(pred_errors *e, long n, const double *point);
/* adds the q-quantile of each horizon's errors to out[0..nh) (left alone below 5 errors), floored at 0 */
void pred_errors_apply(const pred_errors *e, double q, int nh, double *out);

typedef struct {
    double alpha, beta; /* smoothing of level and trend (0.5, 0.1) */
    int period;         /* seasonal period in minutes (0: none) */
    double level, trend;
    long n; /* minutes observed */
    double history[PRED_SEASON_MAX];
    pred_errors errors;
} predictor;

void pred_init(predictor *p, int period);
/* one more minute's rate (requests per second) */
void pred_observe(predictor *p, double rate);
/* rates for the next nh minutes (nh <= PRED_HORIZON) at quantile q in (0,1) */
void pred_forecast(const predictor *p, double q, int nh, double *out);
/* the point forecast (no error term) */
void pred_point(const predictor *p, int nh, double *out);

#endif
