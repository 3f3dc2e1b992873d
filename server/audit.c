/* audit.c - the audit log's rows, written in the transaction of the change they record (audit.h). */
#include "server/audit.h"
#include "common/clock.h"
#include "server/db.h"

#include <stdio.h>

int audit_record(sqlite3 *db, const char *token_id, const char *action, const char *detail)
{
    sqlite3_stmt *st = db_stmt(db, "INSERT INTO audit_log (ts, token_id, action, detail) VALUES (?,?,?,?)");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, clock_now_ms());
    sqlite3_bind_text(st, 2, token_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, action, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, detail ? detail : "", -1, SQLITE_STATIC);
    int rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    db_release(st);
    return rc;
}

json_t *audit_list_json(sqlite3 *db, int64_t cursor, int limit)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT seq, ts, token_id, action, detail FROM audit_log WHERE ?1 = 0 OR seq < ?1 "
                                   "ORDER BY seq DESC LIMIT ?2");
    if (!st) return NULL;
    sqlite3_bind_int64(st, 1, cursor);
    sqlite3_bind_int(st, 2, limit + 1);
    json_t *list = json_array();
    int64_t last = 0;
    int more = 0;
    while (db_step(st) == SQLITE_ROW) {
        if ((int)json_array_size(list) == limit) {
            more = 1;
            break;
        }
        char iso[32];
        last = sqlite3_column_int64(st, 0);
        clock_iso8601(sqlite3_column_int64(st, 1), iso, sizeof(iso));
        json_array_append_new(list, json_pack("{s:I, s:s, s:s, s:s, s:s}", "seq", (json_int_t)last, "ts", iso, "token_id",
                                              (const char *)sqlite3_column_text(st, 2), "action",
                                              (const char *)sqlite3_column_text(st, 3), "detail",
                                              (const char *)sqlite3_column_text(st, 4)));
    }
    db_release(st);
    char cur[32];
    snprintf(cur, sizeof(cur), "%lld", (long long)last);
    return json_pack("{s:o, s:o}", "entries", list, "next_cursor", more ? json_string(cur) : json_null());
}
