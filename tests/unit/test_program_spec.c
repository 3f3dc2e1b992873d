/* test_program_spec.c - spec/program_spec: a program job's spec (valid specs, the defaults the
 * settings apply, every rule naming its field) and the training spec module's program variant. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testjson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/program_spec.h"
#include "spec/train_spec.h"

#define MIB (1024LL * 1024LL)

typedef int (*validate_fn)(const json_t *, char *, size_t, char *, size_t);

static void expect_with(validate_fn fn, const char *spec, const char *field)
{
    json_t *j = J(spec);
    char f[256] = "", m[512] = "";
    assert_int_equal(fn(j, f, sizeof f, m, sizeof m), -1);
    if (strcmp(f, field)) fail_msg("field %s, want %s (%s: %s)", f, field, spec, m);
    assert_true(strlen(m) > 0);
    json_decref(j);
}

static void expect_ok_with(validate_fn fn, const char *spec)
{
    json_t *j = J(spec);
    char f[256] = "", m[512] = "";
    if (fn(j, f, sizeof f, m, sizeof m)) fail_msg("%s refused: %s %s", spec, f, m);
    json_decref(j);
}

static void expect_field(const char *spec, const char *field)
{
    expect_with(program_spec_validate, spec, field);
}

static void expect_ok(const char *spec)
{
    expect_ok_with(program_spec_validate, spec);
}

#define PROG "'program':{'command':['python3','train.py'],'workdir':'pytorch'}"

static void test_valid_and_settings(void **state)
{
    (void)state;
    json_t *spec = J("{'program':{'command':['python3','train.py','--epochs','3'],'workdir':'pytorch','env':{'LR':'0.01',"
                     "'PATH':'/usr/bin','_x1':''}},'workers':{'min':1,'max':3},'max_runtime_s':3600,'grace_s':10,"
                     "'max_restarts':0,'rendezvous_timeout_s':5,'resources':{'memory_mb':4096,'processes':64,'open_files':100,"
                     "'cpus':1.5},"
                     "'register_model':{'output':'models/model.pt','format':'torchscript'},'model_name':'fashion-cnn'}");
    char f[256], m[512];
    if (program_spec_validate(spec, f, sizeof f, m, sizeof m)) fail_msg("%s %s", f, m);
    assert_int_equal(train_spec_variant(spec), TRAIN_PROGRAM);
    program_settings s;
    program_settings_get(spec, 0, &s);
    assert_int_equal(json_array_size(s.command), 4);
    assert_string_equal(s.workdir, "pytorch");
    assert_string_equal(json_string_value(json_object_get(s.env, "LR")), "0.01");
    assert_int_equal(s.min_workers, 1);
    assert_int_equal(s.max_workers, 3);
    assert_int_equal(s.max_runtime_s, 3600);
    assert_int_equal(s.grace_s, 10);
    assert_int_equal(s.max_restarts, 0);
    assert_int_equal(s.rendezvous_timeout_s, 5);
    assert_true(s.memory_bytes == 4096 * MIB);
    assert_int_equal(s.processes, 64);
    assert_int_equal(s.open_files, 100);
    assert_true(s.cpus == 1.5);
    assert_string_equal(s.register_output, "models/model.pt");
    assert_string_equal(s.register_format, "torchscript");
    assert_string_equal(s.model_name, "fashion-cnn");
    program_settings_get(spec, 1024 * MIB, &s); /* the tenant's max_memory_bytes caps memory_mb */
    assert_true(s.memory_bytes == 1024 * MIB);
    json_decref(spec);
}

static void test_defaults(void **state)
{
    (void)state;
    json_t *spec = J("{" PROG "}");
    char f[256], m[512];
    assert_int_equal(program_spec_validate(spec, f, sizeof f, m, sizeof m), 0);
    program_settings s;
    program_settings_get(spec, 0, &s);
    assert_null(s.env);
    assert_int_equal(s.min_workers, 1);
    assert_int_equal(s.max_workers, 1);
    assert_int_equal(s.max_runtime_s, 0);
    assert_int_equal(s.grace_s, 30);
    assert_int_equal(s.max_restarts, 3);
    assert_int_equal(s.rendezvous_timeout_s, 60);
    assert_true(s.memory_bytes == PROG_DEFAULT_MEMORY_MB * MIB); /* no tenant limit: 8192 MiB */
    assert_int_equal(s.processes, 1024);
    assert_true(s.cpus == 0); /* absent: the worker's slot share */
    assert_int_equal(s.open_files, 4096);
    assert_null(s.register_output);
    assert_null(s.register_format);
    assert_null(s.model_name);
    program_settings_get(spec, 3 * 1024 * MIB, &s); /* the tenant's max_memory_bytes is the default */
    assert_true(s.memory_bytes == 3 * 1024 * MIB);
    json_decref(spec);
    spec = J("{" PROG ",'workers':4,'register_model':{'output':'m.pt'}}");
    assert_int_equal(program_spec_validate(spec, f, sizeof f, m, sizeof m), 0);
    program_settings_get(spec, 0, &s);
    assert_int_equal(s.min_workers, 4);
    assert_int_equal(s.max_workers, 4);
    assert_string_equal(s.register_format, "torchscript");
    json_decref(spec);
    json_t *plain = J("{'model':{}}");
    assert_int_equal(train_spec_variant(plain), TRAIN_BUILTIN);
    json_decref(plain);
}

static void test_program_rules(void **state)
{
    (void)state;
    expect_field("{}", "spec.program");
    expect_field("{'program':[]}", "spec.program");
    expect_field("{'program':{'workdir':'w'}}", "spec.program.command");
    expect_field("{'program':{'command':[],'workdir':'w'}}", "spec.program.command");
    expect_field("{'program':{'command':'python3 train.py','workdir':'w'}}", "spec.program.command");
    expect_field("{'program':{'command':['python3','train.py',3],'workdir':'w'}}", "spec.program.command[2]");
    expect_field("{'program':{'command':['','train.py'],'workdir':'w'}}", "spec.program.command[0]");
    expect_field("{'program':{'command':['a']}}", "spec.program.workdir");
    expect_field("{'program':{'command':['a'],'workdir':''}}", "spec.program.workdir");
    expect_field("{'program':{'command':['a'],'workdir':7}}", "spec.program.workdir");
    expect_field("{'program':{'command':['a'],'workdir':'w','cwd':'x'}}", "spec.program.cwd");
    expect_field("{'program':{'command':['a'],'workdir':'w','env':[]}}", "spec.program.env");
    expect_field("{'program':{'command':['a'],'workdir':'w','env':{'LR':0.01}}}", "spec.program.env.LR");
    expect_ok("{'program':{'command':['a',''],'workdir':'w','env':{}}}"); /* an empty argument is an argument */
}

static void test_env_names(void **state)
{
    (void)state;
    static const char *const refused[] = {"RANK",
                                          "WORLD_SIZE",
                                          "MASTER_ADDR",
                                          "MASTER_PORT",
                                          "LOCAL_RANK",
                                          "LOCAL_WORLD_SIZE",
                                          "GANTRY_JOB_ID",
                                          "GANTRY_OUTPUT_DIR",
                                          "CUDA_VISIBLE_DEVICES",
                                          "PWD",
                                          "1X",
                                          "A-B",
                                          "A B",
                                          "",
                                          "LR=1",
                                          NULL};
    for (int i = 0; refused[i]; i++) {
        char spec[256], field[128];
        snprintf(spec, sizeof spec, "{'program':{'command':['a'],'workdir':'w','env':{'%s':'v'}}}", refused[i]);
        snprintf(field, sizeof field, "spec.program.env.%s", refused[i]);
        expect_field(spec, field);
        assert_non_null(program_env_refusal(refused[i]));
    }
    static const char *const taken[] = {"PATH", "HOME", "LANG", "LR", "_", "a1", "NCCL_DEBUG", "RANKS", "OMP_NUM_THREADS", NULL};
    for (int i = 0; taken[i]; i++)
        assert_null(program_env_refusal(taken[i]));
    char many[8192] = "{'program':{'command':['a'],'workdir':'w','env':{";
    for (int i = 0; i <= PROG_MAX_ENV; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%s'V%d':''", i ? "," : "", i);
    strcat(many, "}}}");
    expect_field(many, "spec.program.env");
}

static void test_other_rules(void **state)
{
    (void)state;
    expect_field("{" PROG ",'workers':0}", "spec.workers");
    expect_field("{" PROG ",'workers':65}", "spec.workers");
    expect_field("{" PROG ",'workers':'2'}", "spec.workers");
    expect_field("{" PROG ",'workers':{'min':1}}", "spec.workers.max");
    expect_field("{" PROG ",'workers':{'min':3,'max':2}}", "spec.workers.max");
    expect_field("{" PROG ",'max_runtime_s':0}", "spec.max_runtime_s");
    expect_field("{" PROG ",'grace_s':0}", "spec.grace_s");
    expect_field("{" PROG ",'grace_s':3601}", "spec.grace_s");
    expect_field("{" PROG ",'max_restarts':-1}", "spec.max_restarts");
    expect_field("{" PROG ",'max_restarts':101}", "spec.max_restarts");
    expect_field("{" PROG ",'rendezvous_timeout_s':0}", "spec.rendezvous_timeout_s");
    expect_field("{" PROG ",'resources':{'memory_mb':15}}", "spec.resources.memory_mb");
    expect_field("{" PROG ",'resources':{'memory_mb':1.5}}", "spec.resources.memory_mb");
    expect_field("{" PROG ",'resources':{'processes':0}}", "spec.resources.processes");
    expect_field("{" PROG ",'resources':{'open_files':1048577}}", "spec.resources.open_files");
    expect_field("{" PROG ",'resources':{'cpus':0}}", "spec.resources.cpus");
    expect_field("{" PROG ",'resources':{'cpus':-1}}", "spec.resources.cpus");
    expect_field("{" PROG ",'resources':{'cpus':'2'}}", "spec.resources.cpus");
    expect_field("{" PROG ",'resources':{'cpus':1025}}", "spec.resources.cpus");
    expect_ok("{" PROG ",'resources':{'cpus':2}}");
    expect_ok("{" PROG ",'resources':{'cpus':0.5}}");
    expect_field("{" PROG ",'register_model':{}}", "spec.register_model.output");
    expect_field("{" PROG ",'register_model':{'output':'m.pt','format':'onnx'}}", "spec.register_model.format");
    static const char *const outputs[] = {"/gantry/output/m.pt", "../m.pt", "a/../m.pt", "./m.pt", "a//m.pt", "a/", NULL};
    for (int i = 0; outputs[i]; i++) {
        char spec[256];
        snprintf(spec, sizeof spec, "{" PROG ",'register_model':{'output':'%s'}}", outputs[i]);
        expect_field(spec, "spec.register_model.output");
    }
    expect_ok("{" PROG ",'register_model':{'output':'a/b/m.pt'}}");
    expect_field("{" PROG ",'model_name':'m'}", "spec.model_name");
    expect_field("{" PROG ",'register_model':{'output':'m.pt'},'model_name':''}", "spec.model_name");
    expect_field("{" PROG ",'register_model':{'output':'m.pt'},'model_name':'a\\u001b[2Jb'}", "spec.model_name");
    expect_field("{" PROG ",'epochs':3}", "spec.epochs"); /* not a program member */
}

/* ---- the training spec module's program variant (spec/train_spec.c) ---- */

typedef struct {
    char path[256], field[128];
    job_path_kind kind;
    int n;
} seen_paths;

static int collect(void *ctx, const char *path, const char *field, job_path_kind kind)
{
    seen_paths *s = ctx;
    snprintf(s->path, sizeof s->path, "%s", path);
    snprintf(s->field, sizeof s->field, "%s", field);
    s->kind = kind;
    s->n++;
    return 0;
}

static void test_training_variant(void **state)
{
    (void)state;
    const job_spec *js = &train_job_spec;
    expect_ok_with(js->validate, "{" PROG ",'workers':2,'max_runtime_s':3600,'grace_s':30}");
    /* built-in training's members are refused by name, whichever comes first */
    static const char *const builtin[] = {"model", "dataset", "optimizer",        "schedule", "batch_size", "epochs",
                                          "steps", "seed",    "eval_every_steps", "policies", "search",     NULL};
    for (int i = 0; builtin[i]; i++) {
        char spec[256], field[64];
        snprintf(spec, sizeof spec, "{" PROG ",'%s':1}", builtin[i]);
        snprintf(field, sizeof field, "spec.%s", builtin[i]);
        expect_with(js->validate, spec, field);
    }
    expect_with(js->validate, "{'dataset':{'name':'fashion-mnist'}," PROG "}", "spec.dataset");
    expect_with(js->validate, "{" PROG ",'no_such_field':1}", "spec.no_such_field");
    expect_with(js->validate, "{'program':{'command':['a'],'workdir':'w','env':{'RANK':'1'}}}", "spec.program.env.RANK");
    expect_with(js->validate, "{'program':null}", "spec.program");
    expect_with(js->validate, "[]", "spec"); /* not an object: built-in training's answer */

    json_t *spec = J("{" PROG ",'workers':{'min':2,'max':4}}");
    assert_int_equal(js->slots(spec), 2); /* a gang of min ranks */
    seen_paths seen = {.n = 0};
    assert_int_equal(js->paths(spec, collect, &seen), 0);
    assert_int_equal(seen.n, 1);
    assert_string_equal(seen.path, "pytorch");
    assert_string_equal(seen.field, "spec.program.workdir");
    assert_int_equal(seen.kind, JOB_PATH_DIR);
    job_cost c = {.epochs = {-1, NULL, NULL}, .steps = {-1, NULL, NULL}, .memory = {-1, NULL, NULL}}; /* as the server */
    js->cost(spec, &c);
    assert_true(c.epochs.asked < 0 && c.steps.asked < 0); /* a program asks for no epochs or steps */
    assert_true(c.memory.asked < 0);                      /* nor memory without memory_mb: it takes the tenant's */
    json_decref(spec);
    spec = J("{" PROG ",'workers':3,'resources':{'memory_mb':512}}");
    assert_int_equal(js->slots(spec), 3);
    js->cost(spec, &c);
    assert_true(c.memory.asked == 512 * MIB);
    assert_string_equal(c.memory.field, "spec.resources.memory_mb");
    json_decref(spec);

    /* the API document: TrainingSpec is either variant, the program one requiring "program" */
    json_t *doc = sch_json(js->shape), *alts = json_object_get(doc, "oneOf");
    assert_int_equal(json_array_size(alts), 2);
    json_t *prog = json_array_get(alts, 1);
    assert_string_equal(json_string_value(json_array_get(json_object_get(prog, "required"), 0)), "program");
    json_t *env = json_object_get(json_object_get(json_object_get(prog, "properties"), "program"), "properties");
    assert_non_null(json_object_get(env, "env"));
    json_t *grace = json_object_get(json_object_get(prog, "properties"), "grace_s");
    assert_int_equal(json_integer_value(json_object_get(grace, "default")), 30);
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_and_settings), cmocka_unit_test(test_defaults),    cmocka_unit_test(test_program_rules),
        cmocka_unit_test(test_env_names),          cmocka_unit_test(test_other_rules), cmocka_unit_test(test_training_variant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
