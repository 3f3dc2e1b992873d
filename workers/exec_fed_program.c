/* exec_fed_program.c - one site of a federated job whose spec names the team's own program
 * (spec.program: spec/fed_spec.h; docs/federated.md, "Your own PyTorch model").
 *
 * The site is claimed and meets the others as a built-in site does (workers/fed_site.h).  Its program
 * runs once for the whole job, sandboxed as a program job's rank (workers/prog_run.h: the same limits,
 * logs and metrics lines), with RANK and WORLD_SIZE (the site's index, the number of sites),
 * GANTRY_FED_SITE, GANTRY_FED_SITE_NAME, GANTRY_FED_SITES, GANTRY_FED_ROUNDS and GANTRY_FED_DIR, its
 * run directory (/gantry/run), where the site and the program exchange model files
 * (workers/fed/tensorfile.h: safetensors, FP32; python/gantry/federated.py is the program's side):
 *
 *   round_0.out      the program: its initial model (its tensors define the model: names, shapes, order)
 *   round_K.in       the site, K = 1..rounds: the global model to train from in round K
 *   round_K.out      the program: its model after round K's local training, __metadata__.num_samples
 *                    (the samples it trained on: the site's weight this round)
 *   round_R.in       R = rounds + 1, __metadata__.final "1": the final global model; the program ends
 *
 * After a restart (docs/federated.md, "Restarts") the first file the program gets may be round_K.in with K > 1 and
 * __metadata__.resumed_from K - 1: the global model checkpointed after round K - 1 (workers/fed_ckpt.h, every site
 * after every round), which the sites agreed on (fed_site_resume) instead of site 0's initial model.
 *
 * Each file appears whole (written aside, then renamed).  Site 0's initial model is every site's start:
 * one masked sum of site 0's values and the others' zeros; before it, the sites check that their
 * programs' models have one layout (a digest through the generation's gang values).  Each round the
 * update is checked (the layout of round_0.out, finite values of magnitude at most FED_PROG_MAX_ABS, a
 * sample count), the weights are summed again from this round's counts, and the update goes through the
 * aggregation as a built-in site's model does.  The model vector is the tensors' values in file order.
 *
 * Failures: a program that ends before its last file, a malformed file or one that does not come within
 * update_timeout_s fails the job, naming the site and the file ("site b (1): round_2.out: tensor 'fc.weight'
 * has shape [10, 64], the model's is [10, 128]"); a lost site retries the generation (the programs
 * start again).  Site 0 reports each round (the exchange's point; the program's own metrics lines are
 * the job's curves too), writes the final model to GANTRY_OUTPUT_DIR/global_model.safetensors and reports
 * the result; the others end silently. */
#include "common/alloc.h"
#include "common/log.h"
#include "common/strv.h"
#include "spec/fed_spec.h"
#include "workers/executor.h"
#include "workers/fed/tensorfile.h"
#include "workers/fed_progfile.h"
#include "workers/fed_site.h"
#include "workers/prog_run.h"
#include "workers/program/prog_sandbox.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 100
#define FED_PROG_MAX_ABS 1e6            /* a model's values, at most: the fixed point of the sums holds 2^31 / sites */
#define FED_PROG_MAX_HEADER (16 << 20)  /* bytes of a program's file beyond its values */
#define FED_PROG_MAX_VALUES (32u << 20) /* a model's values: a message is 8 bytes a value (Redis takes 512 MB) */
#define TAIL_LINES 20
#define TAIL_BYTES 6000
#define GLOBAL_MODEL "global_model.safetensors"

typedef struct {
    fed_site site;
    prog_run r;
    bool running;
    tensorfile_header layout; /* round_0.out's */
    double update_timeout_s;
} fsite;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "site b (1)": how errors name this site */
static void site_label(const fsite *f, char *out, size_t outlen)
{
    snprintf(out, outlen, "site %s (%d)", f->site.name, f->site.me);
}

/* why the program ended, with its last log lines */
static void ended_reason(fsite *f, const char *waiting_for, char *err, size_t errlen)
{
    const prog_rank_status *st = prog_run_finish(&f->r);
    char *tail = prog_logcap_tail(f->r.logs, f->r.rank, TAIL_LINES, TAIL_BYTES), who[120];
    site_label(f, who, sizeof who);
    int n = snprintf(err, errlen, "%s: its program %s before writing %s", who, st->reason, waiting_for);
    if (tail && *tail && n > 0 && (size_t)n < errlen) snprintf(err + n, errlen - (size_t)n, "; its last lines:\n%s", tail);
    free(tail);
    size_t m = strlen(err);
    while (m > 0 && err[m - 1] == '\n')
        err[--m] = '\0';
}

/* Waits for the program's file name while supervising it: 1 with *h and *v when it came, else an
 * EXEC_* code with err (the program ended, the file is malformed, the deadline passed, the job stopped). */
static int wait_file(fsite *f, const char *name, size_t max_bytes, tensorfile_header *h, double **v, char *err, size_t errlen)
{
    double deadline = mono_s() + f->update_timeout_s;
    char who[120], why[600];
    site_label(f, who, sizeof who);
    for (;;) {
        int got = fed_progfile_read(f->r.run, name, max_bytes, h, v, why, sizeof why);
        if (got == 1) return 1;
        if (got < 0) {
            snprintf(err, errlen, "%s: %s", who, why);
            return EXEC_FAILED;
        }
        if (prog_run_poll(&f->r, POLL_MS)) {
            if (f->r.by_worker) {
                snprintf(err, errlen, "stopped");
                return EXEC_RETRY;
            }
            f->running = false;
            ended_reason(f, name, err, errlen);
            return EXEC_FAILED;
        }
        if (f->r.terminating) continue; /* stopping (the job cancelled): its end comes within grace_s */
        if (mono_s() > deadline) {
            snprintf(err, errlen, "%s: its program did not write %s within %.0f s (update_timeout_s)", who, name,
                     f->update_timeout_s);
            return EXEC_FAILED;
        }
    }
}

/* what an update must be beyond its format: round_0.out's layout, values in range, a sample count */
static int check_update(fsite *f, const char *name, const tensorfile_header *h, const double *v, bool need_samples, double *samples,
                        char *err, size_t errlen)
{
    char who[120], why[400];
    site_label(f, who, sizeof who);
    if (f->layout.t && tensorfile_same_layout(&f->layout, h, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s: %s: %s", who, name, why);
        return -1;
    }
    long bad = tensorfile_find_out_of_range(v, h->total, FED_PROG_MAX_ABS);
    if (bad >= 0) {
        const tensorfile_tensor *t = tensorfile_tensor_at(h, (size_t)bad);
        snprintf(err, errlen, "%s: %s: tensor '%.200s' has the value %g at %zu: values must be finite and at most %g in magnitude",
                 who, name, t->name, v[bad], (size_t)bad - t->offset, FED_PROG_MAX_ABS);
        return -1;
    }
    const char *ns = json_string_value(json_object_get(h->meta, "num_samples"));
    char *end = NULL;
    double n = ns ? strtod(ns, &end) : -1;
    if (need_samples && (!ns || end == ns || *end || !(n >= 0) || n > 1e15)) {
        snprintf(err, errlen,
                 "%s: %s: __metadata__.num_samples must be the number of samples the round trained on (a non-negative number "
                 "as a string), not %s",
                 who, name, ns ? ns : "missing");
        return -1;
    }
    if (samples) *samples = n;
    return 0;
}

/* the sites' programs have one model: site 0 shares its layout's digest, the others compare theirs */
static int check_same_model(fsite *f, char *err, size_t errlen)
{
    exec_ctx *ctx = f->site.ctx;
    char *text = tensorfile_layout_text(&f->layout), mine[200], theirs[200], why[400], who[120];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    EVP_Digest(text, strlen(text), md, &mdlen, EVP_sha256(), NULL);
    free(text);
    int n = snprintf(mine, sizeof mine, "%zu tensors, %zu values, layout ", f->layout.n, f->layout.total);
    for (unsigned i = 0; i < 8 && i < mdlen; i++)
        n += snprintf(mine + n, sizeof mine - (size_t)n, "%02x", md[i]);
    if (f->site.me == 0) {
        if (ctx->gang_put(ctx, "fed_model", mine) != 0) {
            snprintf(err, errlen, "cannot share the model's layout through the rendezvous (Redis unreachable)");
            return EXEC_RETRY;
        }
        return 0;
    }
    if (ctx->gang_get(ctx, "fed_model", (int)(f->update_timeout_s * 1000), theirs, sizeof theirs, why, sizeof why) != 0) {
        snprintf(err, errlen, "site 0's model layout did not come: %s", why);
        return EXEC_RETRY;
    }
    if (strcmp(mine, theirs) != 0) {
        site_label(f, who, sizeof who);
        snprintf(err, errlen,
                 "%s: its program's model (round_0.out: %s) is not site 0's (%s): every site's program must build the same "
                 "model",
                 who, mine, theirs);
        return EXEC_FAILED;
    }
    return 0;
}

static void build_env(const fsite *f, int rounds, strv *env)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)f->r.set.env, k, v) strv_add(env, xasprintf("%s=%s", k, json_string_value(v)));
    exec_ctx *ctx = f->site.ctx;
    strv_add(env, xasprintf("RANK=%d", f->site.me));
    strv_add(env, xasprintf("WORLD_SIZE=%d", f->site.n));
    strv_add(env, xasprintf("GANTRY_JOB_ID=%s", ctx->task->job_id));
    strv_add(env, xasprintf("GANTRY_GENERATION=%d", f->r.generation));
    strv_add(env, xasprintf("GANTRY_FED_DIR=%s", PROG_SANDBOX_RUN_DIR));
    strv_add(env, xasprintf("GANTRY_FED_SITE=%d", f->site.me));
    strv_add(env, xasprintf("GANTRY_FED_SITE_NAME=%s", f->site.name));
    strv_add(env, xasprintf("GANTRY_FED_SITES=%d", f->site.n));
    strv_add(env, xasprintf("GANTRY_FED_ROUNDS=%d", rounds));
    prog_run_device_env(ctx, env);
}

/* the exchange's files a former generation left in the run directory */
static void remove_round_files(const char *dir, int rounds)
{
    char path[PATH_MAX + 64];
    for (int k = 0; k <= rounds + 1; k++) {
        static const char *const forms[] = {"%s/round_%d.in", "%s/round_%d.out", "%s/.round_%d.in.tmp"};
        for (size_t i = 0; i < 3; i++) {
            snprintf(path, sizeof path, forms[i], dir, k);
            unlink(path);
        }
    }
}

/* round_K.in: the global model z; resumed_from: the checkpoint's round when it is the first since a restart, else 0 */
static int write_global(fsite *f, int k, int rounds, int resumed_from, const double *z, char *err, size_t errlen)
{
    char name[64], sk[16], sr[16], sf[16];
    snprintf(name, sizeof name, "round_%d.in", k);
    snprintf(sk, sizeof sk, "%d", k), snprintf(sr, sizeof sr, "%d", rounds), snprintf(sf, sizeof sf, "%d", resumed_from);
    json_t *meta = json_pack("{s:s, s:s}", "round", sk, "rounds", sr);
    if (k > rounds) json_object_set_new(meta, "final", json_string("1"));
    if (resumed_from > 0) json_object_set_new(meta, "resumed_from", json_string(sf));
    int rc = fed_progfile_write(f->r.run, name, &f->layout, meta, z, err, errlen);
    json_decref(meta);
    return rc;
}

/* after its last file: the program's end (update_timeout_s at most); 0 when it exited 0 */
static int wait_end(fsite *f, char *err, size_t errlen)
{
    double deadline = mono_s() + f->update_timeout_s;
    while (!prog_run_poll(&f->r, POLL_MS))
        if (!f->r.terminating && mono_s() > deadline) {
            prog_run_stop(&f->r, "update_timeout_s passed after the final model");
        }
    f->running = false;
    const prog_rank_status *st = prog_run_finish(&f->r);
    if (f->r.by_worker) {
        snprintf(err, errlen, "stopped");
        return EXEC_RETRY;
    }
    if (st->end == PROG_RANK_EXITED && st->code == 0) return 0;
    char who[120];
    site_label(f, who, sizeof who);
    char *tail = prog_logcap_tail(f->r.logs, f->r.rank, TAIL_LINES, TAIL_BYTES);
    snprintf(err, errlen, "%s: its program %s after the final model%s%s", who, st->reason,
             tail && *tail ? "; its last lines:\n" : "", tail ? tail : "");
    free(tail);
    return EXEC_FAILED;
}

int exec_fed_program(exec_ctx *ctx, json_t **result, char *err, size_t errlen)
{
    const json_t *spec = ctx->task->spec;
    fsite f = {0};
    int rc = fed_site_join(&f.site, ctx, spec, err, errlen);
    if (rc) return rc;
    int rounds = (int)sch_number(&fed_program_spec_shape, spec, "rounds", 0);
    f.update_timeout_s = sch_number(&fed_program_spec_shape, spec, "update_timeout_s", 0);
    json_t *pspec = fed_site_program_spec(spec, f.site.me);
    tensorfile_header h = {0};
    double *v = NULL, *z = NULL;
    char why[1200];
    rc = EXEC_FAILED;
    if (prog_run_init(&f.r, ctx, pspec, f.site.me, err, errlen) != 0) goto out;
    if (prog_run_dirs(&f.r, err, errlen) != 0) goto out;
    remove_round_files(f.r.run, rounds);
    strv env = {0};
    build_env(&f, rounds, &env);
    int lrc = prog_run_launch(&f.r, &env, why, sizeof why);
    strv_free(&env);
    if (lrc != 0) {
        snprintf(err, errlen, "site %s (%d): its program could not start: %s", f.site.name, f.site.me, why);
        goto out;
    }
    f.running = true;
    if (f.site.me == 0) {
        snprintf(why, sizeof why, "site programs started; network %s",
                 ctx->net_fenced ? "fenced" : "NOT fenced (--program-network open)");
        ctx->note(ctx, why);
    }
    /* the program's initial model: the layout, and site 0's values are every site's start */
    size_t cap = FED_PROG_MAX_HEADER + 4 * (size_t)FED_PROG_MAX_VALUES;
    if ((rc = wait_file(&f, "round_0.out", cap, &f.layout, &v, err, errlen)) != 1) goto out;
    rc = EXEC_FAILED;
    if (f.layout.total == 0 || f.layout.total > FED_PROG_MAX_VALUES) {
        snprintf(err, errlen, "site %s (%d): round_0.out: %zu values: a model has 1 to %u", f.site.name, f.site.me, f.layout.total,
                 FED_PROG_MAX_VALUES);
        goto out;
    }
    if (check_update(&f, "round_0.out", &f.layout, v, false, NULL, err, errlen)) goto out;
    if ((rc = check_same_model(&f, err, errlen))) goto out;
    size_t dim = f.layout.total;
    cap = FED_PROG_MAX_HEADER + 4 * dim;
    uint64_t duals_seed; /* the duals are this site's secret: not derived from anything another party knows */
    if (RAND_bytes((unsigned char *)&duals_seed, sizeof duals_seed) != 1) {
        snprintf(err, errlen, "no random bytes for the duals");
        goto out;
    }
    if ((rc = fed_site_connect(&f.site, dim, 1.0, duals_seed, err, errlen))) goto out;
    z = xmalloc(sizeof(double) * dim);
    int done = 0; /* the round the job continues after: a checkpoint's, or 0 and site 0's initial model */
    if ((rc = fed_site_resume(&f.site, &f.layout, rounds, z, &done, err, errlen))) goto out;
    if (done == 0 && (rc = fed_site_from_site0(&f.site, v, z, err, errlen))) goto out;
    free(v), v = NULL;
    for (int k = done + 1; k <= rounds; k++) {
        rc = EXEC_FAILED;
        fed_site_round_start(&f.site);
        if (write_global(&f, k, rounds, k == done + 1 ? done : 0, z, err, errlen)) goto out;
        char name[64];
        snprintf(name, sizeof name, "round_%d.out", k);
        if ((rc = wait_file(&f, name, cap, &h, &v, err, errlen)) != 1) goto out;
        rc = EXEC_FAILED;
        double samples;
        if (check_update(&f, name, &h, v, true, &samples, err, errlen)) goto out;
        tensorfile_header_free(&h);
        if ((rc = fed_site_weigh(&f.site, samples, err, errlen))) goto out;
        if ((rc = fed_site_aggregate(&f.site, v, z, err, errlen))) goto out;
        free(v), v = NULL;
        fed_site_checkpoint(&f.site, &f.layout, z, k, rounds);
        char used[PATH_MAX + 64]; /* read by now: only the latest round's files stay */
        snprintf(used, sizeof used, "%s/round_%d.in", f.r.run, k);
        unlink(used);
        snprintf(used, sizeof used, "%s/round_%d.out", f.r.run, k);
        unlink(used);
        if (f.site.me == 0) {
            json_t *pt = fed_site_point(&f.site, k);
            json_object_set_new(pt, "samples", json_real(f.site.S.total_samples));
            char line[200];
            snprintf(line, sizeof(line), "round %d of %d aggregated: %.0f samples, consensus residual %.1e", k, rounds,
                     f.site.S.total_samples, f.site.residual);
            ctx->progress(ctx, (double)k / rounds, line, pt);
            json_decref(pt);
        }
    }
    rc = EXEC_FAILED;
    if (write_global(&f, rounds + 1, rounds, done >= rounds ? done : 0, z, err, errlen)) goto out;
    if ((rc = wait_end(&f, err, errlen))) goto out;
    if (f.site.me != 0) {
        rc = EXEC_SILENT;
        goto out;
    }
    rc = EXEC_FAILED;
    char model[PATH_MAX + 64];
    if (fed_progfile_write(f.r.out, GLOBAL_MODEL, &f.layout, NULL, z, err, errlen)) goto out;
    snprintf(model, sizeof model, "%s/%s", f.r.out, GLOBAL_MODEL);
    json_t *metrics = json_deep_copy(f.r.merged);
    json_object_set_new(metrics, "rounds", json_integer(rounds));
    json_object_set_new(metrics, "sites", json_integer(f.site.n));
    json_object_set_new(metrics, "residual", json_real(f.site.residual));
    json_object_set_new(metrics, "bytes_per_site_per_round", json_real(f.site.S.bytes_sent / (rounds > done ? rounds - done : 1)));
    *result = json_pack("{s:o, s:{s:s, s:I, s:I}, s:o, s:o}", "metrics", metrics, "global_model", "path", model, "tensors",
                        (json_int_t)f.layout.n, "parameters", (json_int_t)dim, "design", fed_site_design(&f.site), "outputs",
                        prog_run_outputs(f.r.out));
    rc = EXEC_OK;
out:
    if (f.running && rc != EXEC_OK && rc != EXEC_SILENT)
        log_info("job %s: site %d: stopping its program: %s", ctx->task->job_id, f.site.me, err);
    if (f.r.ctx) {
        if (f.r.pr)
            program_io_log_end(ctx->redis, ctx->task->job_id, f.r.rank, f.r.generation,
                               f.running ? "stopped by its site" : prog_rank_status_of(f.r.pr)->reason);
        prog_run_free(&f.r);
    }
    json_decref(pspec);
    tensorfile_header_free(&h);
    tensorfile_header_free(&f.layout);
    free(v), free(z);
    fed_site_free(&f.site);
    return rc;
}
