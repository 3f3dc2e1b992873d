/* test_predict_quantile.c - scheduler/autoscale: the seasonal quantile forecaster (predict_quantile.h)
 * and the forecast-quality scoring (forecast_eval.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "scheduler/autoscale/autoscale_policy.h"
#include "scheduler/autoscale/forecast_eval.h"
#include "scheduler/autoscale/predict_quantile.h"

static uint64_t rng = 7;

static double uniform(void) /* [0, 1) */
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static double shape(long m, int period) /* a daily-like profile with a sharp recurring spike */
{
    double s = 10 + 6 * sin(2 * M_PI * m / period);
    if (m % period >= period / 3 && m % period < period / 3 + 4) s += 15;
    return s;
}

static void test_periodic_series(void **state)
{
    (void)state;
    pq_predictor *p = malloc(sizeof(*p));
    pq_init(p, 60);
    long m = 0;
    for (; m < 240; m++) /* four periods at one level, then the level rises by half */
        pq_observe(p, shape(m, 60));
    for (; m < 270; m++)
        pq_observe(p, 1.5 * shape(m, 60));
    double f[PRED_HORIZON];
    pq_point(p, PRED_HORIZON, f);
    for (int h = 0; h < PRED_HORIZON; h++) { /* within 10% of the truth at the new level */
        double want = 1.5 * shape(m + h, 60);
        if (fabs(f[h] - want) > 0.1 * want) fail_msg("h=%d: forecast %g, truth %g", h + 1, f[h], want);
    }
    /* the spike comes back every period: the forecast made just before it rises with it */
    for (; m % 60 != 60 / 3 - 1; m++)
        pq_observe(p, 1.5 * shape(m, 60));
    pq_observe(p, 1.5 * shape(m, 60)), m++;
    pq_point(p, 2, f);
    assert_true(f[1] > 1.5 * shape(m - 1, 60) + 5); /* the second minute of the spike is above the minute before it */
    free(p);
}

static void test_quantiles_monotone_and_calibrated(void **state)
{
    (void)state;
    static const double qs[] = {0.1, 0.5, 0.8, 0.9};
    pq_predictor *p = malloc(sizeof(*p));
    pq_init(p, 60);
    int covered[4] = {0}, trials = 0;
    for (long m = 0; m < 3000; m++) {
        double rate = shape(m, 60) * (0.8 + 0.4 * uniform()) + 2 * (uniform() - 0.5);
        if (m > 600) {
            double prev = -1;
            for (int k = 0; k < 4; k++) {
                double f[PRED_HORIZON];
                pq_forecast(p, qs[k], PRED_HORIZON, f);
                assert_true(f[0] >= prev); /* monotone in q */
                for (int h = 0; h < PRED_HORIZON; h++)
                    assert_true(f[h] >= 0 && isfinite(f[h]));
                prev = f[0];
                covered[k] += rate <= f[0];
            }
            trials++;
        }
        pq_observe(p, rate);
    }
    for (int k = 0; k < 4; k++) {
        double cov = (double)covered[k] / trials;
        printf("quantile %.1f: coverage %.3f\n", qs[k], cov);
        if (fabs(cov - qs[k]) > 0.05) fail_msg("quantile %g covers %g", qs[k], cov);
    }
    free(p);
}

static void test_degenerate_inputs(void **state)
{
    (void)state;
    pq_predictor *p = malloc(sizeof(*p));
    double f[PRED_HORIZON];
    int periods[] = {0, 1, 60, PRED_SEASON_MAX, PRED_SEASON_MAX + 1, -5};
    for (int k = 0; k < 6; k++) {
        pq_init(p, periods[k]);
        pq_forecast(p, 0.8, PRED_HORIZON, f); /* nothing observed: zeros */
        for (int h = 0; h < PRED_HORIZON; h++)
            assert_true(f[h] == 0);
        for (int m = 0; m < 2 * PRED_SEASON_MAX + 50; m++) { /* all zeros: zeros, never NaN */
            pq_observe(p, 0);
            if (m < 5 || m % 97 == 0) {
                pq_forecast(p, 0.8, PRED_HORIZON, f);
                for (int h = 0; h < PRED_HORIZON; h++)
                    assert_true(f[h] == 0);
            }
        }
        pq_observe(p, 30); /* a first request after a silent period: finite, non-negative, follows it */
        pq_forecast(p, 0.99, PRED_HORIZON, f);
        for (int h = 0; h < PRED_HORIZON; h++)
            assert_true(isfinite(f[h]) && f[h] > 0);
    }
    pq_init(p, 60); /* a short history: the level */
    pq_observe(p, 4);
    pq_point(p, PRED_HORIZON, f);
    for (int h = 0; h < PRED_HORIZON; h++)
        assert_true(f[h] == 4);
    free(p);
}

static void test_forecast_eval(void **state)
{
    (void)state;
    assert_true(fe_pinball(10, 8, 0.8) == 0.8 * 2);
    assert_true(fabs(fe_pinball(8, 10, 0.8) - 0.2 * 2) < 1e-12);
    /* a seasonal trace with recurring spikes: the seasonal forecaster beats Holt's and both cover about q */
    enum { J = 2, M = 1200, P = 120 };
    double *counts = malloc(sizeof(double) * J * M);
    for (int m = 0; m < M; m++)
        for (int j = 0; j < J; j++)
            counts[m * J + j] = 60 * (j + 1) * shape(m, P) * (0.9 + 0.2 * uniform());
    fe_result holt, seasonal;
    fe_evaluate(counts, J, M, 3 * P, P, 0.8, AS_PRED_HOLT, &holt);
    fe_evaluate(counts, J, M, 3 * P, P, 0.8, AS_PRED_SEASONAL, &seasonal);
    printf("pinball at 0.8: holt %.3f (coverage %.3f), seasonal %.3f (coverage %.3f)\n", holt.pinball, holt.coverage,
           seasonal.pinball, seasonal.coverage);
    assert_true(holt.scored == seasonal.scored && holt.scored > J * (M - 3 * P - PRED_HORIZON) * PRED_HORIZON);
    assert_true(seasonal.pinball < 0.9 * holt.pinball);
    assert_true(fabs(seasonal.coverage - 0.8) < 0.05 && fabs(holt.coverage - 0.8) < 0.05);
    free(counts);
}

static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* what one Faro round costs the predictor at 100 jobs with a daily period and three days of history */
static void test_forecast_cost(void **state)
{
    (void)state;
    enum { N = 100 };
    pq_predictor *p = malloc(sizeof(*p) * N);
    for (int i = 0; i < N; i++) {
        pq_init(&p[i], PRED_SEASON_MAX);
        for (long m = 0; m < 3 * PRED_SEASON_MAX + 30; m++)
            pq_observe(&p[i], shape(m + i, PRED_SEASON_MAX) * (0.8 + 0.4 * uniform()));
    }
    double best = 1e9, observe = 1e9;
    for (int r = 0; r < 20; r++) {
        double f[PRED_HORIZON], t0 = cpu_ms();
        for (int i = 0; i < N; i++)
            pq_forecast(&p[i], 0.8, PRED_HORIZON, f);
        double t1 = cpu_ms();
        for (int i = 0; i < N; i++)
            pq_observe(&p[i], 10);
        double t2 = cpu_ms();
        best = t1 - t0 < best ? t1 - t0 : best;
        observe = t2 - t1 < observe ? t2 - t1 : observe;
    }
    printf("100 jobs: forecast %.3f ms CPU, a minute's observation %.3f ms CPU (best of 20)\n", best, observe);
    assert_true(best < 10 && observe < 10); /* the solver's budget per round; loose on a shared machine */
    free(p);
}

static void test_policy_modifiers(void **state)
{
    (void)state;
    as_job j = {0.1, 0.5, 0.99, 1, 1, 1, 50};
    as_policy *p = as_policy_create("faro-fairsum+seasonal+exact", 1, &j, NULL);
    assert_non_null(p);
    as_policy_free(p);
    p = as_policy_create("faro-sum+holt", 1, &j, NULL);
    assert_non_null(p);
    as_policy_free(p);
    assert_null(as_policy_create("mark+holt", 1, &j, NULL));
    assert_null(as_policy_create("faro-fair+arima", 1, &j, NULL));
    assert_true(as_predictor_parse("holt") == AS_PRED_HOLT && as_predictor_parse("seasonal") == AS_PRED_SEASONAL);
    assert_true(as_predictor_parse("nhits") < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_periodic_series),   cmocka_unit_test(test_quantiles_monotone_and_calibrated),
        cmocka_unit_test(test_degenerate_inputs), cmocka_unit_test(test_forecast_eval),
        cmocka_unit_test(test_forecast_cost),     cmocka_unit_test(test_policy_modifiers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
