/* routes.c - the route table: the one list of endpoints, their roles and body
 * rules.  main.c hands it to the server (server.routes); http.c routes by it, /metrics
 * labels come from it and the OpenAPI document (server/api_openapi.c) is generated from it,
 * each through the server, never by name. */
#include "server/routes.h"
#include "server/api.h"

const route routes[] = {
    {"GET", "/healthz", ROLE_NONE, BODY_NONE, api_healthz, "liveness probe", LIMIT_API},
    {"GET", "/readyz", ROLE_NONE, BODY_NONE, api_readyz, "readiness: SQLite and Redis reachable", LIMIT_API},
    {"GET", "/metrics", ROLE_NONE, BODY_NONE, api_metrics, "Prometheus metrics", LIMIT_API},
    {"GET", "/v1/openapi.json", ROLE_NONE, BODY_NONE, api_openapi, "this API description (OpenAPI 3.1)", LIMIT_API},
    {"GET", "/v1/whoami", ROLE_VIEWER, BODY_NONE, api_whoami, "the caller's tenant and role", LIMIT_API},
    {"POST", "/v1/tenants", ROLE_ADMIN, BODY_JSON, api_tenant_create, "create a tenant", LIMIT_API},
    {"GET", "/v1/tenants", ROLE_ADMIN, BODY_NONE, api_tenant_list, "list tenants", LIMIT_API},
    {"PATCH", "/v1/tenants/{id}", ROLE_ADMIN, BODY_JSON, api_tenant_update, "change a tenant's weight, quotas, limits", LIMIT_API},
    {"POST", "/v1/tenants/{id}/tokens", ROLE_ADMIN, BODY_JSON, api_token_create, "create a token (shown once)", LIMIT_API},
    {"POST", "/v1/tokens/{id}/revoke", ROLE_ADMIN, BODY_JSON, api_token_revoke, "revoke a token", LIMIT_API},
    {"GET", "/v1/audit", ROLE_ADMIN, BODY_NONE, api_audit, "the audit log, newest first", LIMIT_API},
    {"POST", "/v1/jobs", ROLE_MEMBER, BODY_JSON_LARGE, api_job_submit, "submit a job", LIMIT_API},
    {"GET", "/v1/jobs", ROLE_VIEWER, BODY_NONE, api_job_list, "list jobs (keyset pagination)", LIMIT_API},
    {"GET", "/v1/jobs/{id}", ROLE_VIEWER, BODY_NONE, api_job_get, "a job with its spec and result", LIMIT_API},
    {"POST", "/v1/jobs/{id}/cancel", ROLE_MEMBER, BODY_JSON, api_job_cancel, "cancel a job", LIMIT_API},
    {"GET", "/v1/jobs/{id}/events", ROLE_VIEWER, BODY_NONE, api_job_events, "a job's events, oldest first", LIMIT_API},
    {"GET", "/v1/jobs/{id}/metrics", ROLE_VIEWER, BODY_NONE, api_job_metrics,
     "a training job's progress points (step, loss, accuracy, samples/s), oldest first, at most 5000", LIMIT_API},
    {"GET", "/v1/jobs/{id}/trials", ROLE_VIEWER, BODY_NONE, api_job_trials,
     "a search's trials: parameters, state, the metric at each rung and the last, the best (404 when the job is not a "
     "search)",
     LIMIT_API},
    {"GET", "/v1/jobs/{id}/logs", ROLE_VIEWER, BODY_NONE, api_job_logs,
     "a program job's output: the last lines as text (rank, tail; 404 when the job is not a program job), or followed "
     "live as Server-Sent Events (follow=1)",
     LIMIT_API},
    {"GET", "/v1/jobs/{id}/outputs", ROLE_VIEWER, BODY_NONE, api_job_outputs,
     "the files a program job wrote to its output directory: path, bytes, sha256", LIMIT_API},
    {"GET", "/v1/jobs/{id}/outputs/{path*}", ROLE_VIEWER, BODY_NONE, api_job_output_get,
     "one of the job's output files (a path the listing gives), as an attachment", LIMIT_API},
    {"GET", "/v1/events", ROLE_VIEWER, BODY_NONE, api_events_stream, "Server-Sent Events for the tenant", LIMIT_API},
    {"GET", "/v1/workers", ROLE_VIEWER, BODY_NONE, api_workers, "workers, their slots and what they run", LIMIT_API},
    {"GET", "/v1/cluster", ROLE_VIEWER, BODY_NONE, api_cluster, "workers, slots per tenant, queue depths", LIMIT_API},
    {"GET", "/v1/cluster/timeline", ROLE_VIEWER, BODY_NONE, api_cluster_timeline, "busy intervals per worker", LIMIT_API},
    {"GET", "/v1/models", ROLE_VIEWER, BODY_NONE, api_models, "the tenant's registered models", LIMIT_API},
    {"GET", "/v1/models/{name}", ROLE_VIEWER, BODY_NONE, api_model_get, "a model's versions, aliases, metrics and artifact",
     LIMIT_API},
    {"POST", "/v1/models/{name}/versions", ROLE_MEMBER, BODY_UPLOAD, api_model_upload,
     "upload a TorchScript model as the next version (multipart/form-data: file, metadata)", LIMIT_API},
    {"PUT", "/v1/models/{name}/aliases/{alias}", ROLE_MEMBER, BODY_JSON, api_model_alias_put,
     "point an alias at a version ({\"version\": N}); serving jobs on name@alias roll to it", LIMIT_API},
    {"DELETE", "/v1/models/{name}/aliases/{alias}", ROLE_MEMBER, BODY_NONE, api_model_alias_delete,
     "remove an alias that no running job serves", LIMIT_API},
    {"GET", "/v2/models/{name}", ROLE_VIEWER, BODY_NONE, api_infer_metadata, "Open Inference Protocol: model metadata", LIMIT_API},
    {"GET", "/v2/models/{name}/ready", ROLE_VIEWER, BODY_NONE, api_infer_ready,
     "Open Inference Protocol: 200 when an inference job serves the model, 503 while it starts", LIMIT_API},
    {"POST", "/v2/models/{name}/infer", ROLE_MEMBER, BODY_RAW, api_infer,
     "Open Inference Protocol: predictions (429 queue full, 504 timeout)", LIMIT_INFER},
};

const int routes_count = sizeof(routes) / sizeof(routes[0]);
