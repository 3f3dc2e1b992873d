/* logs.h - a program job's output as people read it (issue 20): GET /v1/jobs/{id}/logs, the last
 * lines as text, and its live follow (&follow=1, Server-Sent Events).  docs/programs.md "Logs and
 * outputs".
 *
 * The workers append each rank's output to the stream K_LOGS_PREFIX<job> (wire/keys.h): entries
 * `r <rank> g <generation> t <whole lines>`, and `r g end <reason>` when a rank's generation ended.
 * The hub reads it on the bus's command connection (bus_redis): the tail backwards (XREVRANGE), a
 * follow forwards from the newest entry it has seen (XRANGE from an exclusive id, every
 * LOGS_POLL_MS), and keeps the followers (at most LOGS_FOLLOWERS per tenant). */
#ifndef GANTRY_LOGS_H
#define GANTRY_LOGS_H

#include <stddef.h>

#include "server/server.h"

typedef struct logs_hub logs_hub;

logs_hub *logs_create(server *srv);
/* stops polling (the server is stopping); the followers' streams end with their requests */
void logs_close(logs_hub *h);

/* Pure: one line of a program's output (n bytes, no LF) as it is shown: NUL and bytes that are not well-formed UTF-8 become '?'; a
 * trailing CR (CRLF line ends) is dropped and of a line a carriage return rewrote (progress bars) only the text after its last CR
 * is kept, as a terminal shows it; every other control character but tab is escaped (\x1b, \u009b: common/utf8.h), so the text
 * cannot drive a terminal.  A new string (free it). */
char *logs_line_text(const char *p, size_t n);

#endif
