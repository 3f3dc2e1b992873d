/* test_signature.c - spec/serve_signature.c: an upload's metadata read into a model_sig, each
 * refusal naming its field, and sig_to_json reading back. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testjson.h"

#include <stdio.h>
#include <string.h>

#include "spec/serve_signature.h"

static void expect_refused(const char *meta, const char *field, const char *msg_part)
{
    json_t *j = J(meta);
    model_sig s;
    char f[128] = "", m[256] = "";
    if (sig_parse(j, &s, f, sizeof f, m, sizeof m) != -1) fail_msg("accepted %s", meta);
    if (strcmp(f, field)) fail_msg("field %s, want %s (%s: %s)", f, field, meta, m);
    if (!strstr(m, msg_part)) fail_msg("message '%s' lacks '%s'", m, msg_part);
    json_decref(j);
}

static void test_parse(void **state)
{
    (void)state;
    json_t *j =
        J("{'inputs':[{'name':'x','datatype':'FP32','shape':[-1,3,224,224]},{'name':'ids','datatype':'INT64','shape':[-1,-1]}],"
          "'outputs':[{'name':'logits','datatype':'FP32','shape':[-1,1000]}],"
          "'description':'ResNet-18\\nImageNet classes\\t(1000)','metrics':{'top1':0.697,'n':3}}");
    model_sig s;
    char f[128], m[256];
    assert_int_equal(sig_parse(j, &s, f, sizeof f, m, sizeof m), 0);
    assert_int_equal(s.nin, 2);
    assert_int_equal(s.nout, 1);
    assert_string_equal(s.in[0].name, "x");
    assert_int_equal(s.in[0].dtype, SIG_FP32);
    assert_int_equal(s.in[0].ndim, 4);
    assert_true(s.in[0].shape[0] == -1 && s.in[0].shape[1] == 3 && s.in[0].shape[3] == 224);
    assert_int_equal(s.in[1].dtype, SIG_INT64);
    assert_true(s.in[1].shape[1] == -1);
    assert_string_equal(s.out[0].name, "logits");
    /* read back: the same signature */
    json_t *back = sig_to_json(&s);
    assert_true(json_equal(json_object_get(back, "inputs"), json_object_get(j, "inputs")));
    assert_true(json_equal(json_object_get(back, "outputs"), json_object_get(j, "outputs")));
    model_sig s2;
    assert_int_equal(sig_parse(back, &s2, f, sizeof f, m, sizeof m), 0);
    assert_memory_equal(&s, &s2, sizeof s);
    json_decref(back);
    json_decref(j);

    /* outputs optional (and may be empty); the largest dimension */
    j = J("{'inputs':[{'name':'a.b-c_9','datatype':'INT32','shape':[-1,2147483647]}]}");
    assert_int_equal(sig_parse(j, &s, f, sizeof f, m, sizeof m), 0);
    assert_int_equal(s.nout, 0);
    assert_true(s.in[0].shape[1] == 2147483647);
    back = sig_to_json(&s);
    assert_int_equal(json_array_size(json_object_get(back, "outputs")), 0);
    json_decref(back);
    json_decref(j);
}

static void test_dtypes(void **state)
{
    (void)state;
    const char *names[] = {"FP32", "FP64", "INT32", "INT64"};
    const size_t sizes[] = {4, 8, 4, 8};
    for (int i = 0; i < 4; i++) {
        sig_dtype t;
        assert_int_equal(sig_dtype_parse(names[i], &t), 0);
        assert_int_equal(t, i);
        assert_string_equal(sig_dtype_name(t), names[i]);
        assert_int_equal(sig_dtype_size(t), sizes[i]);
    }
    sig_dtype t;
    assert_int_equal(sig_dtype_parse("fp32", &t), -1);
    assert_int_equal(sig_dtype_parse("BOOL", &t), -1);
    assert_int_equal(sig_dtype_parse(NULL, &t), -1);
}

static void test_refusals(void **state)
{
    (void)state;
    const char *x = "{'name':'x','datatype':'FP32','shape':[-1,3]}";
    char meta[512];
    expect_refused("[1]", "metadata", "must be an object");
    expect_refused("{}", "metadata.inputs", "1 to 16 tensors");
    expect_refused("{'inputs':[]}", "metadata.inputs", "1 to 16 tensors");
    expect_refused("{'inputs':{}}", "metadata.inputs", "1 to 16 tensors");
    expect_refused("{'inputs':[3]}", "metadata.inputs[0]", "must be an object");
    expect_refused("{'inputs':[{'name':'x','datatype':'FP32','shape':[-1],'dims':[1]}]}", "metadata.inputs[0].dims",
                   "unknown member");
    expect_refused("{'inputs':[{'datatype':'FP32','shape':[-1]}]}", "metadata.inputs[0].name", "1 to 64 characters");
    expect_refused("{'inputs':[{'name':'','datatype':'FP32','shape':[-1]}]}", "metadata.inputs[0].name", "1 to 64 characters");
    expect_refused("{'inputs':[{'name':'a b','datatype':'FP32','shape':[-1]}]}", "metadata.inputs[0].name", "A-Z a-z 0-9");
    expect_refused("{'inputs':[{'name':'x','datatype':'FP32','shape':[-1]},{'name':'x','datatype':'FP32','shape':[-1]}]}",
                   "metadata.inputs[1].name", "already the name of inputs[0]");
    snprintf(meta, sizeof meta, "{'inputs':[%s,{'name':'y','datatype':'BOOL','shape':[-1]}]}", x);
    expect_refused(meta, "metadata.inputs[1].datatype", "must be one of FP32, FP64, INT32, INT64");
    expect_refused("{'inputs':[{'name':'x','datatype':'FP32','shape':[]}]}", "metadata.inputs[0].shape", "1 to 8 dimensions");
    expect_refused("{'inputs':[{'name':'x','datatype':'FP32','shape':[-1,1,1,1,1,1,1,1,1]}]}", "metadata.inputs[0].shape",
                   "1 to 8 dimensions");
    expect_refused("{'inputs':[{'name':'x','datatype':'FP32','shape':[4,3]}]}", "metadata.inputs[0].shape[0]", "must be -1");
    expect_refused("{'inputs':[{'name':'x','datatype':'FP32','shape':[-1,0]}]}", "metadata.inputs[0].shape[1]", "-1 (any size)");
    expect_refused("{'inputs':[{'name':'x','datatype':'FP32','shape':[-1,-2]}]}", "metadata.inputs[0].shape[1]", "-1 (any size)");
    expect_refused("{'inputs':[{'name':'x','datatype':'FP32','shape':[-1,2147483648]}]}", "metadata.inputs[0].shape[1]",
                   "-1 (any size)");
    expect_refused("{'inputs':[{'name':'x','datatype':'FP32','shape':[-1,2.5]}]}", "metadata.inputs[0].shape[1]", "-1 (any size)");
    snprintf(meta, sizeof meta,
             "{'inputs':[%s],'outputs':[{'name':'y','datatype':'FP32','shape':[-1]},{'name':'y','datatype':'FP64','shape':[-1]}]}",
             x);
    expect_refused(meta, "metadata.outputs[1].name", "already the name of outputs[0]");
    snprintf(meta, sizeof meta, "{'inputs':[%s],'outputs':[{'name':'y','datatype':'INT8','shape':[-1]}]}", x);
    expect_refused(meta, "metadata.outputs[0].datatype", "FP32, FP64, INT32, INT64");
    snprintf(meta, sizeof meta, "{'inputs':[%s],'outputs':3}", x);
    expect_refused(meta, "metadata.outputs", "0 to 16 tensors");
    snprintf(meta, sizeof meta, "{'inputs':[%s],'description':3}", x);
    expect_refused(meta, "metadata.description", "at most 4096 bytes");
    snprintf(meta, sizeof meta, "{'inputs':[%s],'description':'a\\u0001b'}", x);
    expect_refused(meta, "metadata.description", "control characters");
    snprintf(meta, sizeof meta, "{'inputs':[%s],'metrics':{'top1':'high'}}", x);
    expect_refused(meta, "metadata.metrics.top1", "finite number");
    snprintf(meta, sizeof meta, "{'inputs':[%s],'metrics':[1]}", x);
    expect_refused(meta, "metadata.metrics", "at most 64");
    snprintf(meta, sizeof meta, "{'inputs':[%s],'labels':['cat']}", x);
    expect_refused(meta, "metadata.labels", "unknown member");

    /* sizes at their limits: 17 inputs, a 4097-byte description, 65 metrics */
    json_t *j = J("{'inputs':[]}"), *ins = json_object_get(j, "inputs");
    for (int i = 0; i < 17; i++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", i);
        json_array_append_new(ins, json_pack("{s:s, s:s, s:[i]}", "name", name, "datatype", "FP32", "shape", -1));
    }
    model_sig s;
    char f[128], m[256];
    assert_int_equal(sig_parse(j, &s, f, sizeof f, m, sizeof m), -1);
    assert_string_equal(f, "metadata.inputs");
    json_array_remove(ins, 16);
    assert_int_equal(sig_parse(j, &s, f, sizeof f, m, sizeof m), 0);
    assert_int_equal(s.nin, 16);
    char *d = calloc(4098, 1);
    memset(d, 'a', 4097);
    json_object_set_new(j, "description", json_string(d));
    assert_int_equal(sig_parse(j, &s, f, sizeof f, m, sizeof m), -1);
    assert_string_equal(f, "metadata.description");
    d[4096] = '\0';
    json_object_set_new(j, "description", json_string(d));
    assert_int_equal(sig_parse(j, &s, f, sizeof f, m, sizeof m), 0);
    free(d);
    json_t *metrics = json_object();
    for (int i = 0; i < 65; i++) {
        char k[16];
        snprintf(k, sizeof k, "m%d", i);
        json_object_set_new(metrics, k, json_real(i));
    }
    json_object_set_new(j, "metrics", metrics);
    assert_int_equal(sig_parse(j, &s, f, sizeof f, m, sizeof m), -1);
    assert_string_equal(f, "metadata.metrics");
    json_object_del(metrics, "m0");
    assert_int_equal(sig_parse(j, &s, f, sizeof f, m, sizeof m), 0);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
