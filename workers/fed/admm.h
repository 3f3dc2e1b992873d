/* admm.h - SecureD-FL's aggregation: consensus ADMM, coordinate-wise
 * (METHODS.md §4).  Site i holds its trained model w_i and weight a_i
 * (sum a_i = 1) and solves min sum a_i ||x_i - w_i||^2 s.t. x_i = z:
 *
 *   x_i = (2 w_i - lambda_i + rho z) / (2 + rho)
 *   m_i = x_i + lambda_i / rho                 (the message)
 *   z   = sum a_i m_i                          (one masked sum over all sites: secagg.h)
 *   lambda_i += rho (x_i - z)
 *
 * starting from z = 0 and random lambda_i, with rho decaying (x decay every
 * decay_every iterations).  Then sum a_i lambda_i = 0 after every iteration and
 * z converges to sum a_i w_i (FedAvg) geometrically.  Vectors are doubles;
 * pure. */
#ifndef GANTRY_FED_ADMM_H
#define GANTRY_FED_ADMM_H

#include <stddef.h>

typedef struct {
    double rho0;     /* 0.1 */
    double decay;    /* 0.9 */
    int decay_every; /* 2 */
} fed_admm_params;

/* rho at iteration k (0-based) */
double fed_admm_rho(const fed_admm_params *p, int k);
/* x = (2w - lambda + rho z) / (2 + rho) */
void fed_admm_x(const double *w, const double *lambda, const double *z, double rho, double *x, size_t dim);
/* out = a (x + lambda / rho): what the site contributes to its group's sum */
void fed_admm_message(const double *x, const double *lambda, double rho, double a, double *out, size_t dim);
/* lambda += rho (x - z) */
void fed_admm_dual(double *lambda, const double *x, const double *z, double rho, size_t dim);

#endif
