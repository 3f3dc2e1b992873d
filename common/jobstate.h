/* jobstate.h - job states and the legal transitions between them.
 * queued -> scheduled -> running -> succeeded | failed | cancelled; preempted or
 * requeued jobs go back to queued; elastic training may pass through resizing.  Priorities are
 * here too; the job types are common/jobtypes.h. */
#ifndef GANTRY_JOBSTATE_H
#define GANTRY_JOBSTATE_H

#include <stdbool.h>

typedef enum {
    JS_QUEUED,
    JS_SCHEDULED,
    JS_RUNNING,
    JS_RESIZING,
    JS_SUCCEEDED,
    JS_FAILED,
    JS_CANCELLED,
    JS__COUNT,
    JS_INVALID = -1
} job_state;

const char *job_state_name(job_state s);
job_state job_state_parse(const char *name);
bool job_state_terminal(job_state s);
/* whether an event reporting `to` may move a job currently in `from` */
bool job_state_can_move(job_state from, job_state to);

#define JOB_PRIORITIES(X) X(low, 0) X(normal, 1) X(high, 2)
/* -1 when unknown */
int job_priority_parse(const char *name);
const char *job_priority_name(int prio);

#endif
