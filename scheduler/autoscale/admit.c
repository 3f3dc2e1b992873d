/* admit.c - the servable rate of a job's replicas and the shedding decision (admit.h). */
#include "scheduler/autoscale/admit.h"
#include "scheduler/autoscale/latency.h"

#define ADMIT_ON 1.10
#define ADMIT_OFF 0.90

double as_admit_max_rate(double p, double c, double q, double slo_s)
{
    if (!(p > 0) || !(c > 0) || !(slo_s > 0) || as_latency(1e-9, p, c, q) > slo_s) return 0;
    double lo = 0, hi = as_capacity_rate(p, c); /* latency grows with the rate: bisect for the last one within */
    if (as_latency(hi, p, c, q) <= slo_s) return hi;
    for (int i = 0; i < 60; i++) {
        double mid = (lo + hi) / 2;
        if (as_latency(mid, p, c, q) <= slo_s)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

bool as_admit_shed(double observed_rate, double servable_rate, bool was)
{
    if (servable_rate <= 0) return false; /* no rate meets the SLO: shedding would only serve fewer, none in time */
    return observed_rate > servable_rate * (was ? ADMIT_OFF : ADMIT_ON);
}
