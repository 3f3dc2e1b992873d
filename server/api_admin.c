/* api_admin.c - who am I, tenants and tokens.  Creating tenants and tokens needs
 * the admin role; a token's secret appears once, in the 201 reply. */
#include "common/clock.h"
#include "common/alloc.h"
#include "common/ids.h"
#include "common/utf8.h"
#include "server/api.h"
#include "server/audit.h"
#include "server/bus.h"
#include "server/db.h"
#include "server/limits.h"
#include "server/tenants.h"

#include <ctype.h>
#include <stdbool.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

void api_whoami(http_ctx *c)
{
    json_t *me = json_pack("{s:s, s:s, s:{s:s, s:s}}", "role", role_name(c->auth.role), "token_id", c->auth.token_id, "tenant",
                           "id", c->auth.tenant_id, "name", c->auth.tenant_name);
    tenant_limits lim;
    tenants_limits(c->srv->db, c->auth.tenant_id, &lim); /* the limits this tenant's jobs run under */
    limits_to_json(&lim, json_object_get(me, "tenant"));
    http_reply_json(c, 200, me);
}

static int valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.') return 0;
    return 1;
}

typedef struct {
    http_defer *defer;
    server *srv;
    char id[48], name[80], token_id[48];
    tenant_settings set;
    int rc; /* 0 ok, 1 name taken, 2 tenant missing */
    char secret[AUTH_SECRET_LEN + 8];
    role role;
    char token_name[128];
    int64_t expires_at; /* ms, 0: never */
} admin_op;

/* weight, max_slots, max_queued and the job limits from a body; null clears a quota or limit.  0, or -1 after answering 400 */
static int parse_settings(http_ctx *c, tenant_settings *s)
{
    json_t *w = json_object_get(c->body, "weight");
    if (w && (!json_is_number(w) || json_number_value(w) <= 0 || json_number_value(w) > 1000)) {
        http_error(c, GERR_INVALID_FIELD, "weight", "must be a number in (0, 1000]");
        return -1;
    }
    json_t *roots = json_object_get(c->body, "roots");
    if (roots) {
        size_t i;
        json_t *r;
        bool ok = json_is_array(roots) && json_array_size(roots) <= 16;
        json_array_foreach(roots, i, r) ok = ok && json_is_string(r) && json_string_value(r)[0] == '/' &&
                                             json_string_length(r) < 1024 && !strstr(json_string_value(r), "..");
        if (!ok) {
            http_error(c, GERR_INVALID_FIELD, "roots", "must be an array of at most 16 absolute paths without '..'");
            return -1;
        }
        s->roots = json_dumps(roots, JSON_COMPACT);
    }
    s->has_weight = w != NULL;
    s->weight = w ? json_number_value(w) : 1.0;
    static const char *const names[] = {"max_slots", "max_queued"};
    for (int i = 0; i < 2; i++) {
        json_t *q = json_object_get(c->body, names[i]);
        if (q && !json_is_null(q) && (!json_is_integer(q) || json_integer_value(q) < 0 || json_integer_value(q) > 1000000)) {
            http_error(c, GERR_INVALID_FIELD, names[i], "must be an integer from 0 to 1000000, or null for no limit");
            free(s->roots);
            s->roots = NULL;
            return -1;
        }
        long long v = q && !json_is_null(q) ? json_integer_value(q) : -1;
        if (i == 0) {
            s->has_max_slots = q != NULL;
            s->max_slots = v;
        } else {
            s->has_max_queued = q != NULL;
            s->max_queued = v;
        }
    }
    char field[32], msg[160];
    if (limits_parse(c->body, &s->limits, field, sizeof(field), msg, sizeof(msg)) != 0) {
        http_error(c, GERR_INVALID_FIELD, field, "%s", msg);
        free(s->roots);
        s->roots = NULL;
        return -1;
    }
    return 0;
}

static int apply_tenant(sqlite3 *db, void *arg)
{
    admin_op *op = arg;
    int rc = tenants_create(db, op->id, op->name, &op->set);
    op->rc = rc > 0 ? rc : 0;
    rc = rc < 0 ? -1 : 0;
    if (rc == 0 && op->rc == 0) audit_record(db, op->token_id, "tenant.create", op->name);
    return rc;
}

/* Answers an admin write once it committed (or failed) and releases the op: 500 when the
 * write failed, 409 for rc 1 (conflict), 404 for rc 2 (missing), else `body` with `status`.
 * `body` is built by the caller only for a success and is released here otherwise. */
static void finish(admin_op *op, int ok, int status, json_t *body, const char *conflict, const char *missing)
{
    http_ctx *c = http_defer_ctx(op->defer);
    bool success = ok && op->rc == 0 && body;
    if (c && !ok)
        http_error(c, GERR_INTERNAL, NULL, "database error");
    else if (c && op->rc == 1)
        http_error(c, GERR_CONFLICT, "name", "%s", conflict);
    else if (c && !success)
        http_error(c, GERR_NOT_FOUND, "id", "%s", missing);
    else if (c)
        http_reply_json(c, status, json_incref(body));
    json_decref(body);
    http_defer_end(op->defer);
    free(op->set.roots);
    OPENSSL_cleanse(op->secret, sizeof(op->secret));
    free(op);
}

static void tenant_done(void *arg, int ok)
{
    admin_op *op = arg;
    if (ok && op->rc == 0) bus_sync_tenants(op->srv->bus);
    char conflict[160];
    snprintf(conflict, sizeof(conflict), "a tenant named '%s' already exists", op->name);
    json_t *t = ok && op->rc == 0 ? tenants_json(op->srv->db, op->id) : NULL;
    finish(op, ok, op->name[0] ? 201 : 200, t, conflict, "no tenant with this id");
}

void api_tenant_create(http_ctx *c)
{
    json_t *name = json_object_get(c->body, "name");
    if (!json_is_string(name) || !valid_name(json_string_value(name))) {
        http_error(c, GERR_INVALID_FIELD, "name", "required: 1 to 64 characters from a-z A-Z 0-9 . _ -");
        return;
    }
    admin_op *op = xcalloc(1, sizeof(*op));
    if (parse_settings(c, &op->set) != 0) {
        free(op);
        return;
    }
    id_random("t", 8, op->id, sizeof(op->id));
    snprintf(op->name, sizeof(op->name), "%s", json_string_value(name));
    snprintf(op->token_id, sizeof(op->token_id), "%s", c->auth.token_id);
    op->srv = c->srv;
    op->defer = http_defer_begin(c);
    store_submit(c->srv->store, apply_tenant, tenant_done, op);
}

static int apply_tenant_update(sqlite3 *db, void *arg)
{
    admin_op *op = arg;
    int rc = tenants_update(db, op->id, &op->set);
    op->rc = rc > 0 ? rc : 0;
    rc = rc < 0 ? -1 : 0;
    if (rc == 0 && op->rc == 0) audit_record(db, op->token_id, "tenant.update", op->id);
    return rc;
}

void api_tenant_update(http_ctx *c)
{
    admin_op *op = xcalloc(1, sizeof(*op));
    if (parse_settings(c, &op->set) != 0) {
        free(op);
        return;
    }
    snprintf(op->id, sizeof(op->id), "%s", http_param(c, 0));
    snprintf(op->token_id, sizeof(op->token_id), "%s", c->auth.token_id);
    op->srv = c->srv;
    op->defer = http_defer_begin(c);
    store_submit(c->srv->store, apply_tenant_update, tenant_done, op);
}

void api_tenant_list(http_ctx *c)
{
    json_t *list = tenants_json(c->srv->db, NULL);
    if (!list) {
        http_error(c, GERR_INTERNAL, NULL, "database error");
        return;
    }
    http_reply_json(c, 200, json_pack("{s:o}", "tenants", list));
}

static int apply_token(sqlite3 *db, void *arg)
{
    admin_op *op = arg;
    if (!tenants_exists(db, op->id)) {
        op->rc = 2;
        return 0;
    }
    char token_id[48];
    id_random("k", 8, token_id, sizeof(token_id));
    snprintf(op->name, sizeof(op->name), "%s", token_id);
    if (auth_insert_token(db, token_id, op->id, op->role, op->token_name, op->secret) != 0) return -1;
    if (op->expires_at && auth_set_expiry(db, token_id, op->expires_at) != 0) return -1;
    audit_record(db, op->token_id, "token.create", token_id);
    return 0;
}

static void token_done(void *arg, int ok)
{
    admin_op *op = arg;
    json_t *t = NULL;
    if (ok && op->rc == 0) {
        t = json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", op->name, "token", op->secret, "role", role_name(op->role), "tenant",
                      op->id, "name", op->token_name);
        char iso[32];
        clock_iso8601(op->expires_at, iso, sizeof(iso));
        json_object_set_new(t, "expires_at", op->expires_at ? json_string(iso) : json_null());
    }
    finish(op, ok, 201, t, "", "no tenant with this id");
}

void api_token_create(http_ctx *c)
{
    json_t *r = json_object_get(c->body, "role"), *name = json_object_get(c->body, "name");
    role role = r ? (json_is_string(r) ? role_parse(json_string_value(r)) : ROLE_NONE) : ROLE_MEMBER;
    if (role == ROLE_NONE) {
        http_error(c, GERR_INVALID_FIELD, "role", "must be one of admin, member, viewer");
        return;
    }
    if (name && (!json_is_string(name) || json_string_length(name) > 100 || utf8_has_control(json_string_value(name)))) {
        http_error(c, GERR_INVALID_FIELD, "name", "must be a string of at most 100 characters, without control characters");
        return;
    }
    json_t *exp = json_object_get(c->body, "expires_in_s");
    if (exp && (!json_is_integer(exp) || json_integer_value(exp) < 1 || json_integer_value(exp) > 315360000)) {
        http_error(c, GERR_INVALID_FIELD, "expires_in_s", "must be an integer number of seconds from 1 to 315360000");
        return;
    }
    admin_op *op = xcalloc(1, sizeof(*op));
    op->expires_at = exp ? clock_now_ms() + json_integer_value(exp) * 1000 : 0;
    snprintf(op->id, sizeof(op->id), "%s", http_param(c, 0));
    snprintf(op->token_id, sizeof(op->token_id), "%s", c->auth.token_id);
    snprintf(op->token_name, sizeof(op->token_name), "%s", name ? json_string_value(name) : "");
    op->role = role;
    if (auth_new_secret(op->secret) != 0) {
        free(op);
        http_error(c, GERR_INTERNAL, NULL, "random generator failed");
        return;
    }
    op->srv = c->srv;
    op->defer = http_defer_begin(c);
    store_submit(c->srv->store, apply_token, token_done, op);
}

static int apply_revoke(sqlite3 *db, void *arg)
{
    admin_op *op = arg;
    int rc = auth_revoke(db, op->id);
    if (rc < 0) return -1;
    op->rc = rc == 0 ? 0 : 2;
    if (op->rc == 0) audit_record(db, op->token_id, "token.revoke", op->id);
    return 0;
}

static void revoke_done(void *arg, int ok)
{
    admin_op *op = arg;
    json_t *body = ok && op->rc == 0 ? json_pack("{s:s, s:b}", "id", op->id, "revoked", 1) : NULL;
    finish(op, ok, 200, body, "", "no active token with this id");
}

void api_token_revoke(http_ctx *c)
{
    admin_op *op = xcalloc(1, sizeof(*op));
    snprintf(op->id, sizeof(op->id), "%s", http_param(c, 0));
    snprintf(op->token_id, sizeof(op->token_id), "%s", c->auth.token_id);
    op->srv = c->srv;
    op->defer = http_defer_begin(c);
    store_submit(c->srv->store, apply_revoke, revoke_done, op);
}

void api_audit(http_ctx *c)
{
    const char *limit = http_query(c, "limit"), *cursor = http_query(c, "cursor");
    long n = limit ? strtol(limit, NULL, 10) : 100;
    long long cur = cursor ? strtoll(cursor, NULL, 10) : 0;
    if (n < 1 || n > 1000) {
        http_error(c, GERR_INVALID_FIELD, "limit", "must be an integer from 1 to 1000");
        return;
    }
    if (cur < 0) {
        http_error(c, GERR_INVALID_FIELD, "cursor", "not a cursor returned by this endpoint");
        return;
    }
    json_t *out = audit_list_json(c->srv->db, cur, (int)n);
    if (!out) {
        http_error(c, GERR_INTERNAL, NULL, "database error");
        return;
    }
    http_reply_json(c, 200, out);
}
