/* gantry-fed-split: cuts a labelled IDX dataset into non-IID parts, one per
 * federated site (Dirichlet label skew, partition.h), written as IDX files a
 * site's dataset can name.
 *
 *   gantry-fed-split --sites 9 [--alpha 0.5] [--seed 1] --out DIR
 *                    [--images F --labels F]      (default: Debian's Fashion-MNIST training set)
 *
 * Writes DIR/site-<k>-images-idx3-ubyte and DIR/site-<k>-labels-idx1-ubyte
 * (raw IDX, pixels as read) for k = 0 .. sites-1, and prints each part's size
 * and classes. */
#include "workers/fed/partition.h"
#include "common/alloc.h"
#include "workers/train/data.h"
#include "workers/train/train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *arg(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return argv[i + 1];
    return def;
}

static void be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

static int write_part(const char *dir, int k, const train_data *d, const int *site)
{
    char ip[4096], lp[4096];
    snprintf(ip, sizeof ip, "%s/site-%d-images-idx3-ubyte", dir, k);
    snprintf(lp, sizeof lp, "%s/site-%d-labels-idx1-ubyte", dir, k);
    FILE *fi = fopen(ip, "wb"), *fl = fopen(lp, "wb");
    if (!fi || !fl) {
        fprintf(stderr, "gantry-fed-split: cannot write %s: %s\n", !fi ? ip : lp, strerror(errno));
        if (fi) fclose(fi);
        if (fl) fclose(fl);
        return -1;
    }
    uint32_t n = 0;
    for (size_t i = 0; i < d->n; i++)
        n += site[i] == k;
    unsigned char hi[16] = {0, 0, 8, 3}, hl[8] = {0, 0, 8, 1};
    be32(hi + 4, n), be32(hi + 8, (uint32_t)d->h), be32(hi + 12, (uint32_t)d->w);
    be32(hl + 4, n);
    fwrite(hi, 1, 16, fi), fwrite(hl, 1, 8, fl);
    unsigned char *px = xmalloc(d->dim);
    for (size_t i = 0; px && i < d->n; i++) {
        if (site[i] != k) continue;
        for (size_t j = 0; j < d->dim; j++) /* back to bytes: the reader scaled them to [0, 1] */
            px[j] = (unsigned char)lrintf(d->x[i * d->dim + j] * 255.0f);
        unsigned char y = (unsigned char)d->y[i];
        fwrite(px, 1, d->dim, fi), fwrite(&y, 1, 1, fl);
    }
    free(px);
    int bad = ferror(fi) || ferror(fl);
    bad |= fclose(fi) != 0, bad |= fclose(fl) != 0;
    if (bad) fprintf(stderr, "gantry-fed-split: writing site %d failed\n", k);
    return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
    json_set_alloc_funcs(xmalloc, free); /* jansson never returns NULL for memory (common/alloc.h) */
    int sites = atoi(arg(argc, argv, "--sites", "0"));
    double alpha = atof(arg(argc, argv, "--alpha", "0.5"));
    const char *out = arg(argc, argv, "--out", NULL);
    if (sites < 1 || sites > 64 || !(alpha > 0) || !out) {
        fprintf(stderr, "usage: gantry-fed-split --sites N (1-64) [--alpha A > 0] [--seed S] --out DIR [--images F --labels F]\n");
        return 2;
    }
    train_data d;
    char err[512];
    if (train_data_load_idx(arg(argc, argv, "--images", TRAIN_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz"),
                            arg(argc, argv, "--labels", TRAIN_FASHION_MNIST_DIR "/train-labels-idx1-ubyte.gz"), &d, err,
                            sizeof err)) {
        fprintf(stderr, "gantry-fed-split: %s\n", err);
        return 1;
    }
    int *site = xmalloc(sizeof(int) * (d.n ? d.n : 1));
    if (fed_partition_dirichlet(d.y, d.n, d.classes, sites, alpha, (uint64_t)atoll(arg(argc, argv, "--seed", "1")), site)) {
        fprintf(stderr, "gantry-fed-split: cannot split\n");
        return 1;
    }
    mkdir(out, 0755);
    for (int k = 0; k < sites; k++) {
        if (write_part(out, k, &d, site)) return 1;
        int per[256] = {0}, n = 0, classes = 0;
        for (size_t i = 0; i < d.n; i++)
            if (site[i] == k) per[d.y[i]]++, n++;
        for (int c = 0; c < d.classes && c < 256; c++)
            classes += per[c] > 0;
        printf("site %d: %d samples, %d classes\n", k, n, classes);
    }
    free(site);
    train_data_free(&d);
    return 0;
}
