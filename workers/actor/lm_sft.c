/* workers/actor/lm_sft.c — supervised fine-tuning (loss op "sft", method
 * sft_step; contract: workers/actor/actor.h): masked NLL of the batch's
 * response positions (any kind with RL_Q_LOGP: the LM, the image
 * classifier), normalised by meta RL_ACTOR_GLOBAL_TOKENS. */
#include <stdint.h>

#include "rlrt/error.h"
#include "workers/actor/actor_internal.h"

typedef struct s_sft {
    double global_tokens, tokens;
} s_sft;

static int s_loss(void *arg, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    s_sft *c = arg;
    int64_t n = out->rows * out->width[RL_Q_LOGP];
    const float *lp = out->q[RL_Q_LOGP], *mask = out->mask[RL_Q_LOGP];
    for (int64_t i = 0; i < n; i++) {
        if (!mask[i])
            continue;
        *loss -= lp[i] / c->global_tokens;
        grad->q[RL_Q_LOGP][i] = (float)(-1.0 / c->global_tokens);
        c->tokens += 1;
    }
    return RL_OK;
}

static int s_prepare(rl_actor_step *s)
{
    s_sft *c = s->ctx;
    int64_t gtok;
    if (rl_dataproto_meta_get_int(s->in, RL_ACTOR_GLOBAL_TOKENS, 1, INT64_MAX, &gtok))
        return rl_error_code();
    c->global_tokens = (double)gtok;
    s->want = RL_Q_BIT(RL_Q_LOGP);
    s->loss = s_loss;
    return RL_OK;
}

static json_t *s_reply(const rl_actor_step *s)
{
    const s_sft *c = s->ctx;
    return json_pack("{s:f}", RL_ACTOR_M_TOKENS, c->tokens);
}

const rl_actor_loss_op rl_actor_loss_sft = {RL_ACTOR_LOSS_SFT, RL_ACTOR_SFT_STEP, sizeof(s_sft), 0,
    .prepare = s_prepare, .reply = s_reply};
