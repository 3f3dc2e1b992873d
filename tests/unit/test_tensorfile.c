/* test_tensorfile.c - the model files of a federated program's exchange (workers/fed/tensorfile.h): a file
 * written and parsed back gives the same layout and values; a file as the safetensors library writes it
 * (bytes spelled out here) parses; every rule of the format refuses what breaks it, with a reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workers/fed/tensorfile.h"

/* a file from a header text and data bytes */
static unsigned char *file_of(const char *hdr, const unsigned char *data, size_t dlen, size_t *len)
{
    size_t hl = strlen(hdr);
    unsigned char *b = malloc(8 + hl + dlen);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, hdr, hl);
    if (dlen) memcpy(b + 8 + hl, data, dlen);
    *len = 8 + hl + dlen;
    return b;
}

/* parses hdr + dlen zero bytes; the parser's return; its reason in err */
static int try_parse(const char *hdr, size_t dlen, char *err, size_t errlen)
{
    unsigned char *zeros = calloc(1, dlen + 1);
    size_t len;
    unsigned char *b = file_of(hdr, zeros, dlen, &len);
    tensorfile_header h;
    const unsigned char *data;
    int rc = tensorfile_parse(b, len, 0, &h, &data, err, errlen);
    if (rc == 0) tensorfile_header_free(&h);
    free(b), free(zeros);
    return rc;
}

static void test_round_trip(void **state)
{
    (void)state;
    /* the layout from a file with the tensors in another order than their bytes: the bytes' order wins */
    const char *hdr = "{\"b\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [8, 32]},"
                      " \"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                      " \"__metadata__\": {\"round\": \"3\", \"num_samples\": \"120\"}}   ";
    float vals[8] = {1.5f, -2.0f, 0.25f, 3.0f, -4.5f, 1e-7f, 65504.0f, -0.0f};
    unsigned char data[32];
    for (int i = 0; i < 8; i++) {
        uint32_t u;
        memcpy(&u, &vals[i], 4);
        for (int k = 0; k < 4; k++)
            data[4 * i + k] = (unsigned char)(u >> (8 * k)); /* little-endian */
    }
    size_t len;
    unsigned char *b = file_of(hdr, data, sizeof data, &len);
    tensorfile_header h;
    const unsigned char *region;
    char err[300];
    assert_int_equal(tensorfile_parse(b, len, 0, &h, &region, err, sizeof err), 0);
    assert_int_equal(h.n, 2);
    assert_int_equal(h.total, 8);
    assert_string_equal(h.t[0].name, "a");
    assert_int_equal(h.t[0].offset, 0);
    assert_int_equal(h.t[1].ndim, 2);
    assert_int_equal(h.t[1].shape[1], 3);
    assert_int_equal(h.t[1].offset, 2);
    assert_string_equal(json_string_value(json_object_get(h.meta, "num_samples")), "120");
    double v[8];
    tensorfile_values(&h, region, v);
    for (int i = 0; i < 8; i++)
        assert_true(v[i] == (double)vals[i]);
    assert_ptr_equal(tensorfile_tensor_at(&h, 1), &h.t[0]);
    assert_ptr_equal(tensorfile_tensor_at(&h, 2), &h.t[1]);
    assert_ptr_equal(tensorfile_tensor_at(&h, 7), &h.t[1]);
    char *text = tensorfile_layout_text(&h);
    assert_string_equal(text, "[[\"a\",[2]],[\"b\",[2,3]]]");
    free(text);

    /* written again with new values and metadata: the same layout, the values rounded to FP32 */
    double w[8] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 1.0 / 3.0};
    json_t *meta = json_pack("{s:s}", "round", "4");
    size_t wl;
    unsigned char *wb = tensorfile_write(&h, meta, w, &wl);
    json_decref(meta);
    assert_int_equal((wl - 8 - 32) % 8, 0); /* the data 8-byte aligned */
    tensorfile_header h2;
    assert_int_equal(tensorfile_parse(wb, wl, 8, &h2, &region, err, sizeof err), 0);
    assert_int_equal(tensorfile_same_layout(&h, &h2, err, sizeof err), 0);
    assert_string_equal(json_string_value(json_object_get(h2.meta, "round")), "4");
    double w2[8];
    tensorfile_values(&h2, region, w2);
    for (int i = 0; i < 8; i++)
        assert_true(w2[i] == (double)(float)w[i]);
    /* a limit on the values */
    tensorfile_header h3;
    assert_int_equal(tensorfile_parse(wb, wl, 7, &h3, &region, err, sizeof err), -1);
    assert_non_null(strstr(err, "8 values: at most 7"));
    tensorfile_header_free(&h2);
    free(wb);

    /* layouts that differ: named */
    const char *other = "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                        " \"b\": {\"dtype\": \"F32\", \"shape\": [3, 2], \"data_offsets\": [8, 32]}}";
    unsigned char *ob = file_of(other, data, sizeof data, &len);
    assert_int_equal(tensorfile_parse(ob, len, 0, &h2, &region, err, sizeof err), 0);
    assert_int_equal(tensorfile_same_layout(&h, &h2, err, sizeof err), -1);
    assert_string_equal(err, "tensor 'b' has shape [3, 2], the model's is [2, 3]");
    tensorfile_header_free(&h2);
    free(ob);
    const char *fewer = "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}";
    ob = file_of(fewer, data, 8, &len);
    assert_int_equal(tensorfile_parse(ob, len, 0, &h2, &region, err, sizeof err), 0);
    assert_int_equal(tensorfile_same_layout(&h, &h2, err, sizeof err), -1);
    assert_non_null(strstr(err, "tensor 'b' is missing"));
    tensorfile_header_free(&h2);
    free(ob);
    tensorfile_header_free(&h);
    free(b);
}

static void test_empty_and_zero_sized(void **state)
{
    (void)state;
    char err[300];
    assert_int_equal(try_parse("{}", 0, err, sizeof err), 0);
    assert_int_equal(try_parse("{\"z\": {\"dtype\": \"F32\", \"shape\": [0, 4], \"data_offsets\": [0, 0]},"
                               " \"s\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 4]}}",
                               4, err, sizeof err),
                     0);
}

static void test_refused(void **state)
{
    (void)state;
    char err[300];
    static const struct {
        const char *hdr;
        size_t dlen;
        const char *why;
    } bad[] = {
        {"[1, 2]", 0, "not a JSON object"},
        {"{\"a\": 1", 0, "not a JSON object"},
        {"{} x", 0, "bytes after its JSON object"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, \"a\": {}}", 4, "not a JSON object"},
        {"{\"w\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 4, "dtype F16: only F32"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2]}}", 8, "must be {\"dtype\""},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]}}", 8, "shape[0] must be an integer"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4, "9 dimensions"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8, "span 8 bytes, its shape needs 12"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 0]}}", 8, "0 <= begin <= end"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12, "start at 4, the data so far ends at 0"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
         " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
         12, "tile the data"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 12, "cover 8 bytes of data, the file has 12"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 4, "cover 8 bytes of data, the file has 4"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [1099511627776, 1099511627776], \"data_offsets\": [0, 8]}}", 8,
         "too many values"},
        {"{\"\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, "1 to 1024 bytes"},
        {"{\"__metadata__\": {\"round\": 3}}", 0, "__metadata__ must be an object of strings"},
        {"{\"__metadata__\": []}", 0, "__metadata__ must be an object of strings"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        int rc = try_parse(bad[i].hdr, bad[i].dlen, err, sizeof err);
        if (rc != -1 || !strstr(err, bad[i].why)) fail_msg("case %zu (%s): rc %d, '%s'", i, bad[i].hdr, rc, err);
    }
    /* the length prefix itself */
    unsigned char small[7] = {0};
    tensorfile_header h;
    const unsigned char *data;
    assert_int_equal(tensorfile_parse(small, sizeof small, 0, &h, &data, err, sizeof err), -1);
    assert_non_null(strstr(err, "shorter than the 8-byte"));
    unsigned char big[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
    assert_int_equal(tensorfile_parse(big, sizeof big, 0, &h, &data, err, sizeof err), -1);
    assert_non_null(strstr(err, "not within the file"));
    unsigned char past[10] = {3, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    assert_int_equal(tensorfile_parse(past, sizeof past, 0, &h, &data, err, sizeof err), -1);
    /* every prefix of a good file is refused or parses, never read past its end (ASan watches) */
    const char *hdr = "{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}";
    unsigned char zeros[8] = {0};
    size_t len;
    unsigned char *b = file_of(hdr, zeros, 8, &len);
    for (size_t cut = 0; cut < len; cut++) {
        unsigned char *p = malloc(cut ? cut : 1);
        memcpy(p, b, cut);
        assert_int_equal(tensorfile_parse(p, cut, 0, &h, &data, err, sizeof err), -1);
        free(p);
    }
    free(b);
}

static void test_out_of_range(void **state)
{
    (void)state;
    double v[4] = {1, -2, 3, 4};
    assert_int_equal(tensorfile_find_out_of_range(v, 4, 10), -1);
    v[2] = NAN;
    assert_int_equal(tensorfile_find_out_of_range(v, 4, 10), 2);
    v[2] = 3, v[1] = -11;
    assert_int_equal(tensorfile_find_out_of_range(v, 4, 10), 1);
    v[1] = INFINITY;
    assert_int_equal(tensorfile_find_out_of_range(v, 4, 1e30), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_empty_and_zero_sized),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_out_of_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
