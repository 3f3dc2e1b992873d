/* metrics.h - the /metrics exposition (Prometheus text), written when the handler (api_ops.c)
 * is asked for it: the HTTP request counters (httpstats.h), jobs by type and state and the slots
 * per tenant (jobs.h), store commits, SSE streams, the bus's figures and the inference gateway's
 * totals, each read from its owner at scrape time.  It keeps no state of its own, and nothing the
 * dispatcher calls depends on it. */
#ifndef GANTRY_METRICS_H
#define GANTRY_METRICS_H

#include <stdbool.h>
#include <stdio.h>

struct server;

/* writes the exposition text; full: the per-tenant and per-job series too (tenant names, job ids), for an
 * admin or the scrape token only (docs/operations.md, "Metrics") */
void metrics_render(struct server *srv, FILE *out, bool full);

#endif
