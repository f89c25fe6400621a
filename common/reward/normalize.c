/* normalize.c — normalisation, number parsing and equality of math answers
 * (the string rules of verl's hendrycks-MATH normaliser plus a numeric
 * comparison, see rlrt/reward.h). Every step rewrites a malloc'd string. */
#include "rlrt/error.h"
#include "rlrt/reward.h"
#include "reward_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define S_REL_TOL 1e-6

/* Replaces every occurrence of `from` in *s by `to`; with `word` set, only
 * where the next character is not a letter (so "\left" spares "\leftarrow"). */
static int s_replace(char **s, const char *from, const char *to, int word)
{
    size_t fl = strlen(from), tl = strlen(to), n = strlen(*s), count = 0;
    for (const char *p = strstr(*s, from); p; p = strstr(p + fl, from))
        count++;
    if (!count)
        return RL_OK;
    size_t cap = n + count * (tl > fl ? tl - fl : 0) + 1;
    char *o = malloc(cap);
    if (!o)
        return rl_error_set(RL_ENOMEM, "reward: out of memory normalising an answer");
    const char *src = *s;
    size_t k = 0;
    while (*src) {
        if (strncmp(src, from, fl) == 0 && !(word && isalpha((unsigned char)src[fl]))) {
            memcpy(o + k, to, tl);
            k += tl;
            src += fl;
        } else {
            o[k++] = *src++;
        }
    }
    o[k] = '\0';
    free(*s);
    *s = o;
    return RL_OK;
}

/* Removes every byte of `set` (in place). */
static void s_remove_chars(char *s, const char *set)
{
    size_t k = 0;
    for (size_t i = 0; s[i]; i++)
        if (!strchr(set, s[i]))
            s[k++] = s[i];
    s[k] = '\0';
}

static int s_is_blank(const char *s)
{
    for (; *s; s++)
        if (!isspace((unsigned char)*s))
            return 0;
    return 1;
}

/* Text-like groups: \cmd{X}. Unit groups (\text, \mbox, …) are dropped when
 * something else remains ("5 \text{ cm}" → "5") and unwrapped otherwise
 * ("\text{Monday}" → "Monday"); style groups (\textbf, \mathbf) are always
 * unwrapped. */
static const char *const s_unit_cmds[] = {"\\text{", "\\mbox{", "\\textrm{", "\\textnormal{",
                                          "\\mathrm{", NULL};
static const char *const s_style_cmds[] = {"\\textbf{", "\\mathbf{", "\\boldsymbol{",
                                           "\\textit{", "\\mathit{", NULL};

/* Rewrites groups of `cmds` in s: keep_content 1 → content stays, 0 → the
 * whole group goes. Returns a new string (NULL on ENOMEM). */
static char *s_groups(const char *s, const char *const *cmds, int keep_content)
{
    size_t n = strlen(s), k = 0;
    char *o = malloc(n + 1);
    if (!o) {
        rl_error_set(RL_ENOMEM, "reward: out of memory normalising an answer");
        return NULL;
    }
    /* Closing braces of the groups being unwrapped, innermost last. */
    size_t *closes = malloc((n + 1) * sizeof *closes);
    if (!closes) {
        free(o);
        rl_error_set(RL_ENOMEM, "reward: out of memory normalising an answer");
        return NULL;
    }
    size_t nclose = 0;
    size_t i = 0;
    while (i < n) {
        if (nclose && closes[nclose - 1] == i) {
            nclose--;
            i++;
            continue;
        }
        int hit = 0;
        for (int c = 0; cmds[c]; c++) {
            size_t cl = strlen(cmds[c]);
            if (strncmp(s + i, cmds[c], cl) == 0) {
                size_t close = rl_reward_match_brace(s, i + cl - 1);
                if (close == (size_t)-1)
                    break;
                if (keep_content) {
                    closes[nclose++] = close;
                    i += cl;
                } else {
                    i = close + 1;
                }
                hit = 1;
                break;
            }
        }
        if (!hit)
            o[k++] = s[i++];
    }
    o[k] = '\0';
    free(closes);
    return o;
}

/* \frac12 → \frac{1}{2}, \frac1{2} → \frac{1}{2}; \sqrt2 → \sqrt{2}. */
static char *s_fix_args(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(3 * n + 1); /* each single-char arg grows by 2 */
    if (!o) {
        rl_error_set(RL_ENOMEM, "reward: out of memory normalising an answer");
        return NULL;
    }
    size_t k = 0, i = 0;
    while (i < n) {
        if (strncmp(s + i, "\\frac", 5) == 0 && !isalpha((unsigned char)s[i + 5])) {
            memcpy(o + k, "\\frac", 5);
            k += 5;
            i += 5;
            /* A braced argument is left to the main loop (its content may
             * need fixing too); bare one-character arguments get braces. */
            for (int arg = 0; arg < 2 && isalnum((unsigned char)s[i]); arg++) {
                o[k++] = '{';
                o[k++] = s[i++];
                o[k++] = '}';
            }
            continue;
        }
        if (strncmp(s + i, "\\sqrt", 5) == 0 && isalnum((unsigned char)s[i + 5])) {
            memcpy(o + k, "\\sqrt{", 6);
            k += 6;
            o[k++] = s[i + 5];
            o[k++] = '}';
            i += 6;
            continue;
        }
        o[k++] = s[i++];
    }
    o[k] = '\0';
    return o;
}

/* "1,234,567.5" (optionally signed) → digits without the separators, in
 * place; anything else (a tuple "(1,2)", "1,23") is left alone. */
static void s_strip_thousands(char *s)
{
    const char *p = s;
    if (*p == '-' || *p == '+')
        p++;
    size_t lead = 0;
    while (isdigit((unsigned char)p[lead]))
        lead++;
    if (lead < 1 || lead > 3 || p[lead] != ',')
        return;
    const char *q = p + lead;
    int groups = 0;
    while (*q == ',') {
        for (int d = 1; d <= 3; d++)
            if (!isdigit((unsigned char)q[d]))
                return;
        q += 4;
        groups++;
    }
    if (isdigit((unsigned char)*q))
        return;
    if (*q == '.') {
        q++;
        if (!isdigit((unsigned char)*q))
            return;
        while (isdigit((unsigned char)*q))
            q++;
    }
    if (*q || !groups)
        return;
    s_remove_chars(s, ",");
}

char *rl_reward_normalize(const char *answer)
{
    char *s = rl_reward_dup_n(answer ? answer : "", answer ? strlen(answer) : 0);
    if (!s)
        return NULL;
    static const struct {
        const char *from, *to;
        int word;
    } reps[] = {
        {"\xe2\x88\x92", "-", 0}, /* U+2212 MINUS SIGN */
        {"\\left", "", 1},
        {"\\right", "", 1},
        {"\\dfrac", "\\frac", 1},
        {"\\tfrac", "\\frac", 1},
        {"\\displaystyle", "", 1},
        {"\\$", "", 0},
        {"$", "", 0},
        {"\\!", "", 0},
        {"\\,", "", 0},
        {"\\;", "", 0},
        {"\\:", "", 0},
        {"\\ ", "", 0},
        {"{,}", ",", 0},
        {"^{\\circ}", "", 0},
        {"^\\circ", "", 0},
        {"\\circ", "", 1},
        {"\\degree", "", 1},
        {"\\%", "", 0},
        {"%", "", 0},
        {"~", "", 0},
    };
    for (size_t r = 0; r < sizeof reps / sizeof reps[0]; r++)
        if (s_replace(&s, reps[r].from, reps[r].to, reps[r].word)) {
            free(s);
            return NULL;
        }
    char *t = s_groups(s, s_style_cmds, 1);
    free(s);
    if (!(s = t))
        return NULL;
    char *stripped = s_groups(s, s_unit_cmds, 0);
    if (!stripped) {
        free(s);
        return NULL;
    }
    if (!s_is_blank(stripped)) {
        free(s);
        s = stripped;
    } else {
        free(stripped);
        t = s_groups(s, s_unit_cmds, 1);
        free(s);
        if (!(s = t))
            return NULL;
    }
    s_remove_chars(s, " \t\n\r\f\v");
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '.')
        s[--n] = '\0';
    /* "x=5" / "k=5" → "5": a short variable name on the left (verl keeps
     * the right side when the left has at most 2 characters). */
    char *eq = strchr(s, '=');
    if (eq && !strchr(eq + 1, '=') && eq > s && eq - s <= 2) {
        int var = 1;
        for (char *p = s; p < eq; p++)
            var &= isalpha((unsigned char)*p) != 0;
        if (var)
            memmove(s, eq + 1, strlen(eq + 1) + 1);
    }
    /* {5} → 5 */
    for (n = strlen(s); n >= 2 && s[0] == '{' && rl_reward_match_brace(s, 0) == n - 1;
         n = strlen(s)) {
        memmove(s, s + 1, n - 2);
        s[n - 2] = '\0';
    }
    t = s_fix_args(s);
    free(s);
    if (!(s = t))
        return NULL;
    s_strip_thousands(s);
    return s;
}

/* [sign] digits [. digits] | [sign] . digits, from *p; advances *p. */
static int s_decimal(const char **p, double *v, int *is_int)
{
    const char *s = *p, *start = s;
    if (*s == '+' || *s == '-')
        s++;
    int digits = 0, dot = 0;
    while (isdigit((unsigned char)*s)) {
        s++;
        digits++;
    }
    if (*s == '.') {
        dot = 1;
        s++;
        while (isdigit((unsigned char)*s)) {
            s++;
            digits++;
        }
    }
    if (!digits)
        return 0;
    char *end = NULL;
    *v = strtod(start, &end);
    if (end != s)
        return 0;
    *is_int = !dot;
    *p = s;
    return 1;
}

int rl_reward_parse_number(const char *s, double *value, int *is_int)
{
    if (!s || !*s)
        return 0;
    const char *p = s;
    double a, b;
    int ia, ib;
    if (s_decimal(&p, &a, &ia)) {
        if (!*p) {
            *value = a;
            *is_int = ia;
            return 1;
        }
        if (*p == '/') {
            p++;
            if (s_decimal(&p, &b, &ib) && !*p && b != 0.0) {
                *value = a / b;
                *is_int = 0;
                return 1;
            }
        }
        return 0;
    }
    p = s;
    double sign = 1.0;
    if (*p == '-' || *p == '+')
        sign = *p++ == '-' ? -1.0 : 1.0;
    if (strncmp(p, "\\frac{", 6) != 0)
        return 0;
    p += 6;
    if (!s_decimal(&p, &a, &ia) || strncmp(p, "}{", 2) != 0)
        return 0;
    p += 2;
    if (!s_decimal(&p, &b, &ib) || strcmp(p, "}") != 0 || b == 0.0)
        return 0;
    *value = sign * a / b;
    *is_int = 0;
    return 1;
}

/* Canonical integer text: no '+', no leading zeros, "-0" → "0". */
static void s_int_canon(const char *s, char *out)
{
    int neg = 0;
    if (*s == '+' || *s == '-')
        neg = *s++ == '-';
    while (*s == '0' && s[1])
        s++;
    if (neg && strcmp(s, "0") != 0)
        *out++ = '-';
    strcpy(out, s);
}

int rl_reward_answers_equal(const char *a, const char *b)
{
    char *na = rl_reward_normalize(a), *nb = rl_reward_normalize(b);
    int eq = 0;
    if (!na || !nb || !*na || !*nb)
        goto done;
    double va, vb;
    int ia, ib;
    if (rl_reward_parse_number(na, &va, &ia) && rl_reward_parse_number(nb, &vb, &ib)) {
        if (ia && ib) {
            /* Integers compare exactly, whatever their size. */
            char *ca = malloc(strlen(na) + 1), *cb = malloc(strlen(nb) + 1);
            if (ca && cb) {
                s_int_canon(na, ca);
                s_int_canon(nb, cb);
                eq = strcmp(ca, cb) == 0;
            }
            free(ca);
            free(cb);
        } else {
            double scale = fmax(fabs(va), fabs(vb));
            eq = fabs(va - vb) <= S_REL_TOL * scale;
        }
        goto done;
    }
    eq = strcmp(na, nb) == 0;
done:
    free(na);
    free(nb);
    return eq;
}
