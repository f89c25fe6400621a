/* agent_loop.c — multi-turn generation with tool calls (see
 * common/tools/agent_loop.h). Each turn re-prefills the live rows' whole context
 * (prompt ++ response so far) through rl_lm_generate(), which keeps a row's
 * tokens independent of the rows beside it. */
#include "common/tools/agent_loop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/data.h"
#include "common/nn/models/lm/transformer.h"
#include "common/schema/lm.h"
#include "common/schema/rollout.h"
#include "common/core/util.h"
#include "rlrt/error.h"

int rl_agent_tokens_find(const rl_tokenizer *tok, rl_agent_tokens *out)
{
    static const char *const names[4] = {"<call>", "</call>", "<result>", "</result>"};
    int32_t ids[4];
    if (!tok || !out)
        return rl_error_set(RL_EINVAL, "agent: NULL tokenizer or output");
    for (int k = 0; k < 4; k++) {
        ids[k] = rl_tokenizer_token_to_id(tok, names[k]);
        if (ids[k] < 0 || !rl_tokenizer_is_special(tok, ids[k]))
            return rl_error_set(RL_ENOTFOUND,
                                "the tokenizer has no special token '%s' (tool calls need "
                                "<call>, </call>, <result>, </result>; %s: arith_ext has them)",
                                names[k],
                                RL_CFG_PATH(&rl_lm_data_section, rl_lm_data_config, tokenizer));
    }
    out->call_begin = ids[0];
    out->call_end = ids[1];
    out->result_begin = ids[2];
    out->result_end = ids[3];
    return RL_OK;
}

/* Encodes `text` as tool output into a new array *ids (caller frees) of *n
 * ids: 0; 1 when the tokenizer cannot spell it or it contains a special
 * token (a tool must not write markup into the context); or RL_ENOMEM. */
static int s_encode_output(const rl_tokenizer *tok, const char *text, int32_t **ids, int64_t *n)
{
    int rc = rl_tokenizer_encode(tok, text, strlen(text), ids, n);
    if (rc == RL_ENOMEM)
        return rl_error_wrap(rc, "agent: encoding a tool result");
    for (int64_t i = 0; rc == RL_OK && i < *n; i++)
        if (rl_tokenizer_is_special(tok, (*ids)[i]))
            rc = 1;
    if (rc) {
        free(*ids);
        *ids = NULL;
        *n = 0;
        return 1;
    }
    return 0;
}

/* Runs the call that ends at resp[len - 1] (</call>). *nres receives the
 * length of <result>OUTPUT</result>, whatever its size; its first
 * min(*nres, cap) tokens are written to res[] (cap >= 1: what the row's
 * budget can still hold). */
static int s_answer(const rl_tokenizer *tok, const rl_agent_tokens *at, rl_tool_runner *runner,
                    const int32_t *resp, int len, int32_t *res, int64_t cap, int64_t *nres,
                    rl_agent_row_stats *st)
{
    int k = len - 2;
    while (k >= 0 && resp[k] != at->call_begin && resp[k] != at->result_end)
        k--;
    char out[RL_TOOL_MAX_OUTPUT + 2]; /* an output the runner accepts, or its error text */
    const char *msg = "error: bad call";
    rl_tool_outcome o = RL_TOOL_ERROR;
    int bad = 1;
    if (k >= 0 && resp[k] == at->call_begin) {
        char *text = NULL;
        size_t tl = 0;
        char name[RL_TOOL_MAX_NAME], args[RL_TOOL_MAX_ARGS];
        if (rl_tokenizer_decode(tok, resp + k + 1, len - 2 - k, &text, &tl) == RL_OK &&
            strlen(text) == tl && rl_tool_parse_call(text, tl, name, args) == RL_OK) {
            if (rl_tool_runner_call(runner, name, args, out, sizeof out, &o)) {
                free(text);
                return rl_error_wrap(rl_error_code(), "agent: calling tool '%s'", name);
            }
            st->outcomes[o]++;
            msg = out;
            bad = 0;
        }
        free(text);
    }
    if (bad)
        st->bad_calls++;
    st->calls++;
    int32_t *ids = NULL;
    int64_t n = 0;
    int rc = s_encode_output(tok, msg, &ids, &n);
    if (rc > 0 && !bad) { /* the tokenizer cannot spell it */
        if (o == RL_TOOL_OK) {
            st->outcomes[RL_TOOL_OK]--;
            st->outcomes[RL_TOOL_GARBAGE]++;
        }
        rc = s_encode_output(tok, "error: bad output", &ids, &n);
    }
    if (rc < 0)
        return rc;
    /* rc > 0: not even the fixed text is spellable; the result is empty */
    *nres = n + 2;
    res[0] = at->result_begin;
    int64_t m = n < cap - 1 ? n : cap - 1;
    if (m > 0)
        memcpy(res + 1, ids, sizeof(int32_t) * (size_t)m);
    if (n + 2 <= cap)
        res[n + 1] = at->result_end;
    free(ids);
    return RL_OK;
}

int rl_agent_generate(rl_lm *m, const rl_tokenizer *tok, const rl_agent_tokens *at,
                      rl_tool_runner *runner, int max_turns, int B, int P,
                      const int32_t *prompts, const int *prompt_lens, const uint64_t *row_seeds,
                      const rl_lm_sampling *s, int32_t *out_tokens, float *out_logp,
                      float *out_entropy, float *out_mask, int *out_lens,
                      rl_agent_row_stats *stats)
{
    if (!m || !tok || !at || !runner || !s || !prompts || !prompt_lens || !out_tokens ||
        !out_mask || !out_lens)
        return rl_error_set(RL_EINVAL, "agent: NULL argument");
    const rl_lm_config *c = rl_lm_get_config(m);
    if (B < 1 || P < 1 || P > c->max_seq_len)
        return rl_error_set(RL_ESHAPE, "agent: prompts (%d, %d) need B >= 1, 1 <= P <= %d", B,
                            P, c->max_seq_len);
    if (max_turns < 0)
        return rl_error_set(RL_EINVAL, "agent: max_turns must be >= 0, got %d", max_turns);
    if (s->max_new_tokens < 1 || s->num_stop_tokens < 0 || s->num_stop_tokens > 15 ||
        (s->num_stop_tokens && !s->stop_tokens))
        return rl_error_set(RL_EINVAL, "agent: max_new_tokens %d (>= 1) / %d stop tokens "
                                       "(0..15)", s->max_new_tokens, s->num_stop_tokens);
    for (int b = 0; b < B; b++)
        if (prompt_lens[b] < 1 || prompt_lens[b] > P)
            return rl_error_set(RL_ERANGE, "agent: prompt_lens[%d] = %d not in [1, %d]", b,
                                prompt_lens[b], P);
    const int R = s->max_new_tokens, maxL = c->max_seq_len;
    const int32_t pad = c->pad_token_id >= 0 ? c->pad_token_id : 0;
    for (int b = 0; b < B; b++) {
        out_lens[b] = 0;
        if (stats) {
            memset(&stats[b], 0, sizeof stats[b]);
        }
        for (int j = 0; j < R; j++) {
            size_t at_ = (size_t)b * R + j;
            out_tokens[at_] = pad;
            out_mask[at_] = 0.0f;
            if (out_logp)
                out_logp[at_] = 0.0f;
            if (out_entropy)
                out_entropy[at_] = 0.0f;
        }
    }
    int32_t stops[16];
    for (int k = 0; k < s->num_stop_tokens; k++)
        stops[k] = s->stop_tokens[k];
    stops[s->num_stop_tokens] = at->call_end;
    rl_lm_sampling st = *s;
    st.stop_tokens = stops;
    st.num_stop_tokens = s->num_stop_tokens + 1;

    int *live = malloc(sizeof(int) * (size_t)B * 3);
    rl_agent_row_stats *own = stats ? NULL : calloc((size_t)B, sizeof *own);
    int32_t *ctx = malloc(sizeof(int32_t) * (size_t)B * maxL);
    int32_t *gtok = malloc(sizeof(int32_t) * (size_t)B * R);
    float *glp = malloc(sizeof(float) * (size_t)B * R * 2);
    uint64_t *seeds = malloc(sizeof(uint64_t) * (size_t)B);
    int32_t *res = malloc(sizeof(int32_t) * (size_t)R); /* a result, up to the budget */
    int rc = RL_OK;
    if (!live || (!stats && !own) || !ctx || !gtok || !glp || !seeds || !res) {
        rc = rl_error_set(RL_ENOMEM, "agent: out of memory for %d rows", B);
        goto done;
    }
    if (!stats)
        stats = own;
    int *plens = live + B, *glens = live + 2 * B;
    float *gent = glp + (size_t)B * R;
    int n = 0;
    for (int b = 0; b < B; b++)
        live[n++] = b;
    for (int turn = 0; n > 0; turn++) {
        int Pt = 1, budget = 1;
        for (int i = 0; i < n; i++) {
            int b = live[i], len = prompt_lens[b] + out_lens[b];
            Pt = len > Pt ? len : Pt;
            budget = R - out_lens[b] > budget ? R - out_lens[b] : budget;
        }
        for (int i = 0; i < n; i++) {
            int b = live[i];
            int32_t *row = ctx + (size_t)i * Pt;
            memcpy(row, prompts + (size_t)b * P, sizeof(int32_t) * (size_t)prompt_lens[b]);
            memcpy(row + prompt_lens[b], out_tokens + (size_t)b * R,
                   sizeof(int32_t) * (size_t)out_lens[b]);
            plens[i] = prompt_lens[b] + out_lens[b];
            for (int t = plens[i]; t < Pt; t++)
                row[t] = pad;
            seeds[i] = (row_seeds ? row_seeds[b] : (uint64_t)b) +
                       (uint64_t)turn * RL_AGENT_TURN_STREAM;
        }
        st.max_new_tokens = budget;
        if ((rc = rl_lm_generate(m, n, Pt, ctx, plens, seeds, &st, gtok, glp, gent, glens)) < 0)
            goto done;
        int keep = 0;
        for (int i = 0; i < n; i++) {
            int b = live[i], room = R - out_lens[b];
            int g = glens[i] < room ? glens[i] : room;
            size_t o = (size_t)b * R + out_lens[b];
            for (int j = 0; j < g; j++) {
                out_tokens[o + j] = gtok[(size_t)i * budget + j];
                out_mask[o + j] = 1.0f;
                if (out_logp)
                    out_logp[o + j] = glp[(size_t)i * budget + j];
                if (out_entropy)
                    out_entropy[o + j] = gent[(size_t)i * budget + j];
            }
            out_lens[b] += g;
            stats[b].turns++;
            int called = g > 0 && out_tokens[o + g - 1] == at->call_end;
            if (!called || prompt_lens[b] + out_lens[b] >= maxL || out_lens[b] >= R)
                continue; /* the row is finished */
            if (stats[b].calls >= max_turns) {
                stats[b].max_turns_hit = 1;
                continue;
            }
            int64_t nres = 0;
            int space = R - out_lens[b];
            if (maxL - prompt_lens[b] - out_lens[b] < space)
                space = maxL - prompt_lens[b] - out_lens[b];
            if ((rc = s_answer(tok, at, runner, out_tokens + (size_t)b * R, out_lens[b], res,
                               space, &nres, &stats[b])) < 0)
                goto done;
            int put = nres < space ? (int)nres : space;
            memcpy(out_tokens + (size_t)b * R + out_lens[b], res, sizeof(int32_t) * (size_t)put);
            out_lens[b] += put; /* mask, logp, entropy stay 0 */
            if (put < nres) {
                stats[b].truncated = 1;
                continue;
            }
            if (out_lens[b] >= R || prompt_lens[b] + out_lens[b] >= maxL)
                continue;
            live[keep++] = b;
        }
        n = keep;
    }
done:
    free(live);
    free(own);
    free(ctx);
    free(gtok);
    free(glp);
    free(seeds);
    free(res);
    return rc;
}

rl_agent *rl_agent_open(const rl_config *job)
{
    const rl_lm_data_config *data = rl_config_section_get(job, &rl_lm_data_section);
    const rl_rollout_multi_turn_config *mt = data ? rl_config_section_get(job, &rl_rollout_multi_turn_section) : NULL;
    if (!mt)
        return NULL;
    const rl_rollout_multi_turn_config cfg = *mt; /* the tree's strings and nodes stay */
    const char *tokname = data->tokenizer;
    size_t nt = rl_config_node_len(cfg.tools);
    rl_agent *a = rl_zalloc(sizeof *a, "agent");
    if (!a)
        return NULL;
    a->max_turns = (int)cfg.max_turns;
    if (!(a->tok = rl_task_tokenizer_open(tokname))) {
        RL_CFG_ERROR(job, &rl_lm_data_section, rl_lm_data_config, tokenizer, rl_error_code(), "%s",
                     rl_error_message());
        goto fail;
    }
    if (rl_agent_tokens_find(a->tok, &a->at)) {
        RL_CFG_ERROR(job, &rl_lm_data_section, rl_lm_data_config, tokenizer, rl_error_code(),
                     "%s: %s", RL_CFG_PATH(&rl_rollout_multi_turn_section, rl_rollout_multi_turn_config, enable),
                     rl_error_message());
        goto fail;
    }
    rl_tool tools[RL_MULTI_TURN_MAX_TOOLS];
    for (size_t i = 0; i < nt; i++) {
        const rl_config_node *item = rl_config_node_item(cfg.tools, i);
        const char *name;
        if (rl_config_node_string(item, &name))
            goto fail;
        if (rl_tool_builtin(name, &tools[i])) {
            rl_config_node_error(item, rl_error_code(), "%s", rl_error_message());
            goto fail;
        }
    }
    a->runner = rl_tool_runner_new(tools, (int)nt, (int)cfg.tool_timeout_ms,
                                   (size_t)cfg.max_tool_output, 4,
                                   strcmp(tokname, "arith_ext") == 0 ? RL_ARITH_EXT_CHARSET : NULL);
    if (!a->runner) {
        rl_config_node_error(cfg.tools, rl_error_code(), "%s", rl_error_message());
        goto fail;
    }
    return a;
fail:
    rl_agent_free(a);
    return NULL;
}

void rl_agent_free(rl_agent *a)
{
    if (!a)
        return;
    rl_tool_runner_free(a->runner);
    rl_tokenizer_free(a->tok);
    free(a);
}
