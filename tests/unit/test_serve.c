/* test_serve.c - workers/serve: inference spec, the request scanner, batched OIP replies. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testjson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "workers/serve/scan.h"
#include "workers/serve/serve.h"
#include "workers/train/ckpt.h"
#include "workers/train/model.h"

static void expect_field(const char *spec, const char *field)
{
    json_t *j = J(spec);
    char f[128] = "", m[256] = "";
    assert_int_equal(serve_spec_validate(j, f, sizeof f, m, sizeof m), -1);
    if (strcmp(f, field)) fail_msg("field %s, want %s (%s)", f, field, spec);
    assert_true(strlen(m) > 0);
    json_decref(j);
}

static void test_spec(void **state)
{
    (void)state;
    json_t *ok = J("{'model':'m','slo':{'latency_ms':50,'percentile':95},'replicas':{'min':2,'max':5},'max_batch':8}");
    char f[128], m[256];
    assert_int_equal(serve_spec_validate(ok, f, sizeof f, m, sizeof m), 0);
    serve_settings s;
    serve_settings_get(ok, &s);
    assert_string_equal(s.model, "m");
    assert_true(s.slo_ms == 50 && s.slo_q == 0.95);
    assert_int_equal(s.min_replicas, 2);
    assert_int_equal(s.max_replicas, 5);
    assert_int_equal(s.max_batch, 8);
    assert_int_equal(s.queue_limit, 1000); /* defaults */
    assert_int_equal(s.timeout_ms, 5000);
    assert_true(s.service_ms == 0 && s.weight == 1 && s.batch_delay_ms == 2);
    json_decref(ok);
    ok = J("{'model':'m','replicas':{'min':2},'service_ms':4.5}");
    assert_int_equal(serve_spec_validate(ok, f, sizeof f, m, sizeof m), 0);
    serve_settings_get(ok, &s);
    assert_true(s.service_ms == 4.5);
    assert_int_equal(s.max_replicas, 2); /* max defaults to min */
    json_decref(ok);
    ok = J("{'model':'m','replicas':{'min':0,'max':2},'idle_s':30}"); /* scale to zero */
    assert_int_equal(serve_spec_validate(ok, f, sizeof f, m, sizeof m), 0);
    serve_settings_get(ok, &s);
    assert_true(s.min_replicas == 0 && s.max_replicas == 2 && s.idle_s == 30 && s.cold_start_ms == 60000);
    assert_int_equal(serve_job_spec.slots(ok), 1); /* it starts with one replica */
    json_decref(ok);
    ok = J("{'model':'m','replicas':3}");
    serve_settings_get(ok, &s);
    assert_int_equal(s.min_replicas, 3);
    assert_int_equal(s.max_replicas, 3);
    assert_true(s.slo_ms == 100 && s.slo_q == 0.99);
    json_decref(ok);
    expect_field("{}", "spec.model");
    expect_field("{'model':''}", "spec.model");
    expect_field("{'model':'m','version':0}", "spec.version");
    expect_field("{'model':'m','slo':3}", "spec.slo");
    expect_field("{'model':'m','slo':{'latency_ms':0}}", "spec.slo.latency_ms");
    expect_field("{'model':'m','slo':{'percentile':40}}", "spec.slo.percentile");
    expect_field("{'model':'m','replicas':0}", "spec.replicas");
    expect_field("{'model':'m','replicas':{'min':-1,'max':2}}", "spec.replicas.min");
    expect_field("{'model':'m','replicas':{'min':0}}", "spec.replicas.max"); /* scale to zero needs a max */
    expect_field("{'model':'m','replicas':{'min':0,'max':2},'idle_s':0}", "spec.idle_s");
    expect_field("{'model':'m','replicas':{'min':0,'max':2},'cold_start_ms':0}", "spec.cold_start_ms");
    expect_field("{'model':'m','replicas':{'min':2,'max':1}}", "spec.replicas.max");
    expect_field("{'model':'m','weight':-1}", "spec.weight");
    expect_field("{'model':'m','max_batch':2000}", "spec.max_batch");
    expect_field("{'model':'m','batch_delay_ms':-1}", "spec.batch_delay_ms");
    expect_field("{'model':'m','queue_limit':0}", "spec.queue_limit");
    expect_field("{'model':'m','timeout_ms':0}", "spec.timeout_ms");
    expect_field("{'model':'m','service_ms':0}", "spec.service_ms");
    expect_field("{'model':'m','max_batches':8}", "spec.max_batches"); /* misspelt: refused, not ignored */
}

static void test_scan(void **state)
{
    (void)state;
    size_t b, e;
    const char *s = "{\"id\":\"x \\\"data\\\" [\", \"inputs\" : [ {\"name\":\"data\",\"shape\":[2,2],\"data\": [[1, 2.5],"
                    "[-3e2 ,4]] , \"datatype\":\"FP32\"}, {\"data\":[9]}]}";
    assert_int_equal(scan_data(s, strlen(s), &b, &e), 0);
    assert_memory_equal(s + b, "[[1, 2.5],[-3e2 ,4]]", e - b);
    float out[8];
    size_t n;
    assert_int_equal(scan_numbers(s + b, e - b, out, 8, &n), 0);
    assert_int_equal(n, 4);
    assert_true(out[0] == 1 && out[1] == 2.5f && out[2] == -300 && out[3] == 4);
    assert_int_equal(scan_numbers(s + b, e - b, out, 3, &n), -1); /* overflow */
    const char *bad[] = {"",
                         "{",
                         "{\"inputs\":[{\"data\":[1,2}]}",
                         "{\"inputs\":{\"data\":[1]}}",
                         "{\"inputs\":[{\"dat\":[1]}]}",

                         "{\"x\":\"unterminated",
                         "{\"x\":\"\\\xc3\xa9\",\"inputs\":[{\"data\":[1]}]}", /* JSONTestSuite n_string_escaped_emoji */
                         "{\"x\":\"\\q\",\"inputs\":[{\"data\":[1]}]}",
                         "{\"x\":\"\\u12\",\"inputs\":[{\"data\":[1]}]}",
                         "{\"x\":\"\\",
                         "[1,2]",
                         "{\"inputs\":[{\"data\":[tru]}]}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (scan_data(bad[i], strlen(bad[i]), &b, &e) == 0) fail_msg("accepted %s", bad[i]);
    /* what follows the data is jansson's to check (the caller parses the rest) */
    const char *trunc = "{\"inputs\":[{\"data\":[1,2]";
    assert_int_equal(scan_data(trunc, strlen(trunc), &b, &e), 0);
    /* an array of numbers' grammar is the reader's to check: the skipper finds its end */
    const char *loose = "{\"inputs\":[{\"data\":[1 2,,]}]}";
    assert_int_equal(scan_data(loose, strlen(loose), &b, &e), 0);
    assert_memory_equal(loose + b, "[1 2,,]", e - b);
    const char *nums[] = {"[1,\"2\"]", "[1,nan]", "[1e999]", "[1,{}]", "[true]", "[1 2]", "[1,,2]", "[1,]", "[[1]"};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        assert_int_equal(scan_numbers(nums[i], strlen(nums[i]), out, 8, &n), -1);
}

/* a 4-input, 3-class linear model whose class is the argmax of the first three inputs */
static const char *model_file(void)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/gantry-serve-test-%d.model", (int)getpid());
    json_t *arch = J("{'input':[1,1,4],'layers':[{'type':'dense','units':3}]}");
    char err[256];
    train_model *m = train_model_create(arch, train_backend_cpu(), 1, 8, err, sizeof err);
    assert_non_null(m);
    train_param *W = m->params[0], *bias = m->params[1];
    for (size_t i = 0; i < W->n; i++)
        W->w[i] = 0;
    for (int c = 0; c < 3; c++) /* W is units x inputs (row-major): input c -> class c */
        W->w[c * 4 + c] = 10;
    for (size_t i = 0; i < bias->n; i++)
        bias->w[i] = 0;
    train_ckpt_state st = {0};
    assert_int_equal(train_ckpt_save(path, m, NULL, &st, err, sizeof err), 0);
    train_model_free(m);
    json_decref(arch);
    return path;
}

static void test_batch(void **state)
{
    (void)state;
    char err[256];
    serve_model *m = serve_model_load(model_file(), 4, err, sizeof err);
    if (!m) fail_msg("%s", err);
    assert_int_equal(serve_model_in_size(m), 4);
    assert_int_equal(serve_model_out_size(m), 3);
    const char *bodies[] = {
        "{\"id\":\"a\",\"inputs\":[{\"name\":\"x\",\"shape\":[2,4],\"datatype\":\"FP32\",\"data\":[[0,1,0,0],[1,0,0,0]]}]}",
        "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[0,0,1,5]}]}",
        "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,5],\"data\":[0,0,1,5,1]}]}",                     /* wrong sample size */
        "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,4],\"data\":[0,0,1,5]}]}",                       /* too few numbers */
        "not json",                                                                                 /* */
        "{\"inputs\":[{\"name\":\"x\",\"shape\":[3,4],\"data\":[[0,0,1,0],[0,1,0,0],[1,0,0,0]]}]}", /* next pass */
        "{\"inputs\":[{\"name\":\"x\",\"shape\":[5,4],\"data\":[]}]}",                              /* more than capacity */
        "{\"inputs\":[{\"shape\":[1,4],\"datatype\":\"INT8\",\"data\":[0,0,1,0]}]}",
    };
    int n = sizeof bodies / sizeof bodies[0];
    serve_request reqs[8];
    for (int i = 0; i < n; i++)
        reqs[i] = (serve_request){.body = bodies[i], .len = strlen(bodies[i])};
    serve_batch(m, "lin", 3, reqs, n);
    int want[] = {200, 200, 400, 400, 400, 200, 400, 400};
    for (int i = 0; i < n; i++)
        if (reqs[i].status != want[i]) fail_msg("request %d: status %d (%s)", i, reqs[i].status, reqs[i].err);
    json_t *r0 = json_loads(reqs[0].reply, 0, NULL);
    assert_non_null(r0);
    assert_string_equal(json_string_value(json_object_get(r0, "model_name")), "lin");
    assert_string_equal(json_string_value(json_object_get(r0, "model_version")), "3");
    assert_string_equal(json_string_value(json_object_get(r0, "id")), "a");
    json_t *labels = json_object_get(json_array_get(json_object_get(r0, "outputs"), 1), "data");
    assert_int_equal(json_integer_value(json_array_get(labels, 0)), 1);
    assert_int_equal(json_integer_value(json_array_get(labels, 1)), 0);
    json_decref(r0);
    json_t *r1 = json_loads(reqs[1].reply, 0, NULL), *r5 = json_loads(reqs[5].reply, 0, NULL);
    assert_int_equal(
        json_integer_value(json_array_get(json_object_get(json_array_get(json_object_get(r1, "outputs"), 1), "data"), 0)), 2);
    labels = json_object_get(json_array_get(json_object_get(r5, "outputs"), 1), "data");
    for (int i = 0; i < 3; i++)
        assert_int_equal(json_integer_value(json_array_get(labels, (size_t)i)), 2 - i);
    json_decref(r1);
    json_decref(r5);
    assert_non_null(strstr(reqs[2].err, "4 values per sample"));
    assert_non_null(strstr(reqs[3].err, "inputs[0].data"));
    assert_non_null(strstr(reqs[6].err, "[1, 4]"));
    assert_non_null(strstr(reqs[7].err, "datatype"));
    for (int i = 0; i < n; i++)
        free(reqs[i].reply);
    /* inputs so large that the outputs overflow: a 400, never NaN in a reply */
    const char *huge = "{\"inputs\":[{\"shape\":[1,4],\"data\":[3e38,-3e38,3e38,0]}]}";
    serve_request hr = {.body = huge, .len = strlen(huge)};
    serve_batch(m, "lin", 3, &hr, 1);
    assert_int_equal(hr.status, 400);
    assert_null(hr.reply);
    assert_non_null(strstr(hr.err, "overflow"));
    serve_model_free(m);
    assert_null(serve_model_load("/nonexistent.model", 4, err, sizeof err));
    unlink(model_file());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec),
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
