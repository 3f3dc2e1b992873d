/* db.c - the server's SQLite database: opened durable, migrations applied, db_step (db.h). */
#include "server/db.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STMT_CACHE 256

/* one process, few connections: a small table scanned by pointer comparison */
static struct {
    sqlite3 *db;
    const char *sql;
    sqlite3_stmt *st;
} cache[STMT_CACHE];

sqlite3_stmt *db_stmt(sqlite3 *db, const char *sql)
{
    int empty = -1;
    for (int i = 0; i < STMT_CACHE; i++) {
        if (cache[i].db == db && cache[i].sql == sql) return cache[i].st;
        if (!cache[i].db && empty < 0) empty = i;
    }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v3(db, sql, -1, empty >= 0 ? SQLITE_PREPARE_PERSISTENT : 0, &st, NULL) != SQLITE_OK) {
        log_error("sqlite prepare: %s (in: %.80s)", sqlite3_errmsg(db), sql);
        return NULL;
    }
    if (empty >= 0) {
        cache[empty].db = db;
        cache[empty].sql = sql;
        cache[empty].st = st;
    }
    return st;
}

void db_release(sqlite3_stmt *st)
{
    if (!st) return;
    for (int i = 0; i < STMT_CACHE; i++) {
        if (cache[i].st == st) {
            sqlite3_reset(st);
            sqlite3_clear_bindings(st);
            return;
        }
    }
    sqlite3_finalize(st);
}

void db_close(sqlite3 *db)
{
    for (int i = 0; i < STMT_CACHE; i++) {
        if (cache[i].db == db) {
            sqlite3_finalize(cache[i].st);
            cache[i].db = NULL;
            cache[i].sql = NULL;
            cache[i].st = NULL;
        }
    }
    sqlite3_close(db);
}

int db_exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        log_error("sqlite: %s (in: %.80s)", msg ? msg : "?", sql);
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

int db_step(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        const char *sql = sqlite3_sql(st);
        log_error("sqlite: %s (in: %.200s)", sqlite3_errmsg(sqlite3_db_handle(st)), sql ? sql : "?");
    }
    return rc;
}

static int pragma_text(sqlite3 *db, const char *sql, char *out, size_t len)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
    int rc = db_step(st) == SQLITE_ROW ? 0 : -1;
    if (rc == 0) snprintf(out, len, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return rc;
}

int db_open(const char *path, sqlite3 **out, char *err, size_t errlen)
{
    sqlite3 *db;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open %s: %s", path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return -1;
    }
    char mode[16] = "";
    if (pragma_text(db, "PRAGMA journal_mode=WAL", mode, sizeof(mode)) != 0 || strcmp(mode, "wal") != 0) {
        snprintf(err, errlen, "%s: WAL mode refused (journal_mode=%s)", path, mode);
        sqlite3_close(db);
        return -1;
    }
    /* FULL: a commit is on disk before any reply that depends on it (NORMAL may lose it on power loss) */
    if (db_exec(db, "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; PRAGMA busy_timeout=5000") != 0) {
        snprintf(err, errlen, "%s: cannot set pragmas", path);
        sqlite3_close(db);
        return -1;
    }
    *out = db;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int applied(sqlite3 *db, long version)
{
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, "SELECT 1 FROM schema_migrations WHERE version = ?", -1, &st, NULL);
    sqlite3_bind_int64(st, 1, version);
    int found = db_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return found;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? xmalloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = '\0';
    fclose(f);
    return buf;
}

static int apply_one(sqlite3 *db, const char *dir, const char *name, long version, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    char *sql = read_file(path);
    if (!sql) {
        snprintf(err, errlen, "cannot read %s", path);
        return -1;
    }
    char *msg = NULL;
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &msg);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc == SQLITE_OK) {
        sqlite3_stmt *st;
        sqlite3_prepare_v2(db, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)", -1, &st, NULL);
        sqlite3_bind_int64(st, 1, version);
        sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, clock_now_ms());
        rc = db_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
        sqlite3_finalize(st);
    }
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, "COMMIT", NULL, NULL, &msg);
    free(sql);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "migration %s failed: %s", name, msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    log_info("applied migration %s", name);
    return 0;
}

int db_migrate(sqlite3 *db, const char *dir, char *err, size_t errlen)
{
    if (db_exec(db, "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                    "applied_at INTEGER NOT NULL)") != 0) {
        snprintf(err, errlen, "cannot create schema_migrations");
        return -1;
    }
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "cannot open migrations directory %s", dir);
        return -1;
    }
    char *names[1024];
    size_t n = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) && n < 1024) {
        size_t len = strlen(ent->d_name);
        if (len > 4 && strcmp(ent->d_name + len - 4, ".sql") == 0 && ent->d_name[0] >= '0' && ent->d_name[0] <= '9')
            names[n++] = xstrdup(ent->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof(names[0]), cmp_str);
    int count = 0;
    for (size_t i = 1; i < n; i++) {
        if (strtol(names[i], NULL, 10) == strtol(names[i - 1], NULL, 10)) {
            snprintf(err, errlen, "migrations %s and %s have the same version number", names[i - 1], names[i]);
            count = -1;
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        long version = strtol(names[i], NULL, 10);
        if (count >= 0 && !applied(db, version)) count = apply_one(db, dir, names[i], version, err, errlen) == 0 ? count + 1 : -1;
        free(names[i]);
    }
    return count;
}
