/* test_server.c - unit tests for server/: auth, db, store (group commit), jobs, spec,
 * http_json_depth and errors, on real SQLite files in a temporary directory. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "wire/msg.h"
#include "server/auth.h"
#include "server/db.h"
#include "server/errors.h"
#include "server/http.h"
#include "server/jobs.h"
#include "server/spec.h"
#include "server/store.h"
#include "testpath.h"

/* ---- fixture: a temporary directory with a database in it ---- */

typedef struct {
    char dir[64];
    char path[128];
    sqlite3 *db;
} fixture;

static void rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *ent;
            while ((ent = readdir(d))) {
                if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0) continue;
                char sub[1024];
                snprintf(sub, sizeof(sub), "%s/%s", path, ent->d_name);
                rm_rf(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

static const char *migrations_dir(void)
{
    return source_path("migrations");
}

static int open_only(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/gantry-unit-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/gantry.db", f->dir);
    char err[256] = "";
    if (db_open(f->path, &f->db, err, sizeof(err)) != 0) fail_msg("db_open: %s", err);
    *state = f;
    return 0;
}

static int tenant(sqlite3 *db, const char *id, const char *name)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "INSERT INTO tenants (id, name, created_at) VALUES ('%s', '%s', 1)", id, name);
    return db_exec(db, sql);
}

static int open_migrated(void **state)
{
    open_only(state);
    fixture *f = *state;
    char err[256] = "";
    if (db_migrate(f->db, migrations_dir(), err, sizeof(err)) < 0) fail_msg("db_migrate: %s", err);
    assert_int_equal(tenant(f->db, "t_a", "acme"), 0);
    assert_int_equal(tenant(f->db, "t_b", "bravo"), 0);
    return 0;
}

static int close_db(void **state)
{
    fixture *f = *state;
    if (f->db) {
        /* every statement the code used was given back (reset), none left mid-step */
        for (sqlite3_stmt *st = sqlite3_next_stmt(f->db, NULL); st; st = sqlite3_next_stmt(f->db, st))
            if (sqlite3_stmt_busy(st)) fail_msg("statement left busy: %s", sqlite3_sql(st));
        db_close(f->db);
    }
    rm_rf(f->dir);
    free(f);
    return 0;
}

static int64_t scalar_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) fail_msg("prepare %s: %s", sql, sqlite3_errmsg(db));
    int64_t v = INT64_MIN;
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* the first column of the first row as text into out ("" when no row, "NULL" for NULL) */
static void scalar_text(sqlite3 *db, const char *sql, char *out, size_t len)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) fail_msg("prepare %s: %s", sql, sqlite3_errmsg(db));
    snprintf(out, len, "%s", "");
    if (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *v = sqlite3_column_text(st, 0);
        snprintf(out, len, "%s", v ? (const char *)v : "NULL");
    }
    sqlite3_finalize(st);
}

static int64_t count_where(sqlite3 *db, const char *table, const char *where)
{
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE %s", table, where);
    return scalar_int(db, sql);
}

static int table_exists(sqlite3 *db, const char *name)
{
    char where[128];
    snprintf(where, sizeof(where), "type = 'table' AND name = '%s'", name);
    return count_where(db, "sqlite_master", where) == 1;
}

/* ---- errors ---- */

static void test_errors(void **state)
{
    (void)state;
    assert_int_equal(gerr_status(GERR_BAD_REQUEST), 400);
    assert_int_equal(gerr_status(GERR_INVALID_JSON), 400);
    assert_int_equal(gerr_status(GERR_UNAUTHORIZED), 401);
    assert_int_equal(gerr_status(GERR_FORBIDDEN), 403);
    assert_int_equal(gerr_status(GERR_NOT_FOUND), 404);
    assert_int_equal(gerr_status(GERR_METHOD_NOT_ALLOWED), 405);
    assert_int_equal(gerr_status(GERR_CONFLICT), 409);
    assert_int_equal(gerr_status(GERR_TOO_LARGE), 413);
    assert_int_equal(gerr_status(GERR_UNSUPPORTED_MEDIA), 415);
    assert_int_equal(gerr_status(GERR_RATE_LIMITED), 429);
    assert_int_equal(gerr_status(GERR_INTERNAL), 500);
    assert_int_equal(gerr_status(GERR_UNAVAILABLE), 503);
    assert_string_equal(gerr_code(GERR_NOT_FOUND), "not_found");
    assert_string_equal(gerr_code(GERR_TOO_LARGE), "payload_too_large");
    assert_string_equal(gerr_message(GERR_NOT_FOUND), "no such resource");
    for (int e = 0; e < GERR__COUNT; e++) {
        assert_in_range(gerr_status((gerr)e), 400, 599);
        assert_non_null(gerr_code((gerr)e));
        assert_true(strlen(gerr_message((gerr)e)) > 0);
        for (int k = 0; k < e; k++)
            assert_string_not_equal(gerr_code((gerr)e), gerr_code((gerr)k));
    }
}

/* ---- auth: hashing, secrets, roles ---- */

static void hex(const unsigned char *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

static void test_auth_hash(void **state)
{
    (void)state;
    unsigned char h[AUTH_HASH_LEN];
    char s[2 * AUTH_HASH_LEN + 1];
    auth_hash("abc", 3, h);
    hex(h, sizeof(h), s);
    assert_string_equal(s, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    auth_hash("", 0, h);
    hex(h, sizeof(h), s);
    assert_string_equal(s, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* only len bytes count */
    auth_hash("abcdef", 3, h);
    hex(h, sizeof(h), s);
    assert_string_equal(s, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void test_auth_new_secret(void **state)
{
    (void)state;
    char a[AUTH_SECRET_LEN + 8], b[AUTH_SECRET_LEN + 8];
    assert_int_equal(auth_new_secret(a), 0);
    assert_int_equal(auth_new_secret(b), 0);
    assert_int_equal(strlen(a), 4 + AUTH_SECRET_LEN);
    assert_memory_equal(a, "gty_", 4);
    for (size_t i = 4; i < strlen(a); i++)
        assert_non_null(strchr("0123456789abcdef", a[i]));
    assert_string_not_equal(a, b);
}

static void test_roles(void **state)
{
    (void)state;
    assert_int_equal(role_parse("admin"), ROLE_ADMIN);
    assert_int_equal(role_parse("member"), ROLE_MEMBER);
    assert_int_equal(role_parse("viewer"), ROLE_VIEWER);
    assert_int_equal(role_parse("none"), ROLE_NONE);
    assert_int_equal(role_parse("root"), ROLE_NONE);
    assert_int_equal(role_parse("Admin"), ROLE_NONE);
    assert_int_equal(role_parse(NULL), ROLE_NONE);
    assert_string_equal(role_name(ROLE_ADMIN), "admin");
    assert_string_equal(role_name(ROLE_VIEWER), "viewer");
    assert_true(ROLE_ADMIN > ROLE_MEMBER && ROLE_MEMBER > ROLE_VIEWER && ROLE_VIEWER > ROLE_NONE);
}

static void test_auth_admin(void **state)
{
    fixture *f = *state;
    const char *secret = "gty_bootstrap-secret";
    assert_int_equal(auth_ensure_admin(f->db, secret), 0);
    assert_int_equal(auth_ensure_admin(f->db, secret), 0); /* idempotent */
    assert_int_equal(count_where(f->db, "tokens", "role = 'admin'"), 1);

    auth_info info;
    memset(&info, 0, sizeof(info));
    assert_int_equal(auth_lookup(f->db, secret, strlen(secret), &info), 0);
    assert_int_equal(info.role, ROLE_ADMIN);
    assert_string_equal(info.tenant_id, "t_system");
    assert_string_equal(info.tenant_name, "system");
    assert_true(strncmp(info.token_id, "k_", 2) == 0);

    assert_int_equal(auth_lookup(f->db, "gty_wrong", 9, &info), -1);
    assert_int_equal(auth_lookup(f->db, secret, strlen(secret) - 1, &info), -1); /* a prefix is not the secret */
    assert_int_equal(auth_lookup(f->db, "", 0, &info), -1);

    /* the secret itself is not stored */
    char where[128];
    snprintf(where, sizeof(where), "hash = '%s' OR CAST(hash AS TEXT) = '%s'", secret, secret);
    assert_int_equal(count_where(f->db, "tokens", where), 0);
}

static void test_auth_insert_token(void **state)
{
    fixture *f = *state;
    char secret[AUTH_SECRET_LEN + 8];
    assert_int_equal(auth_new_secret(secret), 0);
    assert_int_equal(auth_insert_token(f->db, "k_member1", "t_a", ROLE_MEMBER, "ci", secret), 0);

    auth_info info;
    memset(&info, 0, sizeof(info));
    assert_int_equal(auth_lookup(f->db, secret, strlen(secret), &info), 0);
    assert_string_equal(info.token_id, "k_member1");
    assert_string_equal(info.tenant_id, "t_a");
    assert_string_equal(info.tenant_name, "acme");
    assert_string_equal(info.token_name, "ci");
    assert_int_equal(info.role, ROLE_MEMBER);

    /* a viewer of another tenant */
    char other[AUTH_SECRET_LEN + 8];
    assert_int_equal(auth_new_secret(other), 0);
    assert_int_equal(auth_insert_token(f->db, "k_viewer1", "t_b", ROLE_VIEWER, NULL, other), 0);
    assert_int_equal(auth_lookup(f->db, other, strlen(other), &info), 0);
    assert_string_equal(info.tenant_id, "t_b");
    assert_int_equal(info.role, ROLE_VIEWER);
    assert_string_equal(info.token_name, "");

    /* a member's secret cannot become the bootstrap admin */
    assert_int_equal(auth_ensure_admin(f->db, secret), -1);

    /* same secret twice (hash is UNIQUE), unknown tenant (foreign key) */
    assert_int_equal(auth_insert_token(f->db, "k_dup", "t_a", ROLE_MEMBER, "dup", secret), -1);
    assert_int_equal(auth_insert_token(f->db, "k_orphan", "t_nosuch", ROLE_MEMBER, "x", "gty_orphan"), -1);

    /* revoked tokens are refused */
    assert_int_equal(db_exec(f->db, "UPDATE tokens SET revoked_at = 5 WHERE id = 'k_member1'"), 0);
    assert_int_equal(auth_lookup(f->db, secret, strlen(secret), &info), -1);
    assert_int_equal(auth_lookup(f->db, other, strlen(other), &info), 0);

    /* an expired token is told apart from an unknown one; a revoked one that also expired stays revoked */
    assert_int_equal(db_exec(f->db, "UPDATE tokens SET expires_at = 1"), 0);
    assert_int_equal(auth_lookup(f->db, other, strlen(other), &info), AUTH_EXPIRED);
    assert_int_equal(auth_lookup(f->db, secret, strlen(secret), &info), -1);
}

/* ---- db: open and migrate ---- */

static void test_db_open_pragmas(void **state)
{
    fixture *f = *state;
    char mode[16];
    scalar_text(f->db, "PRAGMA journal_mode", mode, sizeof(mode));
    assert_string_equal(mode, "wal");
    assert_int_equal(scalar_int(f->db, "PRAGMA synchronous"), 2); /* FULL */
    assert_int_equal(scalar_int(f->db, "PRAGMA foreign_keys"), 1);
    assert_int_equal(scalar_int(f->db, "PRAGMA busy_timeout"), 5000);

    /* a second connection sees the persistent WAL mode */
    sqlite3 *other;
    char err[256] = "";
    assert_int_equal(db_open(f->path, &other, err, sizeof(err)), 0);
    scalar_text(other, "PRAGMA journal_mode", mode, sizeof(mode));
    assert_string_equal(mode, "wal");
    db_close(other);
}

static void test_db_open_fails(void **state)
{
    (void)state;
    sqlite3 *db = (sqlite3 *)0x1;
    char err[256] = "";
    assert_int_equal(db_open("/nonexistent-dir/gantry/x.db", &db, err, sizeof(err)), -1);
    assert_true(strlen(err) > 0);
    assert_ptr_equal(db, (sqlite3 *)0x1); /* untouched on failure */
}

static void test_db_migrate_repo(void **state)
{
    fixture *f = *state;
    char err[256] = "";
    int n = db_migrate(f->db, migrations_dir(), err, sizeof(err));
    if (n < 1) fail_msg("db_migrate returned %d: %s", n, err);
    assert_int_equal(count_where(f->db, "schema_migrations", "1"), n);
    assert_int_equal(count_where(f->db, "schema_migrations", "version = 1 AND name = '0001_init.sql' AND applied_at > 0"), 1);
    assert_true(table_exists(f->db, "jobs"));
    assert_true(table_exists(f->db, "job_events"));
    assert_true(table_exists(f->db, "tokens"));
    assert_true(table_exists(f->db, "idempotency_keys"));
    assert_int_equal(count_where(f->db, "tenants", "id = 't_system'"), 1);
    /* the system tenant was created when 0001 ran, not in 1970 (0008) */
    assert_int_equal(count_where(f->db, "tenants",
                                 "id = 't_system' AND created_at > 0 AND "
                                 "created_at = (SELECT applied_at FROM schema_migrations WHERE version = 1)"),
                     1);

    /* a second run applies nothing */
    assert_int_equal(db_migrate(f->db, migrations_dir(), err, sizeof(err)), 0);
    assert_int_equal(count_where(f->db, "schema_migrations", "1"), n);
    assert_int_equal(count_where(f->db, "tenants", "1"), 1);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void test_db_migrate_bad_sql_rolls_back(void **state)
{
    fixture *f = *state;
    char dir[256], err[256] = "";
    snprintf(dir, sizeof(dir), "%s/migrations", f->dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    write_text(dir, "0001_first.sql", "CREATE TABLE first_t (x INTEGER);\nINSERT INTO first_t VALUES (1);\n");
    write_text(dir, "0002_bad.sql",
               "CREATE TABLE partial_t (x INTEGER);\nINSERT INTO partial_t VALUES (1);\n"
               "INSERT INTO no_such_table VALUES (1);\n");
    write_text(dir, "0003_later.sql", "CREATE TABLE later_t (x INTEGER);\n");
    write_text(dir, "README.md", "not a migration\n");
    write_text(dir, "notes.sql", "this is not SQL and does not start with a digit\n");

    assert_int_equal(db_migrate(f->db, dir, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "0002_bad.sql"));
    assert_true(table_exists(f->db, "first_t"));
    assert_false(table_exists(f->db, "partial_t")); /* rolled back */
    assert_false(table_exists(f->db, "later_t"));   /* not attempted after a failure */
    assert_int_equal(count_where(f->db, "schema_migrations", "1"), 1);
    assert_int_equal(count_where(f->db, "schema_migrations", "version = 1"), 1);
    assert_int_equal(sqlite3_get_autocommit(f->db), 1); /* no transaction left open */

    /* fixed, the next run applies the rest only */
    write_text(dir, "0002_bad.sql", "CREATE TABLE partial_t (x INTEGER);\n");
    assert_int_equal(db_migrate(f->db, dir, err, sizeof(err)), 2);
    assert_true(table_exists(f->db, "partial_t"));
    assert_true(table_exists(f->db, "later_t"));
    assert_int_equal(count_where(f->db, "first_t", "1"), 1);
    assert_int_equal(count_where(f->db, "schema_migrations", "1"), 3);

    assert_int_equal(db_migrate(f->db, "/nonexistent/migrations", err, sizeof(err)), -1);
}

/* A database made before 0008 (the system tenant created "in 1970"): the migration gives it the time 0001
 * ran; a system tenant with a real time already is left alone. */
static void test_db_migrate_system_tenant_created(void **state)
{
    fixture *f = *state;
    char dir[256], err[256] = "", path[4400];
    snprintf(dir, sizeof(dir), "%s/migrations", f->dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    DIR *d = opendir(migrations_dir());
    assert_non_null(d);
    struct dirent *ent;
    while ((ent = readdir(d))) { /* the repository's migrations before 0008 */
        if (ent->d_name[0] < '0' || ent->d_name[0] > '9' || strtol(ent->d_name, NULL, 10) >= 8) continue;
        snprintf(path, sizeof(path), "%s/%s", migrations_dir(), ent->d_name);
        FILE *in = fopen(path, "r");
        assert_non_null(in);
        char sql[65536];
        size_t n = fread(sql, 1, sizeof(sql) - 1, in);
        fclose(in);
        sql[n] = '\0';
        write_text(dir, ent->d_name, sql);
    }
    closedir(d);
    assert_true(db_migrate(f->db, dir, err, sizeof(err)) >= 7);
    assert_int_equal(count_where(f->db, "tenants", "id = 't_system' AND created_at = 0"), 1); /* as it was */
    assert_int_equal(db_exec(f->db, "UPDATE schema_migrations SET applied_at = 1795331520123 WHERE version = 1"), 0);
    assert_int_equal(tenant(f->db, "t_a", "acme"), 0);
    assert_true(db_migrate(f->db, migrations_dir(), err, sizeof(err)) >= 1);
    assert_int_equal(count_where(f->db, "tenants", "id = 't_system' AND created_at = 1795331520123"), 1);
    assert_int_equal(count_where(f->db, "tenants", "id = 't_a' AND created_at = 1"), 1); /* other tenants untouched */
}

/* Regression: two migrations with one version number: the second was skipped silently. */
static void test_db_migrate_duplicate_version(void **state)
{
    fixture *f = *state;
    char dir[256], err[256] = "";
    snprintf(dir, sizeof(dir), "%s/migrations", f->dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    write_text(dir, "0002_a.sql", "CREATE TABLE a_t (x INTEGER);\n");
    write_text(dir, "0002_b.sql", "CREATE TABLE b_t (x INTEGER);\n");
    int n = db_migrate(f->db, dir, err, sizeof(err));
    assert_int_equal(n, -1);
    assert_non_null(strstr(err, "same version"));
    assert_false(table_exists(f->db, "a_t")); /* refused before applying anything */
}

/* ---- store: group commit ---- */

typedef struct {
    int x;
    int fail;
    int done_calls;
    int ok;
} write_arg;

static int apply_insert(sqlite3 *db, void *arg)
{
    write_arg *w = arg;
    char sql[128];
    snprintf(sql, sizeof(sql), "INSERT INTO gc_t (x) VALUES (%d)", w->x);
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) return -1;
    return w->fail ? -1 : 0; /* a failing write after it changed something: must be rolled back */
}

static void on_done(void *arg, int ok)
{
    write_arg *w = arg;
    w->done_calls++;
    w->ok = ok;
}

static void close_store(uv_loop_t *loop, store *s)
{
    store_close(s);
    uv_run(loop, UV_RUN_DEFAULT); /* runs the close callbacks */
    store_free(s);
    assert_int_equal(uv_loop_close(loop), 0);
}

static void test_store_group_commit(void **state)
{
    fixture *f = *state;
    assert_int_equal(db_exec(f->db, "CREATE TABLE gc_t (x INTEGER PRIMARY KEY)"), 0);
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    store *s = store_create(&loop, f->db);
    assert_non_null(s);

    enum { N = 100 };
    static write_arg w[N + 1];
    memset(w, 0, sizeof(w));
    for (int i = 0; i < N; i++) {
        w[i].x = i + 1;
        store_submit(s, apply_insert, on_done, &w[i]);
    }
    w[N].x = 1000;
    w[N].fail = 1;
    store_submit(s, apply_insert, on_done, &w[N]);
    /* nothing runs before the loop turns */
    assert_int_equal(w[0].done_calls, 0);
    assert_int_equal(store_commits(s), 0);

    for (int k = 0; k < 3; k++)
        uv_run(&loop, UV_RUN_NOWAIT);

    for (int i = 0; i < N; i++) {
        assert_int_equal(w[i].done_calls, 1);
        assert_int_equal(w[i].ok, 1);
    }
    assert_int_equal(w[N].done_calls, 1);
    assert_int_equal(w[N].ok, 0);
    assert_int_equal(store_commits(s), 1); /* one transaction for the whole batch */
    assert_int_equal(store_writes(s), N + 1);
    assert_int_equal(count_where(f->db, "gc_t", "1"), N);
    assert_int_equal(count_where(f->db, "gc_t", "x = 1000"), 0); /* the failed write left nothing */
    assert_int_equal(sqlite3_get_autocommit(f->db), 1);

    /* a second batch is a second commit; a constraint failure fails only its write */
    write_arg again[3];
    memset(again, 0, sizeof(again));
    again[0].x = 500;
    again[1].x = 1; /* duplicate primary key */
    again[2].x = 501;
    for (int i = 0; i < 3; i++)
        store_submit(s, apply_insert, on_done, &again[i]);
    store_flush(s);
    assert_int_equal(again[0].ok, 1);
    assert_int_equal(again[1].ok, 0);
    assert_int_equal(again[2].ok, 1);
    assert_int_equal(again[1].done_calls, 1);
    assert_int_equal(store_commits(s), 2);
    assert_int_equal(store_writes(s), N + 4);
    assert_int_equal(count_where(f->db, "gc_t", "1"), N + 2);

    /* flushing with nothing queued commits nothing */
    store_flush(s);
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(store_commits(s), 2);

    /* the batch is durable: another connection sees it */
    sqlite3 *other;
    char err[256];
    assert_int_equal(db_open(f->path, &other, err, sizeof(err)), 0);
    assert_int_equal(count_where(other, "gc_t", "1"), N + 2);
    db_close(other);

    close_store(&loop, s);
}

static void test_store_begin_failure_fails_all(void **state)
{
    fixture *f = *state;
    assert_int_equal(db_exec(f->db, "CREATE TABLE gc_t (x INTEGER PRIMARY KEY)"), 0);
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    store *s = store_create(&loop, f->db);
    assert_non_null(s);
    write_arg w[2];
    memset(w, 0, sizeof(w));
    w[0].x = 1;
    w[1].x = 2;
    store_submit(s, apply_insert, on_done, &w[0]);
    store_submit(s, apply_insert, on_done, &w[1]);
    /* an open transaction makes BEGIN IMMEDIATE fail */
    assert_int_equal(db_exec(f->db, "BEGIN"), 0);
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(db_exec(f->db, "ROLLBACK"), 0);
    assert_int_equal(w[0].done_calls, 1);
    assert_int_equal(w[0].ok, 0);
    assert_int_equal(w[1].done_calls, 1);
    assert_int_equal(w[1].ok, 0);
    assert_int_equal(store_commits(s), 0);
    assert_int_equal(count_where(f->db, "gc_t", "1"), 0);

    /* store_close flushes what is still queued */
    write_arg last;
    memset(&last, 0, sizeof(last));
    last.x = 3;
    store_submit(s, apply_insert, on_done, &last);
    close_store(&loop, s);
    assert_int_equal(last.done_calls, 1);
    assert_int_equal(last.ok, 1);
    assert_int_equal(count_where(f->db, "gc_t", "1"), 1);
}

/* ---- jobs ---- */

static json_t *small_spec(void)
{
    return json_pack("{s:{s:[{s:s, s:i}], s:[{s:s, s:i}]}}", "graph", "ops", "name", "a", "compute_us", 1, "devices", "name", "d0",
                     "memory_bytes", 1000);
}

static int insert_job(sqlite3 *db, const char *id, const char *tenant_id, const char *type, int prio, const char *idem,
                      char *existing)
{
    job_new j;
    memset(&j, 0, sizeof(j));
    snprintf(j.id, sizeof(j.id), "%s", id);
    snprintf(j.tenant_id, sizeof(j.tenant_id), "%s", tenant_id);
    snprintf(j.type, sizeof(j.type), "%s", type);
    snprintf(j.name, sizeof(j.name), "job %s", id);
    j.priority = prio;
    j.slots = 1;
    j.spec = small_spec();
    j.idem = idem;
    snprintf(j.existing, sizeof(j.existing), "garbage");
    int rc = jobs_insert(db, &j);
    json_decref(j.spec);
    if (existing) snprintf(existing, 48, "%s", j.existing);
    return rc;
}

static void job_text(sqlite3 *db, const char *id, const char *col, char *out, size_t len)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT %s FROM jobs WHERE id = '%s'", col, id);
    scalar_text(db, sql, out, len);
}

static void expect_state(sqlite3 *db, const char *id, const char *state)
{
    char s[32];
    job_text(db, id, "state", s, sizeof(s));
    assert_string_equal(s, state);
}

static void test_jobs_insert(void **state)
{
    fixture *f = *state;
    char existing[48];
    assert_int_equal(insert_job(f->db, "j_1", "t_a", "placement", 2, NULL, existing), 0);
    assert_string_equal(existing, "");
    expect_state(f->db, "j_1", "queued");
    assert_int_equal(count_where(f->db, "jobs", "id = 'j_1' AND published = 0 AND priority = 2 AND attempts = 0"), 1);
    assert_int_equal(count_where(f->db, "job_events", "job_id = 'j_1' AND state = 'queued' AND source = 'server'"), 1);

    json_t *o = jobs_get_json(f->db, "j_1", "t_a", true);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "state")), "queued");
    assert_string_equal(json_string_value(json_object_get(o, "priority")), "high");
    assert_string_equal(json_string_value(json_object_get(o, "tenant")), "t_a");
    assert_string_equal(json_string_value(json_object_get(o, "name")), "job j_1");
    assert_true(json_is_null(json_object_get(o, "finished_at")));
    json_t *spec = small_spec();
    assert_true(json_equal(json_object_get(o, "spec"), spec));
    json_decref(spec);
    json_decref(o);

    /* without full: no spec; another tenant cannot see it; the admin (NULL) can */
    o = jobs_get_json(f->db, "j_1", NULL, false);
    assert_non_null(o);
    assert_null(json_object_get(o, "spec"));
    json_decref(o);
    assert_null(jobs_get_json(f->db, "j_1", "t_b", false));
    assert_null(jobs_get_json(f->db, "j_nosuch", NULL, false));

    json_t *ev = jobs_events_json(f->db, "j_1");
    assert_non_null(ev);
    json_t *events = json_object_get(ev, "events");
    assert_int_equal(json_array_size(events), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(events, 0), "state")), "queued");
    json_decref(ev);

    /* the same id twice is an error */
    assert_int_equal(insert_job(f->db, "j_1", "t_a", "placement", 1, NULL, NULL), -1);
}

static void test_jobs_idempotency(void **state)
{
    fixture *f = *state;
    char existing[48];
    assert_int_equal(insert_job(f->db, "j_first", "t_a", "placement", 1, "key-1", existing), 0);
    assert_string_equal(existing, "");
    assert_int_equal(insert_job(f->db, "j_second", "t_a", "placement", 1, "key-1", existing), 0);
    assert_string_equal(existing, "j_first");
    assert_int_equal(count_where(f->db, "jobs", "1"), 1);
    assert_int_equal(count_where(f->db, "job_events", "1"), 1);

    /* keys are per tenant */
    assert_int_equal(insert_job(f->db, "j_other", "t_b", "placement", 1, "key-1", existing), 0);
    assert_string_equal(existing, "");
    /* a different key makes a new job */
    assert_int_equal(insert_job(f->db, "j_third", "t_a", "placement", 1, "key-2", existing), 0);
    assert_string_equal(existing, "");
    assert_int_equal(count_where(f->db, "jobs", "1"), 3);
    assert_int_equal(count_where(f->db, "idempotency_keys", "1"), 3);
}

static void make_event(event_msg *e, const char *job, const char *state_name, const char *worker)
{
    msg_event_init(e, job, worker ? "worker:w_1" : "scheduler");
    snprintf(e->state, sizeof(e->state), "%s", state_name);
    if (worker) snprintf(e->worker, sizeof(e->worker), "%s", worker);
}

static apply_result apply(sqlite3 *db, const event_msg *e, char *tenant_out)
{
    apply_result res = (apply_result)-1;
    assert_int_equal(jobs_apply_event(db, e, &res, tenant_out), 0);
    return res;
}

static void test_jobs_apply_event(void **state)
{
    fixture *f = *state;
    assert_int_equal(insert_job(f->db, "j_1", "t_a", "placement", 1, NULL, NULL), 0);
    char tenant_out[48] = "";
    char buf[256];
    event_msg e;

    make_event(&e, "j_1", "scheduled", NULL);
    assert_int_equal(apply(f->db, &e, tenant_out), APPLY_MOVED);
    assert_string_equal(tenant_out, "t_a");
    expect_state(f->db, "j_1", "scheduled");
    job_text(f->db, "j_1", "attempts", buf, sizeof(buf));
    assert_string_equal(buf, "1");

    make_event(&e, "j_1", "running", "w_1");
    e.ts = 1000;
    assert_int_equal(apply(f->db, &e, tenant_out), APPLY_MOVED);
    expect_state(f->db, "j_1", "running");
    job_text(f->db, "j_1", "worker", buf, sizeof(buf));
    assert_string_equal(buf, "w_1");
    job_text(f->db, "j_1", "started_at", buf, sizeof(buf));
    assert_string_equal(buf, "1000");

    /* the same event again (a replayed stream entry) */
    assert_int_equal(apply(f->db, &e, tenant_out), APPLY_DUPLICATE);
    assert_int_equal(count_where(f->db, "job_events", "job_id = 'j_1'"), 3);

    /* an event for a job that does not exist */
    event_msg u;
    make_event(&u, "j_nosuch", "running", NULL);
    assert_int_equal(apply(f->db, &u, tenant_out), APPLY_UNKNOWN_JOB);
    assert_int_equal(count_where(f->db, "job_events", "job_id = 'j_nosuch'"), 0);

    /* progress only */
    make_event(&e, "j_1", "", "w_1");
    e.progress = 0.5;
    assert_int_equal(apply(f->db, &e, tenant_out), APPLY_RECORDED);
    expect_state(f->db, "j_1", "running");
    assert_int_equal(count_where(f->db, "jobs", "id = 'j_1' AND progress = 0.5"), 1);
    assert_int_equal(count_where(f->db, "job_events", "job_id = 'j_1' AND progress = 0.5"), 1);

    /* an illegal transition is recorded without moving */
    make_event(&e, "j_1", "scheduled", NULL);
    assert_int_equal(apply(f->db, &e, tenant_out), APPLY_RECORDED);
    expect_state(f->db, "j_1", "running");

    /* succeeded with a result */
    make_event(&e, "j_1", "succeeded", "w_1");
    e.ts = 2000;
    e.result = json_pack("{s:s, s:f}", "best", "m-topo", "makespan_us", 42.5);
    assert_int_equal(apply(f->db, &e, tenant_out), APPLY_MOVED);
    expect_state(f->db, "j_1", "succeeded");
    job_text(f->db, "j_1", "finished_at", buf, sizeof(buf));
    assert_string_equal(buf, "2000");
    assert_int_equal(count_where(f->db, "jobs", "id = 'j_1' AND progress = 1.0"), 1);
    json_t *o = jobs_get_json(f->db, "j_1", "t_a", true);
    assert_non_null(o);
    assert_true(json_equal(json_object_get(o, "result"), e.result));
    assert_string_equal(json_string_value(json_object_get(o, "finished_at")), "1970-01-01T00:00:02.000Z");
    json_decref(o);
    msg_event_clear(&e);

    /* after a terminal state: recorded, never moved, progress untouched */
    make_event(&e, "j_1", "running", "w_2");
    assert_int_equal(apply(f->db, &e, tenant_out), APPLY_RECORDED);
    expect_state(f->db, "j_1", "succeeded");
    job_text(f->db, "j_1", "worker", buf, sizeof(buf));
    assert_string_equal(buf, "w_1");
    make_event(&e, "j_1", "queued", NULL);
    assert_int_equal(apply(f->db, &e, tenant_out), APPLY_RECORDED);
    expect_state(f->db, "j_1", "succeeded");
    make_event(&e, "j_1", "", NULL);
    e.progress = 0.1;
    assert_int_equal(apply(f->db, &e, tenant_out), APPLY_RECORDED);
    assert_int_equal(count_where(f->db, "jobs", "id = 'j_1' AND progress = 1.0"), 1);

    json_t *ev = jobs_events_json(f->db, "j_1");
    json_t *events = json_object_get(ev, "events");
    assert_int_equal(json_array_size(events), 9);
    assert_string_equal(json_string_value(json_object_get(json_array_get(events, 0), "state")), "queued");
    assert_string_equal(json_string_value(json_object_get(json_array_get(events, 1), "state")), "scheduled");
    assert_string_equal(json_string_value(json_object_get(json_array_get(events, 2), "state")), "running");
    json_decref(ev);
}

static void test_jobs_failed_and_requeue(void **state)
{
    fixture *f = *state;
    assert_int_equal(insert_job(f->db, "j_1", "t_a", "placement", 1, NULL, NULL), 0);
    char tenant_out[48], buf[256];
    event_msg e;
    make_event(&e, "j_1", "running", "w_1");
    assert_int_equal(apply(f->db, &e, tenant_out), APPLY_MOVED); /* running may overtake scheduled */
    make_event(&e, "j_1", "", "w_1");
    e.progress = 0.7;
    assert_int_equal(apply(f->db, &e, tenant_out), APPLY_RECORDED);
    make_event(&e, "j_1", "queued", NULL);
    snprintf(e.reason, sizeof(e.reason), "worker lost");
    assert_int_equal(apply(f->db, &e, tenant_out), APPLY_MOVED);
    expect_state(f->db, "j_1", "queued");
    job_text(f->db, "j_1", "progress", buf, sizeof(buf));
    assert_string_equal(buf, "NULL"); /* requeue resets progress */
    make_event(&e, "j_1", "failed", "w_2");
    snprintf(e.reason, sizeof(e.reason), "out of memory");
    assert_int_equal(apply(f->db, &e, tenant_out), APPLY_MOVED);
    expect_state(f->db, "j_1", "failed");
    job_text(f->db, "j_1", "error", buf, sizeof(buf));
    assert_string_equal(buf, "out of memory");
    job_text(f->db, "j_1", "finished_at", buf, sizeof(buf));
    assert_string_not_equal(buf, "NULL");
}

static void test_jobs_cancel(void **state)
{
    fixture *f = *state;
    assert_int_equal(insert_job(f->db, "j_a", "t_a", "placement", 1, NULL, NULL), 0);
    assert_int_equal(insert_job(f->db, "j_b", "t_b", "placement", 1, NULL, NULL), 0);
    char eid[48] = "";
    char buf[256];

    assert_int_equal(jobs_cancel(f->db, "j_a", "t_b", "k_x", eid), 2); /* another tenant's job */
    expect_state(f->db, "j_a", "queued");
    assert_int_equal(jobs_cancel(f->db, "j_nosuch", "t_a", "k_x", eid), 2);

    assert_int_equal(jobs_cancel(f->db, "j_a", "t_a", "k_alice", eid), 0);
    assert_true(strncmp(eid, "e_", 2) == 0);
    expect_state(f->db, "j_a", "cancelled");
    job_text(f->db, "j_a", "error", buf, sizeof(buf));
    assert_string_equal(buf, "cancelled by k_alice");
    job_text(f->db, "j_a", "finished_at", buf, sizeof(buf));
    assert_string_not_equal(buf, "NULL");
    char where[128];
    snprintf(where, sizeof(where), "id = '%s' AND job_id = 'j_a' AND state = 'cancelled'", eid);
    assert_int_equal(count_where(f->db, "job_events", where), 1);

    assert_int_equal(jobs_cancel(f->db, "j_a", "t_a", "k_alice", eid), 1); /* already terminal */
    assert_int_equal(count_where(f->db, "job_events", "job_id = 'j_a'"), 2);

    /* the admin (no tenant) may cancel any job */
    assert_int_equal(jobs_cancel(f->db, "j_b", NULL, "admin", eid), 0);
    expect_state(f->db, "j_b", "cancelled");
}

/* ---- max_queued: a counter kept with every insert and state change (migrations/0006), never a count ---- */

/* the tenant's counter equals a count of its waiting jobs; returns it */
static int64_t queued_counter(sqlite3 *db, const char *tenant)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT queued_jobs FROM tenants WHERE id = '%s'", tenant);
    int64_t counter = scalar_int(db, sql);
    snprintf(sql, sizeof(sql), "tenant_id = '%s' AND state IN ('queued', 'scheduled')", tenant);
    assert_int_equal(counter, count_where(db, "jobs", sql));
    return counter;
}

/* inserts a job; returns over_quota (0: inserted) */
static int insert_counted(sqlite3 *db, const char *id, const char *tenant)
{
    job_new j;
    memset(&j, 0, sizeof(j));
    snprintf(j.id, sizeof(j.id), "%s", id);
    snprintf(j.tenant_id, sizeof(j.tenant_id), "%s", tenant);
    snprintf(j.type, sizeof(j.type), "placement");
    j.priority = 1;
    j.slots = 1;
    j.spec = small_spec();
    assert_int_equal(jobs_insert(db, &j), 0);
    json_decref(j.spec);
    return j.over_quota;
}

static void move(sqlite3 *db, const char *job, const char *state)
{
    event_msg e;
    char tenant_out[48];
    make_event(&e, job, state, strcmp(state, "queued") == 0 || strcmp(state, "scheduled") == 0 ? NULL : "w_1");
    assert_int_equal(apply(db, &e, tenant_out), APPLY_MOVED);
}

static void test_jobs_queued_counter(void **state)
{
    fixture *f = *state;
    char eid[48];
    assert_int_equal(db_exec(f->db, "UPDATE tenants SET max_queued = 3 WHERE id = 't_a'"), 0);
    assert_int_equal(queued_counter(f->db, "t_a"), 0);
    assert_int_equal(insert_counted(f->db, "j_1", "t_a"), 0);
    assert_int_equal(insert_counted(f->db, "j_2", "t_a"), 0);
    assert_int_equal(insert_counted(f->db, "j_3", "t_a"), 0);
    assert_int_equal(queued_counter(f->db, "t_a"), 3);
    assert_int_equal(insert_counted(f->db, "j_4", "t_a"), 4); /* at max_queued: refused (the limit + 1) */
    assert_int_equal(count_where(f->db, "jobs", "id = 'j_4'"), 0);
    assert_int_equal(insert_counted(f->db, "j_b1", "t_b"), 0); /* another tenant's count is its own */
    assert_int_equal(queued_counter(f->db, "t_b"), 1);

    /* a cancel frees a place */
    assert_int_equal(jobs_cancel(f->db, "j_1", "t_a", "test", eid), 0);
    assert_int_equal(queued_counter(f->db, "t_a"), 2);
    assert_int_equal(jobs_cancel(f->db, "j_1", "t_a", "test", eid), 1); /* twice: counted once */
    assert_int_equal(queued_counter(f->db, "t_a"), 2);
    assert_int_equal(insert_counted(f->db, "j_4", "t_a"), 0);
    assert_int_equal(queued_counter(f->db, "t_a"), 3);

    /* scheduled still waits; running does not; a requeue waits again */
    move(f->db, "j_2", "scheduled");
    assert_int_equal(queued_counter(f->db, "t_a"), 3);
    move(f->db, "j_2", "running");
    assert_int_equal(queued_counter(f->db, "t_a"), 2);
    move(f->db, "j_3", "running"); /* running may overtake scheduled */
    assert_int_equal(queued_counter(f->db, "t_a"), 1);
    assert_int_equal(insert_counted(f->db, "j_5", "t_a"), 0);
    assert_int_equal(insert_counted(f->db, "j_6", "t_a"), 0);
    assert_int_equal(insert_counted(f->db, "j_7", "t_a"), 4);
    move(f->db, "j_2", "queued"); /* preempted or its worker lost: it waits again, over the limit for a while */
    assert_int_equal(queued_counter(f->db, "t_a"), 4);
    assert_int_equal(insert_counted(f->db, "j_7", "t_a"), 4);

    /* finished: succeeded, failed (from queued too), cancelled while running */
    move(f->db, "j_2", "failed");
    move(f->db, "j_3", "succeeded");
    move(f->db, "j_4", "failed");
    assert_int_equal(queued_counter(f->db, "t_a"), 2);
    move(f->db, "j_5", "running");
    assert_int_equal(jobs_cancel(f->db, "j_5", NULL, "admin", eid), 0);
    assert_int_equal(queued_counter(f->db, "t_a"), 1);
    event_msg late; /* a terminal event for a terminal job changes nothing */
    char tenant_out[48];
    make_event(&late, "j_5", "succeeded", "w_1");
    assert_int_equal(apply(f->db, &late, tenant_out), APPLY_DUPLICATE);
    assert_int_equal(queued_counter(f->db, "t_a"), 1);

    /* a failed write leaves no trace in the counter (it is in the same transaction) */
    assert_int_equal(db_exec(f->db, "SAVEPOINT w"), 0);
    assert_int_equal(insert_counted(f->db, "j_8", "t_a"), 0);
    assert_int_equal(db_exec(f->db, "ROLLBACK TO w; RELEASE w"), 0);
    assert_int_equal(queued_counter(f->db, "t_a"), 1);

    /* a restart: the counter is in the database */
    db_close(f->db);
    char err[256] = "";
    if (db_open(f->path, &f->db, err, sizeof(err)) != 0) fail_msg("db_open: %s", err);
    assert_int_equal(db_migrate(f->db, migrations_dir(), err, sizeof(err)), 0);
    assert_int_equal(queued_counter(f->db, "t_a"), 1);
    assert_int_equal(queued_counter(f->db, "t_b"), 1);
    assert_int_equal(insert_counted(f->db, "j_8", "t_a"), 0);
    assert_int_equal(insert_counted(f->db, "j_9", "t_a"), 0);
    assert_int_equal(insert_counted(f->db, "j_10", "t_a"), 4);
    assert_int_equal(queued_counter(f->db, "t_a"), 3);
}

/* a database from before the counter: the migration starts it from one count */
static void test_jobs_queued_counter_migration(void **state)
{
    fixture *f = *state;
    char dir[256], err[256] = "";
    snprintf(dir, sizeof(dir), "%s/migrations", f->dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    DIR *d = opendir(migrations_dir());
    assert_non_null(d);
    struct dirent *ent;
    static char text[65536], counter_migration[65536];
    char counter_name[256] = "";
    while ((ent = readdir(d))) { /* every migration before 0006 */
        long version = strtol(ent->d_name, NULL, 10);
        if (version < 1 || !strstr(ent->d_name, ".sql")) continue;
        char path[4400];
        snprintf(path, sizeof(path), "%s/%s", migrations_dir(), ent->d_name);
        FILE *fp = fopen(path, "r");
        assert_non_null(fp);
        size_t n = fread(text, 1, sizeof(text) - 1, fp);
        fclose(fp);
        text[n] = '\0';
        if (version < 6) write_text(dir, ent->d_name, text);
        if (version == 6) {
            snprintf(counter_name, sizeof(counter_name), "%s", ent->d_name);
            memcpy(counter_migration, text, n + 1);
        }
    }
    closedir(d);
    assert_string_not_equal(counter_name, "");
    assert_true(db_migrate(f->db, dir, err, sizeof(err)) >= 5);
    assert_int_equal(tenant(f->db, "t_a", "acme"), 0);
    assert_int_equal(tenant(f->db, "t_b", "bravo"), 0);
    assert_int_equal(db_exec(f->db, "INSERT INTO jobs (id, tenant_id, type, name, priority, state, spec, created_at, updated_at) "
                                    "VALUES ('j_1', 't_a', 'placement', '', 1, 'queued', '{}', 1, 1), "
                                    "('j_2', 't_a', 'placement', '', 1, 'scheduled', '{}', 1, 1), "
                                    "('j_3', 't_a', 'placement', '', 1, 'running', '{}', 1, 1), "
                                    "('j_4', 't_a', 'placement', '', 1, 'succeeded', '{}', 1, 1), "
                                    "('j_5', 't_b', 'placement', '', 1, 'queued', '{}', 1, 1)"),
                     0);
    write_text(dir, counter_name, counter_migration); /* the next start applies 0006 */
    assert_int_equal(db_migrate(f->db, dir, err, sizeof(err)), 1);
    assert_int_equal(queued_counter(f->db, "t_a"), 2);
    assert_int_equal(queued_counter(f->db, "t_b"), 1);
    assert_int_equal(queued_counter(f->db, "t_system"), 0);
}

/* job ids in a list reply */
static size_t list_ids(json_t *page, const char **ids, size_t max)
{
    json_t *jobs = json_object_get(page, "jobs");
    size_t n = json_array_size(jobs);
    for (size_t i = 0; i < n && i < max; i++)
        ids[i] = json_string_value(json_object_get(json_array_get(jobs, i), "id"));
    return n;
}

static void test_jobs_list(void **state)
{
    fixture *f = *state;
    /* interleaved: ja0 ja1 jb0 ja2 ja3 jb1 ja4 ja5 ja6 */
    const char *order[] = {"ja0", "ja1", "jb0", "ja2", "ja3", "jb1", "ja4", "ja5", "ja6"};
    for (size_t i = 0; i < 9; i++) {
        int b = order[i][1] == 'b';
        assert_int_equal(
            insert_job(f->db, order[i], b ? "t_b" : "t_a", strcmp(order[i], "jb1") == 0 ? "inference" : "placement", 1, NULL, NULL),
            0);
    }

    const char *expect[3][3] = {{"ja6", "ja5", "ja4"}, {"ja3", "ja2", "ja1"}, {"ja0", NULL, NULL}};
    const size_t sizes[3] = {3, 3, 1};
    job_filter flt = {.tenant_id = "t_a", .limit = 3};
    for (int p = 0; p < 3; p++) {
        json_t *page = jobs_list_json(f->db, &flt);
        assert_non_null(page);
        const char *ids[8];
        assert_int_equal(list_ids(page, ids, 8), sizes[p]);
        for (size_t i = 0; i < sizes[p]; i++)
            assert_string_equal(ids[i], expect[p][i]);
        json_t *next = json_object_get(page, "next_cursor");
        if (p < 2) {
            assert_true(json_is_string(next));
            flt.cursor = strtoll(json_string_value(next), NULL, 10);
            assert_true(flt.cursor > 0);
        } else {
            assert_true(json_is_null(next));
        }
        json_decref(page);
    }

    /* the admin sees everyone's jobs */
    job_filter all = {.limit = 50};
    json_t *page = jobs_list_json(f->db, &all);
    const char *ids[16];
    assert_int_equal(list_ids(page, ids, 16), 9);
    assert_string_equal(ids[0], "ja6");
    assert_string_equal(ids[3], "jb1");
    assert_true(json_is_null(json_object_get(page, "next_cursor")));
    json_decref(page);

    /* t_b sees only its own */
    job_filter tb = {.tenant_id = "t_b", .limit = 50};
    page = jobs_list_json(f->db, &tb);
    assert_int_equal(list_ids(page, ids, 16), 2);
    assert_string_equal(ids[0], "jb1");
    assert_string_equal(ids[1], "jb0");
    json_decref(page);

    /* type filter */
    job_filter ty = {.type = "inference", .limit = 50};
    page = jobs_list_json(f->db, &ty);
    assert_int_equal(list_ids(page, ids, 16), 1);
    assert_string_equal(ids[0], "jb1");
    json_decref(page);
    ty.tenant_id = "t_a";
    page = jobs_list_json(f->db, &ty);
    assert_int_equal(list_ids(page, ids, 16), 0);
    json_decref(page);

    /* state filter */
    char eid[48];
    assert_int_equal(jobs_cancel(f->db, "ja3", "t_a", "test", eid), 0);
    job_filter st = {.state = "cancelled", .limit = 50};
    page = jobs_list_json(f->db, &st);
    assert_int_equal(list_ids(page, ids, 16), 1);
    assert_string_equal(ids[0], "ja3");
    json_decref(page);
    job_filter q = {.tenant_id = "t_a", .state = "queued", .limit = 50};
    page = jobs_list_json(f->db, &q);
    assert_int_equal(list_ids(page, ids, 16), 6);
    json_decref(page);

    /* exactly a page's worth: no next cursor */
    job_filter exact = {.tenant_id = "t_b", .limit = 2};
    page = jobs_list_json(f->db, &exact);
    assert_int_equal(list_ids(page, ids, 16), 2);
    assert_true(json_is_null(json_object_get(page, "next_cursor")));
    json_decref(page);
}

typedef struct {
    char ids[16][128];
    int n;
    int bad_spec;
} seen_tasks;

static void collect(void *arg, const task_msg *t)
{
    seen_tasks *s = arg;
    json_t *spec = small_spec();
    if (!json_equal(spec, t->spec) || strcmp(t->type, "placement") != 0 || t->slots != 1) s->bad_spec++;
    json_decref(spec);
    if (s->n < 16) snprintf(s->ids[s->n], sizeof(s->ids[0]), "%s:%s:%d:%d", t->job_id, t->tenant, t->priority, t->attempt);
    s->n++;
}

static void test_jobs_outbox(void **state)
{
    fixture *f = *state;
    assert_int_equal(insert_job(f->db, "j_1", "t_a", "placement", 0, NULL, NULL), 0);
    assert_int_equal(insert_job(f->db, "j_2", "t_b", "placement", 2, NULL, NULL), 0);
    assert_int_equal(insert_job(f->db, "j_3", "t_a", "placement", 1, NULL, NULL), 0);
    assert_int_equal(insert_job(f->db, "j_4", "t_a", "placement", 1, NULL, NULL), 0);
    char eid[48];
    assert_int_equal(jobs_cancel(f->db, "j_4", NULL, "test", eid), 0); /* finished: never published */
    int64_t later = clock_now_ms() + 60000;

    seen_tasks s;
    memset(&s, 0, sizeof(s));
    int64_t last = jobs_each_unpublished(f->db, 0, later, 100, collect, &s);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.bad_spec, 0);
    assert_string_equal(s.ids[0], "j_1:t_a:0:0");
    assert_string_equal(s.ids[1], "j_2:t_b:2:0");
    assert_string_equal(s.ids[2], "j_3:t_a:1:0");
    assert_int_equal(last, scalar_int(f->db, "SELECT seq FROM jobs WHERE id = 'j_3'"));

    /* max and after page through them */
    memset(&s, 0, sizeof(s));
    int64_t mid = jobs_each_unpublished(f->db, 0, later, 1, collect, &s);
    assert_int_equal(s.n, 1);
    jobs_each_unpublished(f->db, mid, later, 100, collect, &s);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.ids[1], "j_2:t_b:2:0");

    /* nothing created before the cutoff */
    memset(&s, 0, sizeof(s));
    assert_int_equal(jobs_each_unpublished(f->db, 7, 0, 100, collect, &s), 7);
    assert_int_equal(s.n, 0);

    assert_int_equal(jobs_mark_published(f->db, "j_2"), 0);
    memset(&s, 0, sizeof(s));
    jobs_each_unpublished(f->db, 0, later, 100, collect, &s);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.ids[0], "j_1:t_a:0:0");
    assert_string_equal(s.ids[1], "j_3:t_a:1:0");

    assert_int_equal(jobs_mark_published(f->db, "j_1"), 0);
    assert_int_equal(jobs_mark_published(f->db, "j_3"), 0);
    memset(&s, 0, sizeof(s));
    assert_int_equal(jobs_each_unpublished(f->db, 0, later, 100, collect, &s), 0);
    assert_int_equal(s.n, 0);
}

/* ---- the cancel keys owed (migrations/0011_cancel_outbox.sql) ---- */

typedef struct {
    int n;
    char ids[8][48];
} owed_keys;

static void collect_owed(void *arg, const char *job_id)
{
    owed_keys *o = arg;
    if (o->n < 8) snprintf(o->ids[o->n++], 48, "%s", job_id);
}

static void test_jobs_cancel_outbox(void **state)
{
    fixture *f = *state;
    assert_int_equal(insert_job(f->db, "j_1", "t_a", "placement", 1, NULL, NULL), 0);
    assert_int_equal(insert_job(f->db, "j_2", "t_a", "placement", 1, NULL, NULL), 0);
    assert_int_equal(insert_job(f->db, "j_3", "t_a", "placement", 1, NULL, NULL), 0);
    assert_int_equal(insert_job(f->db, "j_4", "t_a", "placement", 1, NULL, NULL), 0);
    char eid[48], tenant_out[48];
    int64_t later = clock_now_ms() + 60000;
    owed_keys o;
    memset(&o, 0, sizeof(o));
    assert_int_equal(jobs_each_cancel_unset(f->db, later, 100, collect_owed, &o), 0);

    /* a cancel, a stop (a search's), a failure owe their keys from their own transaction; a success does not */
    assert_int_equal(jobs_cancel(f->db, "j_1", "t_a", "k_x", eid), 0);
    assert_int_equal(jobs_stop(f->db, "j_2", "stopped by its search"), 0);
    event_msg e;
    make_event(&e, "j_3", "failed", "w_1");
    assert_int_equal(apply(f->db, &e, tenant_out), APPLY_MOVED);
    make_event(&e, "j_4", "succeeded", "w_1");
    assert_int_equal(apply(f->db, &e, tenant_out), APPLY_MOVED);
    assert_int_equal(jobs_cancel(f->db, "j_1", "t_a", "k_x", eid), 1); /* already terminal: nothing more owed */
    assert_int_equal(count_where(f->db, "cancel_outbox", "1"), 3);
    assert_int_equal(jobs_each_cancel_unset(f->db, later, 100, collect_owed, &o), 3);
    assert_string_equal(o.ids[0], "j_1");
    assert_string_equal(o.ids[1], "j_2");
    assert_string_equal(o.ids[2], "j_3");

    /* younger than the cutoff: left to the SET in flight; max pages */
    memset(&o, 0, sizeof(o));
    assert_int_equal(jobs_each_cancel_unset(f->db, 0, 100, collect_owed, &o), 0);
    assert_int_equal(jobs_each_cancel_unset(f->db, later, 1, collect_owed, &o), 1);

    /* Redis answered: no longer owed (twice: the sweep's SET and the first one both answered) */
    assert_int_equal(jobs_cancel_key_set(f->db, "j_2"), 0);
    assert_int_equal(jobs_cancel_key_set(f->db, "j_2"), 0);
    memset(&o, 0, sizeof(o));
    assert_int_equal(jobs_each_cancel_unset(f->db, later, 100, collect_owed, &o), 2);
    assert_string_equal(o.ids[0], "j_1");
    assert_string_equal(o.ids[1], "j_3");
}

typedef struct {
    long queued_placement, cancelled_placement, other;
} counts;

static void count_cb(void *arg, const char *type, const char *st, long n)
{
    counts *c = arg;
    if (strcmp(type, "placement") == 0 && strcmp(st, "queued") == 0)
        c->queued_placement += n;
    else if (strcmp(type, "placement") == 0 && strcmp(st, "cancelled") == 0)
        c->cancelled_placement += n;
    else
        c->other += n;
}

static void test_jobs_count_by_state(void **state)
{
    fixture *f = *state;
    assert_int_equal(insert_job(f->db, "j_1", "t_a", "placement", 1, NULL, NULL), 0);
    assert_int_equal(insert_job(f->db, "j_2", "t_a", "placement", 1, NULL, NULL), 0);
    assert_int_equal(insert_job(f->db, "j_3", "t_b", "placement", 1, NULL, NULL), 0);
    char eid[48];
    assert_int_equal(jobs_cancel(f->db, "j_2", NULL, "test", eid), 0);
    counts c = {0, 0, 0};
    jobs_count_by_state(f->db, count_cb, &c);
    assert_int_equal(c.queued_placement, 2);
    assert_int_equal(c.cancelled_placement, 1);
    assert_int_equal(c.other, 0);
}

/* ---- http_json_depth ---- */

static int depth(const char *s)
{
    return http_json_depth(s, strlen(s));
}

static void test_http_json_depth(void **state)
{
    (void)state;
    assert_int_equal(depth(""), 0);
    assert_int_equal(depth("42"), 0);
    assert_int_equal(depth("\"[[[\""), 0);
    assert_int_equal(depth("{}"), 1);
    assert_int_equal(depth("[]"), 1);
    assert_int_equal(depth("[[[]]]"), 3);
    assert_int_equal(depth("[[],[],[]]"), 2);
    assert_int_equal(depth("{\"a\":[1,{\"b\":[]}],\"c\":{}}"), 4);
    assert_int_equal(depth("{\"a\":\"[[[[{{{{\"}"), 1);                /* brackets inside strings */
    assert_int_equal(depth("{\"a\":\"x\\\"[[[\",\"b\":[1]}"), 2);      /* escaped quote keeps the string open */
    assert_int_equal(depth("{\"a\":\"\\\\\",\"b\":[[{}]]}"), 4);       /* escaped backslash, then the string ends */
    assert_int_equal(depth("{\"a\":\"}}}]]]\",\"b\":{\"c\":{}}}"), 3); /* closers inside strings */
    assert_int_equal(http_json_depth("[[[[", 2), 2);                   /* only len bytes */
    char deep[1001];
    for (int i = 0; i < 500; i++) {
        deep[i] = '[';
        deep[999 - i] = ']';
    }
    deep[1000] = '\0';
    assert_int_equal(depth(deep), 500);
}

/* ---- spec_validate_job ---- */

static const char valid_graph[] = "{\"ops\":[{\"name\":\"a\",\"compute_us\":10,\"output_bytes\":[100]},"
                                  "{\"name\":\"b\",\"compute_us\":5}],"
                                  "\"edges\":[{\"src\":\"a\",\"dst\":\"b\"}],"
                                  "\"devices\":[{\"name\":\"d0\",\"memory_bytes\":1000000},"
                                  "{\"name\":\"d1\",\"memory_bytes\":1000000}]}";

/* runs spec_validate_job on text; returns its result, field and msg filled */
static int validate(const char *text, job_new *out, char *field, size_t flen, char *msg, size_t mlen, json_t **body)
{
    json_error_t jerr;
    *body = json_loads(text, 0, &jerr);
    if (!*body) fail_msg("bad test JSON: %s: %s", text, jerr.text);
    memset(out, 0, sizeof(*out));
    field[0] = msg[0] = '\0';
    return spec_validate_job(*body, out, field, flen, msg, mlen);
}

static void expect_invalid(const char *text, const char *want_field)
{
    job_new out;
    char field[128], msg[256];
    json_t *body;
    int rc = validate(text, &out, field, sizeof(field), msg, sizeof(msg), &body);
    json_decref(body);
    if (rc != -1) fail_msg("accepted: %s", text);
    if (strcmp(field, want_field) != 0) fail_msg("field '%s' (want '%s') for %s", field, want_field, text);
    assert_true(strlen(msg) > 0);
}

static void test_spec_invalid_top_level(void **state)
{
    (void)state;
    expect_invalid("{\"spec\":{}}", "type");
    expect_invalid("{\"type\":7,\"spec\":{}}", "type");
    expect_invalid("{\"type\":\"mining\",\"spec\":{}}", "type");
    expect_invalid("{\"type\":\"placement\",\"priority\":\"urgent\",\"spec\":{}}", "priority");
    expect_invalid("{\"type\":\"placement\",\"priority\":2,\"spec\":{}}", "priority");
    expect_invalid("{\"type\":\"placement\",\"spec\":{},\"colour\":\"red\"}", "colour");
    expect_invalid("{\"type\":\"placement\",\"spec\":[1]}", "spec");
    expect_invalid("{\"type\":\"placement\",\"spec\":\"graph\"}", "spec");
    expect_invalid("{\"type\":\"placement\"}", "spec");
    expect_invalid("{\"type\":\"placement\",\"name\":\"\",\"spec\":{}}", "name");
    expect_invalid("{\"type\":\"placement\",\"name\":5,\"spec\":{}}", "name");

    /* the unknown field is named in the message too */
    job_new out;
    char field[128], msg[256];
    json_t *body;
    assert_int_equal(
        validate("{\"type\":\"placement\",\"spec\":{},\"colour\":1}", &out, field, sizeof(field), msg, sizeof(msg), &body), -1);
    assert_non_null(strstr(msg, "colour"));
    json_decref(body);
    /* the types are listed from the job type table (common/jobtypes.h) */
    assert_int_equal(validate("{\"type\":7,\"spec\":{}}", &out, field, sizeof(field), msg, sizeof(msg), &body), -1);
    assert_string_equal(msg, "required: one of placement, training, inference, federated");
    json_decref(body);

    char longname[400];
    char name[202];
    memset(name, 'x', 201);
    name[201] = '\0';
    snprintf(longname, sizeof(longname), "{\"type\":\"placement\",\"name\":\"%s\",\"spec\":{}}", name);
    expect_invalid(longname, "name");
}

static void test_spec_types_validated(void **state)
{
    (void)state;
    /* training is validated by its library (the field names what is missing) */
    expect_invalid("{\"type\":\"training\",\"spec\":{}}", "spec.model");
    expect_invalid("{\"type\":\"inference\",\"spec\":{}}", "spec.model");
    expect_invalid("{\"type\":\"inference\",\"spec\":{\"model\":\"m\",\"replicas\":{\"min\":3,\"max\":2}}}", "spec.replicas.max");
    expect_invalid("{\"type\":\"inference\",\"spec\":{\"model\":\"m\",\"slo\":{\"percentile\":100}}}", "spec.slo.percentile");
    expect_invalid("{\"type\":\"inference\",\"spec\":{\"model\":\"m\",\"max_batch\":0}}", "spec.max_batch");
    expect_invalid("{\"type\":\"inference\",\"spec\":{\"model\":\"m\",\"resolved\":{}}}", "spec.resolved");
    expect_invalid("{\"type\":\"federated\",\"spec\":{}}", "spec.model"); /* validated by spec/fed_spec.c */
}

/* every row of the job type table has a spec module with what the server needs of it */
static void test_spec_table_complete(void **state)
{
    (void)state;
#define X(name, title, spec, executor, traits)                                                                                     \
    {                                                                                                                              \
        const job_spec *js = spec_module(#name);                                                                                   \
        assert_non_null(js);                                                                                                       \
        assert_non_null(js->shape);                                                                                                \
        assert_non_null(js->validate);                                                                                             \
        assert_non_null(js->slots);                                                                                                \
    }
    JOB_TYPE_TABLE(X)
#undef X
    assert_null(spec_module("mining"));
    assert_null(spec_module(NULL));
}

#define TRAIN_SPEC(extra)                                                                                                          \
    "{\"type\":\"training\",\"spec\":{\"model\":{\"input\":[1,28,28],\"layers\":[{\"type\":\"dense\",\"units\":10}]},"             \
    "\"dataset\":{\"name\":\"fashion-mnist\"},\"optimizer\":{\"type\":\"sgd\",\"lr\":0.1},\"batch_size\":8,\"steps\":5" extra "}}"

static void test_spec_training_gang(void **state)
{
    (void)state;
    /* spec.workers = N: a gang of N slots */
    job_new out;
    char field[128], msg[256];
    json_t *body;
    int rc = validate(TRAIN_SPEC(",\"workers\":3"), &out, field, sizeof(field), msg, sizeof(msg), &body);
    if (rc != 0) fail_msg("rejected at %s: %s", field, msg);
    assert_int_equal(out.slots, 3);
    json_decref(body);
    assert_int_equal(validate(TRAIN_SPEC(""), &out, field, sizeof(field), msg, sizeof(msg), &body), 0);
    assert_int_equal(out.slots, 1);
    json_decref(body);
    expect_invalid(TRAIN_SPEC(",\"workers\":0"), "spec.workers");
    expect_invalid(TRAIN_SPEC(",\"workers\":65"), "spec.workers");
    expect_invalid(TRAIN_SPEC(",\"workers\":9"), "spec.workers"); /* more than batch_size */
    expect_invalid(TRAIN_SPEC(",\"workers\":\"2\""), "spec.workers");
    assert_int_equal(
        validate(TRAIN_SPEC(",\"workers\":{\"min\":2,\"max\":3}"), &out, field, sizeof(field), msg, sizeof(msg), &body), 0);
    assert_int_equal(out.slots, 2); /* an elastic gang starts with at least min */
    json_decref(body);
    expect_invalid(TRAIN_SPEC(",\"workers\":{\"min\":3,\"max\":2}"), "spec.workers.max");
    expect_invalid(TRAIN_SPEC(",\"workers\":{\"max\":2}"), "spec.workers.min");
    expect_invalid(TRAIN_SPEC(",\"workers\":{\"min\":2,\"max\":9}"), "spec.workers"); /* max above batch_size */
    expect_invalid(TRAIN_SPEC(",\"collective_timeout_s\":0"), "spec.collective_timeout_s");
    expect_invalid(TRAIN_SPEC(",\"rendezvous_timeout_s\":1e9"), "spec.rendezvous_timeout_s");
}

static void test_spec_valid_placement(void **state)
{
    (void)state;
    char text[1024];
    snprintf(text, sizeof(text), "{\"type\":\"placement\",\"name\":\"resnet\",\"priority\":\"high\",\"spec\":{\"graph\":%s}}",
             valid_graph);
    job_new out;
    char field[128], msg[256];
    json_t *body;
    int rc = validate(text, &out, field, sizeof(field), msg, sizeof(msg), &body);
    if (rc != 0) fail_msg("rejected at %s: %s", field, msg);
    assert_string_equal(out.type, "placement");
    assert_string_equal(out.name, "resnet");
    assert_int_equal(out.priority, 2);
    assert_int_equal(out.slots, 1);
    assert_ptr_equal(out.spec, json_object_get(body, "spec")); /* borrowed */
    json_decref(body);

    /* defaults: name = type, priority normal */
    snprintf(text, sizeof(text), "{\"type\":\"placement\",\"spec\":{\"graph\":%s,\"algorithms\":[\"all\"]}}", valid_graph);
    rc = validate(text, &out, field, sizeof(field), msg, sizeof(msg), &body);
    if (rc != 0) fail_msg("rejected at %s: %s", field, msg);
    assert_string_equal(out.name, "placement");
    assert_int_equal(out.priority, 1);
    json_decref(body);
}

static void test_spec_invalid_placement(void **state)
{
    (void)state;
    expect_invalid("{\"type\":\"placement\",\"spec\":{}}", "spec.graph");
    expect_invalid("{\"type\":\"placement\",\"spec\":{\"graph\":[]}}", "spec.graph");
    /* an op without compute_us */
    expect_invalid("{\"type\":\"placement\",\"spec\":{\"graph\":{\"ops\":[{\"name\":\"a\",\"compute_us\":1},{\"name\":\"b\"}],"
                   "\"devices\":[{\"name\":\"d0\",\"memory_bytes\":100}]}}}",
                   "spec.graph.ops[1].compute_us");
    /* an edge to an op that does not exist */
    expect_invalid("{\"type\":\"placement\",\"spec\":{\"graph\":{\"ops\":[{\"name\":\"a\",\"compute_us\":1}],"
                   "\"edges\":[{\"src\":\"a\",\"dst\":\"zz\"}],\"devices\":[{\"name\":\"d0\",\"memory_bytes\":100}]}}}",
                   "spec.graph.edges[0].dst");
    expect_invalid("{\"type\":\"placement\",\"spec\":{\"graph\":{\"ops\":[{\"name\":\"a\",\"compute_us\":-1}],"
                   "\"devices\":[{\"name\":\"d0\",\"memory_bytes\":100}]}}}",
                   "spec.graph.ops[0].compute_us");

    /* whatever the exact path, a bad op is reported under spec.graph */
    job_new out;
    char field[128], msg[256];
    json_t *body;
    assert_int_equal(validate("{\"type\":\"placement\",\"spec\":{\"graph\":{\"ops\":[{\"compute_us\":1}],"
                              "\"devices\":[{\"name\":\"d0\",\"memory_bytes\":100}]}}}",
                              &out, field, sizeof(field), msg, sizeof(msg), &body),
                     -1);
    assert_true(strncmp(field, "spec.graph", 10) == 0);
    json_decref(body);

    char text[1024];
    snprintf(text, sizeof(text), "{\"type\":\"placement\",\"spec\":{\"graph\":%s,\"algorithms\":[\"m-topo\",\"magic\"]}}",
             valid_graph);
    expect_invalid(text, "spec.algorithms[1]");
    snprintf(text, sizeof(text), "{\"type\":\"placement\",\"spec\":{\"graph\":%s,\"fuse\":\"yes\"}}", valid_graph);
    expect_invalid(text, "spec.fuse");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_auth_hash),
        cmocka_unit_test(test_auth_new_secret),
        cmocka_unit_test(test_roles),
        cmocka_unit_test_setup_teardown(test_auth_admin, open_migrated, close_db),
        cmocka_unit_test_setup_teardown(test_auth_insert_token, open_migrated, close_db),
        cmocka_unit_test_setup_teardown(test_db_open_pragmas, open_only, close_db),
        cmocka_unit_test(test_db_open_fails),
        cmocka_unit_test_setup_teardown(test_db_migrate_repo, open_only, close_db),
        cmocka_unit_test_setup_teardown(test_db_migrate_bad_sql_rolls_back, open_only, close_db),
        cmocka_unit_test_setup_teardown(test_db_migrate_system_tenant_created, open_only, close_db),
        cmocka_unit_test_setup_teardown(test_db_migrate_duplicate_version, open_only, close_db),
        cmocka_unit_test_setup_teardown(test_store_group_commit, open_only, close_db),
        cmocka_unit_test_setup_teardown(test_store_begin_failure_fails_all, open_only, close_db),
        cmocka_unit_test_setup_teardown(test_jobs_insert, open_migrated, close_db),
        cmocka_unit_test_setup_teardown(test_jobs_idempotency, open_migrated, close_db),
        cmocka_unit_test_setup_teardown(test_jobs_apply_event, open_migrated, close_db),
        cmocka_unit_test_setup_teardown(test_jobs_failed_and_requeue, open_migrated, close_db),
        cmocka_unit_test_setup_teardown(test_jobs_cancel, open_migrated, close_db),
        cmocka_unit_test_setup_teardown(test_jobs_queued_counter, open_migrated, close_db),
        cmocka_unit_test_setup_teardown(test_jobs_queued_counter_migration, open_only, close_db),
        cmocka_unit_test_setup_teardown(test_jobs_list, open_migrated, close_db),
        cmocka_unit_test_setup_teardown(test_jobs_outbox, open_migrated, close_db),
        cmocka_unit_test_setup_teardown(test_jobs_cancel_outbox, open_migrated, close_db),
        cmocka_unit_test_setup_teardown(test_jobs_count_by_state, open_migrated, close_db),
        cmocka_unit_test(test_http_json_depth),
        cmocka_unit_test(test_spec_invalid_top_level),
        cmocka_unit_test(test_spec_types_validated),
        cmocka_unit_test(test_spec_table_complete),
        cmocka_unit_test(test_spec_training_gang),
        cmocka_unit_test(test_spec_valid_placement),
        cmocka_unit_test(test_spec_invalid_placement),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
