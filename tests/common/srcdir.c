/* srcdir.c — finds the source tree for tests (see srcdir.h). */
#include "tests/common/srcdir.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rlrt/error.h"

static char s_root[PATH_MAX];
static char s_tried[3 * PATH_MAX + 64];
static int s_found;
static pthread_once_t s_once = PTHREAD_ONCE_INIT;

/* Keeps `dir` as the root if it holds tests/run.sh. */
static int s_try(const char *dir)
{
    char probe[PATH_MAX + 32];
    struct stat st;
    if (!dir || !*dir)
        return 0;
    size_t used = strlen(s_tried);
    snprintf(s_tried + used, sizeof s_tried - used, "%s%s", used ? ", " : "", dir);
    if (snprintf(probe, sizeof probe, "%s/tests/run.sh", dir) >= (int)sizeof probe ||
        stat(probe, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    char *real = realpath(dir, NULL);
    if (!real || strlen(real) >= sizeof s_root) {
        free(real);
        return 0;
    }
    strcpy(s_root, real);
    free(real);
    return 1;
}

static void s_find(void)
{
    if (s_try(getenv("RL_SOURCE_DIR"))) {
        s_found = 1;
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        /* <root>/<build>/tests/<binary>: drop three components */
        for (int up = 0; up < 3; up++) {
            char *slash = strrchr(exe, '/');
            if (!slash)
                break;
            *slash = 0;
        }
        if (s_try(exe)) {
            s_found = 1;
            return;
        }
    }
#ifdef RL_TEST_SOURCE_DIR
    if (s_try(RL_TEST_SOURCE_DIR)) {
        s_found = 1;
        return;
    }
#endif
}

const char *rl_test_srcdir(void)
{
    pthread_once(&s_once, s_find);
    if (!s_found) {
        rl_error_set(RL_ENOTFOUND, "source tree not found (no tests/run.sh under: %s); set "
                     "RL_SOURCE_DIR", s_tried[0] ? s_tried : "no candidate");
        return NULL;
    }
    return s_root;
}

int rl_test_srcpath(char *buf, size_t cap, const char *rel)
{
    const char *root = rl_test_srcdir();
    if (!root)
        return -1;
    if (snprintf(buf, cap, "%s/%s", root, rel) >= (int)cap) {
        rl_error_set(RL_EINVAL, "path %s/%s is too long", root, rel);
        return -1;
    }
    return 0;
}
