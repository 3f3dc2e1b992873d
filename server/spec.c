#include "server/spec.h"
#include "common/jobstate.h"
#include "common/utf8.h"
#include "common/paths.h"
#include "workers/fed/spec.h"
#include "workers/place/place.h"
#include "workers/serve/spec.h"
#include "workers/train/train.h"

#include <stdio.h>
#include <string.h>

#define NAME_MAX_LEN 200

static int fail(char *field, size_t flen, char *msg, size_t mlen, const char *f, const char *m)
{
    snprintf(field, flen, "%s", f);
    snprintf(msg, mlen, "%s", m);
    return -1;
}

static int validate(json_t *body, job_new *out, char *field, size_t flen, char *msg, size_t mlen)
{
    static const char *const known[] = {"type", "name", "priority", "preemptible", "spec"};
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        int ok = 0;
        for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
            ok |= strcmp(key, known[i]) == 0;
        if (!ok) {
            snprintf(field, flen, "%s", key);
            snprintf(msg, mlen, "unknown field '%s' (a job has type, name, priority, preemptible and spec)", key);
            return -1;
        }
    }
    json_t *type = json_object_get(body, "type");
    if (!json_is_string(type))
        return fail(field, flen, msg, mlen, "type", "required: one of placement, training, inference, federated");
    if (!job_type_valid(json_string_value(type)))
        return fail(field, flen, msg, mlen, "type", "must be one of placement, training, inference, federated");
    snprintf(out->type, sizeof(out->type), "%s", json_string_value(type));

    json_t *name = json_object_get(body, "name");
    if (name && !json_is_string(name)) return fail(field, flen, msg, mlen, "name", "must be a string");
    if (name && (json_string_length(name) == 0 || json_string_length(name) > NAME_MAX_LEN))
        return fail(field, flen, msg, mlen, "name", "must be 1 to 200 characters");
    snprintf(out->name, sizeof(out->name), "%s", name ? json_string_value(name) : out->type);

    json_t *prio = json_object_get(body, "priority");
    out->priority = 1;
    if (prio && (!json_is_string(prio) || (out->priority = job_priority_parse(json_string_value(prio))) < 0))
        return fail(field, flen, msg, mlen, "priority", "must be one of low, normal, high");

    json_t *pre = json_object_get(body, "preemptible");
    if (pre && !json_is_boolean(pre)) return fail(field, flen, msg, mlen, "preemptible", "must be true or false");
    out->preemptible = json_is_true(pre);

    json_t *spec = json_object_get(body, "spec");
    if (!json_is_object(spec)) return fail(field, flen, msg, mlen, "spec", "required: an object with the job's settings");
    out->spec = spec;
    out->slots = 1;

    if (strcmp(out->type, "placement") == 0) return place_spec_validate(spec, field, flen, msg, mlen);
    if (strcmp(out->type, "training") == 0) {
        if (train_spec_validate(spec, field, flen, msg, mlen) != 0) return -1;
        json_t *w = json_object_get(spec, "workers"); /* a gang: that many slots at once (elastic: at least min) */
        if (w) out->slots = (int)json_integer_value(json_is_object(w) ? json_object_get(w, "min") : w);
        return 0;
    }
    if (strcmp(out->type, "inference") == 0) {
        if (serve_spec_validate(spec, field, flen, msg, mlen) != 0) return -1;
        if (json_object_get(spec, "resolved")) return fail(field, flen, msg, mlen, "spec.resolved", "is set by the server");
        serve_settings s;
        serve_settings_get(spec, &s);
        out->slots = s.min_replicas; /* the replicas start together; the autoscaler adds more */
        return 0;
    }
    if (strcmp(out->type, "federated") == 0) { /* one slot per site, each on its labelled worker */
        if (fed_spec_validate(spec, field, flen, msg, mlen) != 0) return -1;
        out->slots = (int)json_array_size(json_object_get(spec, "sites"));
        return 0;
    }
    snprintf(field, flen, "type");
    snprintf(msg, mlen, "job type '%s' is not available in this version of gantry", out->type);
    return -1;
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
