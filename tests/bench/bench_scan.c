/* bench_scan.c - the replica's JSON number reader (workers/serve/scan.h) on one ResNet-18 input
 * (1 x 3 x 224 x 224 FP32 values) as clients print it: 6 significant digits ("%.6g") and 17
 * ("%.17g", Python's repr and numpy's), against strtof on the same numbers.  Per pass: the
 * validating skip over the document (scan_inputs_data) and the read into the tensor (scan_values).
 *
 *     build/tests/bench/gantry-bench-scan [--passes 20]
 */
#include "workers/serve/scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VALUES (3 * 224 * 224)

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* the request body, its numbers printed with fmt */
static char *document(const char *fmt, size_t *len)
{
    char *s = malloc((size_t)VALUES * 32 + 256), *p = s;
    if (!s) exit(1);
    p += sprintf(p, "{\"inputs\": [{\"name\": \"image\", \"shape\": [1, 3, 224, 224], \"datatype\": \"FP32\", \"data\": [");
    srand(1);
    for (int i = 0; i < VALUES; i++) {
        if (i) *p++ = ',';
        p += sprintf(p, fmt, (double)rand() / RAND_MAX * 2 - 1);
    }
    p += sprintf(p, "]}]}");
    *len = (size_t)(p - s);
    return s;
}

int main(int argc, char **argv)
{
    int passes = argc == 3 && !strcmp(argv[1], "--passes") ? atoi(argv[2]) : 20;
    if (passes < 1) passes = 1;
    float *out = malloc(sizeof(float) * VALUES);
    if (!out) return 1;
    printf("| numbers | body | skip (scan_inputs_data) | read (scan_values) | strtof on each number |\n|---|---|---|---|---|\n");
    const char *fmts[] = {"%.6g", "%.17g"};
    for (int f = 0; f < 2; f++) {
        size_t len, n = 0;
        char *doc = document(fmts[f], &len);
        scan_range r[4];
        int count = 0;
        double t0 = now_ms();
        for (int i = 0; i < passes; i++)
            if (scan_inputs_data(doc, len, r, 4, &count) != 0 || count != 1) return 1;
        double t1 = now_ms();
        for (int i = 0; i < passes; i++)
            if (scan_values(doc + r[0].start, r[0].end - r[0].start, SIG_FP32, out, VALUES, &n) != 0 || n != VALUES) return 1;
        double t2 = now_ms();
        for (int i = 0; i < passes; i++) { /* the numbers one by one, as the reader did before its long double path */
            char *p = doc + r[0].start + 1;
            for (int k = 0; k < VALUES; k++) {
                out[k] = strtof(p, &p);
                p++; /* the comma */
            }
        }
        double t3 = now_ms();
        printf("| %s | %.1f MB | %.2f ms | %.2f ms | %.2f ms |\n", fmts[f], (double)len / 1e6, (t1 - t0) / passes,
               (t2 - t1) / passes, (t3 - t2) / passes);
        free(doc);
    }
    free(out);
    return 0;
}
