/* test_shm_arena.c - the request region's allocator (workers/serve/shm_arena.h): blocks never
 * overlap, stay inside the region, start where asked (aligned after a skew), first fit keeps the
 * front in use, and every byte comes back. */
#include "workers/serve/shm_arena.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

static void test_first_fit(void **state)
{
    (void)state;
    shm_arena a;
    sa_init(&a, 1000);
    assert_int_equal(sa_alloc(&a, 100, 1, 0), 0);
    assert_int_equal(sa_alloc(&a, 100, 64, 0), 128); /* aligned */
    assert_int_equal(sa_alloc(&a, 10, 64, 5), 251);  /* (251 + 5) % 64 == 0: a tensor after a 5-byte head */
    assert_int_equal(sa_free(&a, 0), 0);
    assert_int_equal(sa_alloc(&a, 50, 1, 0), 0); /* the front again */
    assert_int_equal(sa_alloc(&a, 2000, 1, 0), SA_NONE);
    assert_int_equal(sa_free(&a, 7), -1); /* no block there */
    assert_int_equal(sa_used(&a), 160);
    sa_fini(&a);
}

/* random allocations and frees against a map of the bytes in use */
static void test_random(void **state)
{
    (void)state;
    enum { SIZE = 1 << 16, ROUNDS = 20000, LIVE = 64 };
    static unsigned char owner[SIZE];
    size_t off[LIVE], len[LIVE];
    int live = 0;
    shm_arena a;
    sa_init(&a, SIZE);
    srand(3);
    for (int r = 0; r < ROUNDS; r++) {
        if (live < LIVE && (live == 0 || rand() % 2)) {
            size_t l = 1 + (size_t)rand() % 4096, skew = (size_t)rand() % 100, align = (size_t)1 << (rand() % 7);
            size_t o = sa_alloc(&a, l, align, skew);
            if (o == SA_NONE) continue;
            assert_true(o + l <= SIZE);
            assert_int_equal((o + skew) % align, 0);
            for (size_t i = o; i < o + l; i++) {
                assert_int_equal(owner[i], 0);
                owner[i] = 1;
            }
            off[live] = o, len[live] = l, live++;
        } else {
            int k = rand() % live;
            assert_int_equal(sa_free(&a, off[k]), 0);
            for (size_t i = off[k]; i < off[k] + len[k]; i++)
                owner[i] = 0;
            off[k] = off[live - 1], len[k] = len[live - 1], live--;
        }
        size_t used = 0;
        for (int i = 0; i < live; i++)
            used += len[i];
        assert_int_equal(sa_used(&a), used);
    }
    while (live > 0)
        assert_int_equal(sa_free(&a, off[--live]), 0);
    assert_int_equal(sa_used(&a), 0);
    assert_int_equal(sa_alloc(&a, SIZE, 1, 0), 0); /* all of it, once everything came back */
    sa_fini(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_first_fit), cmocka_unit_test(test_random)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
