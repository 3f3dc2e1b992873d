/* httpstats.c - the HTTP request counters by route and status class and the latency histogram
 * (httpstats.h), and their Prometheus text. */
#include "server/httpstats.h"
#include "common/alloc.h"

#include <stdlib.h>

static const double buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))
#define NCLASSES 5 /* 1xx..5xx */

typedef struct {
    unsigned long long by_class[NCLASSES];
    unsigned long long hist[NBUCKETS + 1];
    double sum;
    unsigned long long count;
} route_stats;

struct httpstats {
    const route *table;
    int routes;
    route_stats *stats; /* routes + 1: the last one is "unmatched" */
};

httpstats *httpstats_create(const route *table, int n)
{
    httpstats *h = xcalloc(1, sizeof(*h));
    h->table = table;
    h->routes = n;
    h->stats = xcalloc((size_t)n + 1, sizeof(route_stats));
    return h;
}

void httpstats_free(httpstats *h)
{
    if (!h) return;
    free(h->stats);
    free(h);
}

void httpstats_record(httpstats *h, int route, int status, double seconds)
{
    route_stats *s = &h->stats[route < 0 ? h->routes : route];
    int cls = status / 100 - 1;
    if (cls >= 0 && cls < NCLASSES) s->by_class[cls]++;
    size_t b = 0;
    while (b < NBUCKETS && seconds > buckets[b])
        b++;
    s->hist[b]++;
    s->sum += seconds;
    s->count++;
}

static const char *route_label(const httpstats *h, int i)
{
    return i < 0 || i >= h->routes ? "unmatched" : h->table[i].pattern;
}

static const char *route_method(const httpstats *h, int i)
{
    return i < 0 || i >= h->routes ? "" : h->table[i].method;
}

void httpstats_render(const httpstats *h, FILE *out)
{
    fprintf(out, "# HELP gantry_http_requests_total HTTP requests answered, by route and status class.\n"
                 "# TYPE gantry_http_requests_total counter\n");
    for (int i = 0; i <= h->routes; i++) {
        int r = i == h->routes ? -1 : i;
        for (int c = 0; c < NCLASSES; c++)
            if (h->stats[i].by_class[c])
                fprintf(out, "gantry_http_requests_total{method=\"%s\",route=\"%s\",code=\"%dxx\"} %llu\n", route_method(h, r),
                        route_label(h, r), c + 1, h->stats[i].by_class[c]);
    }
    fprintf(out, "# HELP gantry_http_request_duration_seconds Time from routing to the reply, by route.\n"
                 "# TYPE gantry_http_request_duration_seconds histogram\n");
    for (int i = 0; i <= h->routes; i++) {
        const route_stats *s = &h->stats[i];
        if (!s->count) continue;
        int r = i == h->routes ? -1 : i;
        unsigned long long cum = 0;
        for (size_t b = 0; b < NBUCKETS; b++) {
            cum += s->hist[b];
            fprintf(out, "gantry_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n", route_label(h, r),
                    buckets[b], cum);
        }
        fprintf(out, "gantry_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n", route_label(h, r), s->count);
        fprintf(out, "gantry_http_request_duration_seconds_sum{route=\"%s\"} %g\n", route_label(h, r), s->sum);
        fprintf(out, "gantry_http_request_duration_seconds_count{route=\"%s\"} %llu\n", route_label(h, r), s->count);
    }
}
