/* audit.h - the audit log: who created, changed, cancelled or revoked what.
 * Written inside the store transaction of the change it records. */
#ifndef GANTRY_AUDIT_H
#define GANTRY_AUDIT_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdint.h>

int audit_record(sqlite3 *db, const char *token_id, const char *action, const char *detail);
/* {"entries":[{"seq","ts","token_id","action","detail"}],"next_cursor"} newest first */
json_t *audit_list_json(sqlite3 *db, int64_t cursor, int limit);

#endif
