/* faro_model.h - what Faro (EuroSys'25) optimises, pure: a job's utility and the objectives.
 *
 * Utility of a job over a horizon of predicted rates: the sloppified
 * U = min(1, (T/L)^alpha) averaged over the horizon steps (L from latency.h).
 * A job scaling up is scored at its old count for the first step (cold start).
 * The paper's optional drop-rate penalty: with drop_penalty g > 0, each step's utility loses
 * g * the share of the rate beyond what the replicas serve at ρ = 0.95 (1 - 0.95 c / (λ p), the
 * requests the gateway sheds), so the objective weighs who is shed when demand exceeds the cluster.
 * Objectives over replica counts x (Σ cost_i x_i <= R, min_i <= x_i <= max_i):
 *   SUM      max Σ w_i U_i
 *   FAIR     max -(max U - min U)            (ties broken by Σ U)
 *   FAIRSUM  max Σ U_i + N (min U - max U)
 * The solvers (faro.h, faro_exact.h) share these definitions. */
#ifndef GANTRY_AUTOSCALE_FARO_MODEL_H
#define GANTRY_AUTOSCALE_FARO_MODEL_H

#define FARO_HORIZON 7 /* predicted minutes */

typedef enum { FARO_SUM, FARO_FAIR, FARO_FAIRSUM } faro_objective;

typedef struct {
    double p, slo_s, q, weight, cost; /* processing time, latency target, percentile, weight, slots per replica */
    int min, max;
    int current;               /* replicas now (ready + starting) */
    int nh;                    /* horizon steps used (1..FARO_HORIZON) */
    double rate[FARO_HORIZON]; /* predicted arrival rates (1/s) */
    double drop_penalty;       /* g of the optional drop-rate term (0: off) */
} faro_job;

/* the share of arrivals at `rate` beyond what c replicas serve at ρ = 0.95 (latency.h; 0 when within) */
double faro_drop_share(double rate, double p, double c);

/* the sloppified utility (alpha = 1) of one job with x replicas */
double faro_utility(const faro_job *j, int x);
/* the same on a real count (latency.h interpolates; below one replica, that share of one replica's utility) */
double faro_utility_at(const faro_job *j, double x);

/* the objective of n jobs from the sum of their utilities, the weighted sum, the smallest and the largest
 * (the one definition of Sum, Fair and FairSum) */
double faro_objective_of(faro_objective obj, int n, double sum_u, double sum_wu, double min_u, double max_u);

#endif
