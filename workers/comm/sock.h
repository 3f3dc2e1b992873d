/* sock.h - the socket helpers the gang collectives share (ring.c, mesh.c):
 * nonblocking TCP sockets with deadlines, listening and dialing (retried while
 * refused), and the hello every connection of a gang starts with (a magic, the
 * version, the sender's rank, the world and the gang's token), so that a stray
 * or stale connection is refused.  Internal to workers/comm. */
#ifndef GANTRY_COMM_SOCK_H
#define GANTRY_COMM_SOCK_H

#include <stddef.h>
#include <stdint.h>

#define SOCK_TOKEN_MAX 255
#define SOCK_HELLO_MS 1000 /* an accepted connection says hello within this, or is dropped */

int64_t sock_now_ms(void);
int sock_left_ms(int64_t deadline);
void sock_tune(int fd); /* TCP_NODELAY, large buffers */
int sock_nonblocking(int fd);
/* poll one fd: 1 ready, 0 timed out, -1 error */
int sock_wait_fd(int fd, short events, int ms);
/* all n bytes by the deadline on a nonblocking socket: 0, or -1 */
int sock_write_all(int fd, const void *p, size_t n, int64_t deadline);
int sock_read_all(int fd, void *p, size_t n, int64_t deadline);
int sock_send_hello(int fd, int rank, int world, const char *token, int64_t deadline);
/* the rank of a peer of our gang (world, token) from its hello, or -1 */
int sock_read_hello(int fd, int world, const char *token, int64_t deadline);
/* 0 when the peer is want_rank of our gang */
int sock_check_hello(int fd, int want_rank, int world, const char *token, int64_t deadline);
/* connects to "host:port" (retried while refused) by the deadline: the fd, or -1 with err */
int sock_dial(const char *addr, int64_t deadline, char *err, size_t errlen);
/* listens on bind_host, an ephemeral port put in *port: the fd, or -1 with err */
int sock_listen(const char *bind_host, int *port, char *err, size_t errlen);

#endif
