/* test_nn_hf.c — a checkpoint written by Hugging Face transformers
 * (Qwen2ForCausalLM, tests/golden/nn_hf/, made by tests/reference/gen_nn_io.py)
 * loads through config.json + model.safetensors into the C transformer and
 * gives the same logits; saving it back and reloading is exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/common/golden.h"
#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "common/nn/models/lm/lm_config.h"
#include "common/nn/engine/device.h"
#include "common/nn/engine/safetensors.h"
#include "common/nn/models/lm/transformer.h"

static rl_lm *s_load(const char *dir)
{
    char path[512];
    rl_lm_config cfg;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (rl_lm_config_from_hf_json(path, &cfg))
        fail_msg("config: %s", rl_error_message());
    rl_lm *m = rl_lm_new(&cfg, RL_DEVICE_CPU);
    if (!m)
        fail_msg("model: %s", rl_error_message());
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (rl_safetensors_read_params(path, rl_lm_manifest(m), rl_lm_params(m)))
        fail_msg("weights: %s", rl_error_message());
    return m;
}

static void test_hf_qwen2_logits(void **state)
{
    (void)state;
    rl_golden *g = rl_golden_load("tests/golden/nn_hf/logits.safetensors");
    if (!g)
        fail_msg("%s", rl_error_message());
    rl_lm *m = s_load("tests/golden/nn_hf");
    const rl_lm_config *cfg = rl_lm_get_config(m);
    assert_int_equal(cfg->qkv_bias, 1);
    assert_int_equal(cfg->tie_word_embeddings, 0);
    const rl_golden_array *ids = rl_golden_get(g, "input_ids");
    assert_non_null(ids);
    int B = (int)ids->shape[0], T = (int)ids->shape[1], V = cfg->vocab_size;
    int64_t n;
    int64_t *ids64 = rl_golden_i64(g, "input_ids", &n);
    int64_t *mask64 = rl_golden_i64(g, "attention_mask", &n);
    double *want = rl_golden_f64(g, "logits", &n);
    assert_int_equal(n, (int64_t)B * T * V);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(B * T));
    uint8_t *mask = malloc((size_t)(B * T));
    for (int i = 0; i < B * T; i++) {
        tok[i] = (int32_t)ids64[i];
        mask[i] = (uint8_t)mask64[i];
    }
    assert_int_equal(rl_lm_forward(m, B, T, tok, mask, 1.0f, NULL, NULL, NULL), 0);
    const float *got = rl_lm_logits(m);
    /* compare only real positions (HF computes padded ones differently) */
    int64_t bad = 0, checked = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            if (!mask[b * T + t])
                continue;
            size_t o = ((size_t)b * T + t) * V;
            char what[64];
            snprintf(what, sizeof what, "logits[%d,%d,:]", b, t);
            bad += rl_check_close_f32(what, got + o, want + o, V, 2e-4, 1e-3);
            checked += V;
        }
    assert_true(checked > 0);
    assert_int_equal(bad, 0);

    /* save with the HF names and reload: identical parameters */
    char dir[] = "/tmp/rlrt-hf-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(rl_safetensors_write_params(path, rl_lm_manifest(m), rl_lm_params(m), RL_F32, NULL), 0);
    snprintf(path, sizeof path, "%s/config.json", dir);
    assert_int_equal(rl_lm_config_to_hf_json(cfg, path), 0);
    rl_lm *m2 = s_load(dir);
    assert_memory_equal(rl_lm_params(m2), rl_lm_params(m), sizeof(float) * (size_t)rl_lm_num_params(m));
    rl_lm_free(m2);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
    free(tok);
    free(mask);
    free(ids64);
    free(mask64);
    free(want);
    rl_lm_free(m);
    rl_golden_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_hf_qwen2_logits)};
    return cmocka_run_group_tests_name("nn_hf", tests, NULL, NULL);
}
