/* tsarchive.c - TorchScript archive check (tsarchive.h): a ZIP reader that only validates.
 *
 * The end of central directory record is searched backwards from the end (it is 22 bytes plus a
 * comment of up to 65535); the central directory is walked once, each entry's local header and data
 * checked as it comes, so the work is one pass over the bytes.  Offsets are uint64_t and compared
 * with the space left before any addition, so no sum can overflow or point outside the buffer. */
#include "server/tsarchive.h"

#include "common/fielderr.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "workers/serve/tscode.h"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOCATOR64 0x07064b50u
#define SIG_DESCRIPTOR 0x08074b50u
#define FLAG_ENCRYPTED 0x0001u
#define FLAG_DESCRIPTOR 0x0008u

static const char *fix = "save the model with torch.jit.script(model).save(path) or torch.jit.trace(model, example).save(path)";

static uint32_t rd16(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}
static uint32_t rd32(const unsigned char *p)
{
    return rd16(p) | rd16(p + 2) << 16;
}
static uint64_t rd64(const unsigned char *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* an entry's name for a message: printable ASCII, cut with "..." */
static const char *quote(char *dst, size_t cap, const unsigned char *s, size_t n)
{
    size_t keep = n < cap - 1 ? n : cap - 4;
    for (size_t i = 0; i < keep; i++)
        dst[i] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
    if (keep < n) memcpy(dst + keep, "...", 3), keep += 3;
    dst[keep] = '\0';
    return dst;
}

/* One central directory entry, its sizes and offset from the ZIP64 extra field where saturated. */
typedef struct {
    uint32_t flags, method, crc;
    uint64_t csize, usize, offset;
    const unsigned char *name;
    size_t name_len;
    size_t size; /* of the central directory entry */
} zentry;

/* the entry at buf[p], the central directory ending at end; -1 when it is cut short or damaged */
static int read_central(const unsigned char *buf, uint64_t p, uint64_t end, zentry *z)
{
    if (end - p < 46 || rd32(buf + p) != SIG_CENTRAL) return -1;
    const unsigned char *c = buf + p;
    uint32_t nl = rd16(c + 28), xl = rd16(c + 30), cl = rd16(c + 32);
    if (end - p - 46 < (uint64_t)nl + xl + cl || nl == 0) return -1;
    z->flags = rd16(c + 8), z->method = rd16(c + 10), z->crc = rd32(c + 16);
    z->csize = rd32(c + 20), z->usize = rd32(c + 24), z->offset = rd32(c + 42);
    z->name = c + 46, z->name_len = nl, z->size = 46 + (size_t)nl + xl + cl;
    if (rd16(c + 34) != 0) return -1; /* the entry starts on another disk */
    if (z->usize != 0xffffffffu && z->csize != 0xffffffffu && z->offset != 0xffffffffu) return 0;
    /* ZIP64 extra field (id 1): the saturated values, in the order usize, csize, offset */
    const unsigned char *x = c + 46 + nl, *xe = x + xl;
    while (xe - x >= 4) {
        uint32_t id = rd16(x), sz = rd16(x + 2);
        if ((uint32_t)(xe - x - 4) < sz) return -1;
        if (id == 1) {
            const unsigned char *v = x + 4, *ve = v + sz;
            uint64_t *fields[3] = {&z->usize, &z->csize, &z->offset};
            for (int i = 0; i < 3; i++) {
                if (*fields[i] != 0xffffffffu) continue;
                if (ve - v < 8) return -1;
                *fields[i] = rd64(v);
                v += 8;
            }
            return 0;
        }
        x += 4 + sz;
    }
    return -1;
}

/* the CRC-32 of a deflated entry's inflated bytes, fed to code when not NULL; -1 when the stream
 * is broken or does not inflate to usize bytes, -2 when it would take *budget past 0, -3 when code
 * refuses the bytes */
static int inflate_crc(const unsigned char *src, uint64_t csize, uint64_t usize, uint64_t *budget, uint32_t *crc, tscode_scan *code)
{
    if (usize > *budget) return -2;
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return -1; /* raw deflate, as in ZIP */
    unsigned char out[16384];
    uLong c = crc32(0L, Z_NULL, 0);
    uint64_t in_left = csize, total = 0;
    int rc = Z_OK;
    while (rc == Z_OK) {
        if (zs.avail_in == 0) {
            if (in_left == 0) break;
            zs.next_in = (unsigned char *)src;
            zs.avail_in = in_left > 0x40000000u ? 0x40000000u : (uInt)in_left;
            src += zs.avail_in, in_left -= zs.avail_in;
        }
        zs.next_out = out;
        zs.avail_out = sizeof(out);
        rc = inflate(&zs, Z_NO_FLUSH);
        size_t got = sizeof(out) - zs.avail_out;
        total += got;
        if (total > usize) break;
        c = crc32_z(c, out, got);
        if (code && tscode_feed(code, out, got) != 0) {
            inflateEnd(&zs);
            return -3;
        }
        if (rc == Z_BUF_ERROR && zs.avail_in == 0 && in_left > 0) rc = Z_OK; /* more input to come */
    }
    inflateEnd(&zs);
    if (rc != Z_STREAM_END || total != usize) return -1;
    *budget -= usize;
    *crc = (uint32_t)c;
    return 0;
}

/* a refusal of code's for entry name */
static int code_fail(const tscode_scan *code, const char *name, char *msg, size_t msg_len)
{
    char why[128];
    tscode_describe(code, why, sizeof(why));
    return msg_fail(msg, msg_len, "entry '%s': the model's code %s: not allowed in a model (docs/inference.md, \"Model checks\")",
                    name, why);
}

/* Checks the entry's local header, data and data descriptor, all before cd (the central
 * directory's offset); *end is then just past them.  code, when not NULL, reads the entry's
 * (inflated) bytes.  -1 with msg. */
static int check_entry(const unsigned char *buf, uint64_t cd, const zentry *z, uint64_t *budget, uint64_t *end, tscode_scan *code,
                       char *msg, size_t msg_len)
{
    char q[80];
    const char *name = quote(q, sizeof(q), z->name, z->name_len);
    uint64_t o = z->offset;
    if (o > cd || cd - o < 30 || rd32(buf + o) != SIG_LOCAL)
        return msg_fail(msg, msg_len, "damaged: entry '%s' has no local header where the central directory says", name);
    const unsigned char *l = buf + o;
    uint32_t nl = rd16(l + 26), xl = rd16(l + 28);
    if (cd - o - 30 < (uint64_t)nl + xl) return msg_fail(msg, msg_len, "damaged: entry '%s': its local header is cut short", name);
    if (nl != z->name_len || memcmp(l + 30, z->name, nl) != 0 || rd16(l + 8) != z->method)
        return msg_fail(msg, msg_len, "damaged: entry '%s': its local header does not match the central directory", name);
    uint64_t data = o + 30 + nl + xl;
    if (cd - data < z->csize)
        return msg_fail(msg, msg_len, "truncated: entry '%s' runs past the start of the central directory", name);
    uint64_t after = data + z->csize;
    if (z->flags & FLAG_DESCRIPTOR) {
        /* the data descriptor: [signature] crc csize usize, sizes of 4 or 8 bytes */
        uint64_t d = after;
        if (cd - d >= 4 && rd32(buf + d) == SIG_DESCRIPTOR) d += 4;
        if (cd - d >= 12 && rd32(buf + d) == z->crc && rd32(buf + d + 4) == z->csize && rd32(buf + d + 8) == z->usize)
            after = d + 12;
        else if (cd - d >= 20 && rd32(buf + d) == z->crc && rd64(buf + d + 4) == z->csize && rd64(buf + d + 12) == z->usize)
            after = d + 20;
        else
            return msg_fail(msg, msg_len, "damaged: entry '%s': its data descriptor does not match the central directory", name);
    } else {
        uint32_t lc = rd32(l + 18), lu = rd32(l + 22);
        if (rd32(l + 14) != z->crc || (lc != 0xffffffffu && lc != z->csize) || (lu != 0xffffffffu && lu != z->usize))
            return msg_fail(msg, msg_len, "damaged: entry '%s': its local header does not match the central directory", name);
    }
    uint32_t crc;
    if (z->method == 0) {
        if (z->csize != z->usize) return msg_fail(msg, msg_len, "damaged: entry '%s': a stored entry with two sizes", name);
        crc = (uint32_t)crc32_z(0L, buf + data, (z_size_t)z->csize);
        if (code && tscode_feed(code, buf + data, (size_t)z->csize) != 0) return code_fail(code, name, msg, msg_len);
    } else {
        int rc = inflate_crc(buf + data, z->csize, z->usize, budget, &crc, code);
        if (rc == -3) return code_fail(code, name, msg, msg_len);
        if (rc == -2)
            return msg_fail(msg, msg_len, "entry '%s': the compressed entries expand to more than %u MiB (torch's are kilobytes)",
                            name, TSARCHIVE_MAX_INFLATED >> 20);
        if (rc != 0) return msg_fail(msg, msg_len, "damaged: entry '%s': its compressed data is broken", name);
    }
    if (crc != z->crc) return msg_fail(msg, msg_len, "damaged: entry '%s': CRC mismatch (the file was changed or cut)", name);
    if (code) {
        tscode_scan last = *code; /* the file's last identifier ends with it */
        static const unsigned char nl = '\n';
        if (tscode_feed(&last, &nl, 1) != 0) return code_fail(&last, name, msg, msg_len);
    }
    *end = after;
    return 0;
}

/* The central directory's offset, size and entry count, from the end of central directory record
 * (ZIP64's when there is one); *limit is where the central directory must end by. */
static int find_directory(const unsigned char *buf, size_t len, uint64_t *off, uint64_t *size, uint64_t *count, uint64_t *limit,
                          char *msg, size_t msg_len)
{
    size_t e = len - 22, lo = len - 22 > 65535 ? len - 22 - 65535 : 0;
    for (;; e--) {
        if (rd32(buf + e) == SIG_EOCD && e + 22 + rd16(buf + e + 20) == len) break;
        if (e == lo)
            return msg_fail(msg, msg_len, "truncated: no end of central directory record at the end (was the upload cut short?)");
    }
    const unsigned char *r = buf + e;
    uint64_t disk = rd16(r + 4), cd_disk = rd16(r + 6), on_disk = rd16(r + 8);
    *count = rd16(r + 10), *size = rd32(r + 12), *off = rd32(r + 16), *limit = e;
    if (e >= 20 && rd32(buf + e - 20) == SIG_LOCATOR64) {
        uint64_t z = rd64(buf + e - 20 + 8);
        if (z > e - 20 || e - 20 - z < 56 || rd32(buf + z) != SIG_EOCD64 || rd32(buf + e - 20 + 4) != 0)
            return msg_fail(msg, msg_len, "damaged: the ZIP64 end of central directory record is not where its locator says");
        const unsigned char *r64 = buf + z;
        disk = rd32(r64 + 16), cd_disk = rd32(r64 + 20), on_disk = rd64(r64 + 24);
        *count = rd64(r64 + 32), *size = rd64(r64 + 40), *off = rd64(r64 + 48), *limit = z;
    } else if (*count == 0xffff || *size == 0xffffffffu || *off == 0xffffffffu) {
        return msg_fail(msg, msg_len, "damaged: a ZIP64 archive without its ZIP64 end of central directory locator");
    }
    if (disk != 0 || cd_disk != 0 || on_disk != *count)
        return msg_fail(msg, msg_len, "a multi-disk (split) ZIP archive is not supported");
    if (*off > *limit || *limit - *off < *size)
        return msg_fail(msg, msg_len, "truncated or damaged: the central directory lies outside the file");
    return 0;
}

int tsarchive_check(const unsigned char *buf, size_t len, char *msg, size_t msg_len)
{
    if (!buf) len = 0;
    if (len < 4 || rd32(buf) != SIG_LOCAL) {
        if (len >= 2 && buf[0] == 0x80 && buf[1] >= 2 && buf[1] <= 5)
            return msg_fail(msg, msg_len, "a legacy torch.save pickle, not TorchScript: %s", fix);
        if (len >= 4 && rd32(buf) == SIG_EOCD) return msg_fail(msg, msg_len, "an empty ZIP archive, not TorchScript");
        return msg_fail(msg, msg_len, "not a ZIP archive (TorchScript files are ZIP archives written by torch.jit.save)");
    }
    if (len < 22) return msg_fail(msg, msg_len, "truncated: too short for a ZIP archive");
    uint64_t cd = 0, size = 0, count = 0, limit = 0;
    if (find_directory(buf, len, &cd, &size, &count, &limit, msg, msg_len) != 0) return -1;
    if (count == 0) return msg_fail(msg, msg_len, "an empty ZIP archive, not TorchScript");

    char q[80], q2[80];
    const unsigned char *prefix = NULL; /* the first entry's top-level folder, its '/' included */
    size_t plen = 0;
    int has_data = 0, has_constants = 0, has_code = 0;
    uint64_t p = cd, end = cd + size, prev_end = 0, budget = TSARCHIVE_MAX_INFLATED;
    for (uint64_t i = 0; i < count; i++) {
        zentry z;
        if (read_central(buf, p, end, &z) != 0)
            return msg_fail(msg, msg_len, "damaged: central directory entry %llu of %llu is cut short or broken",
                            (unsigned long long)i + 1, (unsigned long long)count);
        p += z.size;
        const char *name = quote(q, sizeof(q), z.name, z.name_len);
        if (z.flags & FLAG_ENCRYPTED) return msg_fail(msg, msg_len, "entry '%s' is encrypted", name);
        if (z.method != 0 && z.method != 8)
            return msg_fail(msg, msg_len,
                            "entry '%s': compression method %u is not supported (torch.jit.save stores or deflates entries)", name,
                            (unsigned)z.method);
        if (z.offset < prev_end)
            return msg_fail(msg, msg_len, "damaged: entry '%s' overlaps the entry before it in the central directory", name);
        /* TorchScript source: P/code/... .py, read for tscode.h's bound as it is checked */
        const unsigned char *first = memchr(z.name, '/', z.name_len);
        size_t after = first ? z.name_len - (size_t)(first + 1 - z.name) : 0;
        int is_code = after > 8 && memcmp(first + 1, "code/", 5) == 0 && memcmp(z.name + z.name_len - 3, ".py", 3) == 0;
        tscode_scan code;
        if (is_code) tscode_init(&code);
        if (check_entry(buf, cd, &z, &budget, &prev_end, is_code ? &code : NULL, msg, msg_len) != 0) return -1;
        /* one top-level folder for all */
        if (!prefix) {
            const unsigned char *slash = memchr(z.name, '/', z.name_len);
            if (!slash || slash == z.name)
                return msg_fail(msg, msg_len, "entry '%s' is not inside a top-level folder: not a PyTorch archive", name);
            prefix = z.name, plen = (size_t)(slash - z.name) + 1;
        }
        if (z.name_len <= plen || memcmp(z.name, prefix, plen) != 0)
            return msg_fail(msg, msg_len, "entries in more than one top-level folder ('%s' and '%s'): not a PyTorch archive",
                            quote(q2, sizeof(q2), prefix, plen), name);
        const unsigned char *rest = z.name + plen;
        size_t rl = z.name_len - plen;
        has_data |= rl == 8 && memcmp(rest, "data.pkl", 8) == 0;
        has_constants |= rl == 13 && memcmp(rest, "constants.pkl", 13) == 0;
        has_code |= rl > 5 && memcmp(rest, "code/", 5) == 0;
    }
    const char *folder = quote(q, sizeof(q), prefix, plen - 1);
    if (!has_data) return msg_fail(msg, msg_len, "not a PyTorch archive: no %s/data.pkl", folder);
    if (!has_code && !has_constants) return msg_fail(msg, msg_len, "a torch.save archive, not TorchScript: %s", fix);
    if (!has_code) return msg_fail(msg, msg_len, "not a complete TorchScript archive: no %s/code/ entries", folder);
    if (!has_constants) return msg_fail(msg, msg_len, "not a complete TorchScript archive: no %s/constants.pkl", folder);
    return 0;
}
