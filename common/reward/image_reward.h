/* common/reward/image_reward.h — the image rewards of the reward role and the
 * reward_model text that combines them ("name[:weight],...").
 * Ownership: nothing is allocated. */
#ifndef RLRT_REWARD_IMAGE_REWARD_H
#define RLRT_REWARD_IMAGE_REWARD_H

typedef enum rl_image_reward_kind {
    RL_IMG_JPEG_COMPRESSIBILITY = 0,   /* −kB of the JPEG at quality q (DDPO) */
    RL_IMG_JPEG_INCOMPRESSIBILITY = 1, /* +kB */
    RL_IMG_PROMPT_MATCH = 2,           /* p(prompt's class | image), the learned scorer */
    RL_IMG_REMOTE = 3,                 /* a remote scorer (e.g. HPSv3) */
    RL_IMG_ON_PROMPT = 4,              /* 1 when the learned scorer's argmax is the
                                        * prompt's class, else 0: a constraint-like
                                        * term beside a JPEG reward that pays for
                                        * staying recognisable, not for sharpening */
    RL_IMG_REWARD_COUNT = 5
} rl_image_reward_kind;

/* "jpeg_compressibility", "jpeg_incompressibility", "prompt_match", "remote",
 * "on_prompt". */
const char *rl_image_reward_name(rl_image_reward_kind k);

/* The weights of a reward_model text "name[:weight],name[:weight],…" (the
 * seed's reward_model key with several rewards combined): weight[k] of each
 * named reward (default 1), 0 for the others. Errors name the bad part:
 * "unknown reward 'hps' (known: …)", "weight 'x' of prompt_match is not a
 * finite number", a name given twice, or no reward at all. */
int rl_image_reward_parse(const char *text, double weight[RL_IMG_REWARD_COUNT]);

#endif
