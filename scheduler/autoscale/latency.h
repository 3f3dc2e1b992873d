/* latency.h - Faro's latency model of a replicated model server.
 *
 * M/D/c approximated as M/M/c with half the queueing delay: offered load
 * a = λp, utilisation ρ = a/c.  Above ρ = 0.95 the rate is capped at 0.95c/p
 * and the latency scaled by λ/λcap.  Erlang C (the probability of waiting) is
 * computed with the iterative Erlang B recurrence, which cannot overflow.  The
 * waiting time at percentile q is Wq = max(0, ln(C/(1-q)) / (cμ - λ)) and the
 * latency L = Wq/2 + p.  A real-valued replica count interpolates linearly
 * between its floor and ceiling (the solver works on real counts).  Pure. */
#ifndef GANTRY_AUTOSCALE_LATENCY_H
#define GANTRY_AUTOSCALE_LATENCY_H

/* the largest rate the model holds: c replicas at ρ = 0.95, 0.95 c / p (1/s) */
double as_capacity_rate(double p, double c);

/* Erlang C: the probability an arrival waits, c servers, offered load a (< c) */
double as_erlang_c(int c, double a);

/* latency (seconds) at percentile q (e.g. 0.99) of a job with arrival rate
 * lambda (1/s), mean processing time p (s) and c replicas (c >= 1; real) */
double as_latency(double lambda, double p, double c, double q);

#endif
