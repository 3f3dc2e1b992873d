/* mesh.h - tree and star all-reduce over a full mesh of TCP connections: the
 * other strategies the strategy_switch policy (workers/train/adapt.h) moves a
 * CPU gang between (the ring, ring.h, is the first).
 *
 * Every rank listens; rank i dials every rank j < i and accepts every rank
 * j > i, each connection opening with the gang's hello (sock.h).  An
 * all-reduce runs on a k-ary tree rooted at rank 0 (parent of r: (r-1)/k):
 * each rank adds its children's buffers in child order and sends the sum up;
 * the root's total comes back down the same tree, so every rank ends with
 * bit-identical results.  fanout 2 is a binary tree (log depth, suits small
 * buffers on many ranks); fanout world-1 is a star (rank 0 reduces for all).
 * Every wait is bounded by timeout_ms; after an error the mesh is unusable and
 * its sockets are shut, so the other ranks fail at once. */
#ifndef GANTRY_COMM_MESH_H
#define GANTRY_COMM_MESH_H

#include <stddef.h>

typedef struct mesh mesh;

/* listen_fd from ring_listen (closed here); addrs[r] "host:port" of every rank.
 * NULL with err when the mesh does not form within timeout_ms. */
mesh *mesh_connect(int listen_fd, int rank, int world, const char *const *addrs, const char *token, int timeout_ms, char *err,
                   size_t errlen);
/* in-place sum of n floats over every rank on the k-ary tree (fanout >= 1); 0, or -1 with err */
int mesh_allreduce(mesh *m, float *buf, size_t n, int fanout, int timeout_ms, char *err, size_t errlen);
void mesh_close(mesh *m);

#endif
