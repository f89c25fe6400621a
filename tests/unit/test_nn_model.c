/* test_nn_model.c — the model interface (rlrt/nn/model.h) and its LM kind:
 * quantities through the interface equal the transformer's own outputs bit
 * for bit (response alignment, micro-batching), gradients through the loss
 * callback equal a direct backward, sampling equals rl_lm_generate, every
 * bad batch is an error naming the tensor, and building, saving and loading
 * (a NaN in a checkpoint is found at load, naming the file, tensor and
 * index, located at model.init_from). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "rlrt/nn/params.h"
#include "common/nn/models/lm/transformer.h"
#include "common/nn/models/lm/generate.h"
#include "rlrt/nn/model.h"
#include "common/nn/models/model_device.h"
#include "common/nn/models/lm/lm_model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"

#define assert_msg_contains(msg, s) \
    do { \
        if (!strstr((msg), (s))) \
            fail_msg("message '%s' lacks '%s'", (msg), (s)); \
    } while (0)

static rl_config *s_job(int n, const char *const *overrides)
{
    /* the lm kind's sections: model.type (lm by default), init_from, the kind's keys */
    rl_config *known = rl_config_schema_defaults(rl_model_kind_lm.sections, 2, NULL, 0);
    rl_config *c = known ? rl_config_load_job_tree(known, NULL, n, overrides) : NULL;
    rl_config_free(known);
    if (!c)
        fail_msg("job: %s", rl_error_message());
    return c;
}

static const char *const TINY[] = {"model.vocab_size=23", "model.hidden_size=16",
                                   "model.intermediate_size=24", "model.num_layers=2",
                                   "model.num_heads=2", "model.num_kv_heads=1",
                                   "model.max_seq_len=32", "model.eos_token_id=2"};
#define NTINY 8

static rl_model *s_tiny(void)
{
    rl_config *c = s_job(NTINY, TINY);
    rl_model *m = rl_model_build(c, 7);
    if (!m)
        fail_msg("build: %s", rl_error_message());
    rl_config_free(c);
    return m;
}

/* B = 3 rows: prompts (3, 4), responses (3, 5) with lens 5, 0, 3. */
static rl_dataproto *s_batch(void)
{
    static const int32_t P[12] = {3, 4, 5, 6, 7, 8, 0, 0, 9, 10, 11, 0};
    static const int32_t PL[3] = {4, 2, 3};
    static const int32_t R[15] = {12, 13, 14, 15, 2, 0, 0, 0, 0, 0, 16, 17, 2, 0, 0};
    static const int32_t RL[3] = {5, 0, 3};
    rl_dataproto *dp = rl_dataproto_new();
    int64_t sp[2] = {3, 4}, sr[2] = {3, 5}, s1[1] = {3};
    memcpy(rl_tensor_data(rl_dataproto_new_tensor(dp, RL_LM_PROMPTS, RL_I32, 2, sp)), P, sizeof P);
    memcpy(rl_tensor_data(rl_dataproto_new_tensor(dp, RL_LM_PROMPT_LENS, RL_I32, 1, s1)), PL, sizeof PL);
    memcpy(rl_tensor_data(rl_dataproto_new_tensor(dp, RL_LM_RESPONSES, RL_I32, 2, sr)), R, sizeof R);
    memcpy(rl_tensor_data(rl_dataproto_new_tensor(dp, RL_LM_RESPONSE_LENS, RL_I32, 1, s1)), RL, sizeof RL);
    return dp;
}

/* The same rows as a padded (3, 9) sequence batch for rl_lm_forward. */
static void s_sequences(int32_t *tok, uint8_t *mask)
{
    static const int plen[3] = {4, 2, 3}, rlen[3] = {5, 0, 3};
    static const int32_t P[12] = {3, 4, 5, 6, 7, 8, 0, 0, 9, 10, 11, 0};
    static const int32_t R[15] = {12, 13, 14, 15, 2, 0, 0, 0, 0, 0, 16, 17, 2, 0, 0};
    for (int b = 0; b < 3; b++)
        for (int t = 0; t < 9; t++) {
            tok[b * 9 + t] = t < plen[b] ? P[b * 4 + t] : t < plen[b] + rlen[b] ? R[b * 5 + t - plen[b]] : 0;
            mask[b * 9 + t] = t < plen[b] + rlen[b];
        }
}

static void test_forward_matches_network(void **state)
{
    (void)state;
    rl_model *m = s_tiny();
    rl_lm *net = rl_lm_model_network(m);
    assert_non_null(net);
    assert_string_equal(rl_model_kind_name(m), "lm");
    assert_int_equal(rl_model_num_params(m), rl_lm_num_params(net));
    int32_t tok[27];
    uint8_t mask[27];
    s_sequences(tok, mask);
    float lp[27], en[27];
    assert_int_equal(rl_lm_forward(net, 3, 9, tok, mask, 0.7f, lp, en, NULL), 0);
    rl_dataproto *in = s_batch(), *out = NULL, *out_mb = NULL;
    rl_model_pass pass = {.temperature = 0.7, .micro_batch = 0};
    unsigned want = RL_Q_BIT(RL_Q_LOGP) | RL_Q_BIT(RL_Q_ENTROPY);
    assert_int_equal(rl_model_forward(m, in, want, &pass, &out), 0);
    pass.micro_batch = 2; /* micro-batching never changes a result */
    assert_int_equal(rl_model_forward(m, in, want, &pass, &out_mb), 0);
    assert_true(rl_dataproto_equal(out, out_mb));
    const float *glp = rl_tensor_data(rl_dataproto_tensor_typed(out, "logp", RL_F32));
    const float *gen = rl_tensor_data(rl_dataproto_tensor_typed(out, "entropy", RL_F32));
    static const int plen[3] = {4, 2, 3}, rlen[3] = {5, 0, 3};
    for (int b = 0; b < 3; b++)
        for (int j = 0; j < 5; j++) {
            float wl = j < rlen[b] ? lp[b * 9 + plen[b] + j] : 0.0f;
            float we = j < rlen[b] ? en[b * 9 + plen[b] + j] : 0.0f;
            if (glp[b * 5 + j] != wl || gen[b * 5 + j] != we)
                fail_msg("row %d pos %d: %g %g, expected %g %g", b, j, glp[b * 5 + j],
                         gen[b * 5 + j], wl, we);
        }
    /* quantities the LM does not have */
    assert_int_equal(rl_model_forward(m, in, RL_Q_BIT(RL_Q_VELOCITY), &pass, &out_mb), RL_EUNSUPPORTED);
    assert_int_equal(rl_model_forward(m, in, RL_Q_BIT(RL_Q_VALUE), &pass, &out_mb), RL_EUNSUPPORTED);
    assert_msg_contains(rl_error_message(), "model.value_head");
    rl_dataproto_free(out);
    rl_dataproto_free(out_mb);
    rl_dataproto_free(in);
    rl_model_free(m);
}

/* L = Σ w·logp + Σ u·entropy over response positions. */
static const float W[15] = {0.5f, -1, 2, 0.25f, 1, 0, 0, 0, 0, 0, -0.5f, 1.5f, 3, 0, 0};
static int s_loss(void *ctx, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    (void)ctx;
    int64_t K = out->width[RL_Q_LOGP];
    for (int64_t b = 0; b < out->rows; b++)
        for (int64_t j = 0; j < K; j++) {
            int64_t i = b * K + j, gi = (out->row0 + b) * K + j;
            if (!out->mask[RL_Q_LOGP][i])
                continue;
            *loss += W[gi] * out->q[RL_Q_LOGP][i] + 0.5 * out->q[RL_Q_ENTROPY][i];
            grad->q[RL_Q_LOGP][i] = W[gi];
            grad->q[RL_Q_ENTROPY][i] = 0.5f;
        }
    return 0;
}

static void test_backward_matches_network(void **state)
{
    (void)state;
    rl_model *m = s_tiny();
    rl_lm *net = rl_lm_model_network(m);
    int64_t P = rl_model_num_params(m);
    int32_t tok[27];
    uint8_t mask[27];
    s_sequences(tok, mask);
    float lp[27], en[27], dlp[27] = {0}, den[27] = {0};
    assert_int_equal(rl_lm_forward(net, 3, 9, tok, mask, 1.0f, lp, en, NULL), 0);
    static const int plen[3] = {4, 2, 3}, rlen[3] = {5, 0, 3};
    for (int b = 0; b < 3; b++)
        for (int j = 0; j < rlen[b]; j++) {
            dlp[b * 9 + plen[b] + j] = W[b * 5 + j];
            den[b * 9 + plen[b] + j] = 0.5f;
        }
    rl_model_zero_grad(m);
    assert_int_equal(rl_lm_backward(net, dlp, den, NULL), 0);
    float *want = malloc(sizeof(float) * (size_t)P);
    memcpy(want, rl_model_grads(m), sizeof(float) * (size_t)P);
    rl_model_zero_grad(m);
    rl_dataproto *in = s_batch();
    rl_model_pass pass = {.temperature = 1.0, .micro_batch = 1};
    double loss = 0;
    assert_int_equal(rl_model_forward_backward(m, in, RL_Q_BIT(RL_Q_LOGP) | RL_Q_BIT(RL_Q_ENTROPY),
                                               &pass, s_loss, NULL, &loss), 0);
    const float *got = rl_model_grads(m);
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < P; i++) {
        worst = fmax(worst, fabs((double)got[i] - want[i]));
        scale = fmax(scale, fabs(want[i]));
    }
    /* micro-batches of one row add in another order: float rounding only */
    if (worst > 1e-5 * scale + 1e-7)
        fail_msg("gradient differs by %g (scale %g)", worst, scale);
    assert_true(scale > 0);
    free(want);
    rl_dataproto_free(in);
    rl_model_free(m);
}

static void test_sample_matches_generate(void **state)
{
    (void)state;
    rl_model *m = s_tiny();
    rl_dataproto *in = s_batch(), *out = NULL;
    int64_t s1[1] = {3};
    int64_t *seeds = rl_tensor_data(rl_dataproto_new_tensor(in, RL_LM_ROW_SEEDS, RL_I64, 1, s1));
    seeds[0] = 11, seeds[1] = 12, seeds[2] = 13;
    rl_model_sampling s = {.temperature = 0.9, .top_p = 1.0, .max_new_tokens = 6};
    assert_int_equal(rl_model_sample(m, in, &s, &out), 0);
    rl_lm_sampling ls;
    rl_lm_sampling_default(&ls);
    ls.temperature = 0.9f;
    ls.max_new_tokens = 6;
    int32_t stop = 2, tok[18];
    ls.stop_tokens = &stop;
    ls.num_stop_tokens = 1;
    float lp[18], en[18];
    int lens[3], plens[3] = {4, 2, 3};
    assert_int_equal(rl_lm_generate(rl_lm_model_network(m), 3, 4,
                                    rl_tensor_data(rl_dataproto_tensor(in, RL_LM_PROMPTS)), plens,
                                    (const uint64_t *)seeds, &ls, tok, lp, en, lens), 0);
    assert_memory_equal(rl_tensor_data(rl_dataproto_tensor(out, RL_LM_RESPONSES)), tok, sizeof tok);
    assert_memory_equal(rl_tensor_data(rl_dataproto_tensor(out, RL_LM_RESPONSE_LOGP)), lp, sizeof lp);
    const int32_t *gl = rl_tensor_data(rl_dataproto_tensor(out, RL_LM_RESPONSE_LENS));
    for (int b = 0; b < 3; b++)
        assert_int_equal(gl[b], lens[b]);
    rl_dataproto_free(out);
    rl_dataproto_free(in);
    rl_model_free(m);
}

/* Partial rollouts through the model interface: poll_weights switches the
 * weights (rl_model_params_set) at its 2nd call and says version 9; the
 * output's token versions are 5 (the call's start) then 9, 0 past a row's
 * end; a version that does not grow is refused. */
typedef struct s_poll {
    rl_model *m;
    float *to;
    uint64_t give;
    int calls;
} s_poll;

static int s_poll_fn(void *ctx, uint64_t *version)
{
    s_poll *p = ctx;
    if (++p->calls != 2)
        return 0;
    int rc = rl_model_params_set(p->m, p->to);
    *version = p->give;
    return rc ? rc : 1;
}

static void test_sample_with_weight_switch(void **state)
{
    (void)state;
    rl_model *m = s_tiny();
    int64_t P = rl_model_num_params(m);
    float *to = malloc(sizeof(float) * (size_t)P);
    memcpy(to, rl_model_params(m), sizeof(float) * (size_t)P);
    for (int64_t i = 0; i < P; i++)
        to[i] *= -1.5f;
    rl_dataproto *in = s_batch(), *out = NULL;
    int64_t s1[1] = {3};
    int64_t *seeds = rl_tensor_data(rl_dataproto_new_tensor(in, RL_LM_ROW_SEEDS, RL_I64, 1, s1));
    seeds[0] = 11, seeds[1] = 12, seeds[2] = 13;
    s_poll p = {m, to, 9, 0};
    rl_model_sampling s = {.temperature = 0.9, .top_p = 1.0, .max_new_tokens = 6,
                           .poll_weights = s_poll_fn, .poll_ctx = &p, .version = 5};
    assert_int_equal(rl_model_sample(m, in, &s, &out), 0);
    const rl_tensor *tv = rl_dataproto_tensor(out, RL_LM_TOKEN_VERSION);
    assert_non_null(tv);
    assert_int_equal(tv->shape[0], 3);
    assert_int_equal(tv->shape[1], 6);
    const int64_t *v = rl_tensor_data((rl_tensor *)tv);
    const int32_t *len = rl_tensor_data(rl_dataproto_tensor(out, RL_LM_RESPONSE_LENS));
    int nine = 0;
    for (int b = 0; b < 3; b++)
        for (int j = 0; j < 6; j++) {
            int64_t want = j >= len[b] ? 0 : j < 2 ? 5 : 9; /* the switch after 2 tokens */
            assert_int_equal(v[b * 6 + j], want);
            nine += want == 9;
        }
    assert_true(nine > 0);
    rl_dataproto_free(out);
    /* versions must grow */
    memcpy(to, rl_model_params(m), sizeof(float) * (size_t)P);
    s_poll q = {m, to, 5, 0};
    s.poll_ctx = &q;
    assert_int_equal(rl_model_sample(m, in, &s, &out), RL_ESTATE);
    assert_msg_contains(rl_error_message(), "weights switched to version 5 after 5");
    free(to);
    rl_dataproto_free(in);
    rl_model_free(m);
}

static void test_bad_batches(void **state)
{
    (void)state;
    rl_model *m = s_tiny();
    rl_model_pass pass = {.temperature = 1.0};
    unsigned want = RL_Q_BIT(RL_Q_LOGP);
    rl_dataproto *out = NULL, *in = s_batch();
    assert_int_equal(rl_dataproto_remove(in, RL_LM_RESPONSE_LENS), 0);
    assert_int_equal(rl_model_forward(m, in, want, &pass, &out), RL_ENOTFOUND);
    assert_msg_contains(rl_error_message(), "missing tensor 'response_lens'");
    rl_dataproto_free(in);
    in = s_batch();
    ((int32_t *)rl_tensor_data(rl_dataproto_tensor(in, RL_LM_RESPONSE_LENS)))[2] = 6;
    assert_int_equal(rl_model_forward(m, in, want, &pass, &out), RL_ERANGE);
    assert_msg_contains(rl_error_message(), "response_lens[2] = 6 outside [0, 5]");
    rl_dataproto_free(in);
    in = s_batch();
    ((int32_t *)rl_tensor_data(rl_dataproto_tensor(in, RL_LM_PROMPTS)))[1] = 99;
    assert_int_equal(rl_model_forward(m, in, want, &pass, &out), RL_ERANGE);
    assert_msg_contains(rl_error_message(), "token 99 at position 1 outside the vocabulary [0, 23)");
    rl_dataproto_free(in);
    in = s_batch();
    assert_int_equal(rl_dataproto_remove(in, RL_LM_PROMPTS), 0);
    int64_t sp[2] = {3, 4};
    rl_dataproto_new_tensor(in, RL_LM_PROMPTS, RL_I64, 2, sp);
    assert_int_equal(rl_model_forward(m, in, want, &pass, &out), RL_EDTYPE);
    assert_msg_contains(rl_error_message(), "tensor 'prompts' must be i32");
    rl_model_sampling s = {.temperature = 1, .top_p = 1, .max_new_tokens = 4};
    assert_int_equal(rl_model_sample(m, in, &s, &out), RL_EDTYPE);
    rl_dataproto_free(in);
    rl_model_free(m);
}

static void test_config_build_save_load(void **state)
{
    (void)state;
    /* range checks are located, and check_config allocates nothing */
    const char *bad[NTINY + 1];
    memcpy(bad, TINY, sizeof TINY);
    bad[NTINY] = "model.num_layers=0";
    rl_config *c = s_job(NTINY + 1, bad);
    assert_int_equal(rl_model_check_config(c), RL_ECONFIG);
    assert_msg_contains(rl_error_message(), "override model.num_layers=0: model.num_layers: must be in [1, 1024], got 0");
    assert_null(rl_model_build(c, 1));
    rl_config_free(c);
    bad[NTINY] = "model.type=transformer";
    c = s_job(NTINY + 1, bad);
    assert_null(rl_model_build(c, 1));
    assert_msg_contains(rl_error_message(), "model.type: unknown model type 'transformer' (known: lm, clip_flow, flow_policy, image_classifier, image_cnn)");
    rl_config_free(c);
    bad[NTINY] = "model.num_heads=3"; /* 16 is not a multiple of 3: the network's own check */
    c = s_job(NTINY + 1, bad);
    assert_int_equal(rl_model_check_config(c), RL_ECONFIG);
    rl_config_free(c);

    /* save, then build from it: the same parameters */
    char dir[] = "/tmp/rlrt_model_XXXXXX";
    assert_non_null(mkdtemp(dir));
    rl_model *m = s_tiny();
    assert_int_equal(rl_model_save(m, dir), 0);
    char from[128];
    snprintf(from, sizeof from, "model.init_from=%s", dir);
    bad[NTINY] = from;
    c = s_job(NTINY + 1, bad);
    rl_model *m2 = rl_model_build(c, 999);
    if (!m2)
        fail_msg("build from %s: %s", dir, rl_error_message());
    assert_memory_equal(rl_model_params(m), rl_model_params(m2),
                        sizeof(float) * (size_t)rl_model_num_params(m));
    rl_model_free(m2);
    /* a NaN in the weights is found at load, named */
    const rl_param_manifest *man = rl_model_manifest(m);
    int v = rl_param_manifest_find(man, "model.norm.weight");
    assert_true(v >= 0);
    rl_model_params(m)[man->views[v].offset + 3] = NAN;
    assert_int_equal(rl_model_save(m, dir), 0);
    assert_null(rl_model_build(c, 999));
    char want[512];
    snprintf(want, sizeof want,
             "override model.init_from=%s: model.init_from: %s/model.safetensors: tensor "
             "'model.norm.weight' holds nan at [3]", dir, dir);
    assert_msg_contains(rl_error_message(), want);
    rl_config_free(c);
    rl_model_free(m);
    char path[256];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
}

/* A model's device on the CPU: it is on the CPU, moving it there is
 * nothing, the host copies round-trip, and a device this build or machine
 * lacks is refused with the model left working where it was, naming the
 * kind (flow_policy, image_cnn). (The move to a GPU and back is checked
 * in test_nn_lm_cuda.) */
static void test_model_device_on_cpu(void **state)
{
    (void)state;
    rl_model *m = s_tiny();
    assert_int_equal(rl_model_device(m), RL_DEVICE_CPU);
    assert_int_equal(rl_model_to_device(m, RL_DEVICE_CPU), RL_OK);
    int64_t P = rl_model_num_params(m);
    float *h = malloc(sizeof(float) * (size_t)P);
    assert_int_equal(rl_model_params_get(m, h), RL_OK);
    assert_memory_equal(h, rl_model_params(m), sizeof(float) * (size_t)P);
    h[5] += 1.0f;
    assert_int_equal(rl_model_params_set(m, h), RL_OK);
    assert_memory_equal(h, rl_model_params(m), sizeof(float) * (size_t)P);
    rl_model_grads(m)[3] = 2.0f;
    rl_model_zero_grad(m);
    assert_true(rl_model_grads(m)[3] == 0.0f);
    if (rl_device_count(RL_DEVICE_CUDA) <= 0) {
        assert_int_equal(rl_model_to_device(m, RL_DEVICE_CUDA), RL_EUNSUPPORTED);
        assert_int_equal(rl_model_device(m), RL_DEVICE_CPU);
        assert_memory_equal(h, rl_model_params(m), sizeof(float) * (size_t)P);
        rl_dataproto *in = s_batch(), *out = NULL;
        rl_model_pass pass = {.temperature = 1.0};
        assert_int_equal(rl_model_forward(m, in, RL_Q_BIT(RL_Q_LOGP), &pass, &out), 0);
        rl_dataproto_free(out);
        rl_dataproto_free(in);
    }
    free(h);
    rl_model_free(m);
    static const char yaml[] = "model: {type: flow_policy, num_action_chunks: 2, num_tasks: 1, "
                               "hidden_size: 8, num_layers: 1, time_embed_dim: 4, sde_mode: one, "
                               "obs_clip: 0, detach_critic_input: false, init_from: ''}\n";
    rl_config *job = rl_config_parse_string(yaml, strlen(yaml), "<test>");
    assert_non_null(job);
    rl_model *f = rl_model_build(job, 1);
    rl_config_free(job);
    if (!f)
        fail_msg("%s", rl_error_message());
    assert_int_equal(rl_model_device(f), RL_DEVICE_CPU);
    assert_int_equal(rl_model_to_device(f, RL_DEVICE_CPU), RL_OK);
    if (rl_device_count(RL_DEVICE_CUDA) <= 0) { /* the kind moves, but there is no GPU here */
        assert_int_equal(rl_model_to_device(f, RL_DEVICE_CUDA), RL_EUNSUPPORTED);
        assert_msg_contains(rl_error_message(), "flow_policy");
        assert_int_equal(rl_model_device(f), RL_DEVICE_CPU);
    }
    rl_model_free(f);
    /* the convolutional kind moves too: without a GPU it is refused by name */
    static const char cnn[] = "model: {type: image_cnn, channels: 1, height: 8, width: 8, conv1_channels: 2, "
                              "conv2_channels: 2, hidden_size: 4, num_classes: 3, init_from: ''}\n";
    job = rl_config_parse_string(cnn, strlen(cnn), "<test>");
    assert_non_null(job);
    f = rl_model_build(job, 1);
    rl_config_free(job);
    if (!f)
        fail_msg("%s", rl_error_message());
    assert_int_equal(rl_model_to_device(f, RL_DEVICE_CPU), RL_OK);
    if (rl_device_count(RL_DEVICE_CUDA) <= 0) {
        assert_int_equal(rl_model_to_device(f, RL_DEVICE_CUDA), RL_EUNSUPPORTED);
        assert_msg_contains(rl_error_message(), "image_cnn");
        assert_int_equal(rl_model_device(f), RL_DEVICE_CPU);
    }
    rl_model_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_matches_network),
        cmocka_unit_test(test_backward_matches_network),
        cmocka_unit_test(test_sample_matches_generate),
        cmocka_unit_test(test_sample_with_weight_switch),
        cmocka_unit_test(test_bad_batches),
        cmocka_unit_test(test_config_build_save_load),
        cmocka_unit_test(test_model_device_on_cpu),
    };
    return cmocka_run_group_tests_name("nn_model", tests, NULL, NULL);
}
