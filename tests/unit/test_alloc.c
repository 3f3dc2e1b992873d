/* test_alloc.c - unit tests for common/alloc: the wrappers return what they promise, and an allocation
 * that cannot be met aborts with the message (in a forked child, whose stderr the parent reads). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/alloc.h"

#if defined(__SANITIZE_ADDRESS__)
/* AddressSanitizer reports malloc(SIZE_MAX) itself and exits; let malloc return NULL as libc's does, so the
 * wrapper's own path runs (tests/run's sanitizer build) */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}
#endif

static void test_wrappers(void **state)
{
    (void)state;
    char *s = xstrdup("gantry");
    assert_string_equal(s, "gantry");
    free(s);
    s = xstrndup("gantry", 3);
    assert_string_equal(s, "gan");
    free(s);
    s = xasprintf("%s-%d", "job", 42);
    assert_string_equal(s, "job-42");
    free(s);
    int *z = xcalloc(16, sizeof(int));
    for (int i = 0; i < 16; i++)
        assert_int_equal(z[i], 0);
    z = xreallocarray(z, 32, sizeof(int));
    z[31] = 7;
    free(z);
    void *p = xmalloc(0); /* never NULL, even for nothing */
    assert_non_null(p);
    p = xrealloc(p, 0);
    assert_non_null(p);
    free(p);
}

enum { OOM_MALLOC, OOM_CALLOC_OVERFLOW, OOM_REALLOCARRAY_OVERFLOW };

/* runs one failing allocation in a child: it must die by SIGABRT, with want on its stderr */
static void expect_abort(int which, const char *want)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        void *volatile p = NULL;
        if (which == OOM_MALLOC) p = xmalloc(SIZE_MAX);
        if (which == OOM_CALLOC_OVERFLOW) p = xcalloc(SIZE_MAX / 2, 4);
        if (which == OOM_REALLOCARRAY_OVERFLOW) p = xreallocarray(NULL, SIZE_MAX / 8, 16);
        (void)p;
        _exit(0); /* not reached when the wrapper works */
    }
    close(fds[1]);
    char buf[256];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof(buf) - 1 && (r = read(fds[0], buf + n, sizeof(buf) - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
    assert_non_null(strstr(buf, want));
}

static void test_out_of_memory_aborts(void **state)
{
    (void)state;
    char want[80];
    snprintf(want, sizeof(want), "gantry: out of memory allocating %zu bytes\n", (size_t)SIZE_MAX);
    expect_abort(OOM_MALLOC, want);
    expect_abort(OOM_CALLOC_OVERFLOW, want); /* an overflowing product is reported as SIZE_MAX */
    expect_abort(OOM_REALLOCARRAY_OVERFLOW, want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrappers),
        cmocka_unit_test(test_out_of_memory_aborts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
