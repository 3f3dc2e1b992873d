/* httpstats.h - the HTTP request counters: per route (and one row for unmatched requests) the
 * replies by status class and a latency histogram.  The dispatcher (http.c) and the outputs'
 * streaming replies (outputs.c) record each reply; the /metrics exposition (metrics.c) writes
 * them out.  A leaf: it knows the route table only to label its rows. */
#ifndef GANTRY_HTTPSTATS_H
#define GANTRY_HTTPSTATS_H

#include <stdio.h>

#include "server/route.h"

typedef struct httpstats httpstats;

/* counters for the n routes of table (which must outlive them) */
httpstats *httpstats_create(const route *table, int n);
void httpstats_free(httpstats *h);
/* one reply; route -1: unmatched */
void httpstats_record(httpstats *h, int route, int status, double seconds);
/* gantry_http_requests_total and gantry_http_request_duration_seconds, Prometheus text, onto out */
void httpstats_render(const httpstats *h, FILE *out);

#endif
