/* predict.c - the error book and Holt's per-minute load predictor, pure (predict.h). */
#include "scheduler/autoscale/predict.h"

#include <stdlib.h>
#include <string.h>

void pred_errors_observe(pred_errors *e, long n, double rate)
{
    for (int h = 1; h <= PRED_HORIZON && n >= h; h++) {
        double f = e->pending[(n - h) % PRED_HORIZON][h - 1];
        e->err[h - 1][e->ierr[h - 1]] = rate - f;
        e->ierr[h - 1] = (e->ierr[h - 1] + 1) % PRED_ERRORS;
        if (e->nerr[h - 1] < PRED_ERRORS) e->nerr[h - 1]++;
    }
}

void pred_errors_remember(pred_errors *e, long n, const double *point)
{
    memcpy(e->pending[n % PRED_HORIZON], point, sizeof(double) * PRED_HORIZON);
}

/* rearranges v[0..n) so that v[k] is the k-th smallest and nothing before it is larger (quickselect) */
static void select_kth(double *v, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = v[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                double t = v[i];
                v[i++] = v[j], v[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return;
    }
}

void pred_errors_apply(const pred_errors *e, double q, int nh, double *out)
{
    double tmp[PRED_ERRORS];
    for (int h = 0; h < nh; h++) {
        int m = e->nerr[h];
        if (m < 5) continue; /* not enough history: the point forecast */
        memcpy(tmp, e->err[h], sizeof(double) * (size_t)m);
        double pos = q * (m - 1);
        int k = (int)pos;
        select_kth(tmp, m, k);
        double d = tmp[k];
        if (k + 1 < m) { /* interpolate towards the next order statistic: the smallest above position k */
            double next = tmp[k + 1];
            for (int i = k + 2; i < m; i++)
                next = tmp[i] < next ? tmp[i] : next;
            d += (pos - k) * (next - d);
        }
        out[h] += d;
        if (out[h] < 0) out[h] = 0;
    }
}

void pred_init(predictor *p, int period)
{
    memset(p, 0, sizeof(*p));
    p->alpha = 0.5, p->beta = 0.1;
    p->period = period > 0 && period <= PRED_SEASON_MAX ? period : 0;
}

static double season_at(const predictor *p, long minute)
{
    /* the value one period before `minute`, when it was observed */
    long back = minute - p->period;
    if (!p->period || back < 0 || back < p->n - PRED_SEASON_MAX) return -1;
    return p->history[back % PRED_SEASON_MAX];
}

void pred_point(const predictor *p, int nh, double *out)
{
    for (int h = 1; h <= nh; h++) {
        double f = p->level + h * p->trend;
        double s = season_at(p, p->n - 1 + h), s0 = season_at(p, p->n - 1);
        if (s >= 0 && s0 >= 0) f = 0.5 * f + 0.5 * (s + (p->level - s0)); /* last period's shape, today's level */
        out[h - 1] = f > 0 ? f : 0;
    }
}

void pred_observe(predictor *p, double rate)
{
    pred_errors_observe(&p->errors, p->n, rate);
    if (p->n == 0) {
        p->level = rate, p->trend = 0;
    } else {
        double prev = p->level;
        p->level = p->alpha * rate + (1 - p->alpha) * (p->level + p->trend);
        p->trend = p->beta * (p->level - prev) + (1 - p->beta) * p->trend;
    }
    p->history[p->n % PRED_SEASON_MAX] = rate;
    p->n++;
    double point[PRED_HORIZON];
    pred_point(p, PRED_HORIZON, point);
    pred_errors_remember(&p->errors, p->n - 1, point);
}

void pred_forecast(const predictor *p, double q, int nh, double *out)
{
    pred_point(p, nh, out);
    pred_errors_apply(&p->errors, q, nh, out);
}
