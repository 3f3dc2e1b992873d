/* data.h - datasets in memory, IDX and CSV readers, shuffles and shards.
 *
 * A dataset is n samples of dim floats (c x h x w) with an int label each.
 * Readers never crash on bad input: every size is checked against the file
 * (magic, element type, dimensions, short reads) and failures return -1
 * with a message naming the file.
 *
 * Elastic data state (METHODS.md §5): the order of an epoch is
 * shuffle(0..n-1, seed, epoch); the consumed prefix is skipped; the rest is
 * cut into global batches; worker r of w takes [r k, min((r+1) k, len)) of
 * each global batch, k = ceil(len / w). */
#ifndef GANTRY_TRAIN_DATA_H
#define GANTRY_TRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t n;
    int c, h, w;
    size_t dim;
    float *x;   /* n x dim */
    int32_t *y; /* n labels in [0, classes) */
    int classes;
} train_data;

/* images: IDX ubyte, 3 dims (n, h, w) or 4 (n, c, h, w); labels: IDX ubyte, 1 dim.
 * gzip or raw (detected).  Pixels scaled to [0, 1]. */
int train_data_load_idx(const char *images, const char *labels, train_data *d, char *err, size_t err_len);
/* one sample per line: label, then c*h*w numbers (multiplied by scale); an
 * optional header line (non-numeric first field) is skipped; c, h and w at least 1 */
int train_data_load_csv(const char *path, int c, int h, int w, float scale, train_data *d, char *err, size_t err_len);
void train_data_free(train_data *d);

/* order[i] = a permutation of 0..n-1 drawn from (seed, epoch) */
void train_shuffle(size_t *order, size_t n, uint64_t seed, uint64_t epoch);
/* the slice [*begin, *end) of a global batch of len samples that rank takes */
void train_shard(size_t len, int rank, int world, size_t *begin, size_t *end);

#endif
