/* gantry-autoscale-sim: replays a request-rate trace against the autoscaling
 * policies of autoscale_policy.h (the scheduler's own code) in the simulator of autoscale_sim.h,
 * several policies, cluster sizes and seeds in one run.
 *
 *   gantry-autoscale-sim [--trace FILE] [--policies a,b,...] [--capacity 16,24,32]
 *       [--seeds 5] [--jobs 10] [--minutes A:B] [--warmup 360] [--service-ms 180]
 *       [--slo-ms 720] [--slo-q 0.99] [--cold-start-s 10] [--cv 0] [--quantile 0.8]
 *       [--period 360] [--queue-limit 1000] [--control-s 300] [--predictor seasonal|holt] [--drop-penalty G] [--json]
 *   gantry-autoscale-sim --forecast-eval [--trace FILE] [--jobs 10] [--minutes A:B] [--warmup M]
 *       [--quantile Q] [--period MIN]
 *
 * --forecast-eval scores the predictors instead (forecast_eval.h): pinball loss and coverage of
 * the forecast at --quantile, per predictor and horizon, on the minutes after the warm-up.
 * A Faro policy takes the ablation's modifiers (autoscale_policy.h): +oracle, +greedy, +exact, +relaxed.
 * The trace: JSON lines {"minute":m,"rates":{"job":requests in that minute,...}}
 * (data/traces/README.md).  Prints, per capacity, a markdown table of mean ± sd
 * over the seeds, or with --json one object per (capacity, policy). */
#include "scheduler/autoscale/autoscale_sim.h"
#include "common/alloc.h"
#include "scheduler/autoscale/forecast_eval.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JOBS 256
#define MAX_LIST 32

static int split(char *s, char **out, int max)
{
    int n = 0;
    for (char *t = strtok(s, ","); t && n < max; t = strtok(NULL, ","))
        out[n++] = t;
    return n;
}

static int cmps(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* counts[m * njobs + j] for the first `want` jobs (sorted by name); NULL with a message */
static double *load_trace(const char *path, int want, int *njobs, int *minutes, char ***names)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "gantry-autoscale-sim: cannot open %s\n", path);
        return NULL;
    }
    char *line = NULL;
    size_t cap = 0, alloc = 0;
    double *counts = NULL;
    int m = 0, n = 0;
    char **nm = NULL;
    while (getline(&line, &cap, f) > 0) {
        json_error_t err;
        json_t *o = json_loads(line, 0, &err), *rates = json_object_get(o, "rates");
        if (!json_is_object(rates)) {
            fprintf(stderr, "gantry-autoscale-sim: %s line %d: not a trace line (%s)\n", path, m + 1, o ? "no rates" : err.text);
            json_decref(o);
            free(counts);
            counts = NULL;
            break;
        }
        if (!nm) { /* the jobs: the first line's names, sorted */
            nm = xcalloc(MAX_JOBS, sizeof(char *));
            const char *k;
            json_t *v;
            json_object_foreach(rates, k, v) if (n < MAX_JOBS) nm[n++] = xstrdup(k);
            qsort(nm, (size_t)n, sizeof(char *), cmps);
            if (want > 0 && want < n) n = want;
        }
        if ((size_t)(m + 1) * n > alloc) {
            alloc = alloc ? alloc * 2 : (size_t)n * 1024;
            counts = xrealloc(counts, sizeof(double) * alloc);
        }
        for (int j = 0; j < n; j++)
            counts[(size_t)m * n + j] = json_number_value(json_object_get(rates, nm[j]));
        m++;
        json_decref(o);
    }
    free(line);
    fclose(f);
    *njobs = n, *minutes = m, *names = nm;
    return counts;
}

int main(int argc, char **argv)
{
    json_set_alloc_funcs(xmalloc, free); /* jansson never returns NULL for memory (common/alloc.h) */
    const char *trace = "data/traces/faro_days01-10.jsonl";
    char policies[512] = "faro-fairsum,faro-sum,faro-fair,fairshare,oneshot,hpa,aiad,mark,ray-serve,kpa", caps[256] = "16,24,32";
    int seeds = 5, want_jobs = 10, a = 2520, b = 3600, warmup = 360, queue_limit = 1000, json = 0, period = 360;
    int predictor = AS_PRED_DEFAULT, forecast_eval = 0;
    double service_ms = 180, slo_ms = 720, slo_q = 0.99, cold = 10, cv = 0, quantile = 0.8, control_s = 300, drop_penalty = 0;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--json") || !strcmp(k, "--forecast-eval")) {
            *(!strcmp(k, "--json") ? &json : &forecast_eval) = 1;
            continue;
        }
        if (!v || k[0] != '-' || k[1] != '-') {
            fprintf(stderr, "usage: gantry-autoscale-sim [--trace FILE] [--policies a,b] [--capacity 16,24] [--seeds N] "
                            "[--jobs N] [--minutes A:B] [--warmup M] [--service-ms MS] [--slo-ms MS] [--slo-q Q] "
                            "[--cold-start-s S] [--cv CV] [--quantile Q] [--period MIN] [--queue-limit N] [--predictor P] "
                            "[--drop-penalty G] [--json] "
                            "[--forecast-eval]\n");
            return 2;
        }
        i++;
        if (!strcmp(k, "--trace"))
            trace = v;
        else if (!strcmp(k, "--policies"))
            snprintf(policies, sizeof(policies), "%s", v);
        else if (!strcmp(k, "--capacity"))
            snprintf(caps, sizeof(caps), "%s", v);
        else if (!strcmp(k, "--seeds"))
            seeds = atoi(v);
        else if (!strcmp(k, "--jobs"))
            want_jobs = atoi(v);
        else if (!strcmp(k, "--minutes"))
            sscanf(v, "%d:%d", &a, &b);
        else if (!strcmp(k, "--warmup"))
            warmup = atoi(v);
        else if (!strcmp(k, "--service-ms"))
            service_ms = atof(v);
        else if (!strcmp(k, "--slo-ms"))
            slo_ms = atof(v);
        else if (!strcmp(k, "--slo-q"))
            slo_q = atof(v);
        else if (!strcmp(k, "--cold-start-s"))
            cold = atof(v);
        else if (!strcmp(k, "--cv"))
            cv = atof(v);
        else if (!strcmp(k, "--quantile"))
            quantile = atof(v);
        else if (!strcmp(k, "--period"))
            period = atoi(v);
        else if (!strcmp(k, "--queue-limit"))
            queue_limit = atoi(v);
        else if (!strcmp(k, "--control-s"))
            control_s = atof(v);
        else if (!strcmp(k, "--drop-penalty"))
            drop_penalty = atof(v);
        else if (!strcmp(k, "--predictor") && as_predictor_parse(v) >= 0)
            predictor = as_predictor_parse(v);
        else {
            fprintf(stderr, "gantry-autoscale-sim: unknown option %s\n", k);
            return 2;
        }
    }
    int njobs, minutes;
    char **names;
    double *all = load_trace(trace, want_jobs, &njobs, &minutes, &names);
    if (!all) return 1;
    if (a < 0 || b > minutes || a >= b || warmup >= b - a || seeds < 1 || queue_limit < 1) {
        fprintf(stderr, "gantry-autoscale-sim: bad window %d:%d (trace has %d minutes), warmup %d, seeds %d\n", a, b, minutes,
                warmup, seeds);
        return 2;
    }
    as_job jobs[MAX_JOBS];
    for (int j = 0; j < njobs; j++)
        jobs[j] = (as_job){service_ms / 1000, slo_ms / 1000, slo_q, 1, 1, 1, 1 << 20};
    char *pl[MAX_LIST], *cl[MAX_LIST];
    int np = split(policies, pl, MAX_LIST), nc = split(caps, cl, MAX_LIST);
    as_params prm = {
        .quantile = quantile, .period_min = period, .control_s = control_s, .predictor = predictor, .drop_penalty = drop_penalty};
    if (forecast_eval) {
        printf("Forecast quality: trace %s, minutes %d:%d (first %d only observed), %d jobs, period %d, quantile %g\n\n"
               "| predictor | pinball loss (req/s) | coverage | pinball h=1 / h=7 | coverage h=1 / h=7 | mean rate "
               "|\n|---|---|---|---|---|---|\n",
               trace, a, b, warmup, njobs, period, quantile);
        static const char *const pn[] = {"holt", "seasonal"};
        for (int k = 0; k < 2; k++) {
            fe_result r;
            fe_evaluate(all + (size_t)a * njobs, njobs, b - a, warmup, period, quantile, as_predictor_parse(pn[k]), &r);
            printf("| %s | %.4f | %.3f | %.4f / %.4f | %.3f / %.3f | %.2f |\n", pn[k], r.pinball, r.coverage, r.pinball_h[0],
                   r.pinball_h[PRED_HORIZON - 1], r.coverage_h[0], r.coverage_h[PRED_HORIZON - 1], r.mean_rate);
        }
        printf("\n(the oracle, the true rates, scores 0 and covers every minute)\n");
        for (int j = 0; names && names[j]; j++)
            free(names[j]);
        free(names);
        free(all);
        return 0;
    }
    if (!json)
        printf("Trace %s, minutes %d:%d (first %d for warm-up), %d jobs, %g ms service, p%g <= %g ms, cold start %g s, "
               "%d seeds\n",
               trace, a, b, warmup, njobs, service_ms, slo_q * 100, slo_ms, cold, seeds);
    for (int ci = 0; ci < nc; ci++) {
        double capacity = atof(cl[ci]);
        if (!json) {
            printf(
                "\n**%g slots**\n\n| policy | SLO violation rate | lost utility | drop rate | replica-minutes | solver ms mean / "
                "max |\n|---|---|---|---|---|---|\n",
                capacity);
        }
        double viol[MAX_LIST] = {0};
        for (int pi = 0; pi < np; pi++) {
            double v[64], sum[5] = {0};
            double p99 = 0, mx = 0;
            for (int s = 0; s < seeds && s < 64; s++) {
                sim_config c = {njobs, b - a,  all + (size_t)a * njobs, jobs, capacity, cold, queue_limit,
                                cv,    warmup, (uint64_t)s + 1};
                sim_result r;
                if (sim_run(&c, pl[pi], &prm, &r) != 0) {
                    fprintf(stderr, "gantry-autoscale-sim: unknown policy %s\n", pl[pi]);
                    return 2;
                }
                v[s] = r.violation_rate;
                sum[0] += r.violation_rate, sum[1] += r.lost_utility, sum[2] += r.drop_rate, sum[3] += r.replica_minutes;
                sum[4] += r.solver_ms_mean, p99 = fmax(p99, r.solver_ms_p99), mx = fmax(mx, r.solver_ms_max);
            }
            double mean = sum[0] / seeds, sd = 0;
            for (int s = 0; s < seeds; s++)
                sd += (v[s] - mean) * (v[s] - mean);
            sd = seeds > 1 ? sqrt(sd / (seeds - 1)) : 0;
            viol[pi] = mean;
            if (json)
                printf("{\"capacity\":%g,\"policy\":\"%s\",\"seeds\":%d,\"slo_violation_rate\":%.6f,\"slo_violation_rate_sd\":%.6f,"
                       "\"lost_utility\":%.6f,\"drop_rate\":%.6f,\"replica_minutes\":%.1f,\"solver_ms_mean\":%.4f,"
                       "\"solver_ms_p99\":%.4f,\"solver_ms_max\":%.4f}\n",
                       capacity, pl[pi], seeds, mean, sd, sum[1] / seeds, sum[2] / seeds, sum[3] / seeds, sum[4] / seeds, p99, mx);
            else
                printf("| %s | %.4f ± %.4f | %.4f | %.4f | %.0f | %.3f / %.3f |\n", pl[pi], mean, sd, sum[1] / seeds,
                       sum[2] / seeds, sum[3] / seeds, sum[4] / seeds, mx);
            fflush(stdout);
        }
        if (!json) { /* the headline ratios */
            int fs = -1;
            for (int pi = 0; pi < np; pi++)
                if (!strcmp(pl[pi], "faro-fairsum")) fs = pi;
            for (int pi = 0; fs >= 0 && pi < np; pi++)
                if (!strcmp(pl[pi], "ray-serve") || !strcmp(pl[pi], "hpa") || !strcmp(pl[pi], "oneshot"))
                    printf("%s / faro-fairsum violations: %.2fx\n", pl[pi], viol[fs] > 0 ? viol[pi] / viol[fs] : INFINITY);
        }
    }
    for (int j = 0; names && names[j]; j++)
        free(names[j]);
    free(names);
    free(all);
    return 0;
}
