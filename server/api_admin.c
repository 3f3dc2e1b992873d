/* api_admin.c - who am I, tenants and tokens.  Creating tenants and tokens needs
 * the admin role; a token's secret appears once, in the 201 reply. */
#include "common/clock.h"
#include "common/ids.h"
#include "server/api.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

void api_whoami(http_ctx *c)
{
    http_reply_json(c, 200,
                    json_pack("{s:s, s:s, s:{s:s, s:s}}", "role", role_name(c->auth.role), "token_id", c->auth.token_id, "tenant",
                              "id", c->auth.tenant_id, "name", c->auth.tenant_name));
}

static void audit(sqlite3 *db, const char *token_id, const char *action, const char *detail)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT INTO audit_log (ts, token_id, action, detail) VALUES (?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, clock_now_ms());
    sqlite3_bind_text(st, 2, token_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, action, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, detail, -1, SQLITE_STATIC);
    sqlite3_step(st);
    sqlite3_finalize(st);
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
    double weight;
    int rc; /* 0 ok, 1 name taken, 2 tenant missing */
    char secret[AUTH_SECRET_LEN + 8];
    role role;
    char token_name[128];
} admin_op;

static int apply_tenant(sqlite3 *db, void *arg)
{
    admin_op *op = arg;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT OR IGNORE INTO tenants (id, name, created_at, weight) VALUES (?,?,?,?)", -1, &st, NULL) !=
        SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, op->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, op->name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, clock_now_ms());
    sqlite3_bind_double(st, 4, op->weight);
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
    sqlite3_finalize(st);
    op->rc = sqlite3_changes(db) == 1 ? 0 : 1;
    if (rc == 0 && op->rc == 0) audit(db, op->token_id, "tenant.create", op->name);
    return rc;
}

static void tenant_done(void *arg, int ok)
{
    admin_op *op = arg;
    http_ctx *c = http_defer_ctx(op->defer);
    if (c) {
        if (!ok)
            http_error(c, GERR_INTERNAL, NULL, "database error");
        else if (op->rc == 1)
            http_error(c, GERR_CONFLICT, "name", "a tenant named '%s' already exists", op->name);
        else
            http_reply_json(c, 201, json_pack("{s:s, s:s, s:f}", "id", op->id, "name", op->name, "weight", op->weight));
    }
    http_defer_end(op->defer);
    free(op);
}

void api_tenant_create(http_ctx *c)
{
    json_t *name = json_object_get(c->body, "name"), *weight = json_object_get(c->body, "weight");
    if (!json_is_string(name) || !valid_name(json_string_value(name))) {
        http_error(c, GERR_INVALID_FIELD, "name", "required: 1 to 64 characters from a-z A-Z 0-9 . _ -");
        return;
    }
    if (weight && (!json_is_number(weight) || json_number_value(weight) <= 0 || json_number_value(weight) > 1000)) {
        http_error(c, GERR_INVALID_FIELD, "weight", "must be a number in (0, 1000]");
        return;
    }
    admin_op *op = calloc(1, sizeof(*op));
    id_random("t", 8, op->id, sizeof(op->id));
    snprintf(op->name, sizeof(op->name), "%s", json_string_value(name));
    snprintf(op->token_id, sizeof(op->token_id), "%s", c->auth.token_id);
    op->weight = weight ? json_number_value(weight) : 1.0;
    op->srv = c->srv;
    op->defer = http_defer_begin(c);
    store_submit(c->srv->store, apply_tenant, tenant_done, op);
}

void api_tenant_list(http_ctx *c)
{
    sqlite3_stmt *st;
    sqlite3_prepare_v2(c->srv->db,
                       "SELECT t.id, t.name, t.created_at, t.weight, (SELECT count(*) FROM jobs j WHERE j.tenant_id = "
                       "t.id) FROM tenants t ORDER BY t.created_at, t.name",
                       -1, &st, NULL);
    json_t *list = json_array();
    while (sqlite3_step(st) == SQLITE_ROW) {
        char iso[32];
        clock_iso8601(sqlite3_column_int64(st, 2), iso, sizeof(iso));
        json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:f, s:I}", "id", sqlite3_column_text(st, 0), "name",
                                              sqlite3_column_text(st, 1), "created_at", iso, "weight", sqlite3_column_double(st, 3),
                                              "jobs", (json_int_t)sqlite3_column_int64(st, 4)));
    }
    sqlite3_finalize(st);
    http_reply_json(c, 200, json_pack("{s:o}", "tenants", list));
}

static int apply_token(sqlite3 *db, void *arg)
{
    admin_op *op = arg;
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, "SELECT 1 FROM tenants WHERE id = ?", -1, &st, NULL);
    sqlite3_bind_text(st, 1, op->id, -1, SQLITE_STATIC);
    int exists = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (!exists) {
        op->rc = 2;
        return 0;
    }
    char token_id[48];
    id_random("k", 8, token_id, sizeof(token_id));
    snprintf(op->name, sizeof(op->name), "%s", token_id);
    if (auth_insert_token(db, token_id, op->id, op->role, op->token_name, op->secret) != 0) return -1;
    audit(db, op->token_id, "token.create", token_id);
    return 0;
}

static void token_done(void *arg, int ok)
{
    admin_op *op = arg;
    http_ctx *c = http_defer_ctx(op->defer);
    if (c) {
        if (!ok)
            http_error(c, GERR_INTERNAL, NULL, "database error");
        else if (op->rc == 2)
            http_error(c, GERR_NOT_FOUND, "id", "no tenant with this id");
        else
            http_reply_json(c, 201,
                            json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", op->name, "token", op->secret, "role", role_name(op->role),
                                      "tenant", op->id, "name", op->token_name));
    }
    OPENSSL_cleanse(op->secret, sizeof(op->secret));
    http_defer_end(op->defer);
    free(op);
}

void api_token_create(http_ctx *c)
{
    json_t *r = json_object_get(c->body, "role"), *name = json_object_get(c->body, "name");
    role role = r ? (json_is_string(r) ? role_parse(json_string_value(r)) : ROLE_NONE) : ROLE_MEMBER;
    if (role == ROLE_NONE) {
        http_error(c, GERR_INVALID_FIELD, "role", "must be one of admin, member, viewer");
        return;
    }
    if (name && (!json_is_string(name) || json_string_length(name) > 100)) {
        http_error(c, GERR_INVALID_FIELD, "name", "must be a string of at most 100 characters");
        return;
    }
    admin_op *op = calloc(1, sizeof(*op));
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
