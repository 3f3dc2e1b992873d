#include "server/spec.h"
#include "common/jobstate.h"
#include "common/utf8.h"
#include "common/paths.h"
#include "workers/fed/spec.h"
#include "workers/place/place.h"
#include "workers/serve/spec.h"
#include "workers/train/train.h"
#include "common/schema.h"

#include <stdio.h>
#include <string.h>

/* ---- the submission's shape (common/schema.h) ---- */

#define X(t) #t,
static const char *const type_values[] = {JOB_TYPES(X) NULL};
#undef X
#define X(n, v) #n,
static const char *const priority_values[] = {JOB_PRIORITIES(X) NULL};
#undef X

static const sch type_s = {SCH_STR, .values = type_values, .msg = "required: one of placement, training, inference, federated"};
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

/* Each job type: its spec's shape (for the document), its validator (the
 * shape, then the rules between fields) and the slots it takes at once. */
static int placement_slots(const json_t *spec)
{
    (void)spec;
    return 1;
}

static int training_slots(const json_t *spec) /* a gang: that many slots at once (elastic: at least min) */
{
    json_t *w = json_object_get(spec, "workers");
    return json_is_object(w) ? (int)json_integer_value(json_object_get(w, "min")) : (int)train_spec_long(spec, "workers");
}

static int inference_slots(const json_t *spec) /* the replicas start together; the autoscaler adds more */
{
    serve_settings s;
    serve_settings_get(spec, &s);
    return s.min_replicas;
}

static int federated_slots(const json_t *spec) /* one worker per site (a labelled site: a worker with its label) */
{
    return (int)json_array_size(json_object_get(spec, "sites"));
}

typedef struct {
    const char *type, *title;
    const sch *shape;
    int (*validate)(const json_t *spec, char *field, size_t fl, char *msg, size_t ml);
    int (*slots)(const json_t *spec);
} job_kind;

static const job_kind kinds[] = {
    {"placement", "PlacementSpec", &place_spec_shape, place_spec_validate, placement_slots},
    {"training", "TrainingSpec", &train_spec_shape, train_spec_validate, training_slots},
    {"inference", "InferenceSpec", &serve_spec_shape, serve_spec_validate, inference_slots},
    {"federated", "FederatedSpec", &fed_spec_shape, fed_spec_validate, federated_slots},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

static int fail(char *field, size_t flen, char *msg, size_t mlen, const char *f, const char *m)
{
    snprintf(field, flen, "%s", f);
    snprintf(msg, mlen, "%s", m);
    return -1;
}

#define NO_CONTROL "must not contain control characters (C0 such as ESC, CR, LF or tab; DEL; U+0080 to U+009F)"

/* the labels a spec chooses for people (a served model's name, the sites' names and labels): printed by the
 * dashboard and the CLI, so no control characters (utf8.h) */
static int check_spec_labels(const char *type, const json_t *spec, char *field, size_t flen, char *msg, size_t mlen)
{
    if (!strcmp(type, "inference") && utf8_has_control(json_string_value(json_object_get(spec, "model"))))
        return fail(field, flen, msg, mlen, "spec.model", NO_CONTROL);
    size_t i;
    json_t *site;
    json_array_foreach(json_object_get(spec, "sites"), i, site)
    {
        static const char *const named[] = {"name", "label"};
        for (size_t k = 0; k < 2; k++)
            if (!strcmp(type, "federated") && utf8_has_control(json_string_value(json_object_get(site, named[k])))) {
                char f[64];
                snprintf(f, sizeof f, "spec.sites[%zu].%s", i, named[k]);
                return fail(field, flen, msg, mlen, f, NO_CONTROL);
            }
    }
    return 0;
}

static int validate(json_t *body, job_new *out, char *field, size_t flen, char *msg, size_t mlen)
{
    if (sch_check(&job_s, body, "", field, flen, msg, mlen)) {
        if (field[0] == '.') memmove(field, field + 1, strlen(field)); /* top-level names have no prefix */
        return -1;
    }
    if (utf8_has_control(json_string_value(json_object_get(body, "name")))) return fail(field, flen, msg, mlen, "name", NO_CONTROL);
    snprintf(out->type, sizeof(out->type), "%s", json_string_value(json_object_get(body, "type")));
    json_t *name = json_object_get(body, "name");
    snprintf(out->name, sizeof(out->name), "%s", name ? json_string_value(name) : out->type);
    out->priority = job_priority_parse(json_string_value(json_object_get(body, "priority")));
    if (out->priority < 0) out->priority = job_priority_parse(DEFAULT_PRIORITY);
    out->preemptible = json_is_true(json_object_get(body, "preemptible"));
    out->spec = json_object_get(body, "spec");
    for (size_t k = 0; k < NKINDS; k++) {
        if (strcmp(out->type, kinds[k].type) != 0) continue;
        if (kinds[k].validate(out->spec, field, flen, msg, mlen) != 0) return -1;
        if (check_spec_labels(out->type, out->spec, field, flen, msg, mlen) != 0) return -1;
        if (!strcmp(out->type, "inference") && json_object_get(out->spec, "resolved"))
            return fail(field, flen, msg, mlen, "spec.resolved", "is set by the server");
        out->slots = kinds[k].slots(out->spec);
        return 0;
    }
    snprintf(field, flen, "type");
    snprintf(msg, mlen, "job type '%s' is not available in this version of gantry", out->type);
    return -1;
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
        json_object_set_new(out, kinds[k].title, sch_json(kinds[k].shape));
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

/* every path of a dataset object under the roots; field named under prefix */
static int confine_dataset(const json_t *dataset, const char *prefix, const char **rootv, int n, char *field, size_t flen,
                           char *msg, size_t mlen)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)dataset, key, v)
    {
        if (!json_is_string(v) || strcmp(key, "name") == 0 || strcmp(key, "format") == 0) continue;
        char resolved[4096], why[512];
        if (path_confine(rootv, n, json_string_value(v), true, resolved, sizeof(resolved), why, sizeof(why)) != 0) {
            snprintf(field, flen, "%s.%s", prefix, key);
            utf8_copy(msg, mlen, why);
            utf8_trim(field);
            return -1;
        }
    }
    return 0;
}

int spec_confine_paths(const json_t *spec, const char *type, const json_t *roots, char *field, size_t flen, char *msg, size_t mlen)
{
    const char *rootv[16];
    int n = 0;
    size_t i;
    json_t *r;
    json_array_foreach(roots, i, r) if (n < 16 && json_is_string(r)) rootv[n++] = json_string_value(r);
    if (strcmp(type, "training") == 0)
        return confine_dataset(json_object_get(spec, "dataset"), "spec.dataset", rootv, n, field, flen, msg, mlen);
    if (strcmp(type, "federated") != 0) return 0;
    json_t *site;
    json_array_foreach(json_object_get(spec, "sites"), i, site)
    {
        char prefix[48];
        snprintf(prefix, sizeof(prefix), "spec.sites[%zu].dataset", i);
        if (confine_dataset(json_object_get(site, "dataset"), prefix, rootv, n, field, flen, msg, mlen)) return -1;
    }
    return confine_dataset(json_object_get(spec, "test"), "spec.test", rootv, n, field, flen, msg, mlen);
}
