/* prog_run.c - one rank of a team's program run by a worker (prog_run.h): its directories, its launch
 * in the sandbox, and its supervision (logs, metrics, cancellation). */
#include "workers/prog_run.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/paths.h"
#include "workers/program/prog_netfence.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BWRAP "/usr/bin/bwrap"
#define MAX_OUTPUTS 1000 /* files listed in result.outputs */

/* --- where things are --- */

/* gantry-rank-init beside this worker's binary (the build directory's top level, or the installed bindir) */
static int find_init(char *out, size_t outlen)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = '\0';
    if (snprintf(out, outlen, "%s/gantry-rank-init", exe) >= (int)outlen) return -1;
    return access(out, X_OK);
}

/* the task's roots (the tenant's, as the server published them) into roots[] (existing directories,
 * resolved); how many */
static int task_roots(const task_msg *t, char (*roots)[PATH_MAX], int max)
{
    int n = 0;
    size_t i;
    json_t *v;
    json_array_foreach(t->roots, i, v)
    {
        const char *s = json_string_value(v);
        struct stat st;
        if (n < max && s && realpath(s, roots[n]) && stat(roots[n], &st) == 0 && S_ISDIR(st.st_mode)) n++;
    }
    return n;
}

int prog_run_init(prog_run *p, exec_ctx *ctx, const json_t *spec, int rank, char *err, size_t errlen)
{
    const task_msg *t = ctx->task;
    memset(p, 0, sizeof(*p));
    p->ctx = ctx, p->rank = rank, p->generation = t->attempt, p->fraction = -1;
    if (access(BWRAP, X_OK) != 0) {
        snprintf(err, errlen, "this worker cannot run programs: %s (Debian's bubblewrap) is not installed", BWRAP);
        return -1;
    }
    if (find_init(p->init, sizeof(p->init)) != 0) {
        snprintf(err, errlen, "this worker cannot run programs: gantry-rank-init is not installed beside gantry-worker");
        return -1;
    }
    if (!ctx->net_fenced && !ctx->net_open) {
        snprintf(err, errlen,
                 "this worker cannot run programs: it cannot fence their network to the job's peers (%s); the operator may "
                 "start it with --program-network open to run them with the host's network",
                 ctx->net_why ? ctx->net_why : "unknown");
        return -1;
    }
    program_settings_get(spec, t->max_memory_bytes, &p->set);
    static char roots[PROG_RUN_MAX_ROOTS][PATH_MAX];
    int nroots = task_roots(t, roots, PROG_RUN_MAX_ROOTS);
    const char *rootv[PROG_RUN_MAX_ROOTS];
    for (int r = 0; r < nroots; r++)
        rootv[r] = roots[r];
    char why[600];
    if (nroots == 0 || path_confine_dir(rootv, nroots, p->set.workdir, p->workdir, sizeof(p->workdir), why, sizeof(why)) != 0) {
        snprintf(err, errlen, "spec.program.workdir: %s", nroots ? why : "none of the tenant's roots exists on this worker");
        return -1;
    }
    p->merged = json_object();
    return 0;
}

/* a job id as the server writes them ("j_" and hex digits): nothing that walks out of <state>/jobs */
static bool job_id_shaped(const char *id)
{
    if (!id || strncmp(id, "j_", 2) != 0 || strlen(id) > 64 || !id[2]) return false;
    return strspn(id + 2, "0123456789abcdef") == strlen(id + 2);
}

/* the job's directories on this worker: <state>/jobs/<job>/{checkpoint,output,logs,run-R}; a paused
 * search trial's later runs keep the checkpoint directory of its first job (spec.trial.checkpoint_job,
 * written by the server only: docs/search.md), in the state directory the workers share */
int prog_run_dirs(prog_run *p, char *err, size_t errlen)
{
    snprintf(p->dir, sizeof(p->dir), "%s/jobs/%s", p->ctx->state_dir, p->ctx->task->job_id);
    const char *keep = json_string_value(json_object_get(json_object_get(p->ctx->task->spec, "trial"), "checkpoint_job"));
    if (keep && !job_id_shaped(keep)) {
        snprintf(err, errlen, "spec.trial.checkpoint_job: not a job id");
        return -1;
    }
    if (keep)
        snprintf(p->ckpt, sizeof(p->ckpt), "%s/jobs/%s/checkpoint", p->ctx->state_dir, keep);
    else
        snprintf(p->ckpt, sizeof(p->ckpt), "%s/checkpoint", p->dir);
    snprintf(p->out, sizeof(p->out), "%s/output", p->dir);
    snprintf(p->logs, sizeof(p->logs), "%s/logs", p->dir);
    snprintf(p->run, sizeof(p->run), "%s/run-%d", p->dir, p->rank);
    const char *dirs[] = {p->ckpt, p->out, p->logs, p->run};
    for (size_t i = 0; i < 4; i++)
        if (path_mkdirs(dirs[i]) != 0) {
            snprintf(err, errlen, "cannot create the job's directory %s: %s", dirs[i], strerror(errno));
            return -1;
        }
    /* this generation's metrics start empty: the reader returns every line of the file */
    char metrics[PATH_MAX + 32];
    snprintf(metrics, sizeof(metrics), "%s/metrics.jsonl", p->run);
    if (unlink(metrics) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "cannot remove the last generation's metrics file %.300s: %s", metrics, strerror(errno));
        return -1;
    }
    return 0;
}

/* The device nodes a GPU worker's rank uses (NVIDIA's driver): the control nodes and the worker's GPU
 * (CUDA_VISIBLE_DEVICES as an index; a UUID or a list binds every GPU node and CUDA_VISIBLE_DEVICES
 * still chooses).  Nodes that do not exist are skipped (--dev-bind-try).  A CPU worker: none.  Not
 * yet run on a GPU machine (docs/programs.md). */
#define MAX_DEVICES 20
static void gpu_devices(const exec_ctx *ctx, char (*names)[32], const char **out)
{
    int n = 0;
    if (ctx->worker_kind && strcmp(ctx->worker_kind, "gpu") == 0) {
        static const char *const control[] = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"};
        for (size_t i = 0; i < sizeof(control) / sizeof(control[0]); i++)
            snprintf(names[n++], 32, "/dev/%s", control[i]);
        const char *gpu = getenv("CUDA_VISIBLE_DEVICES");
        bool index = gpu && gpu[0] && strspn(gpu, "0123456789") == strlen(gpu) && strlen(gpu) < 8;
        if (index)
            snprintf(names[n++], 32, "/dev/nvidia%s", gpu);
        else
            for (int g = 0; n < MAX_DEVICES; g++)
                snprintf(names[n++], 32, "/dev/nvidia%d", g);
    }
    for (int i = 0; i < n; i++)
        out[i] = names[i];
    out[n] = NULL;
}

extern char **environ;

void prog_run_device_env(const exec_ctx *ctx, strv *env)
{
    if (ctx->worker_kind && strcmp(ctx->worker_kind, "gpu") == 0) {
        /* a GPU worker is started with its GPU in CUDA_VISIBLE_DEVICES (deploy/up, the systemd unit);
         * the operator's NCCL_* settings (interfaces, transports) go to the program as they are */
        const char *gpu = getenv("CUDA_VISIBLE_DEVICES");
        strv_add(env, xasprintf("CUDA_VISIBLE_DEVICES=%s", gpu ? gpu : "0"));
        for (char **e = environ; *e; e++)
            if (strncmp(*e, "NCCL_", 5) == 0) strv_add(env, xstrdup(*e));
    }
}

/* --- while it runs --- */

/* ships whole lines of new output (everything left when final) to the job's log stream */
static void ship_logs(prog_run *p, bool final)
{
    exec_ctx *ctx = p->ctx;
    for (int rounds = 0; rounds < 64; rounds++) {
        ssize_t n = prog_logcap_follow_read(&p->follow, p->pending + p->npending, sizeof(p->pending) - p->npending);
        if (n > 0) p->npending += (size_t)n;
        if (p->npending == 0) return;
        size_t send = p->npending;
        if (!final && p->npending < sizeof(p->pending)) { /* up to the last newline; a full buffer goes as it is */
            while (send > 0 && p->pending[send - 1] != '\n')
                send--;
        }
        if (send == 0) return;
        /* not written (rs_command logged why): those lines are missing from the stream, the log file has them */
        program_io_log_chunk(ctx->redis, ctx->task->job_id, p->rank, p->generation, p->pending, send);
        memmove(p->pending, p->pending + send, p->npending - send);
        p->npending -= send;
        if (n <= 0 && (!final || p->npending == 0)) return;
    }
}

/* "epoch 2: loss=0.31 test_accuracy=0.88" from a metrics point */
static void point_message(const json_t *pt, char *out, size_t outlen)
{
    size_t n = 0;
    const char *k;
    json_t *v;
    out[0] = '\0';
    if (json_is_number(json_object_get(pt, "epoch")))
        n += (size_t)snprintf(out, outlen, "epoch %g:", json_number_value(json_object_get(pt, "epoch")));
    json_object_foreach((json_t *)pt, k, v)
    {
        if (!json_is_number(v) || !strcmp(k, "epoch") || !strcmp(k, "rank") || n + 1 >= outlen) continue;
        n += (size_t)snprintf(out + n, outlen - n, "%s%s=%.6g", n ? " " : "", k, json_number_value(v));
    }
    if (n >= outlen) out[outlen - 1] = '\0';
}

/* how far a metrics line says the job is, from what it carries: "progress" (a fraction), else
 * "epoch" of "epochs", else "step" of "steps"; -1 when it says nothing (the program declared no
 * total: the job shows no progress rather than a false one) */
static double point_fraction(const json_t *pt)
{
    static const char *const pairs[][2] = {{"epoch", "epochs"}, {"step", "steps"}};
    json_t *pr = json_object_get(pt, "progress");
    if (json_is_number(pr) && json_number_value(pr) >= 0) return json_number_value(pr);
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        json_t *n = json_object_get(pt, pairs[i][0]), *total = json_object_get(pt, pairs[i][1]);
        if (json_is_number(n) && json_is_number(total) && json_number_value(total) > 0 && json_number_value(n) >= 0)
            return json_number_value(n) / json_number_value(total);
    }
    return -1;
}

/* the rank's new metrics lines.  Rank 0's are the job's: progress points (the curves), merged into
 * result.metrics.  Another rank's are points of their own, with "rank": R (the server keeps them apart:
 * GET /v1/jobs/{id}/metrics?rank=R), which change neither the job's progress nor its result.  "rank" is
 * gantry's: a program's own member of that name is replaced. */
static void read_metrics(prog_run *p)
{
    json_t *points = json_array();
    char why[256];
    if (prog_metrics_read(p->met, points, why, sizeof(why)) < 0) {
        log_warn("job %s rank %d: metrics file: %s", p->ctx->task->job_id, p->rank, why);
    }
    size_t i;
    json_t *pt;
    json_array_foreach(points, i, pt)
    {
        char msg[256];
        if (p->rank != 0) {
            json_object_set_new(pt, "rank", json_integer(p->rank));
            char line[240];
            point_message(pt, line, sizeof(line));
            snprintf(msg, sizeof(msg), "rank %d: %s", p->rank, line);
            p->ctx->progress(p->ctx, -1.0, msg, pt); /* -1: no progress of the job */
            continue;
        }
        json_object_del(pt, "rank");
        double f = point_fraction(pt);
        if (f >= 0) p->fraction = f > 1 ? 1 : f;
        json_object_update(p->merged, pt);
        point_message(pt, msg, sizeof(msg));
        p->ctx->progress(p->ctx, p->fraction, msg, pt);
    }
    json_decref(points);
}

void prog_run_stop(prog_run *p, const char *why)
{
    if (p->terminating) return;
    p->terminating = true;
    snprintf(p->stop_why, sizeof(p->stop_why), "%.*s", (int)sizeof(p->stop_why) - 1, why);
    log_info("job %s rank %d: stopping its program: %s", p->ctx->task->job_id, p->rank, why);
    prog_rank_terminate(p->pr);
}

int prog_run_poll(prog_run *p, int ms)
{
    int ended = prog_rank_poll(p->pr, ms);
    ship_logs(p, false);
    read_metrics(p);
    if (!ended && !p->terminating && p->ctx->cancelled(p->ctx)) {
        p->by_worker = true;
        prog_run_stop(p, "the job was cancelled, preempted, resized or ended elsewhere");
    }
    return ended;
}

const prog_rank_status *prog_run_finish(prog_run *p)
{
    ship_logs(p, true);
    return prog_rank_status_of(p->pr);
}

void prog_run_free(prog_run *p)
{
    if (p->pr) prog_rank_free(p->pr);
    p->pr = NULL;
    char why[700];
    if (p->fenced && prog_netfence_idle(p->ctx->sandbox_uid, why, sizeof(why)) != 0)
        log_warn("job %s: this slot's network rules could not be reset: %s", p->ctx->task->job_id, why);
    p->fenced = false;
    prog_metrics_free(p->met);
    p->met = NULL;
    json_decref(p->merged);
    p->merged = NULL;
}

/* what an earlier generation left in the checkpoint and output directories (written by other slots' uids, or
 * before umask 007) becomes the job group's and group-writable, so that whichever slot runs a rank now may
 * replace it; nftw has no argument for its callback: the gid in a static (one task at a time per worker) */
static gid_t share_gid;

static int share_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    if (type == FTW_SL || S_ISLNK(st->st_mode)) return 0; /* links are left alone (never followed) */
    if (lchown(path, (uid_t)-1, share_gid) != 0) return 0;
    mode_t want = S_ISDIR(st->st_mode) ? (st->st_mode & 07777) | 02070 : (st->st_mode & 07777) | 0060;
    if (want != (st->st_mode & 07777)) chmod(path, want);
    return 0;
}

static void share_dirs(const prog_run *p, gid_t gid)
{
    share_gid = gid;
    nftw(p->ckpt, share_one, 16, FTW_PHYS);
    nftw(p->out, share_one, 16, FTW_PHYS);
}

/* --- the result --- */

static int sha256_file(const char *path, char hex[65], long long *bytes)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char buf[65536], dig[EVP_MAX_MD_SIZE];
    unsigned dlen = 0;
    ssize_t n;
    int rc = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 ? 0 : -1;
    *bytes = 0;
    while (rc == 0 && (n = read(fd, buf, sizeof(buf))) > 0) {
        *bytes += n;
        if (EVP_DigestUpdate(md, buf, (size_t)n) != 1) rc = -1;
    }
    if (rc == 0 && (n < 0 || EVP_DigestFinal_ex(md, dig, &dlen) != 1)) rc = -1;
    EVP_MD_CTX_free(md);
    close(fd);
    for (unsigned i = 0; rc == 0 && i < dlen && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", dig[i]);
    return rc;
}

/* nftw has no argument for its callback: the listing being made (one task at a time per worker) */
static struct {
    json_t *files;
    size_t base;
    bool truncated;
} listing;

static int list_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    if (type != FTW_F || !S_ISREG(st->st_mode)) return 0; /* regular files only: links are not followed */
    if (json_array_size(listing.files) >= MAX_OUTPUTS) {
        listing.truncated = true;
        return 1;
    }
    char hex[65] = "";
    long long bytes = 0;
    if (sha256_file(path, hex, &bytes) != 0) return 0;
    json_array_append_new(listing.files,
                          json_pack("{s:s, s:I, s:s}", "path", path + listing.base, "bytes", (json_int_t)bytes, "sha256", hex));
    return 0;
}

/* {"dir": the output directory, "files": [{"path","bytes","sha256"}], "truncated"?} */
json_t *prog_run_outputs(const char *dir)
{
    listing.files = json_array();
    listing.base = strlen(dir) + 1;
    listing.truncated = false;
    nftw(dir, list_one, 16, FTW_PHYS);
    json_t *o = json_pack("{s:s, s:o}", "dir", dir, "files", listing.files);
    if (listing.truncated) json_object_set_new(o, "truncated", json_true());
    listing.files = NULL;
    return o;
}

/* --- the launch --- */

int prog_run_launch(prog_run *p, const strv *env, char *err, size_t errlen)
{
    strv argv = {0};
    size_t i;
    json_t *a;
    json_array_foreach(p->set.command, i, a) strv_add(&argv, xstrdup(json_string_value(a)));
    static char roots[PROG_RUN_MAX_ROOTS][PATH_MAX];
    int nroots = task_roots(p->ctx->task, roots, PROG_RUN_MAX_ROOTS);
    const char *data_roots[PROG_RUN_MAX_ROOTS + 1];
    for (int r = 0; r < nroots; r++)
        data_roots[r] = roots[r];
    data_roots[nroots] = NULL;
    double runtime = (double)p->set.max_runtime_s;
    if (p->ctx->task->max_runtime_s > 0 && (runtime <= 0 || (double)p->ctx->task->max_runtime_s < runtime))
        runtime = (double)p->ctx->task->max_runtime_s; /* the tenant's; all generations together are the worker's check */
    char device_names[MAX_DEVICES][32];
    const char *devices[MAX_DEVICES + 1];
    gpu_devices(p->ctx, device_names, devices);
    /* CPU time: the spec's resources.cpus, at most the slot's share (--threads, else every core), which is the default */
    double cpus = p->ctx->threads > 0 ? (double)p->ctx->threads : 0;
    if (p->set.cpus > 0 && (cpus <= 0 || p->set.cpus < cpus)) cpus = p->set.cpus;
    /* the network: this slot's chain lets the rank reach its job's peers only (workers/program/prog_netfence.h) */
    if (p->ctx->net_fenced) {
        char why[700];
        if (prog_netfence_job(p->ctx->sandbox_uid, p->ctx->task->job_id, (const char **)p->peers, (size_t)p->npeers, why,
                              sizeof(why)) != 0) {
            snprintf(err, errlen, "cannot fence the rank's network: %.500s", why);
            strv_free(&argv);
            return -1;
        }
        p->fenced = true;
    }
    prog_rank_spec spec = {.argv = (const char *const *)argv.v,
                           .env = (const char *const *)env->v,
                           .workdir = p->workdir,
                           .data_roots = data_roots,
                           .checkpoint_dir = p->ckpt,
                           .output_dir = p->out,
                           .metrics_dir = p->run,
                           .log_dir = p->logs,
                           .rank = p->rank,
                           .memory_bytes = p->set.memory_bytes,
                           .max_procs = p->set.processes,
                           .max_open_files = p->set.open_files,
                           .max_runtime_s = runtime,
                           .grace_s = p->set.grace_s,
                           .cpus = cpus,
                           .uid = p->ctx->sandbox_uid,
                           .gid = prog_netfence_job_gid(p->ctx->task->job_id),
                           .bwrap = BWRAP,
                           .devices = devices,
                           .init = p->init};
    share_dirs(p, prog_netfence_job_gid(p->ctx->task->job_id));
    p->pr = prog_rank_start(&spec, err, errlen);
    strv_free(&argv);
    if (!p->pr) return -1;
    prog_logcap_follow_init(&p->follow, p->logs, p->rank);
    char metrics[PATH_MAX + 32];
    snprintf(metrics, sizeof(metrics), "%s/metrics.jsonl", p->run);
    p->met = prog_metrics_new(metrics, 0, 0);
    log_info("job %s: rank %d started as uid %u (generation %d, memory limit by %s, CPU limit by %s, network %s)",
             p->ctx->task->job_id, p->rank, p->ctx->sandbox_uid, p->generation, prog_rank_memory_mode(p->pr),
             prog_rank_cpu_mode(p->pr), p->fenced ? "fenced to the job's peers" : "NOT fenced");
    return 0;
}
