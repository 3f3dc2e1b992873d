/* models.h - the model registry (migrations/0003_models.sql): a succeeded training
 * or federated job registers its model as the next version of its name.
 *
 * The registry keeps each artifact's absolute path in the model store (the workers'
 * state directory), and an inference job's spec.resolved.artifact carries it to the
 * replicas through Redis.  The API never shows it: tenants (admins too, for one
 * answer everywhere) see the artifact relative to the model store, "j_....model". */
#ifndef GANTRY_MODELS_H
#define GANTRY_MODELS_H

#include <jansson.h>
#include <sqlite3.h>
#include <stddef.h>

/* Inside the transaction that moved job_id to succeeded: registers result.model (if
 * any) under the job's spec.model_name or its name.  0 (also when there is nothing to
 * register, or it was registered before), -1 on a database error.  A search's trial
 * (spec.trial) registers nothing itself: its search registers the chosen trial's model
 * when it ends (models_register_as, server/search.c). */
int models_register(sqlite3 *db, const char *job_id, const json_t *result);
/* The same for job_id's result under another job's name and tenant: owner_id's spec.model_name or
 * name (a search registering its best trial's output: the version's job_id is the trial's, whose
 * file and metrics it has).  With *version_out (and name_out) the version job_id has after it (0:
 * none, nothing to register).  0 or -1 on a database error. */
int models_register_as(sqlite3 *db, const char *job_id, const char *owner_id, const json_t *result, char *name_out, size_t name_len,
                       int *version_out);
/* {"models":[{"name","latest_version","versions","updated_at"}]} */
json_t *models_list_json(sqlite3 *db, const char *tenant_id);
/* {"name","aliases":{alias: version},"versions":[{"version","format","job_id" (null for an upload),
 * "architecture","metrics","artifact","sha256","size_bytes","signature","description","created_at"}]},
 * NULL when unknown; artifact as models_public_artifact has it */
json_t *models_get_json(sqlite3 *db, const char *tenant_id, const char *name);

/* The artifact an inference job serves.  ref is "name", "name@N" or "name@alias"
 * (spec/serve_spec.h serve_model_ref); version (> 0) picks one for a bare name; otherwise the
 * latest.  0 with *resolved = {"name","version","artifact","format", "alias" (when by alias),
 * "input" (gantry models), "signature" and "sha256" (TorchScript)}; MODELS_UNKNOWN when there
 * is no such model or version (or it has no artifact), MODELS_NO_ALIAS when the alias is not
 * set; -1 on a database error. */
/* MODELS_NO_SIGNATURE: a TorchScript version without inputs and outputs (a program registered it without
 * register_model.metadata): it cannot be served */
enum { MODELS_UNKNOWN = 1, MODELS_NO_ALIAS = 2, MODELS_NO_SIGNATURE = 4 };
int models_resolve(sqlite3 *db, const char *tenant_id, const char *ref, int version, json_t **resolved);

/* A member's upload, after its checks (server/api_models.c): inside a store write, the next
 * version of (tenant, name).  0 with *version, -1 on a database error. */
typedef struct {
    const char *tenant_id, *name, *artifact, *sha256, *description;
    int64_t size_bytes;
    const json_t *signature; /* spec/serve_signature.h sig_to_json */
    const json_t *metrics;   /* an object of numbers, or NULL */
} model_upload;
int models_add_upload(sqlite3 *db, const model_upload *u, int *version);

/* Inside a store write: the alias names (name, version) from now on.  0 with *previous (0 when
 * it is new), MODELS_UNKNOWN when that version does not exist, MODELS_NO_SIGNATURE when it cannot
 * be served and a job serves the alias, -1 on a database error.  Every
 * inference job of the tenant that serves name@alias and has not finished gets the new version
 * in its spec.resolved and an event saying so; *rolled = [{"job_id", "resolved"}] (a new
 * reference) for the caller to publish to the replicas once the write is durable. */
int models_alias_set(sqlite3 *db, const char *tenant_id, const char *name, const char *alias, int version, int *previous,
                     json_t **rolled);
/* 0, MODELS_UNKNOWN when the alias is not set, MODELS_IN_USE (with the job's id in job_id, 48
 * bytes) while an unfinished inference job serves name@alias, -1 on a database error */
enum { MODELS_IN_USE = 3 };
int models_alias_delete(sqlite3 *db, const char *tenant_id, const char *name, const char *alias, char *job_id);

/* an artifact's path as the API shows it: relative to the model store (a pointer into artifact) */
const char *models_public_artifact(const char *artifact);
/* rewrites a job's API JSON in place: spec.resolved.artifact and result.model.artifact as
 * models_public_artifact has them; result.outputs.dir (a program job's output directory) dropped */
void models_public_job(json_t *job);

#endif
