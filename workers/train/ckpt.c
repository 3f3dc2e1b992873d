/* ckpt.c - checkpoint writer and verifying reader (format in ckpt.h). */
#include "workers/train/ckpt.h"

#include "common/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static const char MAGIC[8] = {'G', 'N', 'T', 'Y', 'C', 'K', 'P', 'T'};
#define CKPT_MAX_BYTES ((size_t)1 << 34)

typedef struct {
    unsigned char *p;
    size_t len, cap;
} wbuf;

static void put(wbuf *b, const void *src, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        b->p = xrealloc(b->p, cap), b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put32(wbuf *b, uint32_t v)
{
    put(b, &v, 4);
}

static void put64(wbuf *b, uint64_t v)
{
    put(b, &v, 8);
}

static int write_atomic(const char *path, const void *data, size_t len, char *err, size_t err_len)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        snprintf(err, err_len, "checkpoint path too long");
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, err_len, "%s: cannot create: %s", tmp, strerror(errno));
        return -1;
    }
    const unsigned char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            snprintf(err, err_len, "%s: write failed: %s", tmp, strerror(errno));
            close(fd);
            unlink(tmp);
            return -1;
        }
        p += w, left -= (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        snprintf(err, err_len, "%s: fsync failed: %s", tmp, strerror(errno));
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        snprintf(err, err_len, "%s: rename failed: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

int train_ckpt_encode(const train_model *m, const train_optim *o, const train_ckpt_state *st, unsigned char **out, size_t *len,
                      char *err, size_t err_len)
{
    wbuf b = {0};
    *out = NULL, *len = 0;
    char *arch = json_dumps(m->arch, JSON_COMPACT | JSON_SORT_KEYS);
    if (!arch) { /* not memory (docs/errors.md): a value jansson cannot write */
        snprintf(err, err_len, "model.arch: cannot be encoded");
        return -1;
    }
    put(&b, MAGIC, 8);
    put32(&b, TRAIN_CKPT_VERSION);
    put32(&b, o ? 1 : 0);
    put32(&b, (uint32_t)strlen(arch));
    put(&b, arch, strlen(arch));
    free(arch);
    put64(&b, st->step), put64(&b, st->epoch), put64(&b, st->seed), put64(&b, st->data_pos), put64(&b, st->rng);
    put32(&b, (uint32_t)m->nparams);
    for (int i = 0; i < m->nparams; i++) {
        const train_param *p = m->params[i];
        put32(&b, (uint32_t)p->ndim);
        for (int d = 0; d < p->ndim; d++)
            put32(&b, (uint32_t)p->dims[d]);
        put(&b, p->w, sizeof(float) * p->n);
    }
    if (o) {
        int nbuf = train_optim_buffers(o);
        put32(&b, (uint32_t)o->type);
        put64(&b, o->t);
        put32(&b, (uint32_t)nbuf);
        for (int i = 0; i < o->n; i++) {
            put(&b, o->m[i], sizeof(float) * o->params[i]->n);
            if (nbuf == 2) put(&b, o->v[i], sizeof(float) * o->params[i]->n);
        }
    }
    put32(&b, 0); /* the CRC, filled in below */
    uint32_t crc = (uint32_t)crc32_z(0L, b.p, b.len - 4);
    memcpy(b.p + b.len - 4, &crc, 4);
    *out = b.p, *len = b.len;
    return 0;
}

int train_ckpt_save(const char *path, const train_model *m, const train_optim *o, const train_ckpt_state *st, char *err,
                    size_t err_len)
{
    unsigned char *data;
    size_t len;
    if (train_ckpt_encode(m, o, st, &data, &len, err, err_len)) return -1;
    int rc = write_atomic(path, data, len, err, err_len);
    free(data);
    return rc;
}

/* a bounds-checked cursor over a verified file */
typedef struct {
    const unsigned char *p;
    size_t len, off;
} rbuf;

static int get(rbuf *r, void *dst, size_t n)
{
    if (n > r->len - r->off) return -1;
    if (dst) memcpy(dst, r->p + r->off, n);
    r->off += n;
    return 0;
}

static int get32(rbuf *r, uint32_t *v)
{
    return get(r, v, 4);
}

static int get64(rbuf *r, uint64_t *v)
{
    return get(r, v, 8);
}

/* checks the size, magic, version and CRC of an encoded checkpoint; what names it in errors */
static int verify(const unsigned char *data, size_t len, const char *what, char *err, size_t err_len)
{
    if (len < 8 + 12 + 40 + 4 + 4 || len > CKPT_MAX_BYTES) {
        snprintf(err, err_len, "%s: corrupt checkpoint (size %zu is impossible)", what, len);
        return -1;
    }
    if (memcmp(data, MAGIC, 8) != 0) {
        snprintf(err, err_len, "%s: not a gantry checkpoint (bad magic)", what);
        return -1;
    }
    uint32_t version, stored;
    memcpy(&version, data + 8, 4);
    if (version != TRAIN_CKPT_VERSION) {
        snprintf(err, err_len, "%s: checkpoint version %u is not supported (expected %d)", what, version, TRAIN_CKPT_VERSION);
        return -1;
    }
    memcpy(&stored, data + len - 4, 4);
    uint32_t crc = (uint32_t)crc32_z(0L, data, len - 4);
    if (crc != stored) {
        snprintf(err, err_len, "%s: corrupt checkpoint (CRC-32 %08x, expected %08x)", what, crc, stored);
        return -1;
    }
    return 0;
}

/* reads the whole file; *data malloc'd */
static int read_whole(const char *path, unsigned char **data, size_t *len, char *err, size_t err_len)
{
    *data = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_len, "%s: cannot open checkpoint: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || sb.st_size < 8 + 12 + 40 + 4 + 4 || (size_t)sb.st_size > CKPT_MAX_BYTES) {
        snprintf(err, err_len, "%s: corrupt checkpoint (size %lld is impossible)", path, (long long)sb.st_size);
        fclose(f);
        return -1;
    }
    *len = (size_t)sb.st_size;
    *data = xmalloc(*len); /* at most CKPT_MAX_BYTES, checked above */
    if (fread(*data, 1, *len, f) != *len) {
        snprintf(err, err_len, "%s: cannot read checkpoint", path);
        fclose(f);
        free(*data);
        *data = NULL;
        return -1;
    }
    fclose(f);
    return 0;
}

/* reads and verifies the whole file; *data malloc'd */
static int load_verified(const char *path, unsigned char **data, size_t *len, char *err, size_t err_len)
{
    if (read_whole(path, data, len, err, err_len)) return -1;
    if (verify(*data, *len, path, err, err_len) == 0) return 0;
    free(*data);
    *data = NULL;
    return -1;
}

static json_t *read_arch(rbuf *r, uint32_t *flags, const char *path, char *err, size_t err_len)
{
    uint32_t version, alen;
    if (get(r, NULL, 8) || get32(r, &version) || get32(r, flags) || get32(r, &alen) || alen > r->len - r->off) {
        snprintf(err, err_len, "%s: corrupt checkpoint header", path);
        return NULL;
    }
    json_error_t je;
    json_t *arch = json_loadb((const char *)r->p + r->off, alen, 0, &je);
    r->off += alen;
    if (!arch) snprintf(err, err_len, "%s: corrupt checkpoint architecture: %s", path, je.text);
    return arch;
}

json_t *train_ckpt_arch(const char *path, char *err, size_t err_len)
{
    unsigned char *data;
    size_t len;
    if (load_verified(path, &data, &len, err, err_len)) return NULL;
    rbuf r = {data, len - 4, 0};
    uint32_t flags;
    json_t *arch = read_arch(&r, &flags, path, err, err_len);
    free(data);
    return arch;
}

/* pass 0 checks everything, pass 1 copies */
static int parse(rbuf r, int commit, train_model *m, train_optim *o, train_ckpt_state *st, const char *path, char *err,
                 size_t err_len)
{
    uint32_t flags, np;
    json_t *arch = read_arch(&r, &flags, path, err, err_len);
    if (!arch) return -1;
    int same = json_equal(arch, m->arch);
    json_decref(arch);
    if (!same) {
        snprintf(err, err_len, "%s: checkpoint was written for a different model architecture", path);
        return -1;
    }
    train_ckpt_state s;
    if (get64(&r, &s.step) || get64(&r, &s.epoch) || get64(&r, &s.seed) || get64(&r, &s.data_pos) || get64(&r, &s.rng) ||
        get32(&r, &np))
        goto trunc;
    if (np != (uint32_t)m->nparams) {
        snprintf(err, err_len, "%s: checkpoint has %u parameter tensors, the model %d", path, np, m->nparams);
        return -1;
    }
    for (int i = 0; i < m->nparams; i++) {
        train_param *p = m->params[i];
        uint32_t nd, d;
        if (get32(&r, &nd)) goto trunc;
        if (nd != (uint32_t)p->ndim) goto shape;
        for (int k = 0; k < p->ndim; k++) {
            if (get32(&r, &d)) goto trunc;
            if (d != (uint32_t)p->dims[k]) goto shape;
        }
        if (get(&r, commit ? p->w : NULL, sizeof(float) * p->n)) goto trunc;
    }
    if (flags & 1) {
        uint32_t type, nbuf;
        uint64_t t;
        if (get32(&r, &type) || get64(&r, &t) || get32(&r, &nbuf)) goto trunc;
        if (o && (type != (uint32_t)o->type || nbuf != (uint32_t)train_optim_buffers(o))) {
            snprintf(err, err_len, "%s: checkpoint optimizer (%s) differs from the spec's", path,
                     type == TRAIN_ADAM ? "adam" : "sgd");
            return -1;
        }
        if (nbuf > 2) goto trunc;
        for (int i = 0; i < m->nparams; i++)
            for (uint32_t k = 0; k < nbuf; k++)
                if (get(&r, commit && o ? (k ? o->v[i] : o->m[i]) : NULL, sizeof(float) * m->params[i]->n)) goto trunc;
        if (commit && o) o->t = t;
    }
    if (r.off != r.len) {
        snprintf(err, err_len, "%s: corrupt checkpoint (%zu trailing bytes)", path, r.len - r.off);
        return -1;
    }
    if (commit && st) *st = s;
    return 0;
trunc:
    snprintf(err, err_len, "%s: corrupt checkpoint (truncated)", path);
    return -1;
shape:
    snprintf(err, err_len, "%s: checkpoint parameter shapes differ from the model's", path);
    return -1;
}

int train_ckpt_decode(const unsigned char *data, size_t len, train_model *m, train_optim *o, train_ckpt_state *st, const char *what,
                      char *err, size_t err_len)
{
    if (verify(data, len, what, err, err_len)) return -1;
    rbuf r = {data, len - 4, 0};
    int rc = parse(r, 0, m, o, st, what, err, err_len);
    return rc == 0 ? parse(r, 1, m, o, st, what, err, err_len) : rc;
}

int train_ckpt_load(const char *path, train_model *m, train_optim *o, train_ckpt_state *st, char *err, size_t err_len)
{
    unsigned char *data;
    size_t len;
    if (read_whole(path, &data, &len, err, err_len)) return -1;
    int rc = train_ckpt_decode(data, len, m, o, st, path, err, err_len);
    free(data);
    return rc;
}
