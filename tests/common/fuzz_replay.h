/* tests/common/fuzz_replay.h — replays a fuzz target's regression corpus
 * (fuzz/regressions/<target>/ in the source tree, found from any working
 * directory by srcdir.h) in a unit test.
 *
 * A missing or empty corpus is a test failure naming the directory, never a
 * skip: a corpus that silently vanished would otherwise pass forever.
 *
 * The fuzz targets themselves (fuzz/fuzz_<name>.c) are compiled into the
 * test binaries with their entry point renamed rl_fuzz_<name>_one (see the
 * Makefile), so a replay can run every input through the target's own
 * oracles; they abort() on a violated oracle, which fails the test binary.
 * Test-only code: not part of librlrt.
 */
#ifndef RLRT_TESTS_FUZZ_REPLAY_H
#define RLRT_TESTS_FUZZ_REPLAY_H

#include <stddef.h>
#include <stdint.h>

/* Called once per input: its file name (no directory), its bytes in an
 * exact-size heap buffer (so ASan flags any read past the end) and ctx. */
typedef void (*rl_fuzz_replay_fn)(const char *name, const uint8_t *data, size_t len,
                                  void *ctx);

/* Runs fn on every file of fuzz/regressions/<target>/ in name order. Files
 * whose name starts with '.' are not inputs, and only .gitkeep may be one.
 * Fails the current cmocka test (naming the directory) when the source tree
 * or the directory is not found, when it holds no input, when an entry is
 * not a regular file or cannot be read, or when the number of inputs run
 * differs from the number of files counted in a separate pass. Returns the
 * number of inputs run. */
int rl_fuzz_replay(const char *target, rl_fuzz_replay_fn fn, void *ctx);

/* The fuzz targets' entry points (LLVMFuzzerTestOneInput, renamed). */
int rl_fuzz_wire_decode_one(const uint8_t *data, size_t size);
int rl_fuzz_wire_envelope_one(const uint8_t *data, size_t size);
int rl_fuzz_safetensors_one(const uint8_t *data, size_t size);
int rl_fuzz_cluster_yaml_one(const uint8_t *data, size_t size);
int rl_fuzz_job_yaml_one(const uint8_t *data, size_t size);
int rl_fuzz_jsonl_one(const uint8_t *data, size_t size);
int rl_fuzz_tokenizer_json_one(const uint8_t *data, size_t size);
int rl_fuzz_trainer_state_one(const uint8_t *data, size_t size);

#endif
