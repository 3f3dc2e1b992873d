/* tenants.h - the tenants table (migrations 0001, 0005): every SQL statement about a tenant lives
 * here: its creation and settings (weight, slot and queue quotas, roots, the job limits of
 * limits.h), the admin's listing, the roots and limits a submission is checked against, and the
 * shares the bus copies to Redis for the scheduler.  Functions that write run inside a store
 * transaction (see store.h).  What the tenant's jobs hold is jobs.h's; tokens are auth.h's. */
#ifndef GANTRY_TENANTS_H
#define GANTRY_TENANTS_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdbool.h>

#include "server/limits.h"

/* what POST /v1/tenants and PATCH /v1/tenants/{id} set (api_admin.c parses it) */
typedef struct {
    bool has_weight, has_max_slots, has_max_queued;
    char *roots; /* JSON array text, NULL: unchanged */
    double weight;
    long long max_slots, max_queued; /* < 0: no quota */
    limits_patch limits;             /* max_runtime_s, max_epochs, max_steps, max_memory_bytes (server/limits.h) */
} tenant_settings;

/* a new tenant with its settings: 0, 1 when the name is taken (nothing written), -1 on a database error */
int tenants_create(sqlite3 *db, const char *id, const char *name, const tenant_settings *s);
/* the settings s names, on an existing tenant: 0, 2 when there is no such tenant, -1 on a database error */
int tenants_update(sqlite3 *db, const char *id, const tenant_settings *s);
/* whether the tenant exists */
bool tenants_exists(sqlite3 *db, const char *id);
/* GET /v1/tenants: every tenant (id NULL, an array, oldest first) or one (an object, NULL when unknown):
 * {"id","name","created_at","weight","jobs","max_slots","max_queued","roots", the job limits}; NULL on a
 * database error */
json_t *tenants_json(sqlite3 *db, const char *id);
/* the directories this tenant's specs may name ("roots"; a new array, empty when none or unknown) */
json_t *tenants_roots(sqlite3 *db, const char *id);
/* writes the limits named in p to the tenant (inside a store transaction); 0 or -1 */
int tenants_set_limits(sqlite3 *db, const char *id, const limits_patch *p);
/* the tenant's limits; -1 when it does not exist or the database failed (out: no limits) */
int tenants_limits(sqlite3 *db, const char *id, tenant_limits *out);
/* each tenant's share of the cluster: fn(arg, id, weight, max_slots (-1: none)) */
void tenants_each_share(sqlite3 *db, void (*fn)(void *arg, const char *id, double weight, long long max_slots), void *arg);

#endif
