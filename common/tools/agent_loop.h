/* common/tools/agent_loop.h — multi-turn generation with tool calls (verl's agent
 * loop) for an rl_lm: the model writes, a tool answers, the model goes on.
 *
 * Purpose: rl_agent_generate() samples like rl_lm_generate() (same sampling
 * settings, same per-row random streams) but also stops a row at the
 * </call> token. The text between the row's last <call> and that </call> is
 * parsed as "NAME ARGS" (common/tools/tools.h), the tool runs through the bounded
 * runner, and
 *     <result>OUTPUT</result>
 * is appended to the row's response; generation then continues from the
 * whole context (prompt ++ response so far). A row ends at the stop token
 * (eos), when its response budget (max_new_tokens) or the model's
 * max_seq_len is used up, or when it asks for a call after max_turns calls.
 *
 * Response layout (B, max_new_tokens), like rl_lm_generate():
 *   tokens   the model's tokens and the appended result tokens, pad after
 *   logp, entropy   the sampling log-prob / entropy of model tokens; 0 at
 *            result tokens and after the end
 *   mask     1 at model tokens, 0 at result tokens (tool output is not the
 *            policy's action: it leaves the loss) and after the end
 *   lens     tokens per row (stop token and result tokens included)
 *
 * Call text that does not parse, and a call after max_turns calls, are
 * bounded outcomes too: a bad call gets "<result>error: bad call</result>"
 * (counted in bad_calls); the max_turns case ends the row (max_turns_hit).
 * A result that does not fit the budget (or max_seq_len) is cut there and
 * ends the row (truncated); the call keeps its outcome. An OK output that
 * the tokenizer cannot spell (or that holds a special token) is replaced by
 * "error: bad output" and counted as RL_TOOL_GARBAGE; an error text that it
 * cannot spell is replaced the same way and keeps its outcome. An output of
 * more than RL_TOOL_MAX_OUTPUT + 1 bytes is garbage, whatever the runner's
 * max_output.
 *
 * Determinism: turn t of row b samples with stream
 * row_seed[b] + t * RL_AGENT_TURN_STREAM, so turn 0 is exactly
 * rl_lm_generate() and a row's transcript does not depend on its batch.
 * Tool outputs are a function of the call (the runner bounds time; a
 * timed-out call gives the fixed "error: timeout").
 *
 * Ownership: every output is a caller buffer; the tokenizer and runner are
 * borrowed; nothing here prints (the caller logs the per-row counts).
 */
#ifndef RLRT_AGENT_LOOP_H
#define RLRT_AGENT_LOOP_H

#include <stdint.h>

#include "rlrt/config.h"
#include "common/nn/models/lm/generate.h"
#include "common/text/tokenizer.h"
#include "common/tools/tools.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RL_AGENT_TURN_STREAM 0x9E3779B97F4A7C15ull

typedef struct rl_agent_tokens {
    int32_t call_begin, call_end, result_begin, result_end; /* token ids */
} rl_agent_tokens;

/* The ids of "<call>", "</call>", "<result>", "</result>" in `tok`;
 * RL_ENOTFOUND naming the first one the vocabulary lacks (e.g. with
 * data.tokenizer: arith, which cannot spell tool calls; use arith_ext). */
int rl_agent_tokens_find(const rl_tokenizer *tok, rl_agent_tokens *out);

/* Per-row counts. */
typedef struct rl_agent_row_stats {
    int turns;            /* generation turns: 1 + calls answered, or calls
                             answered when the last result ended the row
                             (cut, or it used up the budget / max_seq_len) */
    int calls;            /* tool calls answered (bad ones included) */
    int outcomes[RL_TOOL_NOUTCOMES]; /* by rl_tool_outcome */
    int bad_calls;        /* call text that did not parse */
    int truncated;        /* 1: a result was cut by the budget */
    int max_turns_hit;    /* 1: the row asked for a call after max_turns */
} rl_agent_row_stats;

/* prompts (B, P) right-padded, prompt_lens, row_seeds (or NULL = row index)
 * and `s` as rl_lm_generate() (s->stop_tokens: the eos; </call> is added);
 * max_turns >= 0 (0: a call ends the row). Outputs as described above;
 * out_logp / out_entropy / stats may be NULL. Errors: RL_EINVAL /
 * RL_ESHAPE / RL_ERANGE naming the argument, RL_ENOMEM. */
int rl_agent_generate(rl_lm *m, const rl_tokenizer *tok, const rl_agent_tokens *at,
                      rl_tool_runner *runner, int max_turns, int B, int P,
                      const int32_t *prompts, const int *prompt_lens, const uint64_t *row_seeds,
                      const rl_lm_sampling *s, int32_t *out_tokens, float *out_logp,
                      float *out_entropy, float *out_mask, int *out_lens,
                      rl_agent_row_stats *stats);

/* The multi-turn set-up of a job (rollout.multi_turn.*, data.tokenizer):
 * the tokenizer, its markup ids, the runner of the listed built-in tools
 * (outputs checked against the tokenizer's characters for arith_ext) and
 * max_turns. NULL + a located config error (the tokenizer that cannot spell
 * the markup, an unknown tool name). */
typedef struct rl_agent {
    rl_tokenizer *tok;
    rl_agent_tokens at;
    rl_tool_runner *runner;
    int max_turns;
} rl_agent;

rl_agent *rl_agent_open(const rl_config *job);
void rl_agent_free(rl_agent *a);

#ifdef __cplusplus
}
#endif
#endif
