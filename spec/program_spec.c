/* program_spec.c - a program job's spec (program_spec.h): its shape, the rules between fields, the settings with
 * their defaults.  The shape is the one source: validation, the defaults settings_get applies and
 * the API document's schema all come from it. */
#include "spec/program_spec.h"
#include "common/fielderr.h"

#include <stdio.h>
#include <string.h>

#include "common/jobtypes.h"
#include "common/utf8.h"
#include "spec/search_spec.h"
#include "spec/serve_signature.h"

#define MIB (1024LL * 1024LL)

/* ---- the shape (common/schema.h) ---- */

static const sch arg_s = {SCH_STR, SCH_IN(0, 4096), .desc = "one argument"};
static const sch command_s = {SCH_ARRAY, SCH_IN(1, PROG_MAX_ARGS), .items = &arg_s,
                              .desc = "the program and its arguments (argv, no shell); argv[0] without '/' is looked up on the "
                                      "sandbox's PATH (/usr/local/bin:/usr/bin:/bin): \"python3\" is the host's, give "
                                      "\"/usr/bin/python3\" for Debian's",
                              .msg = "must be a non-empty array of strings (the program and its arguments)"};
static const sch workdir_s = {SCH_STR, SCH_IN(1, 4096),
                              .desc = "the program's directory (its code), read-only, where it starts: relative to the tenant's "
                                      "first root, or absolute under one of its roots; must be a directory",
                              .msg = "must be a directory under your tenant's roots (relative to the first root, or absolute)"};
static const sch env_value_s = {SCH_STR, SCH_IN(0, 65536), .desc = "the variable's value"};
static const sch env_s = {SCH_OBJECT, .flags = SCH_OPEN | SCH_HI, .hi = PROG_MAX_ENV, .items = &env_value_s,
                          .desc = "environment variables {NAME: value}: names [A-Za-z_][A-Za-z0-9_]*, not the ones gantry sets "
                                  "(RANK, WORLD_SIZE, MASTER_*, LOCAL_*, GANTRY_*, CUDA_VISIBLE_DEVICES, PWD)"};
static const sch_member program_m[] = {{"command", &command_s, 1}, {"workdir", &workdir_s, 1}, {"env", &env_s, 0}, {0}};
const sch program_shape = {SCH_OBJECT, .members = program_m, .desc = "the team's program, run as every rank in a sandbox"};

static const sch count_s = {SCH_INT, SCH_IN(1, PROG_MAX_RANKS)};
static const sch_member elastic_m[] = {{"min", &count_s, 1}, {"max", &count_s, 1}, {0}};
static const sch elastic_s = {SCH_OBJECT, .members = elastic_m,
                              .desc = "elastic: starts with at least min ranks, grows to max when workers free up (a new "
                                      "generation from the checkpoint at each resize)"};
static const sch *const workers_alts[] = {&count_s, &elastic_s, NULL};
static const sch workers_s = {SCH_ONEOF, .alts = workers_alts, .dflt = "1",
                              .desc = "ranks (one per worker, WORLD_SIZE), or {min, max}",
                              .msg = "must be an integer in [1, 64] (the number of ranks) or {\"min\", \"max\"} (elastic)"};
const sch program_runtime_shape = {SCH_INT, SCH_IN(1, 315360000),
                                   .desc =
                                       "wall clock of a generation, seconds: the ranks are stopped (SIGTERM, then SIGKILL after "
                                       "grace_s) and the job fails; absent: none (the tenant's max_runtime_s still applies)"};
const sch program_grace_shape = {SCH_INT, SCH_IN(1, 3600), .dflt = "30",
                                 .desc = "seconds between SIGTERM and SIGKILL when ranks are stopped (cancel, preemption, resize, "
                                         "a lost rank): time to write a checkpoint"};
static const sch restarts_s = {SCH_INT, SCH_IN(0, 100), .dflt = "3",
                               .desc = "new generations from the checkpoint after a lost rank (killed by a signal, worker "
                                       "lost) before the job fails; a non-zero exit fails it at once"};
static const sch rendezvous_s = {SCH_INT, SCH_IN(1, 3600), .dflt = "60", .desc = "how long a gang waits for its members"};
static const sch memory_s = {SCH_INT, SCH_IN(16, 1LL << 30),
                             .desc = "memory of each rank, MiB (its processes together; over it the rank is killed and the job "
                                     "fails); default: the tenant's max_memory_bytes, else 8192; at most the tenant's "
                                     "max_memory_bytes"};
static const sch processes_s = {SCH_INT, SCH_IN(16, 1048576), .dflt = "1024",
                                .desc = "processes and threads of each rank, at most"};
static const sch open_files_s = {SCH_INT, SCH_IN(16, 1048576), .dflt = "4096", .desc = "open files of each process, at most"};
static const sch cpus_s = {SCH_NUM, SCH_IN(0.01, PROG_MAX_CPUS),
                           .desc = "CPU time of each rank, in cores (1.5: one and a half cores' time, all its threads "
                                   "together; a CFS quota); default and at most: the worker slot's share of the machine "
                                   "(its --threads, else every core)"};
static const sch_member resources_m[] = {
    {"memory_mb", &memory_s, 0}, {"processes", &processes_s, 0}, {"open_files", &open_files_s, 0}, {"cpus", &cpus_s, 0}, {0}};
const sch program_resources_shape = {SCH_OBJECT, .members = resources_m, .desc = "each rank's limits"};
static const sch output_s = {SCH_STR, SCH_IN(1, 4096), .desc = "a file the program writes under GANTRY_OUTPUT_DIR, relative to it"};
static const char *const format_v[] = {"torchscript", NULL};
static const sch format_s = {SCH_STR, .values = format_v, .dflt = "\"torchscript\"",
                             .desc = "torchscript: saved by torch.jit.save (the inference job type serves it)"};
static const sch reg_metadata_s = {SCH_OBJECT, .flags = SCH_OPEN,
                                   .desc =
                                       "the model's inputs and outputs, description and metrics, as an upload's metadata has them "
                                       "(docs/inference.md): an inference job can serve the version only with it",
                                   .msg = "must be an object {inputs, outputs?, description?, metrics?}"};
static const sch_member register_m[] = {{"output", &output_s, 1}, {"format", &format_s, 0}, {"metadata", &reg_metadata_s, 0}, {0}};
static const sch register_s = {SCH_OBJECT, .members = register_m,
                               .desc = "when the job succeeds, this output file becomes the next version of model_name (else the "
                                       "job's name) in the tenant's registry, with result.metrics (a search: the file of "
                                       "its best trial that finished, with that trial's metrics)"};
static const sch model_name_s = {SCH_STR, SCH_IN(1, 200),
                                 .desc = "the registered model's name (with register_model); default: the job's name"};
static const sch_member spec_m[] = {{"program", &program_shape, 1},
                                    {"workers", &workers_s, 0},
                                    {"max_runtime_s", &program_runtime_shape, 0},
                                    {"grace_s", &program_grace_shape, 0},
                                    {"max_restarts", &restarts_s, 0},
                                    {"rendezvous_timeout_s", &rendezvous_s, 0},
                                    {"resources", &program_resources_shape, 0},
                                    {"register_model", &register_s, 0},
                                    {"model_name", &model_name_s, 0},
                                    {"search", &search_shape, 0},
                                    {"trial", &search_trial_shape, 0},
                                    {0}};
const sch program_spec_shape = {SCH_OBJECT, .members = spec_m,
                                .desc = "A training job running the team's own program (a PyTorch script) as every rank, "
                                        "sandboxed (docs/programs.md).  Rules beyond the schema: command[0] non-empty, env "
                                        "names not gantry's, workers.max >= workers.min, register_model.output relative "
                                        "without '..', model_name only with register_model; workdir a directory under the "
                                        "tenant's roots, memory_mb within the tenant's max_memory_bytes; with search, each "
                                        "parameter's upper-cased name not one gantry sets (register_model then registers the "
                                        "output of the best trial that finished); trial is gantry's (a search's trials)."};

/* ---- the rules between fields ---- */

const char *program_env_refusal(const char *name)
{
    static const char *const exact[] = {"RANK", "WORLD_SIZE", "CUDA_VISIBLE_DEVICES", "PWD", NULL};
    static const char *const prefixes[] = {"MASTER_", "LOCAL_", "GANTRY_", NULL};
    bool ok = name[0] && !(name[0] >= '0' && name[0] <= '9');
    for (const char *p = name; ok && *p; p++)
        ok = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_';
    if (!ok) return "must be a variable name: letters, digits and _, not starting with a digit";
    for (int i = 0; exact[i]; i++)
        if (strcmp(name, exact[i]) == 0) goto gantrys;
    for (int i = 0; prefixes[i]; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) goto gantrys;
    return NULL;
gantrys:
    return "is set by gantry (RANK, WORLD_SIZE, MASTER_*, LOCAL_*, GANTRY_*, CUDA_VISIBLE_DEVICES, PWD); choose another name";
}

/* a plain relative path: names separated by single '/', none of them "." or ".." */
static bool plain_relative(const char *p)
{
    if (p[0] == '/') return false;
    for (const char *s = p;;) {
        size_t n = strcspn(s, "/");
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) return false;
        if (!s[n]) return true;
        s += n + 1;
    }
}

int program_spec_validate(const json_t *spec, char *field, size_t fl, char *msg, size_t ml)
{
    if (sch_check(&program_spec_shape, spec, "spec", field, fl, msg, ml)) return -1;
    json_t *program = json_object_get(spec, "program");
    if (!json_string_value(json_array_get(json_object_get(program, "command"), 0))[0])
        return field_fail(field, fl, msg, ml, "spec.program.command[0]", "must name the program (a non-empty string)");
    const char *name;
    json_t *value;
    json_object_foreach(json_object_get(program, "env"), name, value)
    {
        const char *why = program_env_refusal(name);
        if (!why) continue;
        char cut[160];
        utf8_copy(cut, sizeof cut, name); /* a long name cut on a whole character */
        snprintf(field, fl, "spec.program.env.%s", cut);
        snprintf(msg, ml, "%s", why);
        return -1;
    }
    json_t *wo = json_object_get(spec, "workers");
    if (json_is_object(wo) && json_integer_value(json_object_get(wo, "max")) < json_integer_value(json_object_get(wo, "min")))
        return field_fail(field, fl, msg, ml, "spec.workers.max", "must be an integer in [workers.min, 64]");
    json_t *reg = json_object_get(spec, "register_model");
    if (reg && !plain_relative(json_string_value(json_object_get(reg, "output"))))
        return field_fail(field, fl, msg, ml, "spec.register_model.output",
                          "must be a path relative to GANTRY_OUTPUT_DIR (names separated by '/', no '.' or '..')");
    json_t *meta = json_object_get(reg, "metadata");
    model_sig sig;
    char sfield[128];
    if (meta && sig_parse(meta, &sig, sfield, sizeof sfield, msg, ml)) {
        snprintf(field, fl, "spec.register_model.%s", sfield);
        return -1;
    }
    json_t *search = json_object_get(spec, "search");
    if (search && search_spec_validate(search, field, fl, msg, ml)) return -1;
    const char *pname;
    json_object_foreach(json_object_get(search, "space"), pname, value)
    {
        char var[SEARCH_NAME_MAX + 1];
        size_t i = 0;
        for (; pname[i] && i < SEARCH_NAME_MAX; i++)
            var[i] = (char)(pname[i] >= 'a' && pname[i] <= 'z' ? pname[i] - 'a' + 'A' : pname[i]);
        var[i] = '\0';
        if (program_env_refusal(var)) {
            snprintf(field, fl, "spec.search.space.%s", pname);
            snprintf(msg, ml,
                     "becomes the trial's variable %s, which gantry sets (RANK, WORLD_SIZE, MASTER_*, LOCAL_*, "
                     "GANTRY_*, CUDA_VISIBLE_DEVICES, PWD): choose another name",
                     var);
            return -1;
        }
    }
    json_t *model_name = json_object_get(spec, "model_name");
    if (model_name && !reg)
        return field_fail(field, fl, msg, ml, "spec.model_name", "names the registered model: give register_model too");
    if (utf8_has_control(json_string_value(model_name)))
        return field_fail(field, fl, msg, ml, "spec.model_name", "%s", JOB_NO_CONTROL_MSG);
    return 0;
}

/* ---- the settings, defaults from the shape ---- */

void program_settings_get(const json_t *spec, long long tenant_max_memory_bytes, program_settings *s)
{
    json_t *program = json_object_get(spec, "program"), *wo = json_object_get(spec, "workers"),
           *res = json_object_get(spec, "resources"), *reg = json_object_get(spec, "register_model");
    memset(s, 0, sizeof(*s));
    s->command = json_object_get(program, "command");
    s->workdir = json_string_value(json_object_get(program, "workdir"));
    s->env = json_object_get(program, "env");
    s->min_workers = json_is_object(wo) ? (int)json_integer_value(json_object_get(wo, "min"))
                                        : (int)sch_number(&program_spec_shape, spec, "workers", 1);
    s->max_workers = json_is_object(wo) ? (int)json_integer_value(json_object_get(wo, "max")) : s->min_workers;
    s->max_runtime_s = (long)sch_number(&program_spec_shape, spec, "max_runtime_s", 0);
    s->grace_s = (int)sch_number(&program_spec_shape, spec, "grace_s", 0);
    s->max_restarts = (int)sch_number(&program_spec_shape, spec, "max_restarts", 0);
    s->rendezvous_timeout_s = (int)sch_number(&program_spec_shape, spec, "rendezvous_timeout_s", 0);
    long long cap = tenant_max_memory_bytes > 0 ? tenant_max_memory_bytes : 0;
    json_t *mb = json_object_get(res, "memory_mb");
    s->memory_bytes = json_is_integer(mb) ? (long long)json_integer_value(mb) * MIB : cap ? cap : PROG_DEFAULT_MEMORY_MB * MIB;
    if (cap && s->memory_bytes > cap) s->memory_bytes = cap;
    s->processes = (int)sch_number(&program_resources_shape, res, "processes", 0);
    s->open_files = (int)sch_number(&program_resources_shape, res, "open_files", 0);
    json_t *cpus = json_object_get(res, "cpus");
    s->cpus = json_is_number(cpus) ? json_number_value(cpus) : 0;
    s->register_output = json_string_value(json_object_get(reg, "output"));
    s->register_format = reg ? json_string_value(json_object_get(reg, "format")) : NULL;
    if (reg && !s->register_format) s->register_format = format_v[0];
    s->register_metadata = json_object_get(reg, "metadata");
    s->model_name = json_string_value(json_object_get(spec, "model_name"));
}
