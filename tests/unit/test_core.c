/* test_core.c — errors, log levels and the Philox generator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "rlrt/log.h"
#include "common/core/rng.h"

static void test_error_message_and_wrap(void **state)
{
    (void)state;
    rl_error_clear();
    assert_int_equal(rl_error_code(), RL_OK);
    int rc = rl_error_set(RL_ESHAPE, "tensor '%s': expected %d rows, got %d", "adv", 4, 3);
    assert_int_equal(rc, RL_ESHAPE);
    assert_string_equal(rl_error_message(), "tensor 'adv': expected 4 rows, got 3");
    rl_error_wrap(RL_ESHAPE, "concat item %d", 2);
    assert_string_equal(rl_error_message(), "concat item 2: tensor 'adv': expected 4 rows, got 3");
    assert_string_equal(rl_status_name(RL_ESHAPE), "RL_ESHAPE");
    /* the current message may be an argument of the next one */
    rl_error_set(RL_EINVAL, "file.jsonl:2: %s", rl_error_message());
    assert_string_equal(rl_error_message(),
                        "file.jsonl:2: concat item 2: tensor 'adv': expected 4 rows, got 3");
}

static void test_log_level_parse(void **state)
{
    (void)state;
    rl_log_level l;
    assert_int_equal(rl_log_parse_level("WARN", &l), RL_OK);
    assert_int_equal(l, RL_LOG_WARN);
    assert_int_equal(rl_log_parse_level("loud", &l), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "'loud'"));
}

/* Known-answer tests from Random123's kat_vectors for philox4x32_10. */
static void test_philox_known_answers(void **state)
{
    (void)state;
    struct { uint32_t ctr[4], key[2], out[4]; } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint32_t out[4];
        rl_philox4x32(kat[i].ctr, kat[i].key, out);
        for (int j = 0; j < 4; j++)
            assert_int_equal(out[j], kat[i].out[j]);
    }
}

static void test_rng_streams_reproducible(void **state)
{
    (void)state;
    rl_rng a, b, c;
    rl_rng_init(&a, 42, 7);
    rl_rng_init(&b, 42, 7);
    rl_rng_init(&c, 42, 8);
    int same_c = 0;
    for (int i = 0; i < 100; i++) {
        uint32_t x = rl_rng_u32(&a), y = rl_rng_u32(&b), z = rl_rng_u32(&c);
        assert_int_equal(x, y);
        same_c += (x == z);
    }
    assert_true(same_c < 3);
    /* seek/tell resume the same stream */
    rl_rng_init(&a, 5, 1);
    for (int i = 0; i < 8; i++)
        rl_rng_u32(&a);
    uint64_t pos = rl_rng_tell(&a);
    uint32_t next = rl_rng_u32(&a);
    rl_rng_init(&b, 5, 1);
    rl_rng_seek(&b, pos);
    assert_int_equal(rl_rng_u32(&b), next);
}

static void test_rng_distributions(void **state)
{
    (void)state;
    rl_rng g;
    rl_rng_init(&g, 1, 0);
    double s = 0, s2 = 0, u = 0;
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        double x = rl_rng_normal(&g);
        s += x;
        s2 += x * x;
        float v = rl_rng_uniform(&g);
        assert_true(v >= 0.0f && v < 1.0f);
        u += v;
    }
    assert_true(s / n > -0.01 && s / n < 0.01);
    assert_true(s2 / n > 0.98 && s2 / n < 1.02);
    assert_true(u / n > 0.49 && u / n < 0.51);
    int64_t idx[10];
    for (int i = 0; i < 10; i++)
        idx[i] = i;
    rl_rng_shuffle_i64(&g, idx, 10);
    int seen[10] = {0};
    for (int i = 0; i < 10; i++)
        seen[idx[i]]++;
    for (int i = 0; i < 10; i++)
        assert_int_equal(seen[i], 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_message_and_wrap),
        cmocka_unit_test(test_log_level_parse),
        cmocka_unit_test(test_philox_known_answers),
        cmocka_unit_test(test_rng_streams_reproducible),
        cmocka_unit_test(test_rng_distributions),
    };
    return cmocka_run_group_tests_name("core", tests, NULL, NULL);
}
