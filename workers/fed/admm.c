/* admm.c - the ADMM steps of SecureD-FL (admm.h). */
#include "workers/fed/admm.h"

#include <math.h>

double fed_admm_rho(const fed_admm_params *p, int k)
{
    int every = p->decay_every > 0 ? p->decay_every : 1;
    return p->rho0 * pow(p->decay, (double)(k / every)); /* NOLINT(bugprone-integer-division): a step every `every` rounds */
}

void fed_admm_x(const double *w, const double *lambda, const double *z, double rho, double *x, size_t dim)
{
    for (size_t j = 0; j < dim; j++)
        x[j] = (2 * w[j] - lambda[j] + rho * z[j]) / (2 + rho);
}

void fed_admm_message(const double *x, const double *lambda, double rho, double a, double *out, size_t dim)
{
    for (size_t j = 0; j < dim; j++)
        out[j] = a * (x[j] + lambda[j] / rho);
}

void fed_admm_dual(double *lambda, const double *x, const double *z, double rho, size_t dim)
{
    for (size_t j = 0; j < dim; j++)
        lambda[j] += rho * (x[j] - z[j]);
}
