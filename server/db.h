/* db.h - the server's SQLite database: opening it durable (WAL, synchronous=FULL)
 * and applying migrations/ in order, each in its own transaction, recorded in
 * schema_migrations.  The server is the only writer. */
#ifndef GANTRY_DB_H
#define GANTRY_DB_H

#include <sqlite3.h>
#include <stddef.h>

/* opens (creating) path; 0 or -1 with a message in err */
int db_open(const char *path, sqlite3 **out, char *err, size_t errlen);
/* applies every NNNN_name.sql in dir not yet recorded; returns how many were applied, -1 on error */
int db_migrate(sqlite3 *db, const char *dir, char *err, size_t errlen);
/* A prepared statement from a per-connection cache, reset and unbound, or NULL.
 * `sql` must be a string literal (the cache is keyed by its address).  Give it
 * back with db_release, never sqlite3_finalize.  Preparing costs more than
 * running these small statements, so every hot query goes through here. */
sqlite3_stmt *db_stmt(sqlite3 *db, const char *sql);
void db_release(sqlite3_stmt *st);
/* finalizes the cached statements of db and closes it */
void db_close(sqlite3 *db);
/* sqlite3_exec that logs failures; 0 or -1 */
int db_exec(sqlite3 *db, const char *sql);
/* sqlite3_step for every statement of the server (docs/errors.md): a result other than SQLITE_ROW or
 * SQLITE_DONE is logged once, as "sqlite: <sqlite3_errmsg> (in: <the statement's SQL>)", and returned for
 * the caller to decide.  The SQL is sqlite3_sql's text with its ? placeholders, never the bound values
 * (token hashes, names, specs stay out of the log). */
int db_step(sqlite3_stmt *st);

#endif
