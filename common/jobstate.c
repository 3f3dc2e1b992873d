/* jobstate.c - the job states' names and the legal transitions between them (jobstate.h). */
#include "common/jobstate.h"

#include <string.h>

static const char *const state_names[JS__COUNT] = {"queued",    "scheduled", "running",  "resizing",
                                                   "succeeded", "failed",    "cancelled"};

const char *job_state_name(job_state s)
{
    return (s >= 0 && s < JS__COUNT) ? state_names[s] : "invalid";
}

job_state job_state_parse(const char *name)
{
    for (int i = 0; name && i < JS__COUNT; i++)
        if (strcmp(name, state_names[i]) == 0) return (job_state)i;
    return JS_INVALID;
}

bool job_state_terminal(job_state s)
{
    return s == JS_SUCCEEDED || s == JS_FAILED || s == JS_CANCELLED;
}

bool job_state_can_move(job_state from, job_state to)
{
    if (from == JS_INVALID || to == JS_INVALID || job_state_terminal(from)) return false;
    if (job_state_terminal(to)) return true;
    if (to == JS_QUEUED) return from != JS_QUEUED;
    /* requeue (preemption, retry) from any live state but queued itself */ /* finish from anywhere; requeue (preemption,
                                                                               retry) from anywhere live */
    switch (from) {
    case JS_QUEUED:
        return to == JS_SCHEDULED || to == JS_RUNNING; /* running may overtake scheduled */
    case JS_SCHEDULED:
        return to == JS_RUNNING;
    case JS_RUNNING:
        return to == JS_RESIZING;
    case JS_RESIZING:
        return to == JS_RUNNING;
    default:
        return false;
    }
}

int job_priority_parse(const char *name)
{
#define X(n, v)                                                                                                                    \
    if (name && strcmp(name, #n) == 0) return v;
    JOB_PRIORITIES(X)
#undef X
    return -1;
}

const char *job_priority_name(int prio)
{
#define X(n, v)                                                                                                                    \
    if (prio == v) return #n;
    JOB_PRIORITIES(X)
#undef X
    return "normal";
}
