/* predict_quantile.c - the seasonal quantile forecaster, pure (predict_quantile.h). */
#include "scheduler/autoscale/predict_quantile.h"

#include <string.h>

void pq_init(pq_predictor *p, int period)
{
    memset(p, 0, sizeof(*p));
    p->alpha = 0.5;
    p->period = period > PQ_WINDOW && period <= PRED_SEASON_MAX ? period : 0;
}

/* the seasonal profile at `minute`: the mean of the observed rates around the same minute of the
 * previous periods still held (-1: none) */
static double profile(const pq_predictor *p, long minute)
{
    if (!p->period) return -1;
    double sum = 0;
    int k = 0;
    for (int back = 1; back <= PQ_PERIODS; back++)
        for (int d = -PQ_WINDOW; d <= PQ_WINDOW; d++) {
            long m = minute - (long)back * p->period + d;
            if (m < 0 || m >= p->n || m < p->n - PQ_HIST) continue;
            sum += p->history[m % PQ_HIST];
            k++;
        }
    return k ? sum / k : -1;
}

/* the level's and the seasonal estimate's forecasts of the next nh minutes (seasonal -1: none) */
static void estimates(const pq_predictor *p, int nh, double *level, double *seasonal)
{
    double num = 0, den = 0;
    for (long m = p->n - PQ_RATIO_MIN; m < p->n; m++) {
        double s = m >= 0 ? profile(p, m) : -1;
        if (s < 0) continue;
        num += p->history[m % PQ_HIST];
        den += s;
    }
    double ratio = den > 0 ? num / den : num > 0 ? -1 : 1; /* -1: no usable profile */
    if (ratio > 0 && ratio < 0.25) ratio = 0.25;
    if (ratio > 4) ratio = 4;
    for (int h = 1; h <= nh; h++) {
        double s = ratio >= 0 ? profile(p, p->n - 1 + h) : -1;
        level[h - 1] = p->level;
        seasonal[h - 1] = s >= 0 ? ratio * s : -1;
    }
}

static void blend(const pq_predictor *p, int nh, const double *level, const double *seasonal, double *out)
{
    for (int h = 0; h < nh; h++) {
        double el = p->mse[0][h], es = p->mse[1][h], w = el + es > 0 ? el / (el + es) : 0.5;
        double f = seasonal[h] >= 0 ? w * seasonal[h] + (1 - w) * level[h] : level[h];
        out[h] = f > 0 ? f : 0;
    }
}

void pq_point(const pq_predictor *p, int nh, double *out)
{
    double level[PRED_HORIZON], seasonal[PRED_HORIZON];
    estimates(p, nh, level, seasonal);
    blend(p, nh, level, seasonal, out);
}

void pq_observe(pq_predictor *p, double rate)
{
    pred_errors_observe(&p->errors, p->n, rate);
    for (int h = 1; h <= PRED_HORIZON && p->n >= h; h++) { /* the estimates made h minutes ago for this one */
        const double *l = p->made[(p->n - h) % PRED_HORIZON][0], *s = p->made[(p->n - h) % PRED_HORIZON][1];
        if (s[h - 1] < 0) continue; /* the seasonal one had none: neither learns */
        p->mse[0][h - 1] += PQ_DECAY * ((rate - l[h - 1]) * (rate - l[h - 1]) - p->mse[0][h - 1]);
        p->mse[1][h - 1] += PQ_DECAY * ((rate - s[h - 1]) * (rate - s[h - 1]) - p->mse[1][h - 1]);
    }
    p->level = p->n == 0 ? rate : p->alpha * rate + (1 - p->alpha) * p->level;
    p->history[p->n % PQ_HIST] = rate;
    p->n++;
    double *level = p->made[(p->n - 1) % PRED_HORIZON][0], *seasonal = p->made[(p->n - 1) % PRED_HORIZON][1];
    estimates(p, PRED_HORIZON, level, seasonal);
    double point[PRED_HORIZON];
    blend(p, PRED_HORIZON, level, seasonal, point);
    pred_errors_remember(&p->errors, p->n - 1, point);
}

void pq_forecast(const pq_predictor *p, double q, int nh, double *out)
{
    pq_point(p, nh, out);
    pred_errors_apply(&p->errors, q, nh, out);
}
