/* extract.c — answer extraction from decoded responses: last \boxed{} /
 * \fbox{} with brace matching, GSM8K "#### n", last-number fallback. */
#include "rlrt/error.h"
#include "common/reward/reward.h"
#include "common/reward/reward_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* GSM8K answers sit at the very end; verl looks only at the last 300
 * characters so that numbers quoted from the question earlier never match. */
#define S_GSM8K_CLIP_CHARS 300

char *rl_reward_dup_n(const char *s, size_t n)
{
    char *o = malloc(n + 1);
    if (!o) {
        rl_error_set(RL_ENOMEM, "reward: out of memory copying %zu bytes", n);
        return NULL;
    }
    memcpy(o, s, n);
    o[n] = '\0';
    return o;
}

size_t rl_reward_match_brace(const char *s, size_t open)
{
    int depth = 0;
    for (size_t i = open; s[i]; i++) {
        if (s[i] == '{')
            depth++;
        else if (s[i] == '}' && --depth == 0)
            return i;
    }
    return (size_t)-1;
}

/* Start of the last occurrence of `needle` in `text`, or -1. */
static long s_rfind(const char *text, const char *needle)
{
    long last = -1;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        last = (long)(p - text);
    return last;
}

int rl_reward_find_boxed(const char *text, size_t *start, size_t *len)
{
    if (!text)
        return 0;
    /* The latest answer marker wins: "\boxed{", "\fbox{" or verl's space
     * form "\boxed 5"; a bare "\boxed" followed by anything else is no
     * marker (mathruler looks for "\boxed{" only). */
    long b = s_rfind(text, "\\boxed{");
    long f = s_rfind(text, "\\fbox{");
    long sp = s_rfind(text, "\\boxed ");
    if (sp > b && sp > f) {
        /* "\boxed 5": the answer runs to the closing '$' or the line end. */
        size_t i = (size_t)sp + strlen("\\boxed ");
        while (text[i] == ' ')
            i++;
        size_t e = i;
        while (text[e] && text[e] != '$' && text[e] != '\n')
            e++;
        if (e == i)
            return 0;
        *start = i;
        *len = e - i;
        return 1;
    }
    long at = b > f ? b : f;
    if (at < 0)
        return 0;
    size_t open = (size_t)at + (b > f ? strlen("\\boxed") : strlen("\\fbox"));
    size_t close = rl_reward_match_brace(text, open);
    if (close == (size_t)-1)
        return 0; /* truncated: the final answer never closed */
    *start = open + 1;
    *len = close - open - 1;
    return 1;
}

char *rl_reward_extract_boxed(const char *text)
{
    size_t start, len;
    if (!rl_reward_find_boxed(text, &start, &len))
        return NULL;
    const char *p = text + start;
    while (len > 0 && isspace((unsigned char)*p)) {
        p++;
        len--;
    }
    while (len > 0 && isspace((unsigned char)p[len - 1]))
        len--;
    return rl_reward_dup_n(p, len);
}

/* Byte offset where the last `chars` UTF-8 code points of s begin. */
static size_t s_tail_offset(const char *s, size_t chars)
{
    size_t n = strlen(s), i = n, seen = 0;
    while (i > 0 && seen < chars) {
        i--;
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            seen++;
    }
    return i;
}

/* The number found at s[0 .. len) (NULL: none found) as a new string
 * without the characters of `drop` (thousands separators, currency). */
static char *s_copy_number(const char *s, size_t len, const char *drop)
{
    if (!s)
        return NULL;
    char *o = malloc(len + 1);
    if (!o) {
        rl_error_set(RL_ENOMEM, "reward: out of memory");
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < len; i++)
        if (!strchr(drop, s[i]))
            o[k++] = s[i];
    o[k] = '\0';
    return o;
}

char *rl_reward_extract_gsm8k(const char *text)
{
    if (!text)
        return NULL;
    const char *tail = text + s_tail_offset(text, S_GSM8K_CLIP_CHARS);
    const char *best = NULL;
    size_t best_len = 0;
    for (const char *p = strstr(tail, "####"); p; p = strstr(p + 1, "####")) {
        const char *q = p + 4;
        while (*q == ' ' || *q == '\t' || *q == '$')
            q++;
        const char *num = q;
        if (*q == '-')
            q++;
        int digits = 0;
        while (isdigit((unsigned char)*q) || *q == '.' || *q == ',' || *q == '$') {
            digits += isdigit((unsigned char)*q) != 0;
            q++;
        }
        if (digits) {
            best = num;
            best_len = (size_t)(q - num);
        }
    }
    return s_copy_number(best, best_len, ",$");
}

char *rl_reward_extract_last_number(const char *text)
{
    if (!text)
        return NULL;
    const char *best = NULL;
    size_t best_len = 0;
    size_t i = 0;
    while (text[i]) {
        if (!isdigit((unsigned char)text[i])) {
            i++;
            continue;
        }
        size_t start = i;
        /* A '-' is a sign only where it cannot be a binary minus. */
        if (i > 0 && text[i - 1] == '-' &&
            (i < 2 || !isalnum((unsigned char)text[i - 2])))
            start = i - 1;
        size_t j = i;
        while (isdigit((unsigned char)text[j]))
            j++;
        while (text[j] == ',' && isdigit((unsigned char)text[j + 1])) {
            j++;
            while (isdigit((unsigned char)text[j]))
                j++;
        }
        if (text[j] == '.' && isdigit((unsigned char)text[j + 1])) {
            j++;
            while (isdigit((unsigned char)text[j]))
                j++;
        }
        best = text + start;
        best_len = j - start;
        i = j;
    }
    return s_copy_number(best, best_len, ",");
}
