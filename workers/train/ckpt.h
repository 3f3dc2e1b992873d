/* ckpt.h - the checkpoint format (version 1), little-endian:
 *
 *   "GNTYCKPT"  magic, 8 bytes
 *   u32 version (1), u32 flags (bit 0: optimizer state present)
 *   u32 length, architecture JSON (compact, sorted keys)
 *   u64 step, epoch, seed, data_pos (samples of the epoch consumed), rng (dropout state)
 *   u32 nparams; per param: u32 ndim, u32 dims[ndim], f32 values[prod(dims)]
 *   if flags & 1: u32 optimizer type (1 sgd, 2 adam), u64 t, u32 nbuf,
 *                 per param nbuf x f32[prod(dims)] (velocity, or Adam m then v)
 *   u32 CRC-32 (zlib) of every byte before it
 *
 * Written atomically: path.tmp, fsync, rename, fsync of the directory.
 * Loading checks size, magic, version and CRC before reading anything, then
 * that the architecture and every shape match the model; nothing in the
 * model changes unless the whole file is acceptable.  The final model file
 * (train_run's ckpt_path + ".model") is the same format without optimizer
 * state. */
#ifndef GANTRY_TRAIN_CKPT_H
#define GANTRY_TRAIN_CKPT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "workers/train/model.h"
#include "workers/train/optim.h"

#define TRAIN_CKPT_VERSION 1

typedef struct {
    uint64_t step, epoch, seed, data_pos, rng;
} train_ckpt_state;

/* o may be NULL (a model file) */
int train_ckpt_save(const char *path, const train_model *m, const train_optim *o, const train_ckpt_state *st, char *err,
                    size_t err_len);
/* o may be NULL (optimizer state in the file is then ignored); a file without
 * optimizer state leaves o untouched */
int train_ckpt_load(const char *path, train_model *m, train_optim *o, train_ckpt_state *st, char *err, size_t err_len);
/* the same format in memory (the state a survivor hands to a resized gang, a
 * model moving between workers): *out malloc'd */
int train_ckpt_encode(const train_model *m, const train_optim *o, const train_ckpt_state *st, unsigned char **out, size_t *len,
                      char *err, size_t err_len);
/* verifies then loads an encoded checkpoint, as train_ckpt_load; what names it in errors */
int train_ckpt_decode(const unsigned char *data, size_t len, train_model *m, train_optim *o, train_ckpt_state *st, const char *what,
                      char *err, size_t err_len);
/* the architecture stored in a checkpoint (new reference), NULL with err */
json_t *train_ckpt_arch(const char *path, char *err, size_t err_len);

#endif
