/* test_admit.c - scheduler/autoscale/admit: the servable rate against the latency model it inverts (the
 * rate's latency within the SLO, a little more beyond it), its edges, and the shedding hysteresis. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "scheduler/autoscale/admit.h"
#include "scheduler/autoscale/latency.h"

static void test_max_rate_inverts_the_latency_model(void **state)
{
    (void)state;
    const double ps[] = {0.002, 0.03, 0.18}, cs[] = {1, 2, 3.5, 8}, slos[] = {0.05, 0.1, 0.72, 3};
    int checked = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 4; k++) {
                double p = ps[i], c = cs[j], slo = slos[k], r = as_admit_max_rate(p, c, 0.99, slo);
                if (p > slo) { /* one request alone is late: nothing is servable */
                    assert_true(r == 0);
                    continue;
                }
                assert_true(r > 0 && r <= 0.95 * c / p + 1e-9);
                assert_true(as_latency(r, p, c, 0.99) <= slo * (1 + 1e-9));
                if (r < 0.95 * c / p * (1 - 1e-6)) /* below the cap, a little more is late */
                    assert_true(as_latency(r * 1.01, p, c, 0.99) > slo);
                checked++;
            }
    assert_true(checked >= 30);
    /* more replicas serve more */
    assert_true(as_admit_max_rate(0.03, 2, 0.99, 0.1) > as_admit_max_rate(0.03, 1, 0.99, 0.1));
    assert_true(as_admit_max_rate(0, 1, 0.99, 0.1) == 0 && as_admit_max_rate(0.03, 0, 0.99, 0.1) == 0);
}

static void test_shed_hysteresis(void **state)
{
    (void)state;
    assert_false(as_admit_shed(105, 100, false)); /* within 10% over: not yet */
    assert_true(as_admit_shed(111, 100, false));
    assert_true(as_admit_shed(95, 100, true)); /* once on, off only below 90% */
    assert_false(as_admit_shed(89, 100, true));
    assert_false(as_admit_shed(1000, 0, false)); /* nothing meets the SLO: shedding would not help one request */
    assert_false(as_admit_shed(0, 0, true));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_max_rate_inverts_the_latency_model),
                                       cmocka_unit_test(test_shed_hysteresis)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
