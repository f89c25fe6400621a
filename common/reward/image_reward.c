/* image_reward.c — the image-reward specification of the reward role
 * (common/reward/image_reward.h). */
#include "common/reward/image_reward.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rlrt/error.h"

/* ---- reward specifications ---------------------------------------------------------------- */

static const char *const s_names[RL_IMG_REWARD_COUNT] = {
    "jpeg_compressibility", "jpeg_incompressibility", "prompt_match", "remote", "on_prompt"};

const char *rl_image_reward_name(rl_image_reward_kind k)
{
    return (unsigned)k < RL_IMG_REWARD_COUNT ? s_names[k] : "?";
}

int rl_image_reward_parse(const char *text, double weight[RL_IMG_REWARD_COUNT])
{
    int seen[RL_IMG_REWARD_COUNT] = {0}, any = 0;
    for (int k = 0; k < RL_IMG_REWARD_COUNT; k++)
        weight[k] = 0;
    const char *p = text ? text : "";
    while (*p) {
        while (isspace((unsigned char)*p) || *p == ',')
            p++;
        if (!*p)
            break;
        const char *end = p;
        while (*end && *end != ',')
            end++;
        char part[128];
        size_t n = (size_t)(end - p);
        if (n >= sizeof part)
            return rl_error_set(RL_EINVAL, "reward '%.40s…' is too long", p);
        memcpy(part, p, n);
        part[n] = '\0';
        while (n && isspace((unsigned char)part[n - 1]))
            part[--n] = '\0';
        char *colon = strchr(part, ':');
        double w = 1.0;
        if (colon) {
            *colon = '\0';
            char *e;
            errno = 0;
            w = strtod(colon + 1, &e);
            while (isspace((unsigned char)*e))
                e++;
            if (e == colon + 1 || *e || errno || !isfinite(w))
                return rl_error_set(RL_EINVAL, "weight '%s' of %s is not a finite number",
                                    colon + 1, part);
            size_t l = strlen(part);
            while (l && isspace((unsigned char)part[l - 1]))
                part[--l] = '\0';
        }
        int k = 0;
        while (k < RL_IMG_REWARD_COUNT && strcmp(part, s_names[k]) != 0)
            k++;
        if (k == RL_IMG_REWARD_COUNT)
            return rl_error_set(RL_EINVAL, "unknown reward '%s' (known: %s, %s, %s, %s, %s)",
                                part, s_names[0], s_names[1], s_names[2], s_names[3], s_names[4]);
        if (seen[k])
            return rl_error_set(RL_EINVAL, "reward %s is named twice", part);
        seen[k] = 1;
        weight[k] = w;
        any = 1;
        p = end;
    }
    if (!any)
        return rl_error_set(RL_EINVAL, "no reward named (expected \"name[:weight],…\" of %s, %s, "
                                       "%s, %s, %s)", s_names[0], s_names[1], s_names[2],
                            s_names[3], s_names[4]);
    return RL_OK;
}
