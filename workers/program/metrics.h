/* metrics.h - the metrics lines a rank's program writes (GANTRY_METRICS).
 *
 * The program appends JSON lines to the file (SBX_METRICS_FILE inside the sandbox,
 * its metrics directory outside).  The reader is incremental: each call reads what
 * was appended since the last one and returns every complete line that is a JSON
 * object, as a metrics point (the executor reports it as a progress point, drawn as
 * the job's curves).  Tolerant: a partial last line waits for its '\n', a line that
 * is not a JSON object is counted and skipped, a line longer than max_line is
 * skipped whole; limited: at most max_read bytes per call.  The file is written by
 * the sandboxed program, so it is opened without following links and must be a
 * regular file with one link (never another file the program points it at); a
 * file that shrinks is read again from the start. */
#ifndef GANTRY_PROGRAM_METRICS_H
#define GANTRY_PROGRAM_METRICS_H

#include <jansson.h>
#include <stddef.h>

#define PMET_DEFAULT_MAX_LINE 65536
#define PMET_DEFAULT_MAX_READ (1 << 20)

typedef struct pmetrics pmetrics;
/* 0 for a limit takes its default; never NULL */
pmetrics *pmetrics_new(const char *path, size_t max_line, size_t max_read);
void pmetrics_free(pmetrics *m);

/* Appends the new points (json objects) to the array points; returns how many, or
 * -1 when the file is not a regular file of its own (reason in err).  A missing
 * file is 0 points. */
int pmetrics_read(pmetrics *m, json_t *points, char *err, size_t errlen);
/* lines skipped so far: not JSON objects, or too long */
size_t pmetrics_bad_lines(const pmetrics *m);

#endif
