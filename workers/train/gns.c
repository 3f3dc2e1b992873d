/* gns.c - the gradient noise scale estimator (gns.h). */
#include "workers/train/gns.h"

void train_gns_init(train_gns *g, double alpha)
{
    g->alpha = alpha > 0 && alpha <= 1 ? alpha : 0.05;
    g->g2 = g->s = 0;
    g->n = 0;
}

void train_gns_update(train_gns *g, double small_sq, double b, double big_sq, double B)
{
    if (!(b > 0 && B > b)) return;
    double g2 = (B * big_sq - b * small_sq) / (B - b);
    double s = (small_sq - big_sq) / (1.0 / b - 1.0 / B);
    /* the first sample starts the averages (no bias toward 0) */
    double a = g->n == 0 ? 1.0 : g->alpha;
    g->g2 += a * (g2 - g->g2);
    g->s += a * (s - g->s);
    g->n++;
}

double train_gns_value(const train_gns *g)
{
    return g->n > 0 && g->g2 > 0 ? g->s / g->g2 : 0;
}
