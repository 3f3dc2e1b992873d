/* latency.c - Faro's latency model of a replicated model server (latency.h). */
#include "scheduler/autoscale/latency.h"

#include <math.h>

#define RHO_MAX 0.95

double as_capacity_rate(double p, double c)
{
    return p > 0 && c > 0 ? RHO_MAX * c / p : 0;
}

double as_erlang_c(int c, double a)
{
    if (c < 1) return 1.0;
    if (a <= 0) return 0.0;
    /* Erlang B by recurrence: B(0) = 1, B(k) = a B(k-1) / (k + a B(k-1)) */
    double b = 1.0;
    for (int k = 1; k <= c; k++)
        b = a * b / (k + a * b);
    double rho = a / c;
    if (rho >= 1) return 1.0;
    return b / (1 - rho + rho * b);
}

static double latency_int(double lambda, double p, int c, double q)
{
    if (lambda <= 0) return p;
    double scale = 1.0, cap = as_capacity_rate(p, c);
    if (lambda > cap) { /* saturated: the model holds up to 95%; beyond, latency grows with the overload */
        scale = lambda / cap;
        lambda = cap;
    }
    double mu = 1.0 / p, a = lambda * p;
    double C = as_erlang_c(c, a);
    double wq = 0;
    if (C > 1 - q) wq = log(C / (1 - q)) / (c * mu - lambda);
    if (wq < 0) wq = 0;
    return (wq / 2 + p) * scale;
}

double as_latency(double lambda, double p, double c, double q)
{
    if (c < 1) c = 1;
    int lo = (int)floor(c);
    double f = c - lo;
    double l = latency_int(lambda, p, lo, q);
    return f > 1e-9 ? (1 - f) * l + f * latency_int(lambda, p, lo + 1, q) : l;
}
