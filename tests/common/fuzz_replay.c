/* fuzz_replay.c — replay of fuzz regression corpora (see fuzz_replay.h). */
#include "tests/common/fuzz_replay.h"

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "tests/common/srcdir.h"

static int s_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Regular files of dir not starting with '.', sorted; fails the test on an
 * entry that is neither such a file nor .gitkeep. */
static char **s_list(const char *dir, int *n_out)
{
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("fuzz regression corpus %s: missing (every fuzz target needs a non-empty "
                 "regression directory; see fuzz/README.md)", dir);
    int n = 0, cap = 64;
    char **names = malloc((size_t)cap * sizeof *names);
    assert_non_null(names);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            !strcmp(e->d_name, ".gitkeep"))
            continue;
        char path[4096 + 256];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            fail_msg("fuzz regression corpus %s: '%s' is not an input file (only regular "
                     "files not starting with '.' are replayed)", dir, e->d_name);
        if (n == cap) {
            cap *= 2;
            names = realloc(names, (size_t)cap * sizeof *names);
            assert_non_null(names);
        }
        names[n] = strdup(e->d_name);
        assert_non_null(names[n]);
        n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, s_name_cmp);
    *n_out = n;
    return names;
}

/* An independent count: every directory entry but ".", ".." and .gitkeep. */
static int s_count(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, ".gitkeep");
    closedir(d);
    return n;
}

static uint8_t *s_read(const char *path, size_t *len)
{
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long n = ftell(f);
    rewind(f);
    uint8_t *b = n >= 0 ? malloc(n > 0 ? (size_t)n : 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)(n > 0 ? n : 0);
    return b;
}

int rl_fuzz_replay(const char *target, rl_fuzz_replay_fn fn, void *ctx)
{
    char rel[256], dir[4096];
    snprintf(rel, sizeof rel, "fuzz/regressions/%s", target);
    if (rl_test_srcpath(dir, sizeof dir, rel))
        fail_msg("fuzz regression corpus %s: %s", rel, rl_error_message());
    int n;
    char **names = s_list(dir, &n);
    if (n == 0)
        fail_msg("fuzz regression corpus %s: empty (it must hold every crash ever found and "
                 "hand-made edge cases; see fuzz/README.md)", dir);
    int ran = 0;
    for (int i = 0; i < n; i++) {
        char path[4096 + 256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t len = 0;
        uint8_t *b = s_read(path, &len);
        if (!b)
            fail_msg("fuzz regression input %s: cannot read it", path);
        fn(names[i], b, len, ctx);
        free(b);
        ran++;
        free(names[i]);
    }
    free(names);
    int files = s_count(dir);
    if (ran != files)
        fail_msg("fuzz regression corpus %s: replayed %d inputs but it holds %d files", dir,
                 ran, files);
    print_message("%s: replayed %d of %d regression inputs\n", rel, ran, files);
    return ran;
}
