/* spec.c - the federated job's spec (spec.h). */
#include "workers/fed/spec.h"

#include "workers/fed/design.h"
#include "workers/train/train.h"

#include <stdio.h>
#include <string.h>

static int bad(char *field, size_t fl, char *msg, size_t ml, const char *f, const char *m)
{
    snprintf(field, fl, "%s", f);
    snprintf(msg, ml, "%s", m);
    return -1;
}

static int pos_int(const json_t *o, const char *key, long lo, long hi, long def, long *out)
{
    json_t *v = json_object_get(o, key);
    *out = def;
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) return -1;
    *out = (long)json_integer_value(v);
    return 0;
}

json_t *fed_site_train_spec(const json_t *spec, int s)
{
    json_t *site = json_array_get(json_object_get(spec, "sites"), (size_t)s);
    json_t *t = json_pack("{s:O, s:O, s:O, s:O, s:O}", "model", json_object_get(spec, "model"), "optimizer",
                          json_object_get(spec, "optimizer"), "dataset", json_object_get(site, "dataset"), "batch_size",
                          json_object_get(spec, "batch_size"), "steps", json_object_get(spec, "local_steps"));
    if (t && json_object_get(spec, "seed")) json_object_set(t, "seed", json_object_get(spec, "seed"));
    return t;
}

/* a site's dataset through the training validator, its field names moved under prefix */
static int check_dataset(const json_t *spec, const json_t *dataset, const char *prefix, char *field, size_t fl, char *msg,
                         size_t ml)
{
    json_t *t = json_pack("{s:O, s:O, s:O, s:O, s:i}", "model", json_object_get(spec, "model"), "optimizer",
                          json_object_get(spec, "optimizer"), "dataset", dataset ? (json_t *)dataset : json_null(), "batch_size",
                          json_object_get(spec, "batch_size"), "steps", 1);
    char f[160];
    int rc = t ? train_spec_validate(t, f, sizeof f, msg, ml) : -1;
    json_decref(t);
    if (rc) {
        if (!strncmp(f, "spec.dataset", 12))
            snprintf(field, fl, "%s%s", prefix, f + 12);
        else
            snprintf(field, fl, "%s", f);
        return -1;
    }
    const json_t *part = json_object_get(dataset, "partition");
    if (part) {
        long sites, index, seed;
        json_t *alpha = json_object_get(part, "alpha");
        char pf[200];
        snprintf(pf, sizeof pf, "%s.partition", prefix);
        if (!json_object_get(dataset, "name") || !json_is_object(part))
            return bad(field, fl, msg, ml, pf, "splits the built-in dataset only: {\"sites\", \"index\", \"alpha\", \"seed\"}");
        if (!json_object_get(part, "sites") || pos_int(part, "sites", 1, FED_MAX_JOB_SITES, 1, &sites))
            return bad(field, fl, msg, ml, pf, "sites must be an integer in [1, 64]");
        if (!json_object_get(part, "index") || pos_int(part, "index", 0, sites - 1, 0, &index))
            return bad(field, fl, msg, ml, pf, "index must be an integer in [0, sites)");
        if (alpha && (!json_is_number(alpha) || !(json_number_value(alpha) > 0)))
            return bad(field, fl, msg, ml, pf, "alpha must be a positive number");
        if (pos_int(part, "seed", 0, 1L << 40, 1, &seed)) return bad(field, fl, msg, ml, pf, "seed must be a non-negative integer");
    }
    return 0;
}

int fed_spec_validate(const json_t *spec, char *field, size_t fl, char *msg, size_t ml)
{
    if (!json_is_object(spec)) return bad(field, fl, msg, ml, "spec", "must be an object");
    if (!json_object_get(spec, "batch_size")) return bad(field, fl, msg, ml, "spec.batch_size", "is required");
    long v;
    if (!json_object_get(spec, "local_steps") || pos_int(spec, "local_steps", 1, 1000000, 1, &v))
        return bad(field, fl, msg, ml, "spec.local_steps", "must be an integer in [1, 1000000] (local steps per round)");
    if (!json_object_get(spec, "rounds") || pos_int(spec, "rounds", 1, 100000, 1, &v))
        return bad(field, fl, msg, ml, "spec.rounds", "must be an integer in [1, 100000]");
    if (pos_int(spec, "exchange_timeout_s", 1, 3600, 120, &v))
        return bad(field, fl, msg, ml, "spec.exchange_timeout_s", "must be an integer in [1, 3600]");
    const json_t *sites = json_object_get(spec, "sites");
    if (!json_is_array(sites) || json_array_size(sites) < 3 || json_array_size(sites) > FED_MAX_JOB_SITES)
        return bad(field, fl, msg, ml, "spec.sites",
                   "must list 3 to 64 sites ({\"name\", \"dataset\"}): groups need 3 members so that a sum hides each one");
    size_t n = json_array_size(sites);
    for (size_t s = 0; s < n; s++) {
        const json_t *site = json_array_get(sites, s);
        const char *name = json_string_value(json_object_get(site, "name"));
        char prefix[64];
        snprintf(prefix, sizeof prefix, "spec.sites[%zu]", s);
        if (!json_is_object(site) || !name || !*name || strlen(name) > 63 || strpbrk(name, ",= \t")) {
            snprintf(field, fl, "%s.name", prefix);
            snprintf(msg, ml, "must be a site name (1-63 characters, no comma, '=' or space): the label site=NAME of its worker");
            return -1;
        }
        for (size_t o = 0; o < s; o++)
            if (!strcmp(name, json_string_value(json_object_get(json_array_get(sites, o), "name")))) {
                snprintf(field, fl, "%s.name", prefix);
                snprintf(msg, ml, "\"%s\" is listed twice", name);
                return -1;
            }
        strcat(prefix, ".dataset");
        if (check_dataset(spec, json_object_get(site, "dataset"), prefix, field, fl, msg, ml)) return -1;
    }
    if (json_object_get(spec, "test") && check_dataset(spec, json_object_get(spec, "test"), "spec.test", field, fl, msg, ml))
        return -1;
    const char *agg = json_string_value(json_object_get(spec, "aggregation"));
    if (json_object_get(spec, "aggregation") && (!agg || (strcmp(agg, "securedfl") && strcmp(agg, "fedavg"))))
        return bad(field, fl, msg, ml, "spec.aggregation", "must be \"securedfl\" or \"fedavg\"");
    json_t *masking = json_object_get(spec, "masking");
    if (masking && !json_is_boolean(masking)) return bad(field, fl, msg, ml, "spec.masking", "must be true or false");
    const json_t *admm = json_object_get(spec, "admm");
    long iters = 7, every = 2;
    if (admm && !json_is_object(admm)) return bad(field, fl, msg, ml, "spec.admm", "must be an object");
    if (pos_int(admm, "iterations", 1, 1000, 7, &iters))
        return bad(field, fl, msg, ml, "spec.admm.iterations", "must be an integer in [1, 1000]");
    if (pos_int(admm, "decay_every", 1, 1000, 2, &every))
        return bad(field, fl, msg, ml, "spec.admm.decay_every", "must be an integer in [1, 1000]");
    json_t *rho = json_object_get(admm, "rho"), *decay = json_object_get(admm, "decay");
    if (rho && (!json_is_number(rho) || !(json_number_value(rho) > 0)))
        return bad(field, fl, msg, ml, "spec.admm.rho", "must be a positive number");
    if (decay && (!json_is_number(decay) || !(json_number_value(decay) > 0 && json_number_value(decay) <= 1)))
        return bad(field, fl, msg, ml, "spec.admm.decay", "must be a number in (0, 1]");
    fed_design d;
    char err[200];
    if (fed_design_make((int)n, &d, err, sizeof err)) return bad(field, fl, msg, ml, "spec.sites", err);
    int P = d.classes;
    fed_design_free(&d);
    if (json_is_false(masking) && (!agg || !strcmp(agg, "securedfl")) && iters > P) {
        snprintf(field, fl, "spec.admm.iterations");
        snprintf(msg, ml,
                 "without masking at most %d (P, the design's classes for %zu sites): one more and a site sees a peer's "
                 "message twice, which reveals its model; turn masking on for more",
                 P, n);
        return -1;
    }
    return 0;
}
