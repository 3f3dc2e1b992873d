/* metrics.h - the server's Prometheus metrics: HTTP requests per route and status
 * class, request latency histogram, plus gauges read at scrape time (jobs by type
 * and state from SQLite, store commits, SSE streams, bus figures). */
#ifndef GANTRY_METRICS_H
#define GANTRY_METRICS_H

#include <stdbool.h>
#include <stdio.h>

typedef struct metrics metrics;
struct server;

metrics *metrics_create(int routes);
/* route -1: unmatched */
void metrics_http(metrics *m, int route, int status, double seconds);
void metrics_count_event(metrics *m, const char *what);
/* writes the exposition text; full: the per-tenant and per-job series too (tenant names, job ids), for an
 * admin or the scrape token only (docs/operations.md, "Metrics") */
void metrics_render(metrics *m, struct server *srv, FILE *out, bool full);

#endif
