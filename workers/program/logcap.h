/* logcap.h - a rank's output on disk: size-capped, rotated, readable while written.
 *
 * The supervisor (rank.c) writes everything the program prints (stdout and stderr
 * through one pipe, so their order is kept) to DIR/rank-R.log.  When the file would
 * pass cap bytes, it becomes DIR/rank-R.log.1 (the older .1 is dropped) and a new
 * rank-R.log starts: at most 2 x cap bytes per rank on disk, the newest output always
 * kept.  The files are outside the sandbox (the program cannot rewrite them).
 *
 * Readers need no coordination with the writer: plog_tail reads the last lines
 * across the two files; plog_follow returns what was appended since its last call,
 * across a rotation (it finishes the old file, now .1, before the new one). */
#ifndef GANTRY_PROGRAM_LOGCAP_H
#define GANTRY_PROGRAM_LOGCAP_H

#include <stddef.h>
#include <sys/types.h>

#define PLOG_DEFAULT_CAP (8LL << 20)

/* DIR/rank-R.log (suffix "" or ".1") into out */
void plog_path(const char *dir, int rank, const char *suffix, char *out, size_t outlen);

typedef struct plog plog;
/* creates (truncates) DIR/rank-R.log, removes an old .1; NULL with errno */
plog *plog_open(const char *dir, int rank, long long cap);
/* appends, rotating as needed; 0 or -1 with errno */
int plog_write(plog *l, const char *buf, size_t len);
void plog_close(plog *l);

/* The last n lines (at most max_bytes of text, the end kept) of rank R's output,
 * older file first; a malloc'd string, "" when there is nothing (never NULL). */
char *plog_tail(const char *dir, int rank, int n, size_t max_bytes);

typedef struct {
    char path[4096];
    dev_t dev;
    ino_t ino; /* the file being read (0: not opened yet) */
    off_t off;
} plog_follow;
void plog_follow_init(plog_follow *f, const char *dir, int rank);
/* up to cap bytes appended since the last call (0: nothing new), -1 with errno */
ssize_t plog_follow_read(plog_follow *f, char *buf, size_t cap);

#endif
