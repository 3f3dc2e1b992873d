/* prog_logcap.h - a rank's output on disk: size-capped, rotated, readable while written.
 *
 * The supervisor (prog_rank.c) writes everything the program prints (stdout and stderr
 * through one pipe, so their order is kept) to DIR/rank-R.log.  When the file would
 * pass cap bytes, it becomes DIR/rank-R.log.1 (the older .1 is dropped) and a new
 * rank-R.log starts: at most 2 x cap bytes per rank on disk, the newest output always
 * kept.  The files are outside the sandbox (the program cannot rewrite them).
 *
 * Readers need no coordination with the writer: prog_logcap_tail reads the last lines
 * across the two files; prog_logcap_follow returns what was appended since its last call,
 * across a rotation (it finishes the old file, now .1, before the new one). */
#ifndef GANTRY_PROGRAM_PROG_LOGCAP_H
#define GANTRY_PROGRAM_PROG_LOGCAP_H

#include <stddef.h>
#include <sys/types.h>

#define PROG_LOGCAP_DEFAULT_CAP (8LL << 20)

/* DIR/rank-R.log (suffix "" or ".1") into out */
void prog_logcap_path(const char *dir, int rank, const char *suffix, char *out, size_t outlen);

typedef struct prog_logcap prog_logcap;
/* creates (truncates) DIR/rank-R.log, removes an old .1; NULL with errno */
prog_logcap *prog_logcap_open(const char *dir, int rank, long long cap);
/* appends, rotating as needed; 0 or -1 with errno */
int prog_logcap_write(prog_logcap *l, const char *buf, size_t len);
void prog_logcap_close(prog_logcap *l);

/* The last n lines (at most max_bytes of text, the end kept) of rank R's output,
 * older file first; a malloc'd string, "" when there is nothing (never NULL). */
char *prog_logcap_tail(const char *dir, int rank, int n, size_t max_bytes);

typedef struct {
    char path[4096];
    dev_t dev;
    ino_t ino; /* the file being read (0: not opened yet) */
    off_t off;
} prog_logcap_follow;
void prog_logcap_follow_init(prog_logcap_follow *f, const char *dir, int rank);
/* up to cap bytes appended since the last call (0: nothing new), -1 with errno */
ssize_t prog_logcap_follow_read(prog_logcap_follow *f, char *buf, size_t cap);

#endif
