/* tests/common/srcdir.h — where the source tree is, from any working
 * directory, for tests that read committed files (fuzz corpora, seeds).
 *
 * The root is, in order: $RL_SOURCE_DIR when set; two levels above the test
 * binary (/proc/self/exe = <root>/<build dir>/tests/<name>); the directory
 * the Makefile compiled this file in (RL_TEST_SOURCE_DIR, passed with -D from
 * $(CURDIR), for build directories outside the tree). A candidate counts
 * only if it holds tests/run.sh. Test-only code: not part of librlrt.
 */
#ifndef RLRT_TESTS_SRCDIR_H
#define RLRT_TESTS_SRCDIR_H

#include <stddef.h>

/* The source tree's root without a trailing slash, or NULL when none of the
 * candidates holds tests/run.sh (the candidates tried are then in
 * rl_error_message()). The string is static; computed once. */
const char *rl_test_srcdir(void);

/* <root>/<rel> into buf; 0, or -1 (message set) when the root is unknown or
 * the path does not fit. */
int rl_test_srcpath(char *buf, size_t cap, const char *rel);

#endif
