/* train_main.c - gantry-train: train from a spec file, printing progress as JSON lines.
 *
 *   gantry-train SPEC.json [CHECKPOINT]
 *
 * Resumes from CHECKPOINT when it exists; writes CHECKPOINT.model at the end.
 * Prints the result JSON on the last line; exit 0 ok, 1 stopped, 2 error. */
#include "common/alloc.h"
#include "workers/train/train.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void on_progress(void *ctx, const json_t *metrics)
{
    (void)ctx;
    char *s = json_dumps(metrics, JSON_COMPACT | JSON_REAL_PRECISION(6));
    if (s) fprintf(stderr, "%s\n", s);
    free(s);
}

static int should_stop(void *ctx)
{
    (void)ctx;
    return stop_flag;
}

int main(int argc, char **argv)
{
    json_set_alloc_funcs(xmalloc, free); /* jansson never returns NULL for memory (common/alloc.h) */
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s SPEC.json [CHECKPOINT]\n", argv[0]);
        return 2;
    }
    json_error_t je;
    json_t *spec = json_load_file(argv[1], 0, &je);
    if (!spec) {
        fprintf(stderr, "%s:%d: %s\n", argv[1], je.line, je.text);
        return 2;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    train_hooks hooks = {.progress = on_progress, .should_stop = should_stop};
    json_t *result = NULL;
    char err[512] = "";
    int rc = train_run(spec, argc == 3 ? argv[2] : NULL, &hooks, &result, err, sizeof err);
    json_decref(spec);
    if (rc < 0) {
        fprintf(stderr, "error: %s\n", err);
        return 2;
    }
    if (rc == 1) {
        fprintf(stderr, "stopped; checkpoint written\n");
        return 1;
    }
    char *s = json_dumps(result, JSON_COMPACT | JSON_REAL_PRECISION(6));
    printf("%s\n", s ? s : "{}");
    free(s);
    json_decref(result);
    return 0;
}
