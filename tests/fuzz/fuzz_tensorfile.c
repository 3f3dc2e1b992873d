/* fuzz_tensorfile.c - a federated program's model file as its site reads it (workers/fed/tensorfile.h):
 * the input is the whole file.
 *
 * Checks: a parsed file's tensors tile the values (offsets in order, counts adding up to total) and its
 * values read inside the input; writing the layout again with those values and parsing that gives the
 * same layout and the same values. */
#include "tests/fuzz/fuzz.h"
#include "workers/fed/tensorfile.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tensorfile_header h, h2;
    const unsigned char *region, *region2;
    char err[400];
    if (tensorfile_parse(data, size, 0, &h, &region, err, sizeof err) != 0) return 0;
    size_t at = 0;
    for (size_t i = 0; i < h.n; i++) {
        FUZZ_CHECK(h.t[i].offset == at, "tensor %zu at %zu, expected %zu", i, h.t[i].offset, at);
        at += h.t[i].count;
    }
    FUZZ_CHECK(at == h.total, "counts add up to %zu, total %zu", at, h.total);
    FUZZ_CHECK(region >= data && region + 4 * h.total == data + size, "the data region is not the file's end");
    double *v = malloc(sizeof(double) * (h.total ? h.total : 1)), *w = malloc(sizeof(double) * (h.total ? h.total : 1));
    tensorfile_values(&h, region, v);
    size_t len;
    unsigned char *again = tensorfile_write(&h, h.meta, v, &len);
    FUZZ_CHECK(tensorfile_parse(again, len, 0, &h2, &region2, err, sizeof err) == 0, "written again, refused: %s", err);
    FUZZ_CHECK(tensorfile_same_layout(&h, &h2, err, sizeof err) == 0, "written again, another layout: %s", err);
    tensorfile_values(&h2, region2, w);
    FUZZ_CHECK(memcmp(v, w, sizeof(double) * h.total) == 0 || h.total == 0 ||
                   memcmp(region, region2, 4 * h.total) == 0 /* NaN payloads compare unequal as doubles */,
               "written again, other values");
    tensorfile_header_free(&h2);
    tensorfile_header_free(&h);
    free(again), free(v), free(w);
    return 0;
}
