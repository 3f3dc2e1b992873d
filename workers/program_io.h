/* program_io.h - the Redis side of a program job's rank (keys in wire/keys.h).
 *
 * The rank's output goes to the stream gantry:logs:<job> as the server reads it (its logs
 * routes and `gantry logs`), in entries encoded by wire/log_entry.h (the server decodes them with it):
 * one entry per chunk of whole lines,
 *   XADD gantry:logs:<job> MAXLEN ~ K_LOGS_MAXLEN * r <rank> g <generation> t <chunk>
 * then EXPIRE K_LOGS_TTL_S, and when a generation of the rank ends, one entry
 *   r <rank> g <generation> end <reason>
 * ("exited with code 0", "killed by signal 9", ...).  The chunk is bytes as the program wrote
 * them (binary-safe, not necessarily UTF-8), at most PROGRAM_IO_CHUNK_MAX.
 *
 * And how many restarts a job has had: the failures requeue.c counts in gantry:failures:<job>
 * (a lost rank's restart is a counted failure; preemption and resizes are not). */
#ifndef GANTRY_PROGRAM_IO_H
#define GANTRY_PROGRAM_IO_H

#include "wire/redis_sync.h"

#include <stddef.h>

#define PROGRAM_IO_CHUNK_MAX 65536

/* appends one chunk of rank's output; 0, or -1 when Redis did not take it (logged by rs_command) */
int program_io_log_chunk(rs_conn *r, const char *job_id, int rank, int generation, const char *buf, size_t len);
/* the rank's end for this generation; 0 or -1 */
int program_io_log_end(rs_conn *r, const char *job_id, int rank, int generation, const char *reason);
/* the job's counted failures so far (its restarts), 0 when none; -1 when Redis is unreachable */
int program_io_restarts(rs_conn *r, const char *job_id);

#endif
