/* api.h - the route handlers (one file per resource: api_jobs.c, api_admin.c, api_ops.c). */
#ifndef GANTRY_API_H
#define GANTRY_API_H

#include "server/http.h"

void api_healthz(http_ctx *c);
void api_readyz(http_ctx *c);
void api_metrics(http_ctx *c);
void api_workers(http_ctx *c);
void api_events_stream(http_ctx *c);
void api_models(http_ctx *c); /* server/api_models.c */
void api_model_get(http_ctx *c);
void api_model_upload(http_ctx *c);
void api_model_alias_put(http_ctx *c);
void api_model_alias_delete(http_ctx *c);
void api_openapi(http_ctx *c);
void api_cluster(http_ctx *c);
void api_cluster_timeline(http_ctx *c);

void api_whoami(http_ctx *c);
void api_tenant_create(http_ctx *c);
void api_tenant_list(http_ctx *c);
void api_tenant_update(http_ctx *c);
void api_token_create(http_ctx *c);
void api_token_revoke(http_ctx *c);
void api_audit(http_ctx *c);

void api_job_submit(http_ctx *c);
void api_job_list(http_ctx *c);
void api_job_get(http_ctx *c);
void api_job_cancel(http_ctx *c);
void api_job_events(http_ctx *c);
void api_job_metrics(http_ctx *c);
void api_job_trials(http_ctx *c);
void api_job_logs(http_ctx *c);       /* server/logs.c */
void api_job_outputs(http_ctx *c);    /* server/outputs.c */
void api_job_output_get(http_ctx *c); /* server/outputs.c */
/* the job of the path ({id}) when the caller may see it (its tenant's, or any for an admin), with its spec and
 * result when full; else NULL with the 404 sent */
json_t *api_job_visible(http_ctx *c, bool full);
void api_infer_ready(http_ctx *c);
void api_infer_metadata(http_ctx *c);
void api_infer(http_ctx *c);

#endif
