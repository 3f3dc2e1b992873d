/* infer_frame.c - the direct inference path's frame heads (infer_frame.h). */
#include "wire/infer_frame.h"

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

void if_head_encode(unsigned char out[IF_HEAD], const if_head *h)
{
    out[0] = 'G', out[1] = 'F', out[2] = '1', out[3] = (unsigned char)h->kind;
    put32(out + 4, h->arg);
    put64(out + 8, h->id);
    put64(out + 16, h->len);
}

int if_head_decode(const unsigned char in[IF_HEAD], if_head *out)
{
    if (in[0] != 'G' || in[1] != 'F' || in[2] != '1') return -1;
    if (in[3] != IF_HELLO && in[3] != IF_REQUEST && in[3] != IF_REPLY) return -1;
    out->kind = (if_kind)in[3];
    out->arg = get32(in + 4);
    out->id = get64(in + 8);
    out->len = get64(in + 16);
    if (out->len > IF_MAX_BODY) return -1;
    if (out->kind == IF_REQUEST && out->arg > out->len) return -1;
    if (out->kind == IF_REPLY && (out->arg < 100 || out->arg > 599)) return -1;
    return 0;
}
