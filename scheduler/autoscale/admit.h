/* admit.h - admission control for an overloaded inference job (docs/autoscaler.md, "Overload"): when
 * requests arrive faster than the job's replicas can serve within its SLO, queueing them only makes every
 * one of them late (a 504 after timeout_ms, or a 200 past the SLO); shedding the excess at once (429 at
 * the gateway) keeps the served ones within it.  The rate the replicas can take is read from Faro's
 * latency model (latency.h): the largest arrival rate whose latency at the SLO's percentile is within the
 * SLO.  Pure: the live autoscaler (scheduler/autoscaler.c) decides with it, the gateway enforces the rate
 * (server/infer.c). */
#ifndef GANTRY_AUTOSCALE_ADMIT_H
#define GANTRY_AUTOSCALE_ADMIT_H

#include <stdbool.h>

/* the largest arrival rate (1/s) that c replicas with processing time p (s) serve within slo_s at
 * percentile q (latency.h's model); 0 when even one request alone takes longer than slo_s */
double as_admit_max_rate(double p, double c, double q, double slo_s);

/* Whether to shed (hysteresis): on when the observed rate exceeds the servable one by more than 10%,
 * off again below 90% of it; was: the last decision.  Never when nothing is servable within the SLO
 * (shedding would not make a single request meet it) */
bool as_admit_shed(double observed_rate, double servable_rate, bool was);

#endif
