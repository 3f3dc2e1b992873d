/* forecast_eval.c - forecast quality of Faro's predictors on a trace, pure (forecast_eval.h). */
#include "scheduler/autoscale/forecast_eval.h"
#include "common/alloc.h"
#include "scheduler/autoscale/autoscale_policy.h"
#include "scheduler/autoscale/predict_quantile.h"

#include <stdlib.h>
#include <string.h>

double fe_pinball(double y, double f, double q)
{
    double d = y - f;
    return d >= 0 ? q * d : (q - 1) * d;
}

void fe_evaluate(const double *counts, int njobs, int minutes, int warmup, int period, double q, int which, fe_result *out)
{
    memset(out, 0, sizeof(*out));
    if (which != AS_PRED_HOLT && which != AS_PRED_SEASONAL) which = AS_PRED_DEFAULT_IS;
    long n_h[PRED_HORIZON] = {0};
    double rate_sum = 0;
    predictor *holt = xmalloc(sizeof(*holt));
    pq_predictor *pq = xmalloc(sizeof(*pq));
    for (int j = 0; j < njobs; j++) {
        pred_init(holt, period);
        pq_init(pq, period);
        for (int m = 0; m < minutes; m++) {
            if (m >= warmup && m >= 3) { /* the forecast made now, before minute m is seen */
                double f[PRED_HORIZON];
                if (which == AS_PRED_HOLT)
                    pred_forecast(holt, q, PRED_HORIZON, f);
                else
                    pq_forecast(pq, q, PRED_HORIZON, f);
                for (int h = 0; h < PRED_HORIZON && m + h < minutes; h++) {
                    double y = counts[(size_t)(m + h) * njobs + j] / 60.0;
                    out->pinball_h[h] += fe_pinball(y, f[h], q);
                    out->coverage_h[h] += y <= f[h];
                    rate_sum += y;
                    n_h[h]++;
                }
            }
            double rate = counts[(size_t)m * njobs + j] / 60.0;
            pred_observe(holt, rate);
            pq_observe(pq, rate);
        }
    }
    free(holt);
    free(pq);
    for (int h = 0; h < PRED_HORIZON; h++) {
        out->pinball += out->pinball_h[h];
        out->coverage += out->coverage_h[h];
        out->scored += n_h[h];
        if (n_h[h]) out->pinball_h[h] /= n_h[h], out->coverage_h[h] /= n_h[h];
    }
    if (out->scored) out->pinball /= out->scored, out->coverage /= out->scored, out->mean_rate = rate_sum / out->scored;
}
