/* normalize.c — normalisation, number parsing and equality of math answers
 * (the string rules of verl's hendrycks-MATH normaliser plus a numeric
 * comparison, see common/reward/reward.h). Every step rewrites a malloc'd string. */
#include "rlrt/error.h"
#include "common/reward/reward.h"
#include "common/reward/reward_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

static int s_is_number_text(const char *s, size_t n);

/* "5cm", "12dollars", "3feet^2" → the number: a plain unit word right after
 * a number (the PRM800K grader strips the same words). */
static void s_strip_unit_word(char *s)
{
    static const char *const units[] = {
        "degrees", "degree", "centimeters", "centimeter", "cm", "meters", "meter", "km",
        "miles", "mile", "seconds", "second", "minutes", "minute", "hours", "hour",
        "days", "day", "weeks", "week", "months", "month", "years", "year", "feet",
        "foot", "inches", "inch", "yards", "yard", "dollars", "dollar", "cents", "cent",
        "units", "unit", NULL};
    size_t n = strlen(s);
    if (n > 2 && s[n - 2] == '^' && (s[n - 1] == '2' || s[n - 1] == '3'))
        n -= 2;
    for (int u = 0; units[u]; u++) {
        size_t ul = strlen(units[u]);
        if (n > ul && strncasecmp(s + n - ul, units[u], ul) == 0 &&
            s_is_number_text(s, n - ul)) {
            s[n - ul] = '\0';
            return;
        }
    }
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
        {"\\\\", "\\", 0},
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
    /* "7 3/4" is a mixed number: keep the parts apart before the spaces go
     * (the PRM800K grader does the same). */
    for (char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p))
            continue;
        char *q = p + 1;
        while (*q == ' ' || *q == '\t')
            q++;
        if (q > p + 1 && isdigit((unsigned char)*q))
            p[1] = '+';
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
    s_strip_unit_word(s);
    s_strip_thousands(s);
    /* Case never matters for the answers we grade ("Monday", "monday"). */
    for (char *p = s; *p; p++)
        *p = (char)tolower((unsigned char)*p);
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

/* 1 if s[0..n) is [sign] digits [. digits] (',' allowed between digits). */
static int s_is_number_text(const char *s, size_t n)
{
    size_t i = 0, digits = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        i++;
    while (i < n && (isdigit((unsigned char)s[i]) ||
                     (s[i] == ',' && digits && i + 1 < n && isdigit((unsigned char)s[i + 1])))) {
        digits += s[i] != ',';
        i++;
    }
    if (i < n && s[i] == '.')
        for (i++; i < n && isdigit((unsigned char)s[i]); i++)
            digits++;
    return digits > 0 && i == n;
}

/* The whole of p is a/b or \frac{a}{b} (a, b decimals, b ≠ 0). */
static int s_fraction(const char *p, double *v)
{
    double a, b;
    int ia, ib;
    if (strncmp(p, "\\frac{", 6) == 0) {
        p += 6;
        if (!s_decimal(&p, &a, &ia) || strncmp(p, "}{", 2) != 0)
            return 0;
        p += 2;
        if (!s_decimal(&p, &b, &ib) || strcmp(p, "}") != 0)
            return 0;
    } else {
        if (!s_decimal(&p, &a, &ia) || *p != '/')
            return 0;
        p++;
        if (!s_decimal(&p, &b, &ib) || *p)
            return 0;
    }
    if (b == 0.0)
        return 0;
    *v = a / b;
    return 1;
}

int rl_reward_parse_number(const char *s, double *value, int *is_int)
{
    if (!s || !*s)
        return 0;
    const char *p = s;
    double a, f;
    int ia;
    if (s_decimal(&p, &a, &ia) && !*p) {
        *value = a;
        *is_int = ia;
        return 1;
    }
    p = s;
    double sign = 1.0;
    if (*p == '-' || *p == '+')
        sign = *p++ == '-' ? -1.0 : 1.0;
    if (*p == '-' || *p == '+')
        return 0;
    *is_int = 0;
    if (s_fraction(p, &f)) {
        *value = sign * f;
        return 1;
    }
    /* Mixed numbers: "7+3/4" (normalised from "7 3/4") and "3\frac{1}{2}". */
    const char *w = p;
    while (isdigit((unsigned char)*p))
        p++;
    if (p == w)
        return 0;
    double whole = strtod(w, NULL);
    if (*p == '+')
        p++;
    if (!isdigit((unsigned char)*p) && strncmp(p, "\\frac{", 6) != 0)
        return 0;
    if (strncmp(p, "\\frac{", 6) == 0 && (p[6] == '-' || p[6] == '+'))
        return 0;
    if (!s_fraction(p, &f))
        return 0;
    *value = sign * (whole + f);
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

/* Equality of two normalised scalars: numeric when both parse. */
static int s_scalar_equal(const char *na, const char *nb)
{
    if (!*na || !*nb)
        return 0;
    double va, vb;
    int ia, ib;
    if (rl_reward_parse_number(na, &va, &ia) && rl_reward_parse_number(nb, &vb, &ib)) {
        if (ia && ib) {
            /* Integers compare exactly, whatever their size. */
            char *ca = malloc(strlen(na) + 1), *cb = malloc(strlen(nb) + 1);
            int eq = 0;
            if (ca && cb) {
                s_int_canon(na, ca);
                s_int_canon(nb, cb);
                eq = strcmp(ca, cb) == 0;
            }
            free(ca);
            free(cb);
            return eq;
        }
        double scale = fmax(fabs(va), fabs(vb));
        return fabs(va - vb) <= S_REL_TOL * scale;
    }
    return strcmp(na, nb) == 0;
}

/* Splits the inside of "(x,y,…)" / "[x,y]" at top-level commas, in place:
 * returns the element count (≤ max) or 0 if s is not such a tuple. */
static int s_split_tuple(char *s, char **elems, int max)
{
    size_t n = strlen(s);
    if (n < 3 || !strchr("([", s[0]) || !strchr(")]", s[n - 1]))
        return 0;
    s[n - 1] = '\0';
    int count = 0, depth = 0;
    char *start = s + 1;
    for (char *p = start;; p++) {
        if (*p == '(' || *p == '[' || *p == ')' || *p == ']')
            return 0; /* nested tuples: compare as strings */
        if (*p == '{')
            depth++;
        else if (*p == '}')
            depth--;
        if (*p == '\0' || (*p == ',' && depth == 0)) {
            if (count == max)
                return 0;
            int end = *p == '\0';
            *p = '\0';
            elems[count++] = start;
            start = p + 1;
            if (end)
                break;
        }
    }
    return count >= 2 ? count : 0;
}

#define S_MAX_TUPLE 64

int rl_reward_answers_equal(const char *a, const char *b)
{
    char *na = rl_reward_normalize(a), *nb = rl_reward_normalize(b);
    int eq = 0;
    if (!na || !nb || !*na || !*nb)
        goto done;
    if (s_scalar_equal(na, nb)) {
        eq = 1;
        goto done;
    }
    /* Tuples and intervals: same brackets, element-wise equality, so that
     * (1,\frac{1}{2}) equals (1,0.5). */
    size_t la = strlen(na), lb = strlen(nb);
    if (la >= 3 && lb >= 3 && na[0] == nb[0] && na[la - 1] == nb[lb - 1]) {
        char *ea[S_MAX_TUPLE], *eb[S_MAX_TUPLE];
        int ca = s_split_tuple(na, ea, S_MAX_TUPLE), cb = s_split_tuple(nb, eb, S_MAX_TUPLE);
        if (ca && ca == cb) {
            eq = 1;
            for (int i = 0; i < ca && eq; i++)
                eq = s_scalar_equal(ea[i], eb[i]);
        }
    }
done:
    free(na);
    free(nb);
    return eq;
}
