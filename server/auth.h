/* auth.h - bearer tokens: creation (random from OpenSSL, shown once), storage as
 * SHA-256 only, lookup with a constant-time comparison, and roles. */
#ifndef GANTRY_AUTH_H
#define GANTRY_AUTH_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { ROLE_NONE = 0, ROLE_VIEWER = 1, ROLE_MEMBER = 2, ROLE_ADMIN = 3 } role;

#define AUTH_HASH_LEN 32
#define AUTH_SECRET_LEN 64

typedef struct {
    char token_id[48];
    char tenant_id[48];
    char tenant_name[128];
    char token_name[128];
    role role;
} auth_info;

const char *role_name(role r);
/* ROLE_NONE when unknown */
role role_parse(const char *name);

/* SHA-256 of the secret */
void auth_hash(const char *secret, size_t len, unsigned char out[AUTH_HASH_LEN]);
/* a new secret "gty_<64 hex>"; 0 or -1 */
int auth_new_secret(char out[AUTH_SECRET_LEN + 8]);
/* looks the secret up; 0 and fills info, -1 when unknown or revoked, AUTH_EXPIRED when it was valid
 * but has expired (a client can tell a stale token from a wrong one) */
#define AUTH_EXPIRED (-2)
int auth_lookup(sqlite3 *db, const char *secret, size_t len, auth_info *info);
/* inserts a token row for an existing tenant (inside the caller's transaction); 0 or -1 */
int auth_insert_token(sqlite3 *db, const char *token_id, const char *tenant_id, role r, const char *name, const char *secret);
/* sets a token's expiry (ms since the epoch); 0 or -1 */
int auth_set_expiry(sqlite3 *db, const char *token_id, int64_t expires_at_ms);
/* revokes an active token: 0, 1 when there is no such active token, -1 on error */
int auth_revoke(sqlite3 *db, const char *token_id);
/* makes sure a bootstrap admin token with this secret exists (idempotent); 0 or -1 */
int auth_ensure_admin(sqlite3 *db, const char *secret);

#endif
