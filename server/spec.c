/* spec.c - a job submission: its envelope ({"type","name","priority","preemptible","spec"}), then
 * the type's spec module from the job type table (common/jobtypes.h). */
#include "server/spec.h"
#include "common/fielderr.h"
#include "common/jobstate.h"
#include "common/jobtypes.h"
#include "common/paths.h"
#include "common/schema.h"
#include "common/utf8.h"

#include <stdio.h>
#include <string.h>

/* ---- the submission's shape (common/schema.h) ---- */

#define X(name, title, spec, executor, traits) #name,
static const char *const type_values[] = {JOB_TYPE_TABLE(X) NULL};
#undef X
#define X(n, v) #n,
static const char *const priority_values[] = {JOB_PRIORITIES(X) NULL};
#undef X

static const sch type_s = {SCH_STR, .values = type_values}; /* its message lists the table's names (validate) */
static const sch name_s = {SCH_STR, SCH_IN(1, 200), .desc = "a label for people (default: the type); no control characters"};
#define DEFAULT_PRIORITY "normal"
static const sch priority_s = {SCH_STR, .values = priority_values, .dflt = "\"" DEFAULT_PRIORITY "\"",
                               .desc = "queue order; a high job may preempt preemptible lower ones"};
static const sch preemptible_s = {SCH_BOOL, .dflt = "false", .desc = "may be stopped (and requeued) for a higher-priority job"};
static const sch spec_s = {SCH_OBJECT, .flags = SCH_OPEN, .msg = "required: an object with the job's settings"};
static const sch_member job_m[] = {{"type", &type_s, 1},         {"name", &name_s, 0},
                                   {"priority", &priority_s, 0}, {"preemptible", &preemptible_s, 0},
                                   {"spec", &spec_s, 1},         {0}};
static const sch job_s = {SCH_OBJECT, .members = job_m};

/* Each job type: its name, its spec's title in the API document, and its spec module. */
#define X(name, title, spec, executor, traits) extern const job_spec spec;
JOB_TYPE_TABLE(X)
#undef X

typedef struct {
    const char *type, *title;
    const job_spec *spec;
} job_kind;

#define X(name, title, spec, executor, traits) {#name, #title, &spec},
static const job_kind kinds[] = {JOB_TYPE_TABLE(X)};
#undef X
#define NKINDS (sizeof kinds / sizeof kinds[0])

static const job_spec *find(const char *type)
{
    for (size_t k = 0; type && k < NKINDS; k++)
        if (strcmp(kinds[k].type, type) == 0) return kinds[k].spec;
    return NULL;
}

static int validate(json_t *body, job_new *out, char *field, size_t flen, char *msg, size_t mlen)
{
    if (sch_check(&job_s, body, "", field, flen, msg, mlen)) {
        if (field[0] == '.') memmove(field, field + 1, strlen(field)); /* top-level names have no prefix */
        if (strcmp(field, "type") == 0) snprintf(msg, mlen, "required: one of %s", job_type_list());
        return -1;
    }
    if (utf8_has_control(json_string_value(json_object_get(body, "name"))))
        return field_fail(field, flen, msg, mlen, "name", "%s", JOB_NO_CONTROL_MSG);
    snprintf(out->type, sizeof(out->type), "%s", json_string_value(json_object_get(body, "type")));
    json_t *name = json_object_get(body, "name");
    snprintf(out->name, sizeof(out->name), "%s", name ? json_string_value(name) : out->type);
    out->priority = job_priority_parse(json_string_value(json_object_get(body, "priority")));
    if (out->priority < 0) out->priority = job_priority_parse(DEFAULT_PRIORITY);
    out->preemptible = json_is_true(json_object_get(body, "preemptible"));
    out->spec = json_object_get(body, "spec");
    const job_spec *js = find(out->type);
    if (!js) {
        snprintf(field, flen, "type");
        snprintf(msg, mlen, "job type '%s' is not available in this version of gantry", out->type);
        return -1;
    }
    if (js->validate(out->spec, field, flen, msg, mlen) != 0) return -1;
    if (js->admit && js->admit(out->spec, field, flen, msg, mlen) != 0) return -1;
    out->slots = js->slots(out->spec);
    return 0;
}

json_t *spec_job_schemas(void)
{
    json_t *out = json_object(), *alts = json_array();
    for (size_t k = 0; k < NKINDS; k++) {
        char ref[96];
        snprintf(ref, sizeof ref, "#/components/schemas/%s", kinds[k].title);
        json_t *job = sch_json(&job_s), *props = json_object_get(job, "properties");
        json_object_set_new(props, "type", json_pack("{s:s}", "const", kinds[k].type));
        json_object_set_new(props, "spec", json_pack("{s:s}", "$ref", ref));
        json_array_append_new(alts, job);
        json_object_set_new(out, kinds[k].title, sch_json(kinds[k].spec->shape));
    }
    json_object_set_new(out, "JobSubmission",
                        json_pack("{s:s, s:o}", "description",
                                  "POST /v1/jobs: a job of one type, its spec checked by that type's schema (then by the "
                                  "rules between fields the schemas' descriptions name)",
                                  "oneOf", alts));
    return out;
}

int spec_validate_job(json_t *body, job_new *out, char *field, size_t flen, char *msg, size_t mlen)
{
    int rc = validate(body, out, field, flen, msg, mlen);
    if (rc != 0) { /* names copied from the body may have been cut inside a character */
        utf8_trim(field);
        utf8_trim(msg);
    }
    return rc;
}

/* the tenant's roots, and where a path outside them is reported */
typedef struct {
    const char *rootv[16];
    int n;
    char *field, *msg;
    size_t flen, mlen;
} confine_ctx;

static int confine_one(void *arg, const char *path, const char *field, job_path_kind kind)
{
    confine_ctx *c = arg;
    char resolved[4096], why[512];
    int rc = kind == JOB_PATH_DIR ? path_confine_dir(c->rootv, c->n, path, resolved, sizeof(resolved), why, sizeof(why))
                                  : path_confine(c->rootv, c->n, path, true, resolved, sizeof(resolved), why, sizeof(why));
    if (rc == 0) return 0;
    snprintf(c->field, c->flen, "%s", field);
    utf8_copy(c->msg, c->mlen, why);
    utf8_trim(c->field);
    return -1;
}

int spec_confine_paths(const json_t *spec, const char *type, const json_t *roots, char *field, size_t flen, char *msg, size_t mlen)
{
    const job_spec *js = find(type);
    if (!js || !js->paths) return 0;
    confine_ctx c = {.n = 0, .field = field, .msg = msg, .flen = flen, .mlen = mlen};
    size_t i;
    json_t *r;
    json_array_foreach(roots, i, r) if (c.n < 16 && json_is_string(r)) c.rootv[c.n++] = json_string_value(r);
    return js->paths(spec, confine_one, &c) ? -1 : 0;
}

const job_spec *spec_module(const char *type)
{
    return find(type);
}
