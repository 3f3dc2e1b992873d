/* predict.h - a probabilistic per-minute load predictor, pure.
 *
 * Holt's linear smoothing (level + trend) of the per-minute arrival rate,
 * optionally blended with a seasonal profile (the same minute one period
 * earlier, e.g. 1440 for daily traffic), plus the empirical distribution of
 * its own past errors at each horizon h = 1..PRED_HORIZON: the forecast at
 * quantile q is the point forecast plus the q-quantile of the last
 * PRED_ERRORS errors made at that horizon.  Quantiles are therefore ordered in
 * q, and calibrated on the series itself. */
#ifndef GANTRY_AUTOSCALE_PREDICT_H
#define GANTRY_AUTOSCALE_PREDICT_H

#define PRED_HORIZON 7
#define PRED_ERRORS 240
#define PRED_SEASON_MAX 1440

typedef struct {
    double alpha, beta; /* smoothing of level and trend (0.5, 0.1) */
    int period;         /* seasonal period in minutes (0: none) */
    double level, trend;
    long n; /* minutes observed */
    double history[PRED_SEASON_MAX];
    /* forecasts made h minutes ago for the minute now being observed, and errors */
    double pending[PRED_HORIZON][PRED_HORIZON];
    double err[PRED_HORIZON][PRED_ERRORS];
    int nerr[PRED_HORIZON], ierr[PRED_HORIZON];
} predictor;

void pred_init(predictor *p, int period);
/* one more minute's rate (requests per second) */
void pred_observe(predictor *p, double rate);
/* rates for the next nh minutes (nh <= PRED_HORIZON) at quantile q in (0,1) */
void pred_forecast(const predictor *p, double q, int nh, double *out);
/* the point forecast (no error term) */
void pred_point(const predictor *p, int nh, double *out);

#endif
