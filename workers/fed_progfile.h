/* fed_progfile.h - the files a federated site and its program exchange in the program's directory
 * (GANTRY_FED_DIR: the rank's own run directory, writable by the program): the site writes each
 * global model as a new file renamed into place, and reads the program's files without following a
 * link, blocking on a FIFO or taking more than it should.  The global model's checkpoint (workers/fed_ckpt.h) is
 * written and read the same way.  The files' format is
 * workers/fed/tensorfile.h; their names and what they mean are workers/exec_fed_program.c's. */
#ifndef GANTRY_FED_PROGFILE_H
#define GANTRY_FED_PROGFILE_H

#include "workers/fed/tensorfile.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* dir/name with layout's tensors holding v and meta: written to dir/.name.tmp (a new file, never through a
 * link the program put there; mode 0644: the program reads it), then renamed onto dir/name.  0, or -1 with err */
int fed_progfile_write(const char *dir, const char *name, const tensorfile_header *layout, const json_t *meta, const double *v,
                       char *err, size_t errlen);

/* len bytes as dir/name, the same way; durable: the file and then the directory fsync'd before it returns (a
 * checkpoint that must survive the machine: workers/fed_ckpt.h).  0, or -1 with err */
int fed_progfile_put(const char *dir, const char *name, const unsigned char *bytes, size_t len, bool durable, char *err,
                     size_t errlen);

/* dir/name, a regular file of at most max_bytes: 1 with *h and *v (h->total values, malloc'd) when it is
 * there and parses; 0 when it is not there (yet); -1 with err when it is not a regular file, too large, or
 * not a valid file (tensorfile_parse's reason) */
int fed_progfile_read(const char *dir, const char *name, size_t max_bytes, tensorfile_header *h, double **v, char *err,
                      size_t errlen);

#endif
