/* faro_model.c - a job's utility and Faro's objectives, pure (faro_model.h). */
#include "scheduler/autoscale/faro_model.h"
#include "scheduler/autoscale/latency.h"

double faro_drop_share(double rate, double p, double c)
{
    double served = as_capacity_rate(p, c);
    return rate > served ? 1 - served / rate : 0;
}

double faro_utility_at(const faro_job *j, double x)
{
    int nh = j->nh < 1 ? 1 : j->nh > FARO_HORIZON ? FARO_HORIZON : j->nh;
    double sum = 0;
    for (int h = 0; h < nh; h++) {
        double c = h == 0 && x > j->current ? j->current : x; /* new replicas are still starting in the first minute */
        if (j->drop_penalty > 0) sum -= j->drop_penalty * faro_drop_share(j->rate[h], j->p, c);
        if (c <= 0) continue; /* nothing serves: utility 0 */
        double l = as_latency(j->rate[h], j->p, c < 1 ? 1 : c, j->q), u = l <= j->slo_s ? 1.0 : j->slo_s / l;
        sum += c < 1 ? c * u : u; /* below one replica: a share of one replica's utility */
    }
    return sum / nh;
}

double faro_utility(const faro_job *j, int x)
{
    return faro_utility_at(j, x);
}

double faro_objective_of(faro_objective obj, int n, double sum_u, double sum_wu, double min_u, double max_u)
{
    if (obj == FARO_SUM) return sum_wu;
    if (obj == FARO_FAIR) return -(max_u - min_u) + 1e-6 * sum_u;
    return sum_u + n * (min_u - max_u);
}
