/* metrics.c - the /metrics exposition (metrics.h): each series read from the module that owns it,
 * at scrape time. */
#include "server/metrics.h"
#include "common/alloc.h"
#include "server/bus.h"
#include "server/httpstats.h"
#include "server/infer.h"
#include "server/jobs.h"
#include "server/server.h"
#include "server/sse.h"

#include <stdlib.h>

static void job_line(void *arg, const char *type, const char *state, long n)
{
    fprintf(arg, "gantry_jobs{type=\"%s\",state=\"%s\"} %ld\n", type, state, n);
}

typedef struct {
    FILE *out, *quotas;
} slots_out;

static void slots_line(void *arg, const char *tenant, long long used, long long max_slots)
{
    slots_out *s = arg;
    fprintf(s->out, "gantry_tenant_slots_used{tenant=\"%s\"} %lld\n", tenant, used);
    if (max_slots >= 0) fprintf(s->quotas, "gantry_tenant_max_slots{tenant=\"%s\"} %lld\n", tenant, max_slots);
}

/* the utilization view's series: slots in use per tenant against its quota */
static void tenant_slots(sqlite3 *db, FILE *out)
{
    fprintf(out, "# HELP gantry_tenant_slots_used Slots held by a tenant's scheduled and running jobs.\n"
                 "# TYPE gantry_tenant_slots_used gauge\n");
    char *quotas = NULL;
    size_t qlen = 0;
    FILE *q = xopen_memstream(&quotas, &qlen);
    fprintf(q, "# HELP gantry_tenant_max_slots A tenant's slot quota (absent: none).\n"
               "# TYPE gantry_tenant_max_slots gauge\n");
    slots_out s = {out, q};
    jobs_slots_by_tenant(db, slots_line, &s);
    fclose(q);
    fputs(quotas, out);
    free(quotas);
}

void metrics_render(server *srv, FILE *out, bool full)
{
    httpstats_render(srv->httpstats, out);
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
