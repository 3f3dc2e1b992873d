/* prog_metrics.h - the metrics lines a rank's program writes (GANTRY_METRICS).
 *
 * The program appends JSON lines to the file (PROG_SANDBOX_METRICS_FILE inside the sandbox,
 * its metrics directory outside).  The reader is incremental: each call reads what
 * was appended since the last one and returns every complete line that is a JSON
 * object, as a metrics point (the executor reports it as a progress point, drawn as
 * the job's curves).  Tolerant: a partial last line waits for its '\n', a line that
 * is not a JSON object is counted and skipped, a line longer than max_line is
 * skipped whole; limited: at most max_read bytes per call.  The file is written by
 * the sandboxed program, so it is opened without following links and must be a
 * regular file with one link (never another file the program points it at); a
 * file that shrinks is read again from the start. */
#ifndef GANTRY_PROGRAM_PROG_METRICS_H
#define GANTRY_PROGRAM_PROG_METRICS_H

#include <jansson.h>
#include <stddef.h>

#define PROG_METRICS_DEFAULT_MAX_LINE 65536
#define PROG_METRICS_DEFAULT_MAX_READ (1 << 20)

typedef struct prog_metrics prog_metrics;
/* 0 for a limit takes its default; never NULL */
prog_metrics *prog_metrics_new(const char *path, size_t max_line, size_t max_read);
void prog_metrics_free(prog_metrics *m);

/* Appends the new points (json objects) to the array points; returns how many, or
 * -1 when the file is not a regular file of its own (reason in err).  A missing
 * file is 0 points. */
int prog_metrics_read(prog_metrics *m, json_t *points, char *err, size_t errlen);
/* lines skipped so far: not JSON objects, or too long */
size_t prog_metrics_bad_lines(const prog_metrics *m);

#endif
