/* msg.h - encoding of the messages that cross Redis (see keys.h for where they go).
 *
 * Task (gantry:jobs entries and worker task lists), a JSON object:
 *   {"job_id","tenant","type","priority":0..2,"slots":N,"attempt":N,"preemptible":bool,
 *    "limits":{"runtime_s":N,"memory_bytes":N} (optional, each member optional),
 *    "roots":["/srv/data/acme",...] (optional),"spec":{...}}
 *   (requeue.c gives a task back by decoding it and encoding it again with attempt + 1)
 *   limits: the tenant's max_runtime_s and max_memory_bytes when the job was published; the
 *   worker enforces them (workers/main.c).  Absent or 0: no limit.
 *   roots: the tenant's data roots when the job was published (server/jobs.c, server/api_jobs.c):
 *   a program job's worker resolves its workdir under them again and binds them read-only
 *   (docs/programs.md).  Absent: none.
 * Event (gantry:events entries), a JSON object:
 *   {"id":"e_..","job_id","ts":ms,"source":"scheduler|worker:<id>|server",
 *    "state":"running"|"" ,"reason":"..","progress":0..1|-1,"result":{..}|null,"worker":"..",
 *    "metrics":{..} (optional: a training progress point, see docs/training.md)}
 * Event ids are unique (random); the server persists each id once. */
#ifndef GANTRY_MSG_H
#define GANTRY_MSG_H

#include <jansson.h>
#include <stdint.h>

#define MSG_ID_LEN 48

typedef struct {
    char job_id[MSG_ID_LEN];
    char tenant[MSG_ID_LEN];
    char type[16];
    int priority;
    int slots;
    int attempt;
    int preemptible;          /* 0 or 1 */
    int64_t max_runtime_s;    /* seconds of running time, all generations together; 0: no limit */
    int64_t max_memory_bytes; /* growth of the worker's resident memory while it runs the job; 0: no limit */
    json_t *roots;            /* owned: the tenant's roots, an array of strings (decoded: never NULL, [] when absent);
                                 encoded only when non-empty */
    json_t *spec;             /* owned */
} task_msg;

typedef struct {
    char id[MSG_ID_LEN];
    char job_id[MSG_ID_LEN];
    int64_t ts;
    char source[80];
    char state[16];    /* empty when the event only reports progress */
    char reason[4096]; /* a failed program job quotes its last 20 log lines here (workers/exec_program.c) */
    char worker[MSG_ID_LEN];
    double progress; /* -1 when absent */
    json_t *result;  /* owned, NULL when absent */
    json_t *metrics; /* owned, NULL when absent: a progress point (step, loss, ...) */
} event_msg;

/* returns a malloc'd JSON string, NULL on allocation failure */
char *msg_task_encode(const task_msg *t);
/* 0 on success; -1 when s is not a well-formed task (t is left cleared) */
int msg_task_decode(const char *s, task_msg *t);
void msg_task_clear(task_msg *t);

/* fills id (fresh random) and ts (now) */
void msg_event_init(event_msg *e, const char *job_id, const char *source);
char *msg_event_encode(const event_msg *e);
int msg_event_decode(const char *s, event_msg *e);
void msg_event_clear(event_msg *e);

#endif
