#include "server/metrics.h"
#include "common/alloc.h"
#include "server/bus.h"
#include "server/infer_metrics.h"
#include "server/db.h"
#include "server/route.h"
#include "server/jobs.h"
#include "server/server.h"
#include "server/sse.h"

#include <stdlib.h>
#include <string.h>

static const double buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))
#define NCLASSES 5 /* 1xx..5xx */

typedef struct {
    unsigned long long by_class[NCLASSES];
    unsigned long long hist[NBUCKETS + 1];
    double sum;
    unsigned long long count;
} route_stats;

struct metrics {
    int routes;
    route_stats *stats; /* routes + 1: the last one is "unmatched" */
};

metrics *metrics_create(int routes)
{
    metrics *m = xcalloc(1, sizeof(*m));
    m->routes = routes;
    m->stats = xcalloc((size_t)routes + 1, sizeof(route_stats));
    return m;
}

void metrics_http(metrics *m, int route, int status, double seconds)
{
    route_stats *s = &m->stats[route < 0 ? m->routes : route];
    int cls = status / 100 - 1;
    if (cls >= 0 && cls < NCLASSES) s->by_class[cls]++;
    size_t b = 0;
    while (b < NBUCKETS && seconds > buckets[b])
        b++;
    s->hist[b]++;
    s->sum += seconds;
    s->count++;
}

static const char *route_label(int i)
{
    return i < 0 || i >= routes_count ? "unmatched" : routes[i].pattern;
}

static const char *route_method(int i)
{
    return i < 0 || i >= routes_count ? "" : routes[i].method;
}

static void job_line(void *arg, const char *type, const char *state, long n)
{
    fprintf(arg, "gantry_jobs{type=\"%s\",state=\"%s\"} %ld\n", type, state, n);
}

/* the utilization view's series: slots in use per tenant against its quota */
static void tenant_slots(sqlite3 *db, FILE *out)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT t.name, coalesce(sum(j.slots), 0), t.max_slots FROM tenants t LEFT JOIN jobs j "
                                   "ON j.tenant_id = t.id AND j.state IN ('scheduled', 'running', 'resizing') "
                                   "GROUP BY t.id");
    if (!st) return;
    fprintf(out, "# HELP gantry_tenant_slots_used Slots held by a tenant's scheduled and running jobs.\n"
                 "# TYPE gantry_tenant_slots_used gauge\n");
    char *quotas = NULL;
    size_t qlen = 0;
    FILE *q = xopen_memstream(&quotas, &qlen);
    fprintf(q, "# HELP gantry_tenant_max_slots A tenant's slot quota (absent: none).\n"
               "# TYPE gantry_tenant_max_slots gauge\n");
    while (db_step(st) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        fprintf(out, "gantry_tenant_slots_used{tenant=\"%s\"} %lld\n", name, (long long)sqlite3_column_int64(st, 1));
        if (sqlite3_column_type(st, 2) != SQLITE_NULL)
            fprintf(q, "gantry_tenant_max_slots{tenant=\"%s\"} %lld\n", name, (long long)sqlite3_column_int64(st, 2));
    }
    db_release(st);
    fclose(q);
    fputs(quotas, out);
    free(quotas);
}

void metrics_render(metrics *m, server *srv, FILE *out, bool full)
{
    fprintf(out, "# HELP gantry_http_requests_total HTTP requests answered, by route and status class.\n"
                 "# TYPE gantry_http_requests_total counter\n");
    for (int i = 0; i <= m->routes; i++) {
        int r = i == m->routes ? -1 : i;
        for (int c = 0; c < NCLASSES; c++)
            if (m->stats[i].by_class[c])
                fprintf(out, "gantry_http_requests_total{method=\"%s\",route=\"%s\",code=\"%dxx\"} %llu\n", route_method(r),
                        route_label(r), c + 1, m->stats[i].by_class[c]);
    }
    fprintf(out, "# HELP gantry_http_request_duration_seconds Time from routing to the reply, by route.\n"
                 "# TYPE gantry_http_request_duration_seconds histogram\n");
    for (int i = 0; i <= m->routes; i++) {
        route_stats *s = &m->stats[i];
        if (!s->count) continue;
        int r = i == m->routes ? -1 : i;
        unsigned long long cum = 0;
        for (size_t b = 0; b < NBUCKETS; b++) {
            cum += s->hist[b];
            fprintf(out, "gantry_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n", route_label(r), buckets[b],
                    cum);
        }
        fprintf(out, "gantry_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n", route_label(r), s->count);
        fprintf(out, "gantry_http_request_duration_seconds_sum{route=\"%s\"} %g\n", route_label(r), s->sum);
        fprintf(out, "gantry_http_request_duration_seconds_count{route=\"%s\"} %llu\n", route_label(r), s->count);
    }
    fprintf(out, "# HELP gantry_jobs Jobs by type and state.\n# TYPE gantry_jobs gauge\n");
    jobs_count_by_state(srv->db, job_line, out);
    if (full) tenant_slots(srv->db, out);
    fprintf(out,
            "# HELP gantry_store_commits_total SQLite transactions committed (group commit).\n"
            "# TYPE gantry_store_commits_total counter\ngantry_store_commits_total %llu\n"
            "# HELP gantry_store_writes_total Writes carried by those transactions.\n"
            "# TYPE gantry_store_writes_total counter\ngantry_store_writes_total %llu\n"
            "# HELP gantry_sse_streams Open Server-Sent Event streams.\n"
            "# TYPE gantry_sse_streams gauge\ngantry_sse_streams %d\n",
            store_commits(srv->store), store_writes(srv->store), sse_count(srv->sse));
    bus_render_metrics(srv->bus, out);
    if (full && srv->infer) infer_render_metrics(srv->infer, out);
}
