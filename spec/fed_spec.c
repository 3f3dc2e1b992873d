/* fed_spec.c - the federated job's spec (fed_spec.h): its shape, validation (a site's dataset through the
 * training spec module) and what the server asks of it (fed_job_spec). */
#include "spec/fed_spec.h"
#include "common/fielderr.h"

#include "common/utf8.h"
#include "spec/fed_design.h"
#include "spec/fed_sitekey.h"
#include "spec/program_spec.h"
#include "spec/train_spec.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* ---- the shape (common/schema.h): validation, defaults and the API document ---- */

static const sch part_sites_s = {SCH_INT, SCH_IN(1, FED_MAX_JOB_SITES), .desc = "the number of parts"};
static const sch part_index_s = {SCH_INT, SCH_IN(0, FED_MAX_JOB_SITES - 1), .desc = "this site's part, in [0, sites)"};
static const sch part_alpha_s = {SCH_NUM, SCH_ABOVE(0), .dflt = "0.5", .desc = "Dirichlet concentration: smaller, more label skew"};
static const sch_member part_m[] = {
    {"sites", &part_sites_s, 1}, {"index", &part_index_s, 1}, {"alpha", &part_alpha_s, 0}, {"seed", &train_seed_shape, 0}, {0}};
const sch fed_partition_shape = {SCH_OBJECT, .members = part_m,
                                 .desc = "this site's part of a Dirichlet label-skew split of the built-in dataset"};
static const sch_member dataset_m[] = {{"partition", &fed_partition_shape, 0}, {0}};
static const sch dataset_s = {SCH_OBJECT, .base = &train_dataset_shape, .members = dataset_m,
                              .desc = "a training dataset (the site's own data); the built-in one may be split"};
static const sch site_name_s = {SCH_STR, SCH_IN(1, 63), .desc = "the site's name (results, groups, the job page)",
                                .msg = "must be a site name (1-63 characters, no comma, '=' or space)"};
static const sch site_label_s = {SCH_STR, SCH_IN(6, 68),
                                 .desc = "site=NAME: the site runs only on a worker started with --labels site=NAME (the one "
                                         "that holds its data); without it, on any free worker",
                                 .msg = "must be site=NAME (NAME 1-63 characters, no comma, '=' or space): the label of the "
                                        "worker that holds the site's data (gantry-worker --labels site=NAME)"};
static const sch site_pubkey_s = {SCH_STR, SCH_IN(1, 100),
                                  .desc =
                                      "ed25519:<base64>: the site's identity key (gantry-worker --print-site-key FILE); only the "
                                      "worker holding it runs the site, and the site's public key and group sums must be "
                                      "signed by it (docs/federated.md, \"Protocol\"); without it the site is authenticated "
                                      "by the workers' shared --fed-secret"};
static const sch_member site_m[] = {
    {"name", &site_name_s, 1}, {"label", &site_label_s, 0}, {"public_key", &site_pubkey_s, 0}, {"dataset", &dataset_s, 1}, {0}};
static const sch site_s = {SCH_OBJECT, .members = site_m};
static const sch sites_s = {SCH_ARRAY, SCH_IN(3, FED_MAX_JOB_SITES), .items = &site_s, .desc = "names unique",
                            .msg = "must list 3 to 64 sites ({\"name\", \"dataset\"}): groups need 3 members so that a sum "
                                   "hides each one"};
static const sch local_steps_s = {SCH_INT, SCH_IN(1, 1000000), .desc = "local steps per round",
                                  .msg = "must be an integer in [1, 1000000] (local steps per round)"};
static const sch rounds_s = {SCH_INT, SCH_IN(1, 100000)};
static const sch exchange_s = {SCH_INT, SCH_IN(1, 3600), .dflt = "120", .desc = "how long a site waits for a peer's message"};
static const sch threshold_s = {SCH_INT, SCH_IN(1, FED_MAX_JOB_SITES),
                                .desc = "FedAvg: a round completes when this many sites deliver (docs/federated.md, \"Dropouts\"); "
                                        "more than half of the sites and at least 3; default ceil(2n/3) within those bounds. "
                                        "securedfl: every site"};
static const char *const agg_v[] = {"securedfl", "fedavg", NULL};
static const sch agg_s = {SCH_STR, .values = agg_v, .dflt = "\"fedavg\"",
                          .desc = "fedavg: one masked sum of the weighted models a round; securedfl: ADMM, one masked sum per "
                                  "iteration, the same model to ~1e-8 at admm.iterations times the traffic (the default when the "
                                  "spec gives admm without aggregation)"};
static const sch masking_s = {SCH_BOOL, .dflt = "true",
                              .desc = "kept for old specs: every sum is masked over all sites whatever it says; false caps "
                                      "securedfl's admm.iterations at P"};
static const sch iters_s = {SCH_INT, SCH_IN(1, 1000), .dflt = "7", .desc = "ADMM iterations per round"};
static const sch rho_s = {SCH_NUM, SCH_ABOVE(0), .dflt = "0.1"};
static const sch decay_s = {SCH_NUM, SCH_IN_LO_OPEN(0, 1), .dflt = "0.9", .desc = "rho's factor every decay_every iterations"};
static const sch decay_every_s = {SCH_INT, SCH_IN(1, 1000), .dflt = "2"};
static const sch_member admm_m[] = {
    {"iterations", &iters_s, 0}, {"rho", &rho_s, 0}, {"decay", &decay_s, 0}, {"decay_every", &decay_every_s, 0}, {0}};
const sch fed_admm_shape = {SCH_OBJECT, .members = admm_m};
static const sch_member spec_m[] = {{"model", &train_arch_shape, 1},
                                    {"optimizer", &train_optim_shape, 1},
                                    {"batch_size", &train_batch_shape, 1},
                                    {"local_steps", &local_steps_s, 1},
                                    {"rounds", &rounds_s, 1},
                                    {"seed", &train_seed_shape, 0},
                                    {"sites", &sites_s, 1},
                                    {"test", &dataset_s, 0},
                                    {"aggregation", &agg_s, 0},
                                    {"masking", &masking_s, 0},
                                    {"admm", &fed_admm_shape, 0},
                                    {"exchange_timeout_s", &exchange_s, 0},
                                    {"threshold", &threshold_s, 0},
                                    {0}};
const sch fed_spec_shape = {SCH_OBJECT, .members = spec_m,
                            .desc = "A federated job: sites train on their own data and agree on a model by sums masked "
                                    "over all sites (FedAvg by default, or SecureD-FL's ADMM; docs/federated.md). Without "
                                    "masking, securedfl's admm.iterations is at most the design's classes P."};

/* ---- the program variant: each site runs the team's own program (spec/program_spec.h) ---- */

static const sch psite_env_s = {SCH_OBJECT, .flags = SCH_OPEN | SCH_HI, .hi = PROG_MAX_ENV,
                                .items = &(const sch){SCH_STR, SCH_IN(0, 65536)},
                                .desc = "this site's own variables (its data's directory, ...), added to program.env; names as "
                                        "program.env's"};
static const sch_member psite_m[] = {
    {"name", &site_name_s, 1}, {"label", &site_label_s, 0}, {"public_key", &site_pubkey_s, 0}, {"env", &psite_env_s, 0}, {0}};
static const sch psite_s = {SCH_OBJECT, .members = psite_m};
static const sch psites_s = {SCH_ARRAY, SCH_IN(3, FED_MAX_JOB_SITES), .items = &psite_s, .desc = "names unique",
                             .msg = "must list 3 to 64 sites ({\"name\"}): groups need 3 members so that a sum hides each one"};
static const sch update_timeout_s = {SCH_INT, SCH_IN(1, 86400), .dflt = "3600",
                                     .desc = "how long a site waits for its program's model (the initial one, then each round's "
                                             "update), seconds"};
static const sch_member pspec_m[] = {{"program", &program_shape, 1},
                                     {"resources", &program_resources_shape, 0},
                                     {"max_runtime_s", &program_runtime_shape, 0},
                                     {"grace_s", &program_grace_shape, 0},
                                     {"rounds", &rounds_s, 1},
                                     {"sites", &psites_s, 1},
                                     {"aggregation", &agg_s, 0},
                                     {"masking", &masking_s, 0},
                                     {"admm", &fed_admm_shape, 0},
                                     {"exchange_timeout_s", &exchange_s, 0},
                                     {"threshold", &threshold_s, 0},
                                     {"update_timeout_s", &update_timeout_s, 0},
                                     {0}};
const sch fed_program_spec_shape = {
    SCH_OBJECT, .members = pspec_m,
    .desc = "A federated job whose sites run the team's own program (a PyTorch training loop), sandboxed as a program "
            "job's rank: each round a site's program trains the global model on the site's data and hands back its update; "
            "the sites aggregate the updates by masked sums (docs/federated.md, \"Your own PyTorch model\")."};
/* the API document's FederatedSpec: either variant (fed_spec_validate picks by "program") */
static const sch *const variants[] = {&fed_spec_shape, &fed_program_spec_shape, NULL};
static const sch fed_job_shape = {SCH_ONEOF, .alts = variants,
                                  .desc = "A federated job: gantry's built-in layer-list model, or the team's own program "
                                          "(spec.program)"};

json_t *fed_site_train_spec(const json_t *spec, int s)
{
    json_t *site = json_array_get(json_object_get(spec, "sites"), (size_t)s);
    json_t *d = json_deep_copy(json_object_get(site, "dataset")); /* the partition is the site's business (exec_fed) */
    json_object_del(d, "partition");
    json_t *t = json_pack("{s:O, s:O, s:o, s:O, s:O}", "model", json_object_get(spec, "model"), "optimizer",
                          json_object_get(spec, "optimizer"), "dataset", d, "batch_size", json_object_get(spec, "batch_size"),
                          "steps", json_object_get(spec, "local_steps"));
    if (t && json_object_get(spec, "seed")) json_object_set(t, "seed", json_object_get(spec, "seed"));
    return t;
}

/* a site's dataset through the training validator (without its partition), its field names moved under prefix */
static int check_dataset(const json_t *spec, const json_t *dataset, const char *prefix, char *field, size_t fl, char *msg,
                         size_t ml)
{
    json_t *d = json_deep_copy(dataset);
    json_object_del(d, "partition");
    json_t *t =
        json_pack("{s:O, s:O, s:o, s:O, s:i}", "model", json_object_get(spec, "model"), "optimizer",
                  json_object_get(spec, "optimizer"), "dataset", d, "batch_size", json_object_get(spec, "batch_size"), "steps", 1);
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
    if (!part) return 0;
    if (!json_object_get(dataset, "name"))
        return field_fail(field, fl, msg, ml, prefix, "splits the built-in dataset only: give \"name\"");
    if (json_integer_value(json_object_get(part, "index")) >= json_integer_value(json_object_get(part, "sites"))) {
        snprintf(field, fl, "%s.partition.index", prefix);
        snprintf(msg, ml, "must be in [0, sites)");
        return -1;
    }
    return 0;
}

/* site s's public_key, when it has one: the text form (spec/fed_sitekey.h), and no other site's */
static int check_site_key(const json_t *sites, size_t s, char *field, size_t fl, char *msg, size_t ml)
{
    const char *key = json_string_value(json_object_get(json_array_get(sites, s), "public_key"));
    unsigned char pub[FED_SITEKEY_LEN], other[FED_SITEKEY_LEN];
    char why[200];
    if (!key) return 0;
    if (fed_sitekey_parse(key, pub, why, sizeof why)) {
        snprintf(field, fl, "spec.sites[%zu].public_key", s);
        snprintf(msg, ml, "%s", why);
        return -1;
    }
    for (size_t o = 0; o < s; o++) {
        const char *ok = json_string_value(json_object_get(json_array_get(sites, o), "public_key"));
        if (ok && fed_sitekey_parse(ok, other, why, sizeof why) == 0 && memcmp(pub, other, sizeof pub) == 0) {
            snprintf(field, fl, "spec.sites[%zu].public_key", s);
            snprintf(msg, ml, "is spec.sites[%zu]'s key too: each site needs its own worker and key", o);
            return -1;
        }
    }
    return 0;
}

/* every site's name and label (both variants): names without ',', '=' or blanks and unique, labels site=NAME */
static int check_sites(const json_t *sites, char *field, size_t fl, char *msg, size_t ml)
{
    size_t n = json_array_size(sites);
    for (size_t s = 0; s < n; s++) {
        const json_t *site = json_array_get(sites, s);
        const char *name = json_string_value(json_object_get(site, "name"));
        if (strpbrk(name, ",= \t")) {
            snprintf(field, fl, "spec.sites[%zu].name", s);
            snprintf(msg, ml, "%s", site_name_s.msg);
            return -1;
        }
        const char *label = json_string_value(json_object_get(site, "label"));
        bool bad_label = label && (strncmp(label, "site=", 5) != 0 || !label[5] || strpbrk(label + 5, ",= \t"));
        for (const char *c = label; c && *c && !bad_label; c++)
            bad_label = (unsigned char)*c < 0x20 || *c == 0x7f;
        if (bad_label) {
            snprintf(field, fl, "spec.sites[%zu].label", s);
            snprintf(msg, ml, "%s", site_label_s.msg);
            return -1;
        }
        for (size_t o = 0; o < s; o++)
            if (!strcmp(name, json_string_value(json_object_get(json_array_get(sites, o), "name")))) {
                snprintf(field, fl, "spec.sites[%zu].name", s);
                snprintf(msg, ml, "\"%s\" is listed twice", name);
                return -1;
            }
        if (check_site_key(sites, s, field, fl, msg, ml)) return -1;
    }
    return 0;
}

/* ---- the threshold of the dropouts' mode (docs/federated.md, "Dropouts") ---- */

/* the fewest sites a threshold may be: more than half (two views of one round could otherwise each collect one
 * kind of share of the same site), and 3 when there are 3 or more (a sum of two inputs tells each the other's) */
static int threshold_floor(int n)
{
    int lo = n / 2 + 1;
    return n >= 3 && lo < 3 ? 3 : lo;
}

int fed_drop_threshold_default(int n)
{
    int t = (2 * n + 2) / 3, lo = threshold_floor(n);
    return t > lo ? t : lo;
}

int fed_drop_threshold_check(int n, int t)
{
    return n >= 1 && t >= threshold_floor(n) && t <= n ? 0 : -1;
}

int fed_spec_threshold(const json_t *spec)
{
    int n = (int)json_array_size(json_object_get(spec, "sites"));
    const json_t *t = json_object_get(spec, "threshold");
    if (fed_spec_securedfl(spec)) return n;
    return t ? (int)json_integer_value(t) : fed_drop_threshold_default(n);
}

/* the threshold for n sites (both variants) */
static int check_threshold(const json_t *spec, int n, char *field, size_t fl, char *msg, size_t ml)
{
    const json_t *t = json_object_get(spec, "threshold");
    if (!t) return 0;
    int v = (int)json_integer_value(t);
    if (fed_spec_securedfl(spec) && v != n)
        return field_fail(field, fl, msg, ml, "spec.threshold",
                          "must be %d (every site) with securedfl: its ADMM iterations carry every site's duals, so a round "
                          "cannot complete without one; FedAvg (\"aggregation\": \"fedavg\") completes rounds without lost sites",
                          n);
    if (fed_drop_threshold_check(n, v))
        return field_fail(field, fl, msg, ml, "spec.threshold",
                          "must be from %d to %d for %d sites: more than half of them, and at least 3 (a sum of two sites' "
                          "models tells each the other's)",
                          threshold_floor(n), n, n);
    return 0;
}

/* the design for n sites, and without masking the iterations within its classes (both variants) */
static int check_design(const json_t *spec, size_t n, char *field, size_t fl, char *msg, size_t ml)
{
    if (check_threshold(spec, (int)n, field, fl, msg, ml)) return -1;
    long iters = (long)sch_number(&fed_admm_shape, json_object_get(spec, "admm"), "iterations", 0);
    fed_design d;
    char err[200];
    if (fed_design_make((int)n, &d, err, sizeof err)) return field_fail(field, fl, msg, ml, "spec.sites", "%s", err);
    int P = d.classes;
    fed_design_free(&d);
    if (json_is_false(json_object_get(spec, "masking")) && fed_spec_securedfl(spec) && iters > P) {
        snprintf(field, fl, "spec.admm.iterations");
        snprintf(msg, ml,
                 "without masking at most %d (P, the design's classes for %zu sites): one more and a site sees a peer's "
                 "message twice, which reveals its model; turn masking on for more",
                 P, n);
        return -1;
    }
    return 0;
}

json_t *fed_site_program_spec(const json_t *spec, int s)
{
    const json_t *site = json_array_get(json_object_get(spec, "sites"), (size_t)s);
    json_t *program = json_deep_copy(json_object_get(spec, "program")), *env = json_object_get(program, "env");
    if (!env) json_object_set_new(program, "env", env = json_object());
    json_object_update(env, json_object_get(site, "env"));
    if (!json_object_size(env)) json_object_del(program, "env");
    json_t *t = json_pack("{s:o, s:i}", "program", program, "max_restarts", 0);
    static const char *const kept[] = {"resources", "max_runtime_s", "grace_s"};
    for (size_t k = 0; t && k < sizeof kept / sizeof kept[0]; k++)
        if (json_object_get(spec, kept[k])) json_object_set(t, kept[k], json_object_get(spec, kept[k]));
    return t;
}

/* the program variant: built-in members refused by name; each site's env; each site's program spec through the
 * program module (spec/program_spec.c, whose fields are this spec's: spec.program..., spec.resources...) */
static int program_variant(const json_t *spec, char *field, size_t fl, char *msg, size_t ml)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)spec, key, v)
    {
        if (sch_member_shape(&fed_program_spec_shape, key) || !sch_member_shape(&fed_spec_shape, key)) continue;
        snprintf(field, fl, "spec.%s", key);
        snprintf(msg, ml,
                 "is for gantry's built-in model: a federated job with a program has no %s (each site's program trains its "
                 "own model on its own data)",
                 key);
        return -1;
    }
    const json_t *sites = json_object_get(spec, "sites");
    size_t i;
    json_array_foreach(sites, i, v) if (json_is_object(v) && json_object_get(v, "dataset"))
    {
        snprintf(field, fl, "spec.sites[%zu].dataset", i);
        snprintf(msg, ml,
                 "is for gantry's built-in model: a site's program reads its own data (give the site its "
                 "variables in env: where its data is)");
        return -1;
    }
    if (sch_check(&fed_program_spec_shape, spec, "spec", field, fl, msg, ml)) return -1;
    json_array_foreach(sites, i, v)
    {
        json_t *x;
        json_object_foreach(json_object_get(v, "env"), key, x)
        {
            const char *why = program_env_refusal(key);
            if (!why) continue;
            char cut[160];
            utf8_copy(cut, sizeof cut, key);
            snprintf(field, fl, "spec.sites[%zu].env.%s", i, cut);
            snprintf(msg, ml, "%s", why);
            return -1;
        }
    }
    if (check_sites(sites, field, fl, msg, ml)) return -1;
    json_array_foreach(sites, i, v)
    {
        json_t *t = fed_site_program_spec(spec, (int)i);
        int rc = program_spec_validate(t, field, fl, msg, ml);
        json_decref(t);
        if (rc) return -1;
    }
    return check_design(spec, json_array_size(sites), field, fl, msg, ml);
}

fed_variant fed_spec_variant(const json_t *spec)
{
    return json_object_get(spec, "program") ? FED_PROGRAM : FED_BUILTIN;
}

bool fed_spec_securedfl(const json_t *spec)
{
    const char *agg = json_string_value(json_object_get(spec, "aggregation"));
    return agg ? strcmp(agg, "securedfl") == 0 : json_object_get(spec, "admm") != NULL;
}

int fed_spec_validate(const json_t *spec, char *field, size_t fl, char *msg, size_t ml)
{
    if (fed_spec_variant(spec) == FED_PROGRAM) return program_variant(spec, field, fl, msg, ml);
    if (sch_check(&fed_spec_shape, spec, "spec", field, fl, msg, ml)) return -1;
    const json_t *sites = json_object_get(spec, "sites");
    size_t n = json_array_size(sites);
    if (check_sites(sites, field, fl, msg, ml)) return -1;
    for (size_t s = 0; s < n; s++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "spec.sites[%zu].dataset", s);
        if (check_dataset(spec, json_object_get(json_array_get(sites, s), "dataset"), prefix, field, fl, msg, ml)) return -1;
    }
    if (json_object_get(spec, "test") && check_dataset(spec, json_object_get(spec, "test"), "spec.test", field, fl, msg, ml))
        return -1;
    return check_design(spec, n, field, fl, msg, ml);
}

/* ---- what the server asks of a federated spec (common/jobtypes.h) ---- */

/* the sites' names and labels are printed by the dashboard and the CLI: no control characters (utf8.h) */
static int admit(const json_t *spec, char *field, size_t fl, char *msg, size_t ml)
{
    size_t i;
    json_t *site;
    json_array_foreach(json_object_get(spec, "sites"), i, site)
    {
        static const char *const named[] = {"name", "label"};
        for (size_t k = 0; k < 2; k++)
            if (utf8_has_control(json_string_value(json_object_get(site, named[k])))) {
                snprintf(field, fl, "spec.sites[%zu].%s", i, named[k]);
                snprintf(msg, ml, "%s", JOB_NO_CONTROL_MSG);
                return -1;
            }
    }
    return 0;
}

/* one worker per site (a labelled site: a worker with its label) */
static int slots(const json_t *spec)
{
    return (int)json_array_size(json_object_get(spec, "sites"));
}

/* every site's files, then the test set's */
static int paths(const json_t *spec, job_path_fn fn, void *ctx)
{
    if (fed_spec_variant(spec) == FED_PROGRAM) /* the program's code: a directory */
        return fn(ctx, json_string_value(json_object_get(json_object_get(spec, "program"), "workdir")), "spec.program.workdir",
                  JOB_PATH_DIR);
    size_t i;
    json_t *site;
    json_array_foreach(json_object_get(spec, "sites"), i, site)
    {
        char prefix[48];
        snprintf(prefix, sizeof prefix, "spec.sites[%zu].dataset", i);
        int rc = train_dataset_paths(json_object_get(site, "dataset"), prefix, fn, ctx);
        if (rc) return rc;
    }
    return train_dataset_paths(json_object_get(spec, "test"), "spec.test", fn, ctx);
}

/* every site trains rounds x local_steps steps */
static void cost(const json_t *spec, job_cost *out)
{
    if (fed_spec_variant(spec) == FED_PROGRAM) { /* no steps of gantry's; its programs' memory, as a program job's ranks */
        json_t *mb = json_object_get(json_object_get(spec, "resources"), "memory_mb");
        out->epochs = out->steps = (job_cost_item){-1, "spec.rounds", "rounds"};
        out->memory = (job_cost_item){json_is_integer(mb) ? (long long)json_integer_value(mb) * 1048576LL : -1,
                                      "spec.resources.memory_mb", "memory_mb x 1048576 ="};
        return;
    }
    json_t *rounds = json_object_get(spec, "rounds"), *local = json_object_get(spec, "local_steps");
    long long total = json_is_integer(rounds) && json_is_integer(local)
                          ? (long long)json_integer_value(rounds) * (long long)json_integer_value(local)
                          : -1;
    out->epochs = (job_cost_item){-1, NULL, NULL};
    out->steps = (job_cost_item){total, "spec.rounds", "rounds x local_steps ="};
}

const job_spec fed_job_spec = {
    .shape = &fed_job_shape, .validate = fed_spec_validate, .admit = admit, .slots = slots, .paths = paths, .cost = cost};
