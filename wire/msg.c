/* msg.c - the task, event and result messages' one encoder and decoder each (msg.h). */
#include "wire/msg.h"
#include "common/utf8.h"
#include "common/clock.h"
#include "common/ids.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static void copy_str(char *dst, size_t len, const char *src)
{
    utf8_copy(dst, len, src); /* a field cut to its buffer stays valid UTF-8 */
}

/* NULL (absent) or an array of strings */
static bool strings(const json_t *a)
{
    size_t i;
    json_t *v;
    if (!a) return true;
    if (!json_is_array(a)) return false;
    json_array_foreach(a, i, v) if (!json_is_string(v)) return false;
    return true;
}

char *msg_task_encode(const task_msg *t)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:b}", "job_id", t->job_id, "tenant", t->tenant, "type", t->type,
                          "priority", t->priority, "slots", t->slots, "attempt", t->attempt, "preemptible", t->preemptible);
    if (!o) return NULL;
    if (t->max_runtime_s > 0 || t->max_memory_bytes > 0) {
        json_t *lim = json_object();
        if (t->max_runtime_s > 0) json_object_set_new(lim, "runtime_s", json_integer((json_int_t)t->max_runtime_s));
        if (t->max_memory_bytes > 0) json_object_set_new(lim, "memory_bytes", json_integer((json_int_t)t->max_memory_bytes));
        json_object_set_new(o, "limits", lim);
    }
    if (json_array_size(t->roots) > 0) json_object_set(o, "roots", t->roots);
    /* jansson keeps insertion order: "attempt" before "spec" */
    json_object_set(o, "spec", t->spec ? t->spec : json_null());
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

int msg_task_decode(const char *s, task_msg *t)
{
    memset(t, 0, sizeof(*t));
    json_t *o = json_loads(s, 0, NULL);
    const char *job_id, *tenant, *type;
    json_t *spec, *limits = NULL, *roots = NULL;
    if (!o ||
        json_unpack(o, "{s:s, s:s, s:s, s:i, s:i, s:i, s?b, s?o, s?o, s:o}", "job_id", &job_id, "tenant", &tenant, "type", &type,
                    "priority", &t->priority, "slots", &t->slots, "attempt", &t->attempt, "preemptible", &t->preemptible, "limits",
                    &limits, "roots", &roots, "spec", &spec) != 0 ||
        !strings(roots) || strlen(job_id) >= MSG_ID_LEN || strlen(tenant) >= MSG_ID_LEN || strlen(type) >= sizeof(t->type) ||
        t->priority < 0 || t->priority > 2 || t->slots < 1 || t->attempt < 0) {
        json_decref(o);
        memset(t, 0, sizeof(*t));
        return -1;
    }
    copy_str(t->job_id, sizeof(t->job_id), job_id);
    copy_str(t->tenant, sizeof(t->tenant), tenant);
    copy_str(t->type, sizeof(t->type), type);
    json_t *rt = json_object_get(limits, "runtime_s"), *mem = json_object_get(limits, "memory_bytes");
    t->max_runtime_s = json_is_integer(rt) && json_integer_value(rt) > 0 ? (int64_t)json_integer_value(rt) : 0;
    t->max_memory_bytes = json_is_integer(mem) && json_integer_value(mem) > 0 ? (int64_t)json_integer_value(mem) : 0;
    t->roots = roots ? json_incref(roots) : json_array();
    t->spec = json_incref(spec);
    json_decref(o);
    return 0;
}

void msg_task_clear(task_msg *t)
{
    json_decref(t->roots);
    json_decref(t->spec);
    memset(t, 0, sizeof(*t));
}

void msg_event_init(event_msg *e, const char *job_id, const char *source)
{
    memset(e, 0, sizeof(*e));
    if (id_sortable("e", 10, e->id, sizeof(e->id)) != 0) snprintf(e->id, sizeof(e->id), "e_%lld", (long long)clock_mono_us());
    copy_str(e->job_id, sizeof(e->job_id), job_id);
    copy_str(e->source, sizeof(e->source), source);
    e->ts = clock_now_ms();
    e->progress = -1;
}

char *msg_event_encode(const event_msg *in)
{
    /* text written with snprintf into fixed buffers may end inside a character */
    event_msg copy = *in, *e = &copy;
    utf8_trim(copy.source);
    utf8_trim(copy.state);
    utf8_trim(copy.reason);
    utf8_trim(copy.worker);
    if (!isfinite(copy.progress)) copy.progress = -1;
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:f, s:O}", "id", e->id, "job_id", e->job_id, "ts",
                          (json_int_t)e->ts, "source", e->source, "state", e->state, "reason", e->reason, "worker", e->worker,
                          "progress", e->progress, "result", e->result ? e->result : json_null());
    if (!o) return NULL;
    if (e->metrics) json_object_set(o, "metrics", e->metrics);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

int msg_event_decode(const char *s, event_msg *e)
{
    memset(e, 0, sizeof(*e));
    json_t *o = json_loads(s, 0, NULL);
    const char *id, *job_id, *source = "", *state = "", *reason = "", *worker = "";
    json_int_t ts = 0;
    json_t *result = NULL, *metrics = NULL;
    double progress = -1;
    if (!o ||
        json_unpack(o, "{s:s, s:s, s:I, s?s, s?s, s?s, s?s, s?F, s?o, s?o}", "id", &id, "job_id", &job_id, "ts", &ts, "source",
                    &source, "state", &state, "reason", &reason, "worker", &worker, "progress", &progress, "result", &result,
                    "metrics", &metrics) != 0 ||
        strlen(id) >= MSG_ID_LEN || strlen(job_id) >= MSG_ID_LEN) {
        json_decref(o);
        memset(e, 0, sizeof(*e));
        return -1;
    }
    copy_str(e->id, sizeof(e->id), id);
    copy_str(e->job_id, sizeof(e->job_id), job_id);
    copy_str(e->source, sizeof(e->source), source);
    copy_str(e->state, sizeof(e->state), state);
    copy_str(e->reason, sizeof(e->reason), reason);
    copy_str(e->worker, sizeof(e->worker), worker);
    e->ts = ts;
    e->progress = progress;
    e->result = (result && !json_is_null(result)) ? json_incref(result) : NULL;
    e->metrics = json_is_object(metrics) ? json_incref(metrics) : NULL;
    json_decref(o);
    return 0;
}

void msg_event_clear(event_msg *e)
{
    json_decref(e->result);
    json_decref(e->metrics);
    memset(e, 0, sizeof(*e));
}
