/* fed_site.c - a federated job's site, whatever trains its model (fed_site.h). */
#include "workers/fed_site.h"
#include "wire/requeue.h"
#include "common/alloc.h"
#include "common/log.h"
#include "workers/fed_ckpt.h"
#include "spec/fed_sitekey.h"
#include "spec/fed_spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* a program site's weight in the dropouts' mode is its round's samples in this unit: the fixed point (32 integer
 * bits) then holds weight x value for up to 2e13 samples x |value| (1e4 x 2^31) */
#define FED_DROP_WEIGHT_UNIT 1e4

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* the job's cancellation and preemption, asked while a site waits for the others */
static bool fed_stop(void *arg)
{
    exec_ctx *ctx = arg;
    return ctx->cancelled(ctx);
}

int fed_site_exec_rc(int fed_rc)
{
    return fed_rc == FED_LOST || fed_rc == FED_STOPPED ? EXEC_RETRY : EXEC_FAILED;
}

/* site s's pinned public key (spec.sites[s].public_key, valid) into pub; 0, or -1 (none) */
static int site_pinned(const json_t *spec, int s, unsigned char pub[FED_SITEKEY_LEN])
{
    const char *key = json_string_value(json_object_get(json_array_get(json_object_get(spec, "sites"), (size_t)s), "public_key"));
    char why[200];
    return key && fed_sitekey_parse(key, pub, why, sizeof why) == 0 ? 0 : -1;
}

/* Which site this worker runs (-1: none is left for it; -2: Redis did not answer): the first
 * unclaimed site that names it (its label site=NAME, or its public key pinned), else the first
 * unclaimed site that names no other worker (no label, no public key); a site pinned to another
 * key is never this worker's.  Claimed atomically in the generation's hash, so two workers never
 * run one site (a worker that claimed before, e.g. a restarted one, gets its own again).  The
 * scheduler placed the job so that every labelled site has a worker with its label and every pinned
 * site the worker with its key (scheduler/policy.h); a worker whose key changed since fails the job,
 * saying so. */
static int claim_site(exec_ctx *ctx, const json_t *spec, int n, char *err, size_t errlen)
{
    const json_t *sites = json_object_get(spec, "sites");
    const char *mine = ctx->site && *ctx->site ? ctx->site : NULL;
    unsigned char my_pub[FED_SITEKEY_LEN], pub[FED_SITEKEY_LEN];
    bool has_key = ctx->site_key && fed_sitekey_public(ctx->site_key, my_pub) == 0;
    int cand[FED_MAX_JOB_SITES], ncand = 0, pinned_elsewhere = 0;
    for (int pass = 0; pass < 2; pass++) /* the sites that name it first, then those that name no worker */
        for (int s = 0; s < n && s < FED_MAX_JOB_SITES; s++) {
            const char *label = json_string_value(json_object_get(json_array_get(sites, (size_t)s), "label"));
            bool labelled = label && mine && strncmp(label, "site=", 5) == 0 && strcmp(label + 5, mine) == 0;
            bool pinned = site_pinned(spec, s, pub) == 0, keyed = pinned && has_key && memcmp(pub, my_pub, sizeof pub) == 0;
            if (pinned && !keyed) { /* another worker's site */
                pinned_elsewhere += pass == 0;
                continue;
            }
            if (label && !labelled) continue;
            if (pass == 0 ? !(labelled || keyed) : (label != NULL || pinned)) continue;
            cand[ncand++] = s;
        }
    int me = fed_io_claim(ctx->redis, ctx->task->job_id, ctx->task->attempt, cand, ncand, ctx->worker_id);
    if (me == -2)
        snprintf(err, errlen, "cannot claim a site: Redis did not answer");
    else if (me < 0 && pinned_elsewhere)
        snprintf(err, errlen,
                 "no site of the job is left for worker %s (its label: site=%s; its site key: %s): %d site%s pinned by "
                 "spec.sites[i].public_key to another worker's key; give such a site the label of the worker that holds "
                 "its key, so that the scheduler places it there",
                 ctx->worker_id ? ctx->worker_id : "?", mine ? mine : "(none)",
                 ctx->site_key_text && *ctx->site_key_text ? ctx->site_key_text : "none (no --site-key)", pinned_elsewhere,
                 pinned_elsewhere == 1 ? " is" : "s are");
    else if (me < 0)
        snprintf(err, errlen, "no site of the job is left for this worker (its label: site=%s)", mine ? mine : "(none)");
    return me;
}

/* the roster of the spec (sites[i].public_key) and this worker's identity key into the exchange; 0, or -1 with err */
static int set_roster(fed_site *s, char *err, size_t errlen)
{
    unsigned char(*roster)[32] = xcalloc(FED_PARTY_MAX, 32), pinned[FED_PARTY_MAX] = {0};
    for (int i = 0; i < s->n && i < FED_PARTY_MAX; i++)
        pinned[i] = site_pinned(s->spec, i, roster[i]) == 0;
    int rc = fed_party_identity(&s->S, (const unsigned char(*)[32])roster, pinned, s->ctx->site_key);
    free(roster);
    if (rc)
        snprintf(err, errlen, "site %d (spec.sites[%d].public_key) is pinned to a key this worker does not hold (its key: %s)",
                 s->me, s->me, s->ctx->site_key_text && *s->ctx->site_key_text ? s->ctx->site_key_text : "none");
    return rc;
}

int fed_site_join(fed_site *s, exec_ctx *ctx, const json_t *spec, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->ctx = ctx, s->spec = spec;
    s->n = (int)json_array_size(json_object_get(spec, "sites"));
    const sch *shape = fed_spec_variant(spec) == FED_PROGRAM ? &fed_program_spec_shape : &fed_spec_shape;
    s->timeout_ms = (int)sch_number(shape, spec, "exchange_timeout_s", 0) * 1000;
    if (!ctx->fed_secret || ctx->fed_secret_len == 0) {
        snprintf(err, errlen,
                 "worker %s has no federation secret: start it with --fed-secret FILE, the same file on every "
                 "worker (docs/operations.md)",
                 ctx->worker_id ? ctx->worker_id : "?");
        return EXEC_FAILED;
    }
    s->me = claim_site(ctx, spec, s->n, err, errlen);
    if (s->me < 0) return s->me == -2 ? EXEC_RETRY : EXEC_FAILED;
    s->name = json_string_value(json_object_get(json_array_get(json_object_get(spec, "sites"), (size_t)s->me), "name"));
    ctx->progress(ctx, 0.0, "waiting for the other sites", NULL);
    rdv_members mem;
    char why[400];
    if (ctx->rendezvous(ctx, s->n, "fed", s->timeout_ms, &mem, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "the sites did not meet: %s", why);
        return EXEC_RETRY;
    }
    return 0;
}

int fed_site_connect(fed_site *s, size_t dim, double samples, uint64_t duals_seed, char *err, size_t errlen)
{
    exec_ctx *ctx = s->ctx;
    s->dim = dim;
    s->lambda = xcalloc(dim, sizeof(double)), s->x = xmalloc(sizeof(double) * dim);
    s->msgv = xmalloc(sizeof(double) * dim), s->avg = xmalloc(sizeof(double) * dim);
    s->duals = (rng_state){duals_seed};
    if (fed_design_make(s->n, &s->d, err, errlen)) return EXEC_FAILED; /* verified inside */
    /* keys bound to the job, and the weights (only the total count is revealed) */
    fed_io_open(&s->io, ctx->redis, ctx->task->job_id, ctx->task->attempt, fed_stop, ctx);
    if (fed_party_init(&s->S, &s->io.net, s->n, s->me, ctx->task->job_id, ctx->task->attempt, ctx->fed_secret, ctx->fed_secret_len,
                       &s->d, dim, s->timeout_ms)) {
        snprintf(err, errlen, "cannot start the exchange: %d sites, rank %d or the cluster secret out of range", s->n, s->me);
        return EXEC_FAILED;
    }
    if (set_roster(s, err, errlen)) return EXEC_FAILED;
    int frc = fed_party_setup(&s->S, samples, err, errlen);
    if (frc) return fed_site_exec_rc(frc);
    s->fedavg = !fed_spec_securedfl(s->spec);
    const json_t *admm = json_object_get(s->spec, "admm");
    s->P = (fed_admm_params){sch_number(&fed_admm_shape, admm, "rho", 0), sch_number(&fed_admm_shape, admm, "decay", 0),
                             (int)sch_number(&fed_admm_shape, admm, "decay_every", 0)};
    s->iters = (int)sch_number(&fed_admm_shape, admm, "iterations", 0);
    s->t = fed_spec_threshold(s->spec);
    s->drop = s->fedavg && s->t < s->n;
    /* the scheduler goes on without this site's worker, should it be lost, while t sites remain (site 0 excepted) */
    if (s->drop && requeue_tolerate(ctx->redis, ctx->task->job_id, ctx->task->attempt, ctx->worker_id, s->me, s->t))
        log_warn("job %s: site %d: cannot register with the scheduler's record of live sites: its loss requeues the job",
                 ctx->task->job_id, s->me);
    if (s->me == 0) {
        char note[300], mode[80] = "";
        if (s->drop) snprintf(mode, sizeof mode, "; a round completes with %d of the %d sites", s->t, s->n);
        snprintf(note, sizeof(note), "%d sites met; design: %s, %d classes; %s, sums masked over all sites and sealed%s", s->n,
                 s->d.kind, s->d.classes, s->fedavg ? "FedAvg" : "SecureD-FL", mode);
        ctx->progress(ctx, 0.0, note, NULL);
    }
    return 0;
}

int fed_site_from_site0(fed_site *s, const double *v, double *z, char *err, size_t errlen)
{
    double *mine = s->me == 0 ? (double *)v : xcalloc(s->dim, sizeof(double));
    int frc = fed_party_sum(&s->S, mine, 0, 0, z, err, errlen);
    if (mine != v) free(mine);
    return frc ? fed_site_exec_rc(frc) : 0;
}

/* every site's announcement (the generation's gang values fed_ck_<site>): 0, or EXEC_RETRY with err */
static int resume_gather(fed_site *s, const fed_resume_have *mine, fed_resume_have *have, char *err, size_t errlen)
{
    exec_ctx *ctx = s->ctx;
    char field[32], text[FED_RESUME_ANNOUNCE_MAX], why[300];
    fed_resume_announce(mine, text);
    snprintf(field, sizeof field, "fed_ck_%d", s->me);
    if (ctx->gang_put(ctx, field, text) != 0) {
        snprintf(err, errlen, "cannot announce this site's checkpoint through the rendezvous (Redis unreachable)");
        return EXEC_RETRY;
    }
    for (int i = 0; i < s->n; i++) {
        snprintf(field, sizeof field, "fed_ck_%d", i);
        if (ctx->gang_get(ctx, field, s->timeout_ms, text, sizeof text, why, sizeof why) != 0) {
            snprintf(err, errlen, "site %d's checkpoint did not come: %s", i, why);
            return EXEC_RETRY;
        }
        if (fed_resume_parse(text, &have[i]) != 0) have[i] = (fed_resume_have){0, "-"}; /* counts as none */
    }
    return 0;
}

/* the holder's values to every site as their FP32 bits (two sums of 16-bit halves), in z; *same: whether they
 * match sha.  0, or an EXEC_* code with err */
static int resume_transfer(fed_site *s, int holder, const double *v, const char *sha, double *z, bool *same, char *err,
                           size_t errlen)
{
    size_t dim = s->dim;
    double *hi = xcalloc(dim, sizeof(double)), *lo = xcalloc(dim, sizeof(double)), *shi = xmalloc(sizeof(double) * dim),
           *slo = xmalloc(sizeof(double) * dim);
    if (s->me == holder && v)
        fed_resume_split(v, dim, hi, lo); /* without v (it announced what it lacks): the sums fail the check */
    int frc = fed_party_sum(&s->S, hi, 0, 0, shi, err, errlen);
    if (!frc) frc = fed_party_sum(&s->S, lo, 0, 0, slo, err, errlen);
    if (!frc) {
        char got[65];
        fed_resume_join(shi, slo, dim, z);
        fed_resume_sha256(z, dim, got);
        *same = strcmp(got, sha) == 0;
    }
    free(hi), free(lo), free(shi), free(slo);
    return frc ? fed_site_exec_rc(frc) : 0;
}

int fed_site_resume(fed_site *s, const tensorfile_header *layout, int rounds, double *z, int *round, char *err, size_t errlen)
{
    exec_ctx *ctx = s->ctx;
    fed_resume_have have[FED_MAX_JOB_SITES] = {{0, "-"}}, mine = {0, "-"};
    fed_resume_plan plan;
    double *v = NULL;
    char why[700], note[900];
    *round = 0;
    if (fed_ckpt_load(ctx, layout, rounds, &mine, &v, why, sizeof why) == 0 && why[0]) {
        snprintf(note, sizeof note, "site %s (%d): %s", s->name, s->me, why);
        ctx->note(ctx, note);
    }
    int rc = resume_gather(s, &mine, have, err, errlen);
    if (!rc) fed_resume_decide(have, s->n, rounds, &plan);
    if (rc || plan.round == 0) {
        if (!rc && s->me == 0 && plan.why[0]) ctx->note(ctx, plan.why);
        free(v);
        return rc;
    }
    double *got = xmalloc(sizeof(double) * s->dim), ok = 0;
    bool same = false;
    rc = resume_transfer(s, plan.holder, v, plan.sha256, got, &same, err, errlen);
    if (!rc) { /* did every site get the holder's model? */
        int frc = fed_party_sum1(&s->S, same ? 1.0 : 0.0, &ok, err, errlen);
        rc = frc ? fed_site_exec_rc(frc) : 0;
    }
    if (!rc && ok < s->n - 0.5) {
        snprintf(note, sizeof note,
                 "the checkpoint of round %d (site %d's, sha256 %.12s...) did not reach every site intact (%.0f of %d): starting "
                 "again from round 1",
                 plan.round, plan.holder, plan.sha256, ok, s->n);
    } else if (!rc) {
        memcpy(z, got, sizeof(double) * s->dim);
        *round = plan.round;
        int held = 0;
        for (int i = 0; i < s->n; i++)
            held += have[i].round == plan.round;
        if (plan.round < rounds)
            snprintf(note, sizeof note,
                     "resumed at round %d of %d from the checkpoint of round %d (site %d's copy, sha256 %.12s...; %d of %d sites "
                     "held it)",
                     plan.round + 1, rounds, plan.round, plan.holder, plan.sha256, held, s->n);
        else
            snprintf(note, sizeof note,
                     "all %d rounds were done before the restart: the final model is the checkpoint of round %d (site %d's "
                     "copy, sha256 %.12s...)",
                     rounds, plan.round, plan.holder, plan.sha256);
    }
    free(got), free(v);
    if (!rc && s->me == 0) ctx->note(ctx, note);
    return rc;
}

void fed_site_checkpoint(fed_site *s, const tensorfile_header *layout, const double *z, int round, int rounds)
{
    char why[600];
    if (fed_ckpt_save(s->ctx, layout, z, round, rounds, why, sizeof why))
        log_warn("job %s: site %d: round %d not checkpointed: %s", s->ctx->task->job_id, s->me, round, why);
    /* the first round a restarted generation completes: the sites got past where the last one stopped, so the
     * losses before it no longer count towards the job's failures (wire/requeue.h, requeue_forgive) */
    if (s->me == 0 && !s->moved_on && s->ctx->task->attempt > 0 && s->ctx->redis) {
        s->moved_on = true;
        if (requeue_forgive(s->ctx->redis, s->ctx->task->job_id) > 0) {
            char note[120];
            snprintf(note, sizeof note,
                     "round %d completed after the restart: earlier lost generations no longer count as failures", round);
            s->ctx->note(s->ctx, note);
        }
    }
}

int fed_site_weigh(fed_site *s, double samples, char *err, size_t errlen)
{
    s->program_weights = true;
    if (s->drop) { /* the round's sum carries the weights (a sum over all sites would wait for a lost one) */
        s->S.a = samples / FED_DROP_WEIGHT_UNIT;
        return 0;
    }
    int frc = fed_party_weigh(&s->S, samples, err, errlen);
    return frc ? fed_site_exec_rc(frc) : 0;
}

void fed_site_round_start(fed_site *s)
{
    s->t0 = now_s(), s->sent0 = s->S.bytes_sent, s->got0 = s->S.bytes_got;
}

/* the dropouts' mode: one sum that completes with t of the n sites; site 0 says when the sites a round went
 * without change (and any site dropped for a malformed message) */
static int aggregate_drop(fed_site *s, const double *w, double *z, char *err, size_t errlen)
{
    exec_ctx *ctx = s->ctx;
    uint64_t live = 0;
    if (requeue_live_sites(ctx->redis, ctx->task->job_id, ctx->task->attempt, &live)) live = 0;
    /* after t sites delivered, a quarter of the exchange timeout for the others (a site that trains slower than
     * that misses the round, gets its model, and takes part in the next) */
    fed_drop_opts o = {s->t, s->timeout_ms / 4, 2, live};
    int frc = fed_party_sum_drop(&s->S, &o, w, s->S.a, z, &s->last, err, errlen);
    if (frc) return fed_site_exec_rc(frc);
    memcpy(s->avg, z, sizeof(double) * s->dim);
    s->residual = 0;
    if (s->program_weights) s->S.total_samples = s->last.weight * FED_DROP_WEIGHT_UNIT; /* the delivered sites' samples */
    uint64_t all = s->n >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << s->n) - 1, missing = all & ~s->last.u2;
    if (s->me == 0 && (missing != s->missing || s->last.events[0])) {
        char note[700], names[400] = "";
        for (int i = 0; i < s->n; i++)
            if (missing >> i & 1)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "",
                         json_string_value(json_object_get(json_array_get(json_object_get(s->spec, "sites"), (size_t)i), "name")));
        if (missing)
            snprintf(note, sizeof note, "%d of %d sites delivered (without %s: the round completed with the others)%s%s",
                     s->last.delivered, s->n, names, s->last.events[0] ? "; " : "", s->last.events);
        else
            snprintf(note, sizeof note, "all %d sites delivered%s%s", s->n, s->last.events[0] ? "; " : "", s->last.events);
        ctx->note(ctx, note);
    }
    s->missing = missing;
    return 0;
}

int fed_site_aggregate(fed_site *s, const double *w, double *z, char *err, size_t errlen)
{
    if (s->drop) {
        double t0 = now_s();
        int rc = aggregate_drop(s, w, z, err, errlen);
        s->aggregate_s = now_s() - t0;
        return rc;
    }
    for (size_t j = 0; !s->fedavg && j < s->dim; j++) /* this round's duals: private to the site */
        s->lambda[j] = 0.02 * (double)rng_normal(&s->duals);
    double t0 = now_s();
    int frc = fed_party_round(&s->S, w, s->lambda, &s->P, s->iters, s->fedavg, z, s->avg, s->x, s->msgv, err, errlen);
    s->aggregate_s = now_s() - t0;
    if (frc) return fed_site_exec_rc(frc);
    double num = 0, den = 0;
    for (size_t j = 0; j < s->dim; j++)
        num += (z[j] - s->avg[j]) * (z[j] - s->avg[j]), den += s->avg[j] * s->avg[j];
    s->residual = sqrt(num / (den > 0 ? den : 1));
    return 0;
}

json_t *fed_site_point(const fed_site *s, int round)
{
    return json_pack("{s:i, s:I, s:f, s:f, s:f, s:f, s:f, s:i, s:i}", "round", round, "step", (json_int_t)round, "residual",
                     s->residual, "bytes_sent", s->S.bytes_sent - s->sent0, "bytes_received", s->S.bytes_got - s->got0, "round_s",
                     now_s() - s->t0, "aggregate_s", s->aggregate_s, "sites", s->n, "delivered",
                     s->drop ? s->last.delivered : s->n);
}

static json_t *fed_site_groups(const fed_site *s)
{
    const fed_design *d = &s->d;
    int n = s->n;
    json_t *groups = json_array();
    for (int c = 0; c < d->classes; c++) {
        json_t *cls = json_array();
        for (int gi = 0; gi < d->ngroups[c]; gi++) {
            json_t *grp = json_array();
            for (int k = 0; k < n; k++)
                if (d->group[c * n + k] == gi)
                    json_array_append_new(
                        grp, json_copy(json_object_get(json_array_get(json_object_get(s->spec, "sites"), (size_t)k), "name")));
            json_array_append_new(cls, grp);
        }
        json_array_append_new(groups, cls);
    }
    return groups;
}

json_t *fed_site_design(const fed_site *s)
{
    return json_pack("{s:s, s:i, s:o}", "kind", s->d.kind, "classes", s->d.classes, "groups", fed_site_groups(s));
}

void fed_site_free(fed_site *s)
{
    free(s->lambda), free(s->x), free(s->msgv), free(s->avg);
    s->lambda = s->x = s->msgv = s->avg = NULL;
    fed_party_free(&s->S);
    fed_design_free(&s->d);
}
