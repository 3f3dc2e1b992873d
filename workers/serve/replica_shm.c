/* replica_shm.c - the request region shared by a worker and its replicas (replica_shm.h). */
#include "workers/serve/replica_shm.h"
#include "common/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

replica_shm *rs_create(size_t size, char *err, size_t errlen)
{
    int fd = memfd_create("gantry-requests", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        snprintf(err, errlen, "no shared request region: %s", strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    char *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        snprintf(err, errlen, "no shared request region: %s", strerror(errno));
        close(fd);
        return NULL;
    }
    replica_shm *s = xcalloc(1, sizeof(*s));
    s->fd = fd, s->base = base, s->size = size;
    sa_init(&s->arena, size);
    return s;
}

void rs_free(replica_shm *s)
{
    if (!s) return;
    munmap(s->base, s->size);
    close(s->fd);
    sa_fini(&s->arena);
    free(s);
}

char *rs_alloc(replica_shm *s, size_t len, size_t skew)
{
    size_t off = s ? sa_alloc(&s->arena, len, RS_ALIGN, skew) : SA_NONE;
    if (off == SA_NONE) return NULL;
    if (off + len > s->touched) s->touched = off + len;
    return s->base + off;
}

bool rs_owns(const replica_shm *s, const void *p)
{
    return s && (uintptr_t)p >= (uintptr_t)s->base && (uintptr_t)p < (uintptr_t)s->base + s->size;
}

void rs_release(replica_shm *s, void *p)
{
    if (!rs_owns(s, p)) {
        free(p);
        return;
    }
    sa_free(&s->arena, (size_t)((char *)p - s->base));
    if (s->arena.n == 0 && s->touched > RS_TRIM) { /* empty after a burst: its pages back to the system */
        fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)s->touched);
        s->touched = 0;
    }
}

int rs_attach(int fd, char **base, size_t *size)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) return -1;
    void *b = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (b == MAP_FAILED) return -1;
    *base = b, *size = (size_t)st.st_size;
    return 0;
}
