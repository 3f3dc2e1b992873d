/* program_io.c - a program job's logs and restart count in Redis (program_io.h). */
#include "workers/program_io.h"
#include "wire/keys.h"
#include "wire/log_entry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* XADD key MAXLEN ~ N * <the entry's fields: wire/log_entry.h>, then EXPIRE; 0 or -1 */
static int append(rs_conn *r, const char *job_id, const log_entry *e)
{
    char key[160], maxlen[24];
    snprintf(key, sizeof(key), "%s%s", K_LOGS_PREFIX, job_id);
    snprintf(maxlen, sizeof(maxlen), "%d", K_LOGS_MAXLEN);
    const char *argv[6 + LOG_ENTRY_ARGC] = {"XADD", key, "MAXLEN", "~", maxlen, "*"};
    size_t lens[6 + LOG_ENTRY_ARGC] = {4, strlen(key), 6, 1, strlen(maxlen), 1};
    log_entry_nums nums;
    if (log_entry_encode(e, &nums, argv + 6, lens + 6) != 0) return -1; /* a negative rank or generation: not ours */
    redisReply *rep = rs_command_argv(r, 6 + LOG_ENTRY_ARGC, argv, lens);
    int ok = rep && rep->type == REDIS_REPLY_STRING;
    freeReplyObject(rep);
    if (!ok) return -1;
    /* not renewed: the stream expires K_LOGS_TTL_S after an earlier entry, the output stays on the worker's disk */
    rs_do(r, "EXPIRE %s %d", key, K_LOGS_TTL_S);
    return 0;
}

int program_io_log_chunk(rs_conn *r, const char *job_id, int rank, int generation, const char *buf, size_t len)
{
    if (len > PROGRAM_IO_CHUNK_MAX) len = PROGRAM_IO_CHUNK_MAX;
    return append(r, job_id, &(log_entry){.rank = rank, .gen = generation, .text = buf, .text_len = len});
}

int program_io_log_end(rs_conn *r, const char *job_id, int rank, int generation, const char *reason)
{
    return append(r, job_id, &(log_entry){.rank = rank, .gen = generation, .end = reason, .end_len = strlen(reason)});
}

int program_io_restarts(rs_conn *r, const char *job_id)
{
    redisReply *rep = rs_command(r, "GET %s%s", K_FAILURES_PREFIX, job_id);
    int n = !rep || rep->type == REDIS_REPLY_ERROR ? -1 : rep->type == REDIS_REPLY_STRING ? atoi(rep->str) : 0;
    freeReplyObject(rep);
    return n;
}
