/* tscode.h - a bound on the TorchScript source of a model archive (its code/ *.py files), checked
 * before torch::jit::load compiles it: by the upload route (server/tsarchive.c, on every code/ *.py
 * entry as it is read or inflated) and by the TorchScript loader (torch_model.cpp, on the file it is
 * about to load, whether uploaded or registered by a training job).
 *
 * Why before the load: torch::jit::load compiles the code files and runs a class's __setstate__
 * while it unpickles the module's attributes, so a scripted __setstate__ runs attacker code before
 * any check of the loaded module can look at it; and TorchScript's parser recurses once per
 * bracket or block, so source nested 100,000 deep overflows the loader's stack (SIGSEGV).
 *
 * Refused, with the line:
 * - a definition of __setstate__: the tokens `def` and `__setstate__` in code (not in a string or
 *   comment), with only blanks or line continuations between them;
 * - brackets ( [ { open more than TSCODE_MAX_DEPTH deep at once;
 * - more than TSCODE_MAX_DEPTH indentation levels open at once (blocks; lines inside brackets
 *   and continued lines do not count; a tab counts to the next multiple of 8).
 * Strings ('...', "...", and their triple-quoted forms, with backslash escapes) and # comments are
 * skipped, so brackets inside them count for nothing.  What torch 1.13 writes nests a few levels.
 *
 * Pure, no allocation: a state of fixed size fed in pieces of any size (a byte at a time is
 * the same as all at once); linear in the bytes. */
#ifndef GANTRY_SERVE_TSCODE_H
#define GANTRY_SERVE_TSCODE_H

#include <stddef.h>

#define TSCODE_MAX_DEPTH 200

typedef struct {
    int mode;          /* code, opening quotes, string, comment */
    int quote, nquote; /* the string's quote character; quotes seen in a row (opening, or closing a triple) */
    int triple, escape;
    int line_start, backslash; /* at a line's indentation; after a backslash */
    int col, depth, nind;
    int ind[TSCODE_MAX_DEPTH + 1]; /* the open indentation widths */
    char id[16];                   /* the identifier being read (its first 15 bytes) */
    int idlen, after_def;
    long line;
    const char *why; /* NULL while fine */
} tscode_scan;

void tscode_init(tscode_scan *s);
/* feeds n bytes; 0 while the source is fine, -1 once refused (the same on every later call) */
int tscode_feed(tscode_scan *s, const unsigned char *p, size_t n);
/* the refusal as "<why> (line N)" into msg; the state must have been refused */
void tscode_describe(const tscode_scan *s, char *msg, size_t msg_len);
/* the whole of one file: 0, or -1 with tscode_describe's text in msg */
int tscode_check(const unsigned char *p, size_t n, char *msg, size_t msg_len);

#endif
