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

/* Inside the transaction that moved job_id to succeeded: registers result.model (if
 * any) under the job's spec.model_name or its name.  0 (also when there is nothing to
 * register, or it was registered before), -1 on a database error. */
int models_register(sqlite3 *db, const char *job_id, const json_t *result);
/* {"models":[{"name","latest_version","versions","updated_at"}]} */
json_t *models_list_json(sqlite3 *db, const char *tenant_id);
/* {"name","versions":[{"version","job_id","architecture","metrics","artifact","created_at"}]}, NULL when unknown;
 * artifact as models_public_artifact has it */
json_t *models_get_json(sqlite3 *db, const char *tenant_id, const char *name);

/* The artifact an inference job serves: version 0 means the latest.  0 with
 * *resolved = {"version","artifact","input"}, 1 when there is no such model (or it
 * has no artifact), -1 on a database error. */
int models_resolve(sqlite3 *db, const char *tenant_id, const char *name, int version, json_t **resolved);

/* an artifact's path as the API shows it: relative to the model store (a pointer into artifact) */
const char *models_public_artifact(const char *artifact);
/* rewrites a job's API JSON in place: spec.resolved.artifact and result.model.artifact as
 * models_public_artifact has them; result.outputs.dir (a program job's output directory) dropped */
void models_public_job(json_t *job);

#endif
