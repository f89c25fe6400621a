/* arith.c — the built-in arithmetic task (see include/rlrt/data.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "common/data/data.h"
#include "rlrt/error.h"
#include "common/core/rng.h"

static const char *const s_specials[] = {"<pad>", "<bos>", "<eos>",
                                         "<think>", "</think>", "\\boxed{"};

void rl_arith_tokenizer_spec(rl_char_tokenizer_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    spec->charset = RL_ARITH_CHARSET;
    spec->specials = s_specials;
    spec->n_specials = (int)(sizeof s_specials / sizeof s_specials[0]);
    spec->pad = "<pad>";
    spec->bos = "<bos>";
    spec->eos = "<eos>";
    spec->unk = NULL;
}

rl_tokenizer *rl_arith_tokenizer_new(void)
{
    rl_char_tokenizer_spec spec;
    rl_arith_tokenizer_spec(&spec);
    return rl_tokenizer_new_char(&spec);
}

static const char *const s_ext_specials[] = {"<pad>", "<bos>", "<eos>", "<think>", "</think>",
                                             "\\boxed{", "<call>", "</call>", "<result>",
                                             "</result>"};

void rl_arith_ext_tokenizer_spec(rl_char_tokenizer_spec *spec)
{
    rl_arith_tokenizer_spec(spec);
    spec->charset = RL_ARITH_EXT_CHARSET;
    spec->specials = s_ext_specials;
    spec->n_specials = (int)(sizeof s_ext_specials / sizeof s_ext_specials[0]);
}

rl_tokenizer *rl_arith_ext_tokenizer_new(void)
{
    rl_char_tokenizer_spec spec;
    rl_arith_ext_tokenizer_spec(&spec);
    return rl_tokenizer_new_char(&spec);
}

rl_tokenizer *rl_task_tokenizer_open(const char *name)
{
    if (!name)
        return rl_error_set(RL_EINVAL, "tokenizer: NULL name"), NULL;
    if (strcmp(name, "arith") == 0)
        return rl_arith_tokenizer_new();
    if (strcmp(name, "arith_ext") == 0)
        return rl_arith_ext_tokenizer_new();
    rl_tokenizer *t = rl_tokenizer_load(name);
    if (!t || rl_tokenizer_kind_of(t) != RL_TOKENIZER_BPE)
        return t;
    /* a Hugging Face tokenizer.json: the special tokens of the files beside it */
    const char *slash = strrchr(name, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - name) : 1, slash ? name : ".");
    if (rl_tokenizer_apply_hf_config(t, dir)) {
        rl_tokenizer_free(t);
        return NULL;
    }
    return t;
}

/* Word problems (levels 8, 9): who, what, in what. */
static const char *const s_names[] = {"Ann", "Bob", "Tom", "Eva", "Max", "Sue", "Kim", "Leo"};
static const char *const s_things[] = {"cups", "pens", "eggs", "cards", "books", "coins"};
static const char *const s_packs[] = {"bags", "boxes", "packs", "jars"};

/* Uniform integer in [lo, hi]. */
static int64_t s_range(rl_rng *g, int64_t lo, int64_t hi)
{
    return lo + (int64_t)rl_rng_below(g, (uint64_t)(hi - lo + 1));
}

/* Appends printf output to buf at *pos (buffers are sized so it fits; the
 * check keeps a bug from overflowing). */
static void s_put(char *buf, size_t cap, size_t *pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void s_put(char *buf, size_t cap, size_t *pos, const char *fmt, ...)
{
    if (*pos >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *pos, cap - *pos, fmt, ap);
    va_end(ap);
    if (k > 0)
        *pos += (size_t)k;
}

static int s_digit(int64_t v, int i)
{
    for (int k = 0; k < i; k++)
        v /= 10;
    return (int)(v % 10);
}

static int s_ndigits(int64_t v)
{
    int n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* Column addition from the units up: "7+5=12 4+8+1=13". */
static void s_steps_add(char *buf, size_t cap, size_t *pos, int64_t a, int64_t b)
{
    int n = s_ndigits(a > b ? a : b), carry = 0;
    for (int i = 0; i < n; i++) {
        int x = s_digit(a, i), y = s_digit(b, i), s = x + y + carry;
        if (carry)
            s_put(buf, cap, pos, "%s%d+%d+%d=%d", i ? " " : "", x, y, carry, s);
        else
            s_put(buf, cap, pos, "%s%d+%d=%d", i ? " " : "", x, y, s);
        carry = s / 10;
    }
}

/* Column subtraction (a >= b): each column shows the top digit after paying
 * the previous borrow and, if it borrows, +10: "12-7=5 10-4=6 4-3=1". */
static void s_steps_sub(char *buf, size_t cap, size_t *pos, int64_t a, int64_t b)
{
    int n = s_ndigits(a), borrow = 0;
    for (int i = 0; i < n; i++) {
        int x = s_digit(a, i) - borrow, y = s_digit(b, i);
        borrow = x < y;
        if (borrow)
            x += 10;
        s_put(buf, cap, pos, "%s%d-%d=%d", i ? " " : "", x, y, x - y);
    }
}

/* a (two digits) times b (one digit): "7*6=42 4*6+4=28". */
static void s_steps_mul(char *buf, size_t cap, size_t *pos, int64_t a, int64_t b)
{
    int n = s_ndigits(a), carry = 0;
    for (int i = 0; i < n; i++) {
        int x = s_digit(a, i), p = x * (int)b + carry;
        if (carry)
            s_put(buf, cap, pos, "%s%d*%d+%d=%d", i ? " " : "", x, (int)b, carry, p);
        else
            s_put(buf, cap, pos, "%s%d*%d=%d", i ? " " : "", x, (int)b, p);
        carry = p / 10;
    }
}

/* One calculator step of a tool-calling solution: the call and the
 * result the calculator returns, "<call>calc 6*3</call><result>18</result>"
 * (calls follow each other without a space, to keep the word problems'
 * solutions within 39 tokens). */
static void s_put_calc(char *buf, size_t cap, size_t *pos, int64_t x, char op, int64_t y)
{
    int64_t v = op == '*' ? x * y : op == '+' ? x + y : x - y;
    s_put(buf, cap, pos, "<call>calc %" PRId64 "%c%" PRId64 "</call><result>%" PRId64 "</result>",
          x, op, y, v);
}

int rl_arith_generate(uint64_t seed, int64_t index, int level, rl_arith_item *out)
{
    if (!out)
        return rl_error_set(RL_EINVAL, "rl_arith_generate: out is NULL");
    if (index < 0)
        return rl_error_set(RL_ERANGE, "rl_arith_generate: index %" PRId64 " < 0", index);
    if (level < RL_ARITH_MIN_LEVEL || level > RL_ARITH_MAX_LEVEL)
        return rl_error_set(RL_ERANGE, "rl_arith_generate: level %d outside %d..%d", level,
                            RL_ARITH_MIN_LEVEL, RL_ARITH_MAX_LEVEL);
    memset(out, 0, sizeof *out);
    rl_rng g;
    rl_rng_init(&g, seed, (uint64_t)index);
    /* The level-choice draw of rl_arith_generate_mixed comes first in the
     * stream; skip one block so operands never reuse it. */
    rl_rng_seek(&g, 1);
    int64_t a, b, c = 0, r;
    char op = '+';
    const char *who = NULL, *what = NULL, *pack = NULL;
    size_t pos = 0, cap = sizeof out->solution;
    char *sol = out->solution;
    s_put(sol, cap, &pos, "<think>");
    /* the tool variant: filled only by levels with a multiplication */
    size_t tpos = 0, tcap = sizeof out->solution_tools;
    char *tl = out->solution_tools;
    s_put(tl, tcap, &tpos, "<think>");
    switch (level) {
    case 1:
        a = s_range(&g, 0, 9);
        b = s_range(&g, 0, 9);
        r = a + b;
        s_put(sol, cap, &pos, "%" PRId64 "+%" PRId64 "=%" PRId64, a, b, r);
        break;
    case 2:
    case 3: {
        int64_t lo = level == 2 ? 10 : 100, hi = level == 2 ? 99 : 999;
        a = s_range(&g, lo, hi);
        b = s_range(&g, lo, hi);
        op = rl_rng_below(&g, 2) ? '-' : '+';
        if (op == '-' && a < b) {
            int64_t t = a;
            a = b;
            b = t;
        }
        if (op == '+') {
            r = a + b;
            s_steps_add(sol, cap, &pos, a, b);
        } else {
            r = a - b;
            s_steps_sub(sol, cap, &pos, a, b);
        }
        break;
    }
    case 4:
        op = '*';
        a = s_range(&g, 10, 99);
        b = s_range(&g, 2, 9);
        r = a * b;
        s_steps_mul(sol, cap, &pos, a, b);
        s_put_calc(tl, tcap, &tpos, a, '*', b);
        break;
    case 8: /* a + b bags of c */
    case 9: /* b boxes of c, gives away a (a <= b*c) */
        b = s_range(&g, 2, 9);
        c = s_range(&g, 2, 9);
        a = level == 8 ? s_range(&g, 10, 99) : s_range(&g, 1, b * c);
        who = s_names[rl_rng_below(&g, sizeof s_names / sizeof s_names[0])];
        what = s_things[rl_rng_below(&g, sizeof s_things / sizeof s_things[0])];
        pack = s_packs[rl_rng_below(&g, sizeof s_packs / sizeof s_packs[0])];
        r = level == 8 ? a + b * c : b * c - a;
        /* the product, then the second step by columns like levels 2-3;
         * with the tools, one call per step */
        s_steps_mul(sol, cap, &pos, c, b);
        s_put(sol, cap, &pos, " ");
        if (level == 8)
            s_steps_add(sol, cap, &pos, b * c, a);
        else
            s_steps_sub(sol, cap, &pos, b * c, a);
        s_put_calc(tl, tcap, &tpos, c, '*', b);
        s_put_calc(tl, tcap, &tpos, b * c, level == 8 ? '+' : '-', a);
        break;
    case 6: /* two steps: a*b by columns, then + c */
    case 7: /* two steps: a*b by columns, then - c (c <= a*b) */
        op = level == 6 ? '+' : '-';
        a = s_range(&g, 10, 99);
        b = s_range(&g, 2, 9);
        c = s_range(&g, 10, level == 7 && a * b < 99 ? a * b : 99);
        r = level == 6 ? a * b + c : a * b - c;
        s_steps_mul(sol, cap, &pos, a, b);
        s_put(sol, cap, &pos, " %" PRId64 "%c%" PRId64 "=%" PRId64, a * b, op, c, r);
        s_put_calc(tl, tcap, &tpos, a, '*', b);
        s_put_calc(tl, tcap, &tpos, a * b, op, c);
        break;
    default: /* 5 */
        a = s_range(&g, 10, 99);
        b = s_range(&g, 10, 99);
        c = s_range(&g, 10, a + b < 99 ? a + b : 99);
        r = a + b - c;
        s_put(sol, cap, &pos, "%" PRId64 "+%" PRId64 "=%" PRId64 " %" PRId64 "-%" PRId64
                              "=%" PRId64, a, b, a + b, a + b, c, r);
        break;
    }
    s_put(sol, cap, &pos, "</think>\\boxed{%" PRId64 "}", r);
    if (tpos > strlen("<think>"))
        s_put(tl, tcap, &tpos, "</think>\\boxed{%" PRId64 "}", r);
    else
        snprintf(tl, tcap, "%s", sol);
    if (level == 8)
        snprintf(out->prompt, sizeof out->prompt,
                 "Q: %s has %d %s and buys %d %s of %d %s. How many %s now?\nA: ", who, (int)a,
                 what, (int)b, pack, (int)c, what, what);
    else if (level == 9)
        snprintf(out->prompt, sizeof out->prompt,
                 "Q: %s has %d %s of %d %s and gives away %d. How many %s are left?\nA: ", who,
                 (int)b, pack, (int)c, what, (int)a, what);
    else if (level == 5)
        snprintf(out->prompt, sizeof out->prompt, "Q: %d+%d-%d=?\nA: ", (int)a, (int)b,
                 (int)c);
    else if (level >= 6)
        snprintf(out->prompt, sizeof out->prompt, "Q: %d*%d%c%d=?\nA: ", (int)a, (int)b, op,
                 (int)c);
    else
        snprintf(out->prompt, sizeof out->prompt, "Q: %d%c%d=?\nA: ", (int)a, op, (int)b);
    snprintf(out->ground_truth, sizeof out->ground_truth, "%d", (int)r);
    out->level = level;
    out->global_id = index;
    if (pos >= cap || tpos >= tcap)
        return rl_error_set(RL_ERANGE, "rl_arith_generate: solution longer than %zu", cap);
    return RL_OK;
}

int rl_arith_generate_mixed(uint64_t seed, int64_t index, const int *levels, int n_levels,
                            rl_arith_item *out)
{
    if (!levels || n_levels < 1)
        return rl_error_set(RL_EINVAL, "rl_arith_generate_mixed: need at least one level, "
                                       "got %d", n_levels);
    if (index < 0)
        return rl_error_set(RL_ERANGE, "rl_arith_generate_mixed: index %" PRId64 " < 0",
                            index);
    rl_rng g;
    rl_rng_init(&g, seed, (uint64_t)index);
    int level = levels[rl_rng_below(&g, (uint64_t)n_levels)];
    return rl_arith_generate(seed, index, level, out);
}

int rl_arith_write_jsonl(const char *path, uint64_t seed, int64_t n, const int *levels,
                         int n_levels)
{
    return rl_arith_write_jsonl_ex(path, seed, n, levels, n_levels, 0);
}

int rl_arith_write_jsonl_ex(const char *path, uint64_t seed, int64_t n, const int *levels,
                            int n_levels, int tools)
{
    if (!path || n < 0)
        return rl_error_set(RL_EINVAL, "rl_arith_write_jsonl: bad path or n %" PRId64, n);
    for (int i = 0; i < n_levels; i++)
        if (!levels || levels[i] < RL_ARITH_MIN_LEVEL || levels[i] > RL_ARITH_MAX_LEVEL)
            return rl_error_set(RL_ERANGE, "rl_arith_write_jsonl: levels[%d] = %d outside "
                                           "%d..%d", i, levels ? levels[i] : 0,
                                RL_ARITH_MIN_LEVEL, RL_ARITH_MAX_LEVEL);
    FILE *f = fopen(path, "w");
    if (!f)
        return rl_error_set(RL_EIO, "rl_arith_write_jsonl: cannot open '%s': %s", path,
                            strerror(errno));
    int rc = RL_OK;
    for (int64_t i = 0; i < n && rc == RL_OK; i++) {
        rl_arith_item it;
        rc = rl_arith_generate_mixed(seed, i, levels, n_levels, &it);
        if (rc)
            break;
        json_t *o = json_object();
        json_object_set_new(o, "prompt", json_string(it.prompt));
        json_object_set_new(o, "ground_truth", json_string(it.ground_truth));
        json_object_set_new(o, "data_source", json_string("arith"));
        json_object_set_new(o, "global_id", json_integer(it.global_id));
        json_object_set_new(o, "level", json_integer(it.level));
        json_object_set_new(o, "solution",
                            json_string(tools ? it.solution_tools : it.solution));
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!s || fprintf(f, "%s\n", s) < 0)
            rc = rl_error_set(RL_EIO, "rl_arith_write_jsonl: write to '%s' failed", path);
        free(s);
    }
    if (fclose(f) != 0 && rc == RL_OK)
        rc = rl_error_set(RL_EIO, "rl_arith_write_jsonl: close '%s': %s", path,
                          strerror(errno));
    return rc;
}

/* Parses an optionally signed decimal integer with surrounding spaces and
 * leading zeros over [p, end); 0 if it is not one (or overflows). */
static int s_parse_int(const char *p, const char *end, long long *v)
{
    while (p < end && *p == ' ')
        p++;
    while (end > p && end[-1] == ' ')
        end--;
    int neg = 0;
    if (p < end && (*p == '-' || *p == '+'))
        neg = *p++ == '-';
    while (p < end - 1 && *p == '0')
        p++;
    if (p == end || end - p > 18)
        return 0;
    long long x = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        x = x * 10 + (*p - '0');
    }
    *v = neg ? -x : x;
    return 1;
}

double rl_arith_score(const char *response, const char *ground_truth, int *format_ok)
{
    static const char box[] = "\\boxed{";
    if (format_ok)
        *format_ok = 0;
    if (!response || !ground_truth)
        return 0.0;
    const char *last = NULL;
    for (const char *q = strstr(response, box); q; q = strstr(q + 1, box))
        last = q;
    if (!last)
        return 0.0;
    const char *b = last + sizeof box - 1, *e = strchr(b, '}');
    if (!e)
        return 0.0;
    if (format_ok) {
        const char *t = strstr(response, "</think>");
        const char *rest = e + 1;
        while (*rest == ' ' || *rest == '\n')
            rest++;
        if (strncmp(rest, "<eos>", 5) == 0)
            rest += 5;
        *format_ok = strncmp(response, "<think>", 7) == 0 && t && t + 8 == last &&
                     strstr(response + 7, "<think>") == NULL && *rest == '\0' &&
                     strstr(response, box) == last;
    }
    long long got, want;
    if (!s_parse_int(b, e, &got) ||
        !s_parse_int(ground_truth, ground_truth + strlen(ground_truth), &want))
        return 0.0;
    return got == want ? 1.0 : 0.0;
}
