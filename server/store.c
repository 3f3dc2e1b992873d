/* store.c - group commit: every write to SQLite, batched in one transaction (store.h). */
#include "server/store.h"
#include "server/db.h"
#include "common/alloc.h"
#include "common/log.h"

#include <stdlib.h>

typedef struct write {
    store_apply_fn apply;
    store_done_fn done;
    void *arg;
    int ok;
    struct write *next;
} write_t;

struct store {
    sqlite3 *db;
    uv_check_t check;
    uv_idle_t idle;
    write_t *head, *tail;
    unsigned long long commits, writes;
};

static void on_check(uv_check_t *h)
{
    store_flush(h->data);
}

static void on_idle(uv_idle_t *h)
{
    (void)h; /* only keeps the loop from blocking in poll while writes are queued */
}

store *store_create(uv_loop_t *loop, sqlite3 *db)
{
    store *s = xcalloc(1, sizeof(*s));
    s->db = db;
    uv_check_init(loop, &s->check);
    uv_idle_init(loop, &s->idle);
    s->check.data = s->idle.data = s;
    uv_check_start(&s->check, on_check);
    uv_unref((uv_handle_t *)&s->check);
    return s;
}

void store_submit(store *s, store_apply_fn apply, store_done_fn done, void *arg)
{
    write_t *w = xmalloc(sizeof(*w));
    *w = (write_t){apply, done, arg, 0, NULL};
    if (s->tail)
        s->tail->next = w;
    else
        s->head = w;
    s->tail = w;
    if (!uv_is_active((uv_handle_t *)&s->idle)) uv_idle_start(&s->idle, on_idle);
}

void store_flush(store *s)
{
    write_t *batch = s->head;
    s->head = s->tail = NULL;
    uv_idle_stop(&s->idle);
    if (!batch) return;
    int committed = db_exec(s->db, "BEGIN IMMEDIATE") == 0;
    for (write_t *w = batch; committed && w; w = w->next) {
        db_exec(s->db, "SAVEPOINT w");
        w->ok = w->apply(s->db, w->arg) == 0;
        if (!w->ok) db_exec(s->db, "ROLLBACK TO w");
        db_exec(s->db, "RELEASE w");
    }
    if (committed && db_exec(s->db, "COMMIT") != 0) { /* db_exec logged why */
        db_exec(s->db, "ROLLBACK");
        committed = 0;
    }
    if (committed) s->commits++;
    while (batch) {
        write_t *next = batch->next;
        s->writes++;
        batch->done(batch->arg, committed && batch->ok);
        free(batch);
        batch = next;
    }
}

unsigned long long store_commits(const store *s)
{
    return s->commits;
}

unsigned long long store_writes(const store *s)
{
    return s->writes;
}

void store_close(store *s)
{
    store_flush(s);
    uv_close((uv_handle_t *)&s->check, NULL);
    uv_close((uv_handle_t *)&s->idle, NULL);
}

void store_free(store *s)
{
    free(s);
}
