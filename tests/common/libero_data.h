/* tests/common/libero_data.h — where the LIBERO-Object scenes of the sim
 * tests are (LIBERO_DATA, else build/libero-data: `make libero-data`), and
 * RL_NEED_LIBERO_DATA() to skip a cmocka test with a message when they are
 * missing. Header-only: the tests include it after <cmocka.h>. */
#ifndef RLRT_TESTS_LIBERO_DATA_H
#define RLRT_TESTS_LIBERO_DATA_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline const char *rl_test_libero_data(void)
{
    const char *d = getenv("LIBERO_DATA");
    return d && *d ? d : "build/libero-data";
}

/* 1 when the scenes' manifest is readable; else 0 after a skip message. */
static inline int rl_test_have_libero_data(void)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/manifest.json", rl_test_libero_data());
    if (access(p, R_OK) == 0)
        return 1;
    printf("# skip: no LIBERO-Object data in %s; run: make libero-data\n", rl_test_libero_data());
    return 0;
}

#define RL_NEED_LIBERO_DATA()               \
    do {                                    \
        if (!rl_test_have_libero_data()) {  \
            skip();                         \
            return;                         \
        }                                   \
    } while (0)

#endif
