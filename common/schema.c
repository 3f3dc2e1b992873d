/* schema.c - checking a JSON value against a shape, and writing the shape out
 * as JSON Schema (schema.h).  The error text is written from the same fields
 * the document is, so "must be an integer in [1, 64]" and
 * {"type": "integer", "minimum": 1, "maximum": 64} cannot disagree. */
#include "common/schema.h"
#include "common/fielderr.h"
#include "common/utf8.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char path[320];
    char *field, *msg;
    size_t fl, ml;
} ctx;

/* a bound as people write it: 1000000000, 0.5, 1e-08 */
static void fmt_num(char *buf, size_t len, double x)
{
    if (x == (double)(long long)x && x > -1e15 && x < 1e15)
        snprintf(buf, len, "%lld", (long long)x);
    else
        snprintf(buf, len, "%g", x);
}

static size_t append(char *buf, size_t len, size_t used, const char *fmt, ...)
{
    if (used >= len) return used;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
    return n < 0 ? used : used + (size_t)n;
}

/* "\"a\", \"b\" or \"c\"" */
static size_t list_values(char *buf, size_t len, size_t used, const char *const *values)
{
    for (int i = 0; values[i]; i++)
        used = append(buf, len, used, "%s\"%s\"", i == 0 ? "" : values[i + 1] ? ", " : " or ", values[i]);
    return used;
}

/* the bounds of a number: " in [1, 64]", " in (0, 1]", " >= 3", " < 5" */
static size_t bounds(char *buf, size_t len, size_t used, const sch *s)
{
    char lo[32], hi[32];
    fmt_num(lo, sizeof lo, s->lo);
    fmt_num(hi, sizeof hi, s->hi);
    int L = (s->flags & SCH_LO) != 0, H = (s->flags & SCH_HI) != 0;
    int lo_open = (s->flags & SCH_LO_OPEN) != 0, hi_open = (s->flags & SCH_HI_OPEN) != 0;
    if (L && H) return append(buf, len, used, " in %c%s, %s%c", lo_open ? '(' : '[', lo, hi, hi_open ? ')' : ']');
    if (L) return append(buf, len, used, " %s %s", lo_open ? ">" : ">=", lo);
    if (H) return append(buf, len, used, " %s %s", hi_open ? "<" : "<=", hi);
    return used;
}

/* What s accepts, as a phrase after "must be". */
static size_t rule(char *buf, size_t len, size_t used, const sch *s)
{
    int L = (s->flags & SCH_LO) != 0, H = (s->flags & SCH_HI) != 0, lo_open = (s->flags & SCH_LO_OPEN) != 0;
    switch (s->kind) {
    case SCH_ANY:
        return append(buf, len, used, "any value");
    case SCH_BOOL:
        return append(buf, len, used, "true or false");
    case SCH_INT:
        if (L && !H && s->lo == (lo_open ? -1 : 0)) return append(buf, len, used, "a non-negative integer");
        if (L && !H && s->lo == (lo_open ? 0 : 1)) return append(buf, len, used, "a positive integer");
        return bounds(buf, len, append(buf, len, used, "an integer"), s);
    case SCH_NUM:
        if (L && !H && s->lo == 0) return append(buf, len, used, lo_open ? "a positive number" : "a non-negative number");
        return bounds(buf, len, append(buf, len, used, "a number"), s);
    case SCH_STR: {
        if (s->values) return list_values(buf, len, used, s->values);
        char lo[32], hi[32];
        fmt_num(lo, sizeof lo, s->lo);
        fmt_num(hi, sizeof hi, s->hi);
        if (L && H) return append(buf, len, used, "a string of %s to %s characters", lo, hi);
        if (L && s->lo == 1) return append(buf, len, used, "a non-empty string");
        return append(buf, len, used, "a string");
    }
    case SCH_ARRAY: {
        char lo[32], hi[32];
        fmt_num(lo, sizeof lo, s->lo);
        fmt_num(hi, sizeof hi, s->hi);
        if (L && H) return append(buf, len, used, "an array of %s to %s items", lo, hi);
        if (L && s->lo == 1) return append(buf, len, used, "a non-empty array");
        if (H) return append(buf, len, used, "an array of at most %s items", hi);
        return append(buf, len, used, "an array");
    }
    case SCH_OBJECT:
        return append(buf, len, used, "an object");
    case SCH_ONEOF:
        if (s->tag) {
            used = append(buf, len, used, "an object whose \"%s\" is ", s->tag);
            for (int i = 0; s->alts[i]; i++) {
                const sch *t = sch_member_shape(s->alts[i], s->tag);
                if (t && t->values) used = list_values(buf, len, append(buf, len, used, i ? ", " : ""), t->values);
            }
            return used;
        }
        for (int i = 0; s->alts[i]; i++)
            used = rule(buf, len, append(buf, len, used, i ? " or " : ""), s->alts[i]);
        return used;
    }
    return used;
}

static int fail_at(ctx *c, const char *path, const char *fmt, ...)
{
    snprintf(c->field, c->fl, "%s", path);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, c->ml, fmt, ap);
    va_end(ap);
    return -1;
}

static int wrong(ctx *c, const sch *s)
{
    if (s->msg) return fail_at(c, c->path, "%s", s->msg);
    char r[400];
    rule(r, sizeof r, 0, s);
    return fail_at(c, c->path, "must be %s", r);
}

static int fits_type(const sch *s, const json_t *v)
{
    switch (s->kind) {
    case SCH_ANY:
        return 1;
    case SCH_BOOL:
        return json_is_boolean(v);
    case SCH_INT:
        return json_is_integer(v);
    case SCH_NUM:
        return json_is_number(v);
    case SCH_STR:
        return json_is_string(v);
    case SCH_ARRAY:
        return json_is_array(v);
    case SCH_OBJECT:
        return json_is_object(v);
    case SCH_ONEOF:
        for (int i = 0; s->alts[i]; i++)
            if (fits_type(s->alts[i], v)) return 1;
        return 0;
    }
    return 0;
}

static int in_bounds(const sch *s, double x)
{
    if ((s->flags & SCH_LO) && ((s->flags & SCH_LO_OPEN) ? !(x > s->lo) : !(x >= s->lo))) return 0;
    if ((s->flags & SCH_HI) && ((s->flags & SCH_HI_OPEN) ? !(x < s->hi) : !(x <= s->hi))) return 0;
    return 1;
}

/* characters (code points) of valid UTF-8, as JSON Schema counts them */
static size_t utf8_chars(const char *p)
{
    size_t n = 0;
    for (; *p; p++)
        n += ((unsigned char)*p & 0xC0) != 0x80;
    return n;
}

static int check(ctx *c, const sch *s, const json_t *v);
static int check_members(ctx *c, const sch *s, const json_t *v);

/* checks v under path + suffix, then restores the path */
static int check_under(ctx *c, const sch *s, const json_t *v, const char *fmt, ...)
{
    size_t n = strlen(c->path);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->path + n, sizeof c->path - n, fmt, ap);
    va_end(ap);
    int rc = check(c, s, v);
    if (rc == 0) c->path[n] = '\0';
    return rc;
}

static int check_object(ctx *c, const sch *s, const json_t *v)
{
    const char *key;
    json_t *m;
    json_object_foreach((json_t *)v, key, m)
    { /* unknown names first: a misspelt "epoch" is clearer than "epochs is required" */
        if (sch_member_shape(s, key)) continue;
        if (s->flags & SCH_OPEN) {
            if (s->items && check_under(c, s->items, m, ".%s", key)) return -1;
            continue;
        }
        char known[240], cut[80];
        size_t used = 0;
        known[0] = '\0';
        for (const sch *o = s->base ? s->base : s; o; o = o == s ? NULL : s)
            for (int i = 0; o->members && o->members[i].name; i++)
                used = append(known, sizeof known, used, "%s%s", used ? ", " : "", o->members[i].name);
        utf8_copy(cut, sizeof cut, key); /* a name cut to fit ends on a whole character */
        size_t n = strlen(c->path);
        snprintf(c->path + n, sizeof c->path - n, ".%s", key);
        return fail_at(c, c->path, "unknown field '%s' (known: %s)", cut, known);
    }
    if (s->base && check_members(c, s->base, v)) return -1;
    return check_members(c, s, v);
}

/* s's own members (not its base's) present and required */
static int check_members(ctx *c, const sch *s, const json_t *v)
{
    for (int i = 0; s->members && s->members[i].name; i++) {
        const sch_member *mb = &s->members[i];
        json_t *m = json_object_get(v, mb->name);
        if (!m || (json_is_null(m) && (mb->shape->flags & SCH_NULLABLE))) {
            if (!mb->required) continue;
            char path[sizeof c->path + 64];
            snprintf(path, sizeof path, "%s.%.60s", c->path, mb->name);
            if (mb->shape->msg) return fail_at(c, path, "%s", mb->shape->msg);
            char r[400];
            rule(r, sizeof r, 0, mb->shape);
            return fail_at(c, path, "is required: %s", r);
        }
        if (check_under(c, mb->shape, m, ".%s", mb->name)) return -1;
    }
    return 0;
}

static int check(ctx *c, const sch *s, const json_t *v)
{
    if (json_is_null(v) && (s->flags & SCH_NULLABLE)) return 0;
    switch (s->kind) {
    case SCH_ANY:
        return 0;
    case SCH_BOOL:
        return json_is_boolean(v) ? 0 : wrong(c, s);
    case SCH_INT:
        return json_is_integer(v) && in_bounds(s, (double)json_integer_value(v)) ? 0 : wrong(c, s);
    case SCH_NUM:
        return json_is_number(v) && in_bounds(s, json_number_value(v)) ? 0 : wrong(c, s);
    case SCH_STR:
        if (!json_is_string(v)) return wrong(c, s);
        if (s->values) {
            for (int i = 0; s->values[i]; i++)
                if (strcmp(s->values[i], json_string_value(v)) == 0) return 0;
            return wrong(c, s);
        }
        return in_bounds(s, (double)utf8_chars(json_string_value(v))) ? 0 : wrong(c, s);
    case SCH_ARRAY:
        if (!json_is_array(v) || !in_bounds(s, (double)json_array_size(v))) return wrong(c, s);
        if (s->items)
            for (size_t i = 0; i < json_array_size(v); i++)
                if (check_under(c, s->items, json_array_get(v, i), "[%zu]", i)) return -1;
        return 0;
    case SCH_OBJECT:
        if (!json_is_object(v)) return wrong(c, s);
        if (!in_bounds(s, (double)json_object_size(v))) {
            char lo[32], hi[32];
            fmt_num(lo, sizeof lo, s->lo);
            fmt_num(hi, sizeof hi, s->hi);
            return s->msg ? wrong(c, s) : fail_at(c, c->path, "must have %s to %s members", lo, hi);
        }
        return check_object(c, s, v);
    case SCH_ONEOF:
        if (s->tag) {
            if (!json_is_object(v)) return wrong(c, s);
            const char *t = json_string_value(json_object_get(v, s->tag));
            for (int i = 0; t && s->alts[i]; i++) {
                const sch *ts = sch_member_shape(s->alts[i], s->tag);
                for (int k = 0; ts && ts->values && ts->values[k]; k++)
                    if (strcmp(ts->values[k], t) == 0) return check(c, s->alts[i], v);
            }
            char r[400];
            size_t used = append(r, sizeof r, 0, "must be ");
            for (int i = 0; s->alts[i]; i++) {
                const sch *ts = sch_member_shape(s->alts[i], s->tag);
                if (ts && ts->values) used = list_values(r, sizeof r, append(r, sizeof r, used, i ? ", " : ""), ts->values);
            }
            char path[sizeof c->path + 64];
            snprintf(path, sizeof path, "%s.%.60s", c->path, s->tag);
            return fail_at(c, path, "%s", r);
        }
        for (int i = 0; s->alts[i]; i++)
            if (fits_type(s->alts[i], v)) return check(c, s->alts[i], v);
        return wrong(c, s);
    }
    return 0;
}

int sch_check(const sch *s, const json_t *v, const char *path, char *field, size_t fl, char *msg, size_t ml)
{
    ctx c = {.field = field, .fl = fl, .msg = msg, .ml = ml};
    snprintf(c.path, sizeof c.path, "%s", path);
    int rc = check(&c, s, v);
    if (rc) { /* member names from the document in the path and the message, cut to fit */
        utf8_trim(field);
        utf8_trim(msg);
    }
    return rc;
}

int sch_read_number(const sch *s, const json_t *v, double def, const char *path, double *out, char *field, size_t fl, char *msg,
                    size_t ml)
{
    if (!v || json_is_null(v)) {
        if (isnan(def)) return field_fail(field, fl, msg, ml, path, "is required");
        *out = def;
        return 0;
    }
    if (sch_check(s, v, path, field, fl, msg, ml)) return -1;
    *out = json_number_value(v);
    return 0;
}

/* the member named name of an object shape (its base's first) */
static const sch_member *member(const sch *s, const char *name)
{
    if (!s || s->kind != SCH_OBJECT) return NULL;
    const sch_member *m = member(s->base, name);
    for (int i = 0; !m && s->members && s->members[i].name; i++)
        if (strcmp(s->members[i].name, name) == 0) m = &s->members[i];
    return m;
}

const sch *sch_member_shape(const sch *s, const char *name)
{
    const sch_member *m = member(s, name);
    return m ? m->shape : NULL;
}

double sch_number(const sch *s, const json_t *v, const char *name, double def)
{
    json_t *m = json_object_get(v, name);
    if (json_is_number(m)) return json_number_value(m);
    const sch *ms = sch_member_shape(s, name);
    char *end;
    double x = ms && ms->dflt ? strtod(ms->dflt, &end) : def;
    return ms && ms->dflt && end != ms->dflt && *end == '\0' ? x : def;
}

/* ---- JSON Schema ---- */

static const char *type_name(sch_kind k)
{
    static const char *const names[] = {NULL, "boolean", "integer", "number", "string", "array", "object", NULL};
    return names[k];
}

static void set_bounds(json_t *o, const sch *s, const char *lo_key, const char *hi_key, int exclusive)
{
    if (s->flags & SCH_LO) {
        int open = exclusive && (s->flags & SCH_LO_OPEN);
        json_object_set_new(o, open ? "exclusiveMinimum" : lo_key,
                            s->kind == SCH_NUM ? json_real(s->lo) : json_integer((json_int_t)s->lo));
    }
    if (s->flags & SCH_HI) {
        int open = exclusive && (s->flags & SCH_HI_OPEN);
        json_object_set_new(o, open ? "exclusiveMaximum" : hi_key,
                            s->kind == SCH_NUM ? json_real(s->hi) : json_integer((json_int_t)s->hi));
    }
}

json_t *sch_json(const sch *s)
{
    json_t *o = json_object();
    if (!o) return NULL;
    if (s->desc) json_object_set_new(o, "description", json_string(s->desc));
    const char *t = type_name(s->kind);
    if (t) json_object_set_new(o, "type", (s->flags & SCH_NULLABLE) ? json_pack("[ss]", t, "null") : json_string(t));
    switch (s->kind) {
    case SCH_INT:
    case SCH_NUM:
        set_bounds(o, s, "minimum", "maximum", 1);
        break;
    case SCH_STR:
        if (s->values && s->values[0] && !s->values[1] && !(s->flags & SCH_NULLABLE)) {
            json_object_set_new(o, "const", json_string(s->values[0]));
        } else if (s->values) {
            json_t *e = json_array();
            for (int i = 0; s->values[i]; i++)
                json_array_append_new(e, json_string(s->values[i]));
            if (s->flags & SCH_NULLABLE) json_array_append_new(e, json_null());
            json_object_set_new(o, "enum", e);
        } else {
            set_bounds(o, s, "minLength", "maxLength", 0);
        }
        break;
    case SCH_ARRAY:
        set_bounds(o, s, "minItems", "maxItems", 0);
        if (s->items) json_object_set_new(o, "items", sch_json(s->items));
        break;
    case SCH_OBJECT: {
        json_t *props = json_object(), *req = json_array();
        for (const sch *b = s->base ? s->base : s; b; b = b == s ? NULL : s)
            for (int i = 0; b->members && b->members[i].name; i++) {
                json_object_set_new(props, b->members[i].name, sch_json(b->members[i].shape));
                if (b->members[i].required) json_array_append_new(req, json_string(b->members[i].name));
            }
        set_bounds(o, s, "minProperties", "maxProperties", 0);
        if (json_object_size(props)) json_object_set(o, "properties", props);
        if (json_array_size(req)) json_object_set(o, "required", req);
        json_decref(props), json_decref(req);
        if (!(s->flags & SCH_OPEN))
            json_object_set_new(o, "additionalProperties", json_false());
        else if (s->items)
            json_object_set_new(o, "additionalProperties", sch_json(s->items));
        break;
    }
    case SCH_ONEOF: {
        json_t *alts = json_array();
        for (int i = 0; s->alts[i]; i++)
            json_array_append_new(alts, sch_json(s->alts[i]));
        if (s->flags & SCH_NULLABLE) json_array_append_new(alts, json_pack("{s:s}", "type", "null"));
        json_object_set_new(o, "oneOf", alts);
        break;
    }
    default:
        break;
    }
    if (s->dflt) {
        json_t *d = json_loads(s->dflt, JSON_DECODE_ANY, NULL);
        if (d) json_object_set_new(o, "default", d);
    }
    return o;
}
