/* train_spec.c - the training job's spec (train_spec.h): the top level and the dataset, their validation,
 * and what the server asks of a training spec (train_job_spec: slots, dataset paths, the cost
 * against the tenant's limits).  The members' own files: train_spec_model.c, train_spec_optim.c,
 * train_spec_policies.c, train_spec_search.c.  A spec with "program" is the program variant
 * (spec/program_spec.h): validated by that module, its workdir confined, no epochs or steps. */
#include "spec/train_spec.h"
#include "common/fielderr.h"
#include "spec/program_spec.h"

#include <stdio.h>
#include <string.h>

/* ---- the spec's shape (common/schema.h): validation, defaults and the API document ---- */

static const char *const builtin_v[] = {"fashion-mnist", NULL}, *const format_v[] = {"idx", "csv", NULL};
static const sch builtin_s = {SCH_STR, .values = builtin_v, .desc = "the built-in dataset (instead of format and files)",
                              .msg = "must be \"fashion-mnist\" (the built-in dataset)"};
static const sch format_s = {SCH_STR, .values = format_v,
                             .desc = "idx: train_images, train_labels, test_images, test_labels; csv: train, test "
                                     "(label first, then the pixels)"};
static const sch file_s = {SCH_STR, SCH_IN(1, 4096), .desc = "a file under the tenant's data roots", .msg = "must be a file path"};
static const sch scale_s = {SCH_NUM, SCH_ABOVE(0), .dflt = "1", .desc = "the pixels are divided by it (csv)"};
static const sch_member dataset_m[] = {{"name", &builtin_s, 0},      {"format", &format_s, 0},
                                       {"train_images", &file_s, 0}, {"train_labels", &file_s, 0},
                                       {"test_images", &file_s, 0},  {"test_labels", &file_s, 0},
                                       {"train", &file_s, 0},        {"test", &file_s, 0},
                                       {"scale", &scale_s, 0},       {0}};
const sch train_dataset_shape = {SCH_OBJECT, .members = dataset_m,
                                 .desc = "{\"name\": \"fashion-mnist\"}, or a format and its files"};

const sch train_batch_shape = {SCH_INT, SCH_IN(1, 65536), .desc = "the global batch, split over the workers"};
static const sch epochs_s = {SCH_INT, SCH_IN(1, 100000), .desc = "give epochs or steps"};
static const sch steps_s = {SCH_INT, SCH_IN(1, 1000000000), .desc = "give epochs or steps"};
const sch train_seed_shape = {SCH_INT, SCH_IN(0, SCH_MAX_SAFE_INT), .dflt = "1",
                              .desc = "weights, dropout and the data order follow from it"};
static const sch eval_s = {SCH_INT, SCH_IN(1, 1000000000), .desc = "test-set evaluation every so many steps (absent: per epoch)"};
static const sch ckpt_s = {SCH_INT, SCH_IN(1, 1000000000), .desc = "checkpoint every so many steps (absent: per epoch)"};
static const sch progress_s = {SCH_INT, SCH_IN(1, 1000000000), .dflt = "50", .desc = "a progress point every so many steps"};
static const sch count_s = {SCH_INT, SCH_IN(1, TRAIN_MAX_WORKERS)};
static const sch_member elastic_m[] = {{"min", &count_s, 1}, {"max", &count_s, 1}, {0}};
static const sch elastic_s = {SCH_OBJECT, .members = elastic_m,
                              .desc = "elastic: starts with at least min workers, grows to max when workers free up"};
static const sch *const workers_alts[] = {&count_s, &elastic_s, NULL};
static const sch workers_s = {SCH_ONEOF, .alts = workers_alts, .dflt = "1",
                              .desc = "data-parallel workers (at most batch_size), or {min, max}",
                              .msg = "must be an integer in [1, 64] (the number of data-parallel workers) or {\"min\", \"max\"} "
                                     "(elastic)"};
static const sch collective_s = {SCH_INT, SCH_IN(1, 3600), .dflt = "120",
                                 .desc = "a lost or hung peer fails the all-reduce within this many seconds"};
static const sch rendezvous_s = {SCH_INT, SCH_IN(1, 3600), .dflt = "60", .desc = "how long a gang waits for its members"};
static const sch_member spec_m[] = {{"model", &train_arch_shape, 1},
                                    {"dataset", &train_dataset_shape, 1},
                                    {"optimizer", &train_optim_shape, 1},
                                    {"schedule", &train_schedule_shape, 0},
                                    {"batch_size", &train_batch_shape, 1},
                                    {"epochs", &epochs_s, 0},
                                    {"steps", &steps_s, 0},
                                    {"seed", &train_seed_shape, 0},
                                    {"eval_every_steps", &eval_s, 0},
                                    {"checkpoint_every_steps", &ckpt_s, 0},
                                    {"progress_every_steps", &progress_s, 0},
                                    {"workers", &workers_s, 0},
                                    {"collective_timeout_s", &collective_s, 0},
                                    {"rendezvous_timeout_s", &rendezvous_s, 0},
                                    {"policies", &train_policies_shape, 0},
                                    {"search", &mop_search_shape, 0},
                                    {0}};
const sch train_spec_shape = {SCH_OBJECT, .members = spec_m,
                              .desc = "Built-in training: data-parallel training of a sequential model (docs/training.md). Give "
                                      "exactly one of epochs and steps; workers at most batch_size."};
/* the API document's TrainingSpec: either variant (train_spec_validate picks by "program") */
static const sch *const variants[] = {&train_spec_shape, &program_spec_shape, NULL};
static const sch train_job_shape = {SCH_ONEOF, .alts = variants,
                                    .desc = "A training job: built-in (a layer list, a dataset, an optimizer; docs/training.md) "
                                            "or the team's own program (spec.program; docs/programs.md)"};

long train_spec_long(const json_t *spec, const char *key)
{
    return (long)sch_number(&train_spec_shape, spec, key, 0);
}

/* beyond the shape: a named dataset or a format with all its files */
static int dataset_rules(const json_t *d, char *field, size_t fl, char *msg, size_t ml)
{
    if (json_object_get(d, "name")) return 0;
    const char *fmt = json_string_value(json_object_get(d, "format"));
    static const char *idx_keys[] = {"train_images", "train_labels", "test_images", "test_labels", NULL};
    static const char *csv_keys[] = {"train", "test", NULL};
    if (!fmt) return field_fail(field, fl, msg, ml, "spec.dataset.format", "must be \"idx\" or \"csv\" (or give \"name\")");
    const char **keys = !strcmp(fmt, "idx") ? idx_keys : csv_keys;
    for (int i = 0; keys[i]; i++)
        if (!json_object_get(d, keys[i])) {
            snprintf(field, fl, "spec.dataset.%s", keys[i]);
            snprintf(msg, ml, "must be a file path");
            return -1;
        }
    return 0;
}

/* the program variant: built-in training's own members refused by name, then the program module */
static int program_variant(const json_t *spec, char *field, size_t fl, char *msg, size_t ml)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)spec, key, v)
    {
        if (sch_member_shape(&program_spec_shape, key) || !sch_member_shape(&train_spec_shape, key)) continue;
        snprintf(field, fl, "spec.%s", key);
        snprintf(msg, ml,
                 "is for built-in training: a job with a program has no %s (the program reads its own data and "
                 "trains as it says)",
                 key);
        return -1;
    }
    return program_spec_validate(spec, field, fl, msg, ml);
}

train_variant train_spec_variant(const json_t *spec)
{
    return json_object_get(spec, "program") ? TRAIN_PROGRAM : TRAIN_BUILTIN;
}

int train_spec_validate(const json_t *spec, char *field, size_t fl, char *msg, size_t ml)
{
    if (train_spec_variant(spec) == TRAIN_PROGRAM) return program_variant(spec, field, fl, msg, ml);
    if (sch_check(&train_spec_shape, spec, "spec", field, fl, msg, ml)) return -1;
    if (train_arch_validate(json_object_get(spec, "model"), "spec.model", field, fl, msg, ml)) return -1;
    if (dataset_rules(json_object_get(spec, "dataset"), field, fl, msg, ml)) return -1;
    if (train_schedule_rules(json_object_get(spec, "schedule"), "spec.schedule", field, fl, msg, ml)) return -1;
    json_t *ep = json_object_get(spec, "epochs"), *st = json_object_get(spec, "steps");
    if ((ep != NULL) == (st != NULL)) return field_fail(field, fl, msg, ml, "spec.epochs", "give exactly one of epochs and steps");
    json_t *wo = json_object_get(spec, "workers");
    long workers = json_is_object(wo) ? (long)json_integer_value(json_object_get(wo, "max")) : train_spec_long(spec, "workers");
    if (json_is_object(wo) && workers < (long)json_integer_value(json_object_get(wo, "min")))
        return field_fail(field, fl, msg, ml, "spec.workers.max", "must be an integer in [workers.min, 64]");
    if (workers > train_spec_long(spec, "batch_size"))
        return field_fail(field, fl, msg, ml, "spec.workers",
                          "must not exceed batch_size (each worker takes a slice of every batch)");
    if (train_policies_validate(spec, field, fl, msg, ml)) return -1;
    if (json_object_get(spec, "search")) { /* model selection: every configuration must be valid */
        json_t *configs;
        if (mop_expand(spec, &configs, field, fl, msg, ml)) return -1;
        json_decref(configs);
    }
    return 0;
}

/* ---- what the server asks of a training spec (common/jobtypes.h) ---- */

int train_dataset_paths(const json_t *dataset, const char *prefix, job_path_fn fn, void *ctx)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)dataset, key, v)
    {
        if (!json_is_string(v) || sch_member_shape(&train_dataset_shape, key) != &file_s) continue;
        char field[256];
        snprintf(field, sizeof field, "%s.%s", prefix, key);
        int rc = fn(ctx, json_string_value(v), field, JOB_PATH_FILE);
        if (rc) return rc;
    }
    return 0;
}

static int paths(const json_t *spec, job_path_fn fn, void *ctx)
{
    if (train_spec_variant(spec) == TRAIN_PROGRAM) /* the program's code: a directory */
        return fn(ctx, json_string_value(json_object_get(json_object_get(spec, "program"), "workdir")), "spec.program.workdir",
                  JOB_PATH_DIR);
    return train_dataset_paths(json_object_get(spec, "dataset"), "spec.dataset", fn, ctx);
}

/* a gang: that many slots at once (elastic: at least min); both variants have the same workers */
static int slots(const json_t *spec)
{
    json_t *w = json_object_get(spec, "workers");
    return json_is_object(w) ? (int)json_integer_value(json_object_get(w, "min")) : (int)train_spec_long(spec, "workers");
}

/* epochs and steps against the tenant's limits; a program asks for neither, but for its ranks' memory
 * when it gives memory_mb (else it takes the tenant's max_memory_bytes) */
static void cost(const json_t *spec, job_cost *out)
{
    if (train_spec_variant(spec) == TRAIN_PROGRAM) {
        json_t *mb = json_object_get(json_object_get(spec, "resources"), "memory_mb");
        out->epochs = out->steps = (job_cost_item){-1, "spec.epochs", "epochs"};
        out->memory = (job_cost_item){json_is_integer(mb) ? (long long)json_integer_value(mb) * 1048576LL : -1,
                                      "spec.resources.memory_mb", "memory_mb x 1048576 ="};
        return;
    }
    json_t *ep = json_object_get(spec, "epochs"), *st = json_object_get(spec, "steps");
    out->epochs = (job_cost_item){json_is_integer(ep) ? (long long)json_integer_value(ep) : -1, "spec.epochs", "epochs"};
    out->steps = (job_cost_item){json_is_integer(st) ? (long long)json_integer_value(st) : -1, "spec.steps", "steps"};
}

/* the server's own checks of a submission: spec.trial is written by the server on a search's trials */
static int admit(const json_t *spec, char *field, size_t fl, char *msg, size_t ml)
{
    if (json_object_get(spec, "trial"))
        return field_fail(field, fl, msg, ml, "spec.trial",
                          "is set by gantry on a search's trials: give spec.search to run a search (docs/search.md)");
    return 0;
}

const job_spec train_job_spec = {
    .shape = &train_job_shape, .validate = train_spec_validate, .admit = admit, .slots = slots, .paths = paths, .cost = cost};
