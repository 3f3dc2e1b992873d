/* log_entry.h - the codec of a program job's log stream, K_LOGS_PREFIX<job> (wire/keys.h): the one
 * encoder (the worker's writer, workers/program_io.c) and the one decoder (the server's reader,
 * server/logs.c).  Pure: no hiredis (tests/unit/test_log_entry.c, tests/fuzz/fuzz_log_entry.c).
 *
 * An entry's fields, in this order:
 *   r <rank> g <generation> t <chunk>     a chunk of the rank's output: whole lines as the program
 *                                         wrote them (binary-safe, not necessarily UTF-8)
 *   r <rank> g <generation> end <reason>  the rank's generation ended ("exited with code 0", ...)
 * rank and generation are decimal integers from 0 to LOG_ENTRY_NUM_MAX without sign, spaces or leading
 * zeros (but "0" itself). */
#ifndef GANTRY_LOG_ENTRY_H
#define GANTRY_LOG_ENTRY_H

#include <stddef.h>

#define LOG_ENTRY_ARGC 6            /* field/value strings an encoded entry has */
#define LOG_ENTRY_MAX_FIELDS 16     /* strings the decoder looks at: an entry with more is not one */
#define LOG_ENTRY_NUM_MAX 999999999 /* the largest rank or generation */

typedef struct {
    long rank, gen;
    const char *text; /* "t": a chunk of lines, or NULL */
    size_t text_len;
    const char *end; /* "end": the reason, or NULL */
    size_t end_len;
} log_entry;

/* where an encoded entry's numbers live: keep it as long as the argv */
typedef struct {
    char rank[16], gen[16];
} log_entry_nums;

/* Encoder: the field/value strings of e (exactly one of text and end set; rank and gen in range) for
 * XADD key MAXLEN ~ N * <argv>: argv[LOG_ENTRY_ARGC] and lens point into e and nums.  0, or -1 when e is
 * not an entry of this format. */
int log_entry_encode(const log_entry *e, log_entry_nums *nums, const char *argv[LOG_ENTRY_ARGC], size_t lens[LOG_ENTRY_ARGC]);

/* Decoder: an entry's n field/value strings (field, value, field, value ...; n even), v[i] of lens[i]
 * bytes, not necessarily NUL-terminated.  0 with *out pointing into v, or -1 when they are not an entry of
 * this format: r and g missing or not numbers as above, neither t nor end or both, a field twice, n odd
 * or above LOG_ENTRY_MAX_FIELDS.  Unknown fields are skipped (a newer writer's). */
int log_entry_decode(size_t n, const char *const *v, const size_t *lens, log_entry *out);

#endif
