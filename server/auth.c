/* auth.c - bearer tokens: made, stored as SHA-256, looked up in constant time, roles (auth.h). */
#include "server/auth.h"
#include "server/db.h"
#include "common/clock.h"
#include "common/ids.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

static const char *const role_names[] = {"none", "viewer", "member", "admin"};

const char *role_name(role r)
{
    return role_names[r];
}

role role_parse(const char *name)
{
    for (int r = ROLE_VIEWER; name && r <= ROLE_ADMIN; r++)
        if (strcmp(name, role_names[r]) == 0) return (role)r;
    return ROLE_NONE;
}

void auth_hash(const char *secret, size_t len, unsigned char out[AUTH_HASH_LEN])
{
    unsigned int n = AUTH_HASH_LEN;
    EVP_Digest(secret, len, out, &n, EVP_sha256(), NULL);
}

int auth_new_secret(char out[AUTH_SECRET_LEN + 8])
{
    return id_random("gty", AUTH_SECRET_LEN / 2, out, AUTH_SECRET_LEN + 8);
}

static void copy_col(sqlite3_stmt *st, int col, char *dst, size_t len)
{
    const unsigned char *v = sqlite3_column_text(st, col);
    snprintf(dst, len, "%s", v ? (const char *)v : "");
}

int auth_lookup(sqlite3 *db, const char *secret, size_t len, auth_info *info)
{
    unsigned char h[AUTH_HASH_LEN];
    auth_hash(secret, len, h);
    sqlite3_stmt *st;
    if (!(st = db_stmt(db, "SELECT k.id, k.tenant_id, t.name, k.name, k.role, k.hash, k.expires_at FROM tokens k JOIN tenants t "
                           "ON t.id = k.tenant_id WHERE k.hash = ? AND k.revoked_at IS NULL")))
        return -1;
    sqlite3_bind_blob(st, 1, h, sizeof(h), SQLITE_STATIC);
    int rc = -1;
    if (db_step(st) == SQLITE_ROW && sqlite3_column_bytes(st, 5) == AUTH_HASH_LEN &&
        CRYPTO_memcmp(sqlite3_column_blob(st, 5), h, AUTH_HASH_LEN) == 0) {
        copy_col(st, 0, info->token_id, sizeof(info->token_id));
        copy_col(st, 1, info->tenant_id, sizeof(info->tenant_id));
        copy_col(st, 2, info->tenant_name, sizeof(info->tenant_name));
        copy_col(st, 3, info->token_name, sizeof(info->token_name));
        info->role = role_parse((const char *)sqlite3_column_text(st, 4));
        rc = info->role == ROLE_NONE ? -1 : 0;
        if (rc == 0 && sqlite3_column_type(st, 6) != SQLITE_NULL && sqlite3_column_int64(st, 6) <= clock_now_ms())
            rc = AUTH_EXPIRED;
    }
    db_release(st);
    return rc;
}

int auth_insert_token(sqlite3 *db, const char *token_id, const char *tenant_id, role r, const char *name, const char *secret)
{
    unsigned char h[AUTH_HASH_LEN];
    auth_hash(secret, strlen(secret), h);
    sqlite3_stmt *st;
    if (!(st = db_stmt(db, "INSERT INTO tokens (id, tenant_id, role, name, hash, created_at) VALUES (?,?,?,?,?,?)"))) return -1;
    sqlite3_bind_text(st, 1, token_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, role_name(r), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, name ? name : "", -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 5, h, sizeof(h), SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, clock_now_ms());
    int rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    db_release(st);
    return rc;
}

int auth_ensure_admin(sqlite3 *db, const char *secret)
{
    auth_info info;
    if (auth_lookup(db, secret, strlen(secret), &info) == 0) return info.role == ROLE_ADMIN ? 0 : -1;
    char id[48];
    if (id_random("k", 8, id, sizeof(id)) != 0) return -1;
    return auth_insert_token(db, id, "t_system", ROLE_ADMIN, "bootstrap admin", secret);
}

int auth_set_expiry(sqlite3 *db, const char *token_id, int64_t expires_at_ms)
{
    sqlite3_stmt *st = db_stmt(db, "UPDATE tokens SET expires_at = ? WHERE id = ?");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, expires_at_ms);
    sqlite3_bind_text(st, 2, token_id, -1, SQLITE_STATIC);
    int rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    db_release(st);
    return rc;
}

int auth_revoke(sqlite3 *db, const char *token_id)
{
    sqlite3_stmt *st = db_stmt(db, "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, clock_now_ms());
    sqlite3_bind_text(st, 2, token_id, -1, SQLITE_STATIC);
    int rc = db_step(st) == SQLITE_DONE ? (sqlite3_changes(db) == 1 ? 0 : 1) : -1;
    db_release(st);
    return rc;
}
