/* bench_ckpt.c — what a checkpoint's checksums cost: the model of each
 * example job is built (its `model:` section over the kind's defaults), and
 * for the biggest one a full checkpoint (f32 weights + both AdamW moments +
 * trainer state, as the actor writes it) is saved, sealed and verified.
 *
 *   bench: ckpt_params              parameters of the biggest example model
 *   bench: ckpt_bytes               bytes the checkpoint holds
 *   bench: ckpt_save_s              rl_checkpoint_save, seal included (fsyncs)
 *   bench: ckpt_seal_s              rl_checkpoint_seal alone (sha256 of every file)
 *   bench: ckpt_seal_fraction       seal / save
 *   bench: ckpt_verify_s            rl_checkpoint_verify (what a resume adds)
 *   bench: ckpt_sha256_mb_s         the hashing rate the seal reached
 *
 * Times are the median of RL_BENCH_REPS (default 5) runs; the files are in
 * the page cache when they are hashed (just written, or just read). Run from
 * the repository root (it reads examples/). Usage: bench_ckpt [DIR]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/data/data.h"
#include "common/nn/engine/checkpoint.h"
#include "common/text/tokenizer.h"
#include "rlrt/config.h"
#include "rlrt/error.h"
#include "rlrt/nn/model.h"

static const char *const s_examples[] = {
    "examples/arith_grpo.yaml",           "examples/arith_words_grpo.yaml",
    "examples/arith_tools_grpo.yaml",     "examples/dance_grpo_scorer.yaml",
    "examples/fmnist_scorer.yaml",        "examples/fmnist_flow_clips.yaml",
    "examples/libero_object_ppo.yaml",    "examples/libero_object_flowsar.yaml",
    "examples/libero_warmstart.yaml",     NULL,
};

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The example's model, random weights; NULL (message printed) if it has none. */
static rl_model *s_model(const char *path)
{
    rl_config *job = rl_config_parse_file(path), *model = NULL, *known = NULL, *merged = NULL;
    const char *type = "lm";
    rl_model *m = NULL;
    if (!job)
        goto out;
    if (rl_config_has(job, "model.type"))
        rl_config_get_string(job, "model.type", &type);
    const rl_model_kind *k = rl_model_kind_find(type);
    if (!k)
        goto out;
    size_t n = 0;
    while (k->sections[n])
        n++;
    char t[80];
    snprintf(t, sizeof t, "'%s'", type);
    rl_config_default change = {"model.type", t};
    known = rl_config_schema_defaults(k->sections, n, &change, 1);
    model = rl_config_has(job, "model") ? rl_config_subtree(job, "model") : NULL;
    if (!known)
        goto out;
    rl_config *over = rl_config_new(path);
    if (model)
        rl_config_set_yaml(over, "model", "{}");
    char *text = model ? rl_config_to_json(model, "") : NULL;
    if (text && rl_config_set_yaml(over, "model", text) == RL_OK)
        merged = rl_config_merge(known, over);
    else if (!model)
        merged = rl_config_merge(known, over);
    free(text);
    rl_config_free(over);
    if (merged && strcmp(type, "lm") == 0) { /* the recipe sets it from the tokenizer */
        const char *name = "arith";
        if (rl_config_has(job, "data.tokenizer"))
            rl_config_get_string(job, "data.tokenizer", &name);
        rl_tokenizer *tok = rl_task_tokenizer_open(name);
        char vs[32];
        snprintf(vs, sizeof vs, "%lld", tok ? (long long)rl_tokenizer_vocab_size(tok) : 0LL);
        rl_tokenizer_free(tok);
        rl_config_set_yaml(merged, "model.vocab_size", vs);
    }
    if (merged && rl_config_set_yaml(merged, "model.init_from", "''") == RL_OK)
        m = rl_model_build(merged, 1);
out:
    if (!m)
        fprintf(stderr, "bench_ckpt: %s: %s\n", path, rl_error_message());
    rl_config_free(job);
    rl_config_free(model);
    rl_config_free(known);
    rl_config_free(merged);
    return m;
}

int main(int argc, char **argv)
{
    const char *root = argc > 1 ? argv[1] : "/tmp/rlrt_bench_ckpt";
    int reps = getenv("RL_BENCH_REPS") ? atoi(getenv("RL_BENCH_REPS")) : 5;
    if (reps < 1)
        reps = 1;
    rl_model *best = NULL;
    const char *best_path = NULL;
    for (int i = 0; s_examples[i]; i++) {
        rl_model *m = s_model(s_examples[i]);
        if (!m)
            continue;
        printf("bench: %s (%s): %lld parameters\n", s_examples[i], rl_model_kind_name(m),
               (long long)rl_model_num_params(m));
        if (!best || rl_model_num_params(m) > rl_model_num_params(best)) {
            rl_model_free(best);
            best = m;
            best_path = s_examples[i];
        } else {
            rl_model_free(m);
        }
    }
    if (!best)
        return 1;
    int64_t P = rl_model_num_params(best);
    float *mo = calloc((size_t)P, sizeof(float)), *v = calloc((size_t)P, sizeof(float));
    if (!mo || !v)
        return 1;
    for (int64_t i = 0; i < P; i++)
        mo[i] = 1e-3f * (float)(i % 101), v[i] = 1e-6f * (float)(i % 37);
    rl_checkpoint_data d = {.manifest = rl_model_manifest(best), .params = rl_model_params(best),
                            .param_dtype = RL_F32, .exp_avg = mo, .exp_avg_sq = v,
                            .adamw = {0.9, 0.999, 1e-8, 0.01}, .adamw_step = 10};
    rl_train_state st;
    memset(&st, 0, sizeof st);
    st.step = 10;
    st.lr_step = 10;
    st.lr = (rl_lr_schedule){RL_LR_CONSTANT, 1e-4, 0, 100, 0};
    double *save = calloc((size_t)reps, sizeof(double)), *seal = calloc((size_t)reps, sizeof(double)),
           *ver = calloc((size_t)reps, sizeof(double));
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/step_10", root);
    for (int r = 0; r < reps; r++) {
        double t0 = s_now();
        if (rl_checkpoint_save(root, &d, &st)) {
            fprintf(stderr, "bench_ckpt: save: %s\n", rl_error_message());
            return 1;
        }
        double t1 = s_now();
        if (rl_checkpoint_seal(dir)) {
            fprintf(stderr, "bench_ckpt: seal: %s\n", rl_error_message());
            return 1;
        }
        double t2 = s_now();
        if (rl_checkpoint_verify(dir, NULL, NULL, 0)) {
            fprintf(stderr, "bench_ckpt: verify: %s\n", rl_error_message());
            return 1;
        }
        double t3 = s_now();
        save[r] = t1 - t0, seal[r] = t2 - t1, ver[r] = t3 - t2;
    }
    qsort(save, (size_t)reps, sizeof(double), s_cmp);
    qsort(seal, (size_t)reps, sizeof(double), s_cmp);
    qsort(ver, (size_t)reps, sizeof(double), s_cmp);
    double bytes = 0;
    const char *files[] = {"model.safetensors", "optimizer.safetensors", "trainer_state.json"};
    for (int i = 0; i < 3; i++) {
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        FILE *f = fopen(p, "rb");
        if (f) {
            fseek(f, 0, SEEK_END);
            bytes += (double)ftell(f);
            fclose(f);
        }
    }
    double sv = save[reps / 2], se = seal[reps / 2], vf = ver[reps / 2];
    printf("bench: ckpt_model = %s\n", best_path);
    printf("bench: ckpt_params = %lld\n", (long long)P);
    printf("bench: ckpt_bytes = %.0f\n", bytes);
    printf("bench: ckpt_save_s = %.4f\n", sv);
    printf("bench: ckpt_seal_s = %.4f\n", se);
    printf("bench: ckpt_seal_fraction = %.3f\n", se / sv);
    printf("bench: ckpt_verify_s = %.4f\n", vf);
    printf("bench: ckpt_sha256_mb_s = %.0f\n", bytes / 1e6 / se);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_ckpt: could not remove %s\n", root);
    free(save);
    free(seal);
    free(ver);
    free(mo);
    free(v);
    rl_model_free(best);
    return 0;
}
