/* test_fuzz_corpus.c — every fuzz target has a regression corpus, and every
 * input of it passes the target's own oracles.
 *
 * The targets (fuzz/fuzz_*.c) are linked in with their entry point renamed
 * (tests/common/fuzz_replay.h); an input that violates an oracle aborts this
 * binary, which tests/run.sh counts as failed cases. The decoder-specific
 * expectations (accept-* decodes, reject-* is refused with a message) are in
 * test_wire.c and test_nn_safetensors.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common/fuzz_replay.h"
#include "rlrt/error.h"
#include "tests/common/srcdir.h"

typedef int (*s_target_fn)(const uint8_t *data, size_t size);

typedef struct {
    const char *name;
    s_target_fn one;
} s_target;

static const s_target s_targets[] = {
    {"fuzz_cluster_yaml", rl_fuzz_cluster_yaml_one},
    {"fuzz_job_yaml", rl_fuzz_job_yaml_one},
    {"fuzz_jsonl", rl_fuzz_jsonl_one},
    {"fuzz_safetensors", rl_fuzz_safetensors_one},
    {"fuzz_tokenizer_json", rl_fuzz_tokenizer_json_one},
    {"fuzz_trainer_state", rl_fuzz_trainer_state_one},
    {"fuzz_wire_decode", rl_fuzz_wire_decode_one},
    {"fuzz_wire_envelope", rl_fuzz_wire_envelope_one},
};
enum { N_TARGETS = sizeof s_targets / sizeof s_targets[0] };

static void s_run(const char *name, const uint8_t *data, size_t len, void *ctx)
{
    (void)name;
    const s_target *t = ctx;
    assert_int_equal(t->one(data, len), 0);
}

/* Each fuzz/fuzz_<name>.c of the source tree is in s_targets (so a new
 * target cannot go without a replayed corpus), and each entry of s_targets
 * still has its source. */
static void test_every_target_is_replayed(void **state)
{
    (void)state;
    char dir[4096];
    if (rl_test_srcpath(dir, sizeof dir, "fuzz"))
        fail_msg("%s", rl_error_message());
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("%s: missing", dir);
    int seen[N_TARGETS] = {0}, sources = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "fuzz_", 5) || n < 3 || strcmp(e->d_name + n - 2, ".c"))
            continue;
        sources++;
        int found = 0;
        for (int i = 0; i < N_TARGETS; i++)
            if (strlen(s_targets[i].name) == n - 2 && !strncmp(e->d_name, s_targets[i].name, n - 2))
                found = 1, seen[i] = 1;
        if (!found)
            fail_msg("fuzz/%s has no replay: add it to s_targets in tests/unit/test_fuzz_corpus.c "
                     "and its corpus to fuzz/regressions/", e->d_name);
    }
    closedir(d);
    for (int i = 0; i < N_TARGETS; i++)
        if (!seen[i])
            fail_msg("fuzz/%s.c is gone but still listed in s_targets", s_targets[i].name);
    assert_int_equal(sources, N_TARGETS);
}

static void test_replay_through_targets(void **state)
{
    (void)state;
    for (int i = 0; i < N_TARGETS; i++) {
        int n = rl_fuzz_replay(s_targets[i].name, s_run, (void *)&s_targets[i]);
        assert_true(n > 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_target_is_replayed),
        cmocka_unit_test(test_replay_through_targets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
