/* infer_metrics.h - what the metrics module needs of the inference gateway: the gateway's running
 * totals in the /metrics exposition.  Its own header, apart from infer.h (which needs the request
 * context, server/http.h): http.c reports each reply to metrics.c, metrics.c reads the gateway's
 * totals (and the route table, route.h), the gateway answers through http.c, and no include leads
 * from metrics.c back to http.h. */
#ifndef GANTRY_INFER_METRICS_H
#define GANTRY_INFER_METRICS_H

#include <stdio.h>

struct infer_gw;

/* the gateway's counters and latency figures, Prometheus text, onto out */
void infer_render_metrics(struct infer_gw *g, FILE *out);

#endif
