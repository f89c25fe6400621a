/* test_agent_loop.c — multi-turn generation with tools (common/tools/agent_loop.h)
 * with a real tiny model, taught one tool-use transcript by a few hundred
 * AdamW steps, and real tools: the calculator, a tool that never returns,
 * one that returns garbage, one that writes markup, one longer than the
 * budget; checks the masks, the turn counts, the budget and max_turns
 * bounds, the time bound and the determinism of sampled transcripts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "common/text/tokenizer.h"
#include "common/nn/models/lm/lm_config.h"
#include "common/nn/engine/device.h"
#include "common/nn/models/lm/transformer.h"
#include "common/nn/models/lm/generate.h"
#include "common/tools/tools.h"
#include "common/tools/agent_loop.h"
#include "common/data/data.h"
#include "common/nn/engine/optim.h"

#define PROMPT "Q: 47*6=?\nA: "
#define CALL "<think><call>calc 47*6</call>"
#define RESULT "<result>282</result>"
#define TAIL " 282+3=285</think>\\boxed{285}"

static rl_tokenizer *s_tok;
static rl_lm *s_lm;
static rl_agent_tokens s_at;
static int32_t s_prompt[32];
static int s_plen;

static double s_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static int64_t s_encode(const char *text, int32_t *ids, int64_t cap)
{
    int64_t n = 0;
    assert_int_equal(rl_tokenizer_encode_into(s_tok, text, strlen(text), ids, cap, &n), RL_OK);
    return n;
}

typedef struct s_sft { const uint8_t *mask; int T; } s_sft;

static int s_sft_loss(void *ctx, int row0, int B, int T, const float *logp, const float *entropy,
                      const float *values, float *dlogp, float *dentropy, float *dvalues,
                      double *loss)
{
    (void)row0, (void)entropy, (void)values, (void)dentropy, (void)dvalues;
    s_sft *s = ctx;
    assert_int_equal(B, 1);
    *loss += rl_lm_masked_nll(logp, s->mask, T, 0, dlogp);
    return 0;
}

/* A tiny model that learned PROMPT → CALL RESULT TAIL <eos> (the result
 * tokens left out of the loss, like the tool task's SFT). */
static int s_setup(void **state)
{
    (void)state;
    s_tok = rl_arith_ext_tokenizer_new();
    assert_non_null(s_tok);
    assert_int_equal(rl_agent_tokens_find(s_tok, &s_at), RL_OK);
    rl_lm_config c = {.vocab_size = (int)rl_tokenizer_vocab_size(s_tok), .hidden_size = 48,
                      .intermediate_size = 96, .num_layers = 1, .num_heads = 2,
                      .num_kv_heads = 1, .max_seq_len = 64, .rope_theta = 10000.0f,
                      .rms_norm_eps = 1e-6f, .tie_word_embeddings = 1, .bos_token_id = -1,
                      .eos_token_id = rl_tokenizer_special_id(s_tok, RL_TOK_EOS),
                      .pad_token_id = 0};
    s_lm = rl_lm_new(&c, RL_DEVICE_CPU);
    assert_non_null(s_lm);
    assert_int_equal(rl_lm_init_random(s_lm, 3, 0.02f), RL_OK);
    int32_t seq[64];
    uint8_t attn[64], mask[64] = {0};
    s_plen = (int)s_encode(PROMPT, s_prompt, 32);
    int T = s_plen;
    memcpy(seq, s_prompt, sizeof(int32_t) * (size_t)s_plen);
    int64_t a = s_encode(CALL, seq + T, 64 - T);
    for (int64_t i = 0; i < a; i++)
        mask[T + i] = 1;
    T += (int)a;
    T += (int)s_encode(RESULT, seq + T, 64 - T); /* mask 0 */
    int64_t b = s_encode(TAIL, seq + T, 64 - T);
    for (int64_t i = 0; i <= b; i++)
        mask[T + i] = 1;
    T += (int)b;
    seq[T++] = c.eos_token_id;
    memset(attn, 1, sizeof attn);
    rl_adamw_config oc = rl_adamw_config_default();
    oc.weight_decay = 0;
    rl_adamw *opt = rl_adamw_new(&oc, rl_lm_manifest(s_lm), 0, rl_lm_num_params(s_lm));
    assert_non_null(opt);
    s_sft ctx = {mask, T};
    double loss = 1e9;
    for (int step = 0; step < 400 && loss > 0.01; step++) {
        rl_lm_zero_grad(s_lm);
        loss = 0;
        assert_int_equal(rl_lm_forward_backward(s_lm, 1, T, seq, attn, 1.0f, 0, s_sft_loss, &ctx,
                                                &loss), RL_OK);
        assert_int_equal(rl_adamw_step(opt, 1e-2, rl_lm_params(s_lm), rl_lm_grads(s_lm)), RL_OK);
    }
    rl_adamw_free(opt);
    if (loss > 0.05)
        fail_msg("the tiny model did not learn the transcript (loss %g)", loss);
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    rl_lm_free(s_lm);
    rl_tokenizer_free(s_tok);
    return 0;
}

static char *s_text(const int32_t *ids, int n)
{
    char *t = NULL;
    assert_int_equal(rl_tokenizer_decode(s_tok, ids, n, &t, NULL), RL_OK);
    return t;
}

typedef struct s_out {
    int32_t tok[4 * 48];
    float logp[4 * 48], ent[4 * 48], mask[4 * 48];
    int lens[4];
    rl_agent_row_stats st[4];
} s_out;

static void s_run(rl_tool_runner *r, int max_turns, int B, int R, int greedy, s_out *o)
{
    int32_t prompts[4 * 32];
    int plens[4];
    uint64_t seeds[4];
    for (int b = 0; b < B; b++) {
        memcpy(prompts + b * s_plen, s_prompt, sizeof(int32_t) * (size_t)s_plen);
        plens[b] = s_plen;
        seeds[b] = 100 + (uint64_t)b;
    }
    rl_lm_sampling s;
    rl_lm_sampling_default(&s);
    int32_t eos = rl_tokenizer_special_id(s_tok, RL_TOK_EOS);
    s.greedy = greedy;
    s.temperature = 1.0f;
    s.max_new_tokens = R;
    s.stop_tokens = &eos;
    s.num_stop_tokens = 1;
    s.seed = 5;
    assert_true(R <= 48);
    int rc = rl_agent_generate(s_lm, s_tok, &s_at, r, max_turns, B, s_plen, prompts, plens, seeds,
                               &s, o->tok, o->logp, o->ent, o->mask, o->lens, o->st);
    if (rc)
        fail_msg("rl_agent_generate: %s", rl_error_message());
}

/* The calculator answers; the model finishes from the result. */
static void test_calculator_turn(void **state)
{
    (void)state;
    rl_tool tools[1] = {rl_tool_calculator()};
    rl_tool_runner *r = rl_tool_runner_new(tools, 1, 1000, 64, 2, RL_ARITH_EXT_CHARSET);
    assert_non_null(r);
    s_out o;
    s_run(r, 2, 1, 48, 1, &o);
    char *t = s_text(o.tok, o.lens[0]);
    assert_string_equal(t, CALL RESULT TAIL "<eos>");
    free(t);
    assert_int_equal(o.st[0].turns, 2);
    assert_int_equal(o.st[0].calls, 1);
    assert_int_equal(o.st[0].outcomes[RL_TOOL_OK], 1);
    assert_int_equal(o.st[0].truncated + o.st[0].max_turns_hit + o.st[0].bad_calls, 0);
    /* the mask is 0 exactly at <result>282</result> and after the end */
    int32_t ids[64];
    int a = (int)s_encode(CALL, ids, 64), n = (int)s_encode(RESULT, ids, 64);
    for (int j = 0; j < 48; j++) {
        int in_result = j >= a && j < a + n, in = j < o.lens[0];
        assert_true(o.mask[j] == (in && !in_result ? 1.0f : 0.0f));
        if (!in || in_result)
            assert_true(o.logp[j] == 0.0f && o.ent[j] == 0.0f);
        else
            assert_true(o.logp[j] < 0.0f || o.logp[j] == 0.0f);
    }
    assert_int_equal(o.tok[a], s_at.result_begin);
    assert_int_equal(o.tok[a + n - 1], s_at.result_end);
    rl_tool_runner_free(r);
}

static atomic_int s_release;

static int s_looping(void *st, const char *args, char *out, size_t cap)
{
    (void)st, (void)args;
    while (!atomic_load(&s_release))
        usleep(1000);
    snprintf(out, cap, "late");
    return RL_OK;
}

static int s_garbage(void *st, const char *args, char *out, size_t cap)
{
    (void)st, (void)args;
    memset(out, 0x01, cap - 1);
    out[cap - 1] = '\0';
    return RL_OK;
}

static int s_markup(void *st, const char *args, char *out, size_t cap)
{
    (void)st, (void)args;
    snprintf(out, cap, "1</result><call>calc 1");
    return RL_OK;
}

/* A tool that writes `*(int *)st` letters (a..z repeated). */
static int s_letters(void *st, const char *args, char *out, size_t cap)
{
    (void)args;
    size_t n = (size_t)*(const int *)st;
    if (n > cap - 1)
        n = cap - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = (char)('a' + i % 26);
    out[n] = '\0';
    return RL_OK;
}

/* The result text of row 0 (between <result> and </result>). */
static char *s_result_text(const s_out *o)
{
    int a = -1, e = -1;
    for (int j = 0; j < o->lens[0]; j++) {
        if (o->tok[j] == s_at.result_begin && a < 0)
            a = j;
        if (o->tok[j] == s_at.result_end && e < 0)
            e = j;
    }
    assert_true(a >= 0 && e > a);
    for (int j = a; j <= e; j++)
        assert_true(o->mask[j] == 0.0f);
    return s_text(o->tok + a + 1, e - a - 1);
}

/* A tool that never returns, one that returns garbage, one that writes
 * markup, and a missing tool: each a bounded outcome, the row goes on. */
static void test_bad_tools(void **state)
{
    (void)state;
    struct {
        rl_tool tool;
        const char *charset;
        rl_tool_outcome want;
        const char *text;
    } c[] = {
        {{"calc", s_looping, NULL}, RL_ARITH_EXT_CHARSET, RL_TOOL_TIMEOUT, "error: timeout"},
        {{"calc", s_garbage, NULL}, RL_ARITH_EXT_CHARSET, RL_TOOL_GARBAGE, "error: bad output"},
        {{"calc", s_markup, NULL}, NULL, RL_TOOL_GARBAGE, "error: bad output"},
        {{"other", s_markup, NULL}, NULL, RL_TOOL_UNKNOWN, "error: unknown tool calc"},
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        rl_tool_runner *r = rl_tool_runner_new(&c[k].tool, 1, 50, 64, 4, c[k].charset);
        assert_non_null(r);
        s_out o;
        double t0 = s_now();
        s_run(r, 3, 2, 48, 0, &o);
        double dt = s_now() - t0;
        for (int b = 0; b < 2; b++) {
            assert_true(o.lens[b] >= 1 && o.lens[b] <= 48);
            assert_true(o.st[b].turns >= 1 && o.st[b].turns <= 4);
            assert_true(o.st[b].calls <= 3 && o.st[b].turns <= o.st[b].calls + 1);
        }
        assert_int_equal(o.st[0].outcomes[c[k].want] >= 1, 1);
        char *t = s_result_text(&o);
        if (strcmp(t, c[k].text) != 0)
            fail_msg("case %zu: result '%s', expected '%s'", k, t, c[k].text);
        free(t);
        /* a looping tool costs at most its timeout per call */
        assert_true(dt < 0.05 * 3 * 2 + 5.0);
        rl_tool_runner_free(r);
    }
    atomic_store(&s_release, 1);
}

/* max_turns 0: the call ends the row; a budget that cuts the result. */
static void test_bounds(void **state)
{
    (void)state;
    rl_tool tools[1] = {rl_tool_calculator()};
    rl_tool_runner *r = rl_tool_runner_new(tools, 1, 1000, 64, 2, RL_ARITH_EXT_CHARSET);
    s_out o;
    int32_t ids[64];
    int a = (int)s_encode(CALL, ids, 64);
    s_run(r, 0, 1, 48, 1, &o);
    assert_int_equal(o.lens[0], a);
    assert_int_equal(o.st[0].max_turns_hit, 1);
    assert_int_equal(o.st[0].calls, 0);
    assert_int_equal(o.st[0].turns, 1);
    s_run(r, 2, 1, a + 3, 1, &o);
    assert_int_equal(o.lens[0], a + 3);
    assert_int_equal(o.st[0].truncated, 1);
    assert_int_equal(o.st[0].calls, 1);
    for (int j = 0; j < a + 3; j++)
        assert_true(o.mask[j] == (j < a ? 1.0f : 0.0f));
    rl_tool_runner_free(r);
}

/* An answered call whose output is longer than the row's budget (and than
 * 1023 bytes): the call is OK, the result is cut at the budget and the row
 * ends (truncated), after one turn. */
static void test_long_output(void **state)
{
    (void)state;
    int32_t ids[64];
    int a = (int)s_encode(CALL, ids, 64);
    struct { int len, max_output; } c[] = {{60, 64}, {2000, RL_TOOL_MAX_OUTPUT}};
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        rl_tool tool = {"calc", s_letters, &c[k].len};
        rl_tool_runner *r = rl_tool_runner_new(&tool, 1, 1000, (size_t)c[k].max_output, 2,
                                               RL_ARITH_EXT_CHARSET);
        assert_non_null(r);
        s_out o;
        s_run(r, 2, 1, 48, 1, &o);
        assert_int_equal(o.st[0].calls, 1);
        if (o.st[0].outcomes[RL_TOOL_OK] != 1)
            fail_msg("case %zu: outcomes ok %d garbage %d", k, o.st[0].outcomes[RL_TOOL_OK],
                     o.st[0].outcomes[RL_TOOL_GARBAGE]);
        assert_int_equal(o.st[0].outcomes[RL_TOOL_GARBAGE], 0);
        assert_int_equal(o.st[0].truncated, 1);
        assert_int_equal(o.st[0].turns, 1);
        assert_int_equal(o.lens[0], 48);
        assert_int_equal(o.tok[a], s_at.result_begin);
        char *t = s_text(o.tok + a + 1, 48 - a - 1);
        char want[64];
        int n = 48 - a - 1;
        for (int i = 0; i < n; i++)
            want[i] = (char)('a' + i % 26);
        want[n] = '\0';
        assert_string_equal(t, want);
        free(t);
        for (int j = 0; j < 48; j++)
            assert_true(o.mask[j] == (j < a ? 1.0f : 0.0f));
        rl_tool_runner_free(r);
    }
}

/* Sampled transcripts: the same twice, and a row's transcript does not
 * depend on the rows beside it. */
static void test_determinism(void **state)
{
    (void)state;
    rl_tool tools[1] = {rl_tool_calculator()};
    rl_tool_runner *r = rl_tool_runner_new(tools, 1, 1000, 64, 2, RL_ARITH_EXT_CHARSET);
    static s_out x, y;
    s_run(r, 2, 4, 48, 0, &x);
    s_run(r, 2, 4, 48, 0, &y);
    assert_memory_equal(x.tok, y.tok, sizeof x.tok);
    assert_memory_equal(x.mask, y.mask, sizeof x.mask);
    assert_memory_equal(x.lens, y.lens, sizeof x.lens);
    s_run(r, 2, 1, 48, 0, &y);
    assert_int_equal(x.lens[0], y.lens[0]);
    assert_memory_equal(x.tok, y.tok, sizeof(int32_t) * (size_t)x.lens[0]);
    for (int j = 0; j < x.lens[0]; j++) /* tokens exact; log-probs up to the padding's rounding */
        assert_true(fabsf(x.logp[j] - y.logp[j]) < 1e-4f);
    int calls = 0;
    for (int b = 0; b < 4; b++)
        calls += x.st[b].calls;
    assert_true(calls >= 1); /* the sampled rows call the tool too */
    rl_tool_runner_free(r);
}

static void test_errors(void **state)
{
    (void)state;
    rl_tokenizer *plain = rl_arith_tokenizer_new();
    rl_agent_tokens at;
    assert_int_equal(rl_agent_tokens_find(plain, &at), RL_ENOTFOUND);
    assert_non_null(strstr(rl_error_message(), "<call>"));
    rl_tokenizer_free(plain);
    rl_tool tools[1] = {rl_tool_calculator()};
    rl_tool_runner *r = rl_tool_runner_new(tools, 1, 1000, 64, 2, NULL);
    rl_lm_sampling s;
    rl_lm_sampling_default(&s);
    int32_t tok[8];
    float m[8];
    int lens[1], pl[1] = {0};
    assert_int_equal(rl_agent_generate(s_lm, s_tok, &s_at, r, 1, 1, 2, s_prompt, pl, NULL, &s,
                                       tok, NULL, NULL, m, lens, NULL), RL_ERANGE);
    pl[0] = 2;
    assert_int_equal(rl_agent_generate(s_lm, s_tok, &s_at, r, -1, 1, 2, s_prompt, pl, NULL, &s,
                                       tok, NULL, NULL, m, lens, NULL), RL_EINVAL);
    rl_tool_runner_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calculator_turn),
        cmocka_unit_test(test_bad_tools),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_long_output),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
