/* workers/lm_common.h — pieces the language-model roles (actor, rollout)
 * share: the model from the job's `model.*` section, call arguments from a
 * DataProto's meta, and the (prompt ++ response) sequence layout.
 *
 * Sequence layout: row b of a batch is prompt[b, 0:plen[b]] followed by
 * response[b, 0:rlen[b]], right-padded with pad_id; the attention mask is a
 * prefix of plen + rlen ones. Response token j of row b sits at position
 * plen[b] + j, so its log-prob is logp[b, plen[b] + j] (rlrt/nn/transformer.h
 * alignment: logp[b,t] = log π(token t | tokens < t)). */
#ifndef RLRT_WORKERS_LM_COMMON_H
#define RLRT_WORKERS_LM_COMMON_H

#include <stdint.h>

#include "rlrt/config.h"
#include "rlrt/dataproto.h"
#include "rlrt/nn/lm_config.h"
#include "rlrt/nn/transformer.h"

/* model.* of the job → config (vocab_size must be set by the driver). */
int rl_job_lm_config(const rl_config *job, rl_lm_config *out);
/* A model from the job: model.init_from (a directory with
 * model.safetensors) if set, else random init with trainer.seed and
 * model.init_std. */
rl_lm *rl_job_lm_build(const rl_config *job);

/* A (prompt ++ response) batch assembled from tensors prompts (B,P) i32,
 * prompt_lens (B) i32, responses (B,R) i32, response_lens (B) i32 (responses
 * may be absent: prompts only). tokens/mask are (B, L), L = max row length. */
typedef struct rl_seq_batch {
    int B, P, R, L;
    const int32_t *plen, *rlen;
    int32_t *tokens;
    uint8_t *mask;
    int64_t n_response_tokens;
} rl_seq_batch;

int rl_seq_batch_build(const rl_dataproto *in, int pad_id, rl_seq_batch *out);
void rl_seq_batch_free(rl_seq_batch *s);
/* Gathers per-response-token values: out[b, j] = full[b, plen[b] + j] for
 * j < rlen[b], else 0 (full is (B, L), out (B, R)). */
void rl_seq_gather(const rl_seq_batch *s, const float *full, int row0, int rows, int L,
                   float *out);
/* The inverse: full[b, plen[b] + j] = part[b, j] (other entries untouched). */
void rl_seq_scatter(const rl_seq_batch *s, const float *part, int row0, int rows, int L,
                    float *full);

#endif
