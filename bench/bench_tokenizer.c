/* bench_tokenizer.c — BPE encode speed of a Hugging Face tokenizer.json.
 *
 *   bench_tokenizer [tokenizer.json] [text files...]
 *
 * Defaults: tests/golden/nn_tok/qwen2.json (Qwen2 split regex + NFC) and
 * README.md. Prints, for each file and for all of them concatenated, the
 * bytes, the ids, the first (cold word cache) encode and the best of 10
 * warm ones in MB/s. Run from the repository root.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlrt/error.h"
#include "common/text/tokenizer.h"
#include "common/core/util.h"

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int s_bench(const char *json, const char *label, const char *text, size_t len)
{
    rl_tokenizer *t = rl_tokenizer_load_hf(json); /* fresh: cold word cache */
    if (!t) {
        fprintf(stderr, "%s: %s\n", json, rl_error_message());
        return 1;
    }
    double cold = 0, best = 1e30;
    int64_t n = 0;
    for (int r = 0; r < 11; r++) {
        int32_t *ids;
        double t0 = s_now();
        if (rl_tokenizer_encode(t, text, len, &ids, &n) != RL_OK) {
            fprintf(stderr, "%s: encode: %s\n", label, rl_error_message());
            rl_tokenizer_free(t);
            return 1;
        }
        double dt = s_now() - t0;
        free(ids);
        if (r == 0)
            cold = dt;
        else if (dt < best)
            best = dt;
    }
    printf("%-28s %9zu bytes %8lld ids  cold %7.2f MB/s  warm %7.2f MB/s\n", label, len,
           (long long)n, (double)len / cold / 1e6, (double)len / best / 1e6);
    rl_tokenizer_free(t);
    return 0;
}

int main(int argc, char **argv)
{
    const char *json = argc > 1 ? argv[1] : "tests/golden/nn_tok/qwen2.json";
    static const char *const dflt[] = {"README.md"};
    const char *const *files = argc > 2 ? (const char *const *)argv + 2 : dflt;
    int nf = argc > 2 ? argc - 2 : 1;
    char *all = NULL;
    size_t alen = 0;
    int bad = 0;
    for (int i = 0; i < nf; i++) {
        size_t len;
        char *buf = rl_file_read_all(files[i], &len);
        if (!buf) {
            fprintf(stderr, "%s: %s\n", files[i], rl_error_message());
            return 1;
        }
        bad |= s_bench(json, files[i], buf, len);
        char *na = realloc(all, alen + len);
        if (!na)
            return 1;
        all = na;
        memcpy(all + alen, buf, len);
        alen += len;
        free(buf);
    }
    if (nf > 1)
        bad |= s_bench(json, "(all concatenated)", all, alen);
    free(all);
    return bad;
}
