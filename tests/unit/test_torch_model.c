/* test_torch_model.c - workers/serve/torch_model: the libtorch backend on the fixtures of
 * tests/data/torchscript (made by its make.py): torch's own outputs for two inputs (FP32, INT64)
 * and a tuple of the four served datatypes, a wrong input count, dtype or shape, an output
 * datatype gantry does not serve, and files that are not TorchScript.  The model checks (issue 27):
 * every attacker's model of tests/data/torchscript/attack (its make.py says what each does) that
 * the checks catch is refused at load with a message naming the op, the method or the attribute,
 * before any forward runs; the two only the sandbox contains load; the project's good fixtures
 * load.  In a build without libtorch only the stub's refusal is checked; the other tests are
 * skipped. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workers/serve/torch_model.h"
#include "testpath.h"

#define SKIP_WITHOUT_TORCH()                                                                                                       \
    do {                                                                                                                           \
        if (!tm_available()) skip();                                                                                               \
    } while (0)

/* tests/data/torchscript/NAME in the source tree */
static const char *fixture(const char *name)
{
    char rel[1024];
    snprintf(rel, sizeof rel, "tests/data/torchscript/%s", name);
    return source_path(rel);
}

/* a tm_tensor from {"datatype","shape","data"} of expected.json; data malloc'd */
static tm_tensor tensor_of(const json_t *j)
{
    tm_tensor t = {0};
    const char *dt = json_string_value(json_object_get(j, "datatype"));
    assert_non_null(dt);
    assert_int_equal(sig_dtype_parse(dt, &t.dtype), 0);
    const json_t *shape = json_object_get(j, "shape"), *data = json_object_get(j, "data");
    t.ndim = (int)json_array_size(shape);
    for (int k = 0; k < t.ndim; k++)
        t.shape[k] = json_integer_value(json_array_get(shape, (size_t)k));
    size_t n = json_array_size(data);
    t.data = calloc(n ? n : 1, sig_dtype_size(t.dtype));
    assert_non_null(t.data);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(data, i);
        switch (t.dtype) {
        case SIG_FP32:
            ((float *)t.data)[i] = (float)json_number_value(v);
            break;
        case SIG_FP64:
            ((double *)t.data)[i] = json_number_value(v);
            break;
        case SIG_INT32:
            ((int32_t *)t.data)[i] = (int32_t)json_integer_value(v);
            break;
        case SIG_INT64:
            ((int64_t *)t.data)[i] = json_integer_value(v);
            break;
        }
    }
    return t;
}

static int64_t numel(const tm_tensor *t)
{
    int64_t n = 1;
    for (int k = 0; k < t->ndim; k++)
        n *= t->shape[k];
    return n;
}

typedef struct {
    json_t *expected;
    tm_tensor in[2];
    tm_model *m;
} fixture_state;

static int setup(void **state)
{
    if (!tm_available()) return 0;
    fixture_state *f = calloc(1, sizeof *f);
    json_error_t jerr;
    f->expected = json_load_file(fixture("expected.json"), 0, &jerr);
    if (!f->expected) fail_msg("expected.json: %s", jerr.text);
    for (int i = 0; i < 2; i++)
        f->in[i] = tensor_of(json_array_get(json_object_get(f->expected, "inputs"), (size_t)i));
    char err[256] = "";
    f->m = tm_load(fixture("two_inputs.pt"), 1, err, sizeof err);
    if (!f->m) fail_msg("tm_load: %s", err);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_state *f = *state;
    if (!f) return 0;
    tm_free(f->m);
    for (int i = 0; i < 2; i++)
        free(f->in[i].data);
    json_decref(f->expected);
    free(f);
    return 0;
}

static void test_stub_refuses(void **state)
{
    (void)state;
    if (tm_available()) skip();
    char err[256] = "";
    assert_null(tm_load(fixture("two_inputs.pt"), 1, err, sizeof err));
    assert_string_equal(err, "this worker was built without libtorch (install libtorch-dev and rebuild)");
}

/* torch's outputs, twice (the second run is after the profiling executor's first optimisation) */
static void test_forward_matches_torch(void **state)
{
    SKIP_WITHOUT_TORCH();
    fixture_state *f = *state;
    const json_t *outs = json_object_get(f->expected, "outputs");
    for (int run = 0; run < 3; run++) {
        tm_tensor *out = NULL;
        int nout = 0;
        char err[256] = "";
        if (tm_forward(f->m, f->in, 2, &out, &nout, err, sizeof err) != 0) fail_msg("tm_forward: %s", err);
        assert_int_equal(nout, (int)json_array_size(outs));
        for (int i = 0; i < nout; i++) {
            tm_tensor want = tensor_of(json_array_get(outs, (size_t)i));
            assert_int_equal(out[i].dtype, want.dtype);
            assert_int_equal(out[i].ndim, want.ndim);
            for (int k = 0; k < want.ndim; k++)
                assert_int_equal(out[i].shape[k], want.shape[k]);
            for (int64_t e = 0; e < numel(&want); e++) {
                switch (want.dtype) {
                case SIG_FP32:
                    assert_true(fabsf(((float *)out[i].data)[e] - ((float *)want.data)[e]) <= 1e-6f);
                    break;
                case SIG_FP64:
                    assert_true(fabs(((double *)out[i].data)[e] - ((double *)want.data)[e]) <= 1e-6);
                    break;
                case SIG_INT32:
                    assert_int_equal(((int32_t *)out[i].data)[e], ((int32_t *)want.data)[e]);
                    break;
                case SIG_INT64:
                    assert_int_equal(((int64_t *)out[i].data)[e], ((int64_t *)want.data)[e]);
                    break;
                }
            }
            free(want.data);
        }
        tm_tensors_free(out, nout);
    }
}

/* tm_forward fails with -1, no outputs and a message containing want */
static void expect_forward_error(tm_model *m, const tm_tensor *in, int n, const char *want)
{
    tm_tensor *out = (tm_tensor *)1;
    int nout = 7;
    char err[256] = "";
    assert_int_equal(tm_forward(m, in, n, &out, &nout, err, sizeof err), -1);
    assert_null(out);
    assert_int_equal(nout, 0);
    if (!strstr(err, want)) fail_msg("error '%s' lacks '%s'", err, want);
    assert_null(strchr(err, '\n')); /* one line, no C++ backtrace */
}

static void test_wrong_inputs(void **state)
{
    SKIP_WITHOUT_TORCH();
    fixture_state *f = *state;
    expect_forward_error(f->m, f->in, 1, "the model takes 2 inputs, not 1");
    tm_tensor three[3] = {f->in[0], f->in[1], f->in[1]};
    expect_forward_error(f->m, three, 3, "the model takes 2 inputs, not 3");

    /* the indices as FP32: the model's indexing refuses them */
    float idx_f[4] = {1, 9, 0, 4};
    tm_tensor bad[2] = {f->in[0], f->in[1]};
    bad[1].dtype = SIG_FP32;
    bad[1].data = idx_f;
    expect_forward_error(f->m, bad, 2, "indices");

    /* x with 4 features where the Linear layer takes 3 */
    float x4[8] = {0};
    bad[0] = (tm_tensor){.dtype = SIG_FP32, .ndim = 2, .shape = {2, 4}, .data = x4};
    bad[1] = f->in[1];
    expect_forward_error(f->m, bad, 2, "shapes cannot be multiplied");

    /* shapes the C side refuses before libtorch sees them */
    bad[0] = f->in[0];
    bad[0].shape[1] = -1;
    expect_forward_error(f->m, bad, 2, "input 0: negative dimension -1");
    bad[0] = f->in[0];
    bad[0].dtype = (sig_dtype)9;
    expect_forward_error(f->m, bad, 2, "input 0: unknown datatype 9");
}

static void test_unserved_output_dtype(void **state)
{
    (void)state;
    SKIP_WITHOUT_TORCH();
    char err[256] = "";
    tm_model *m = tm_load(fixture("bool_output.pt"), 1, err, sizeof err);
    if (!m) fail_msg("tm_load: %s", err);
    float x[3] = {-1, 0, 2};
    tm_tensor in = {.dtype = SIG_FP32, .ndim = 1, .shape = {3}, .data = x};
    expect_forward_error(m, &in, 1, "output 0 has datatype Bool");
    tm_free(m);
}

static void expect_load_error(const char *path, const char *want)
{
    char err[256] = "";
    tm_model *m = tm_load(path, 1, err, sizeof err);
    if (m) fail_msg("%s loaded", path);
    if (!strstr(err, want)) fail_msg("%s: error '%s' lacks '%s'", path, err, want);
    assert_null(strchr(err, '\n'));

    char tiny[8] = "";
    assert_null(tm_load(path, 1, tiny, sizeof tiny)); /* the message cut to the buffer */
    assert_int_equal(strlen(tiny), sizeof tiny - 1);
}

static void test_not_torchscript(void **state)
{
    (void)state;
    SKIP_WITHOUT_TORCH();
    char path[4096];
    snprintf(path, sizeof path, "%s", fixture("expected.json")); /* a text file */
    expect_load_error(path, "PytorchStreamReader failed reading zip archive");
    snprintf(path, sizeof path, "%s", fixture("state_dict.pt")); /* a zip, but not TorchScript */
    expect_load_error(path, "constants.pkl");
    snprintf(path, sizeof path, "%s", fixture("no_such_model.pt"));
    expect_load_error(path, "No such file or directory");
}

/* the attacker's models the checks refuse, and what the refusal must say */
static const struct {
    const char *file, *want[2];
} attacks[] = {
    /* before torch::jit::load (tscode.h): the load would run __setstate__, or overflow the stack */
    {"setstate_read.pt", {"code/__torch__.py defines __setstate__", "refused before torch::jit::load"}},
    {"setstate_write.pt", {"code/__torch__.py defines __setstate__", "refused before torch::jit::load"}},
    {"deep_nesting.pt", {"code/__torch__.py brackets nest more than 200 deep", "refused before torch::jit::load"}},
    /* the allow list, after the load and before any forward */
    {"interface.pt", {"the model calls prim::CallMethod in Interface.forward", "interface type"}},
    {"fork.pt", {"the model calls prim::fork in Fork.forward", "not an op of the allow list"}},
    {"resize.pt", {"the model calls aten::resize_as_ in Resize.forward", "uninitialised memory"}},
    {"segment_reduce_unsafe.pt", {"the model calls aten::segment_reduce in SegmentReduceUnsafe.forward", "unsafe"}},
    {"sparse_unsafe.pt", {"the model calls aten::_sparse_coo_tensor_unsafe in SparseUnsafe.forward", "bounds checks"}},
    {"efficientzerotensor.pt", {"the model calls aten::_efficientzerotensor in EfficientZeroTensor.forward", "crashes"}},
    /* the tensor check */
    {"oversized_attribute.pt", {"the model's tensor Oversized.w addresses 4000000 bytes of its storage, which holds 64", ""}},
};

static void test_attacks_refused(void **state)
{
    (void)state;
    SKIP_WITHOUT_TORCH();
    for (size_t i = 0; i < sizeof attacks / sizeof attacks[0]; i++) {
        char rel[256], err[512] = "";
        snprintf(rel, sizeof rel, "attack/%s", attacks[i].file);
        tm_model *m = tm_load(fixture(rel), 1, err, sizeof err);
        if (m) fail_msg("%s: loaded", attacks[i].file);
        for (int k = 0; k < 2; k++)
            if (!strstr(err, attacks[i].want[k])) fail_msg("%s: error '%s' lacks '%s'", attacks[i].file, err, attacks[i].want[k]);
        assert_null(strchr(err, '\n'));
    }
}

/* what only the sandbox contains passes the checks (its forward is never run here), and the
 * project's own models still load */
static void test_allowed_models_load(void **state)
{
    (void)state;
    SKIP_WITHOUT_TORCH();
    static const char *const files[] = {
        "attack/infinite_loop.pt", "attack/huge_allocation.pt", "two_inputs.pt",       "bool_output.pt", "serve/seq.pt",
        "serve/picky.pt",          "serve/nonbatched.pt",       "archives/scripted.pt"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char err[512] = "";
        tm_model *m = tm_load(fixture(files[i]), 1, err, sizeof err);
        if (!m) fail_msg("%s: %s", files[i], err);
        tm_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stub_refuses),
        cmocka_unit_test_setup_teardown(test_forward_matches_torch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_inputs, setup, teardown),
        cmocka_unit_test(test_unserved_output_dtype),
        cmocka_unit_test(test_not_torchscript),
        cmocka_unit_test(test_attacks_refused),
        cmocka_unit_test(test_allowed_models_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
