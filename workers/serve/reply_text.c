/* reply_text.c - the growing text buffer of an Open Inference Protocol reply (reply_text.h). */
#include "workers/serve/reply_text.h"
#include "common/alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void reply_text_reserve(reply_text *o, size_t more)
{
    if (o->len + more < o->cap) return;
    o->cap = (o->len + more) * 2;
    o->b = xrealloc(o->b, o->cap);
}

void reply_text_put(reply_text *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    reply_text_reserve(o, (size_t)(k > 0 ? k : 0) + 1);
    va_start(ap, fmt);
    vsnprintf(o->b + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    o->len += (size_t)(k > 0 ? k : 0);
}

/* a JSON value's text, "" when it cannot be written */
static void put_json(reply_text *o, const json_t *j)
{
    char *t = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    reply_text_put(o, "%s", t ? t : "\"\"");
    free(t);
}

reply_text reply_text_start(const char *name, int version, const json_t *doc)
{
    reply_text o = {xmalloc(4096), 0, 4096};
    o.b[0] = '\0';
    json_t *nj = json_string(name);
    reply_text_put(&o, "{\"model_name\":");
    put_json(&o, nj);
    json_decref(nj);
    reply_text_put(&o, ",\"model_version\":\"%d\"", version);
    json_t *id = json_object_get(doc, "id");
    if (json_is_string(id)) {
        reply_text_put(&o, ",\"id\":");
        put_json(&o, id);
    }
    return o;
}
