/* store.h - group commit: every write to SQLite goes through here.
 *
 * A write is an `apply` function run inside a transaction and a `done` callback
 * run after the transaction is durable.  Writes queued during one turn of the
 * event loop share one transaction (one fsync), flushed from a uv_check handle
 * after the loop has read every ready socket; a uv_idle handle keeps the poll
 * from blocking while writes wait.  Each write runs in its own SAVEPOINT, so one
 * failing write (a constraint, say) fails alone.
 *
 * This is how 64 concurrent clients get thousands of durable submissions per
 * second from a disk that does ~400 fsyncs per second: each fsync carries a batch. */
#ifndef GANTRY_STORE_H
#define GANTRY_STORE_H

#include <sqlite3.h>
#include <uv.h>

/* returns 0 on success; on failure the write's changes are rolled back */
typedef int (*store_apply_fn)(sqlite3 *db, void *arg);
/* ok is 1 when the write committed, 0 when it failed or the commit failed */
typedef void (*store_done_fn)(void *arg, int ok);

typedef struct store store;

store *store_create(uv_loop_t *loop, sqlite3 *db);
void store_submit(store *s, store_apply_fn apply, store_done_fn done, void *arg);
/* runs everything queued now (used at shutdown and by tests) */
void store_flush(store *s);
/* statistics for /metrics */
unsigned long long store_commits(const store *s);
unsigned long long store_writes(const store *s);
/* stops the handles; call store_free from the close callbacks' turn */
void store_close(store *s);
void store_free(store *s);

#endif
