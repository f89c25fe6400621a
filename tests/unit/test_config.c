/* test_config.c — YAML config trees: getters, errors with locations,
 * overrides, validation against defaults, subtree serialisation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <math.h>
#include <time.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "rlrt/config.h"

/* Line numbers in the messages below count lines of this text. */
static const char *JOB =
    "trainer:\n"                          /* 1 */
    "  name: demo\n"                      /* 2 */
    "  epochs: 3\n"                       /* 3 */
    "  fast: true\n"                      /* 4 */
    "actor:\n"                            /* 5 */
    "  optim:\n"                          /* 6 */
    "    lr: fast\n"                      /* 7 */
    "    betas: [0.9, 0.95]\n"            /* 8 */
    "    wd: 1e-2\n"                      /* 9 */
    "  layers:\n"                         /* 10 */
    "    - {dim: 64, act: silu}\n"        /* 11 */
    "    - {dim: 32, act: relu}\n"        /* 12 */
    "  tag: \"42\"\n"                     /* 13 */
    "  big: 0x7fffffffffffffff\n"         /* 14 */
    "  none: ~\n";                        /* 15 */

static rl_config *s_parse(const char *text, const char *name)
{
    rl_config *c = rl_config_parse_string(text, strlen(text), name);
    if (!c)
        fail_msg("parse failed: %s", rl_error_message());
    return c;
}

static void test_typed_getters(void **state)
{
    (void)state;
    rl_config *c = s_parse(JOB, "job.yaml");
    const char *s;
    int64_t i;
    double d;
    int b;
    size_t n;
    assert_int_equal(rl_config_get_string(c, "trainer.name", &s), 0);
    assert_string_equal(s, "demo");
    assert_int_equal(rl_config_get_int(c, "trainer.epochs", &i), 0);
    assert_int_equal(i, 3);
    assert_int_equal(rl_config_get_bool(c, "trainer.fast", &b), 0);
    assert_int_equal(b, 1);
    assert_int_equal(rl_config_get_double(c, "actor.optim.wd", &d), 0);
    assert_true(d == 1e-2);
    /* an integer is a number too */
    assert_int_equal(rl_config_get_double(c, "trainer.epochs", &d), 0);
    assert_true(d == 3.0);
    assert_int_equal(rl_config_get_int(c, "actor.big", &i), 0);
    assert_true(i == INT64_MAX);
    /* quoted text is a string, and the string getter takes any scalar */
    assert_int_equal(rl_config_get_string(c, "actor.tag", &s), 0);
    assert_string_equal(s, "42");
    assert_int_equal(rl_config_get_string(c, "trainer.epochs", &s), 0);
    assert_string_equal(s, "3");
    /* lists: length, [i] and .i forms */
    assert_int_equal(rl_config_list_len(c, "actor.optim.betas", &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(rl_config_get_double(c, "actor.optim.betas[1]", &d), 0);
    assert_true(d == 0.95);
    assert_int_equal(rl_config_get_int(c, "actor.layers[1].dim", &i), 0);
    assert_int_equal(i, 32);
    assert_int_equal(rl_config_get_string(c, "actor.layers.0.act", &s), 0);
    assert_string_equal(s, "silu");
    /* map iteration in file order */
    assert_int_equal(rl_config_map_len(c, "trainer", &n), 0);
    assert_int_equal(n, 3);
    const char *want[] = {"name", "epochs", "fast"};
    for (size_t k = 0; k < n; k++) {
        assert_int_equal(rl_config_map_key(c, "trainer", k, &s), 0);
        assert_string_equal(s, want[k]);
    }
    /* defaults: missing keys and null values give the default */
    assert_int_equal(rl_config_get_int_or(c, "trainer.seed", 7, &i), 0);
    assert_int_equal(i, 7);
    assert_int_equal(rl_config_get_double_or(c, "actor.none", 0.5, &d), 0);
    assert_true(d == 0.5);
    assert_int_equal(rl_config_get_string_or(c, "x.y.z", "dflt", &s), 0);
    assert_string_equal(s, "dflt");
    assert_int_equal(rl_config_get_bool_or(c, "trainer.fast", 0, &b), 0);
    assert_int_equal(b, 1);
    assert_int_equal(rl_config_get_int_or(c, "trainer.epochs", 9, &i), 0);
    assert_int_equal(i, 3);
    assert_true(rl_config_has(c, "actor.layers[0]"));
    assert_false(rl_config_has(c, "actor.layers[2]"));
    /* node locations */
    const rl_config_node *lr = rl_config_node_at(rl_config_root(c), "actor.optim.lr");
    assert_non_null(lr);
    assert_int_equal(rl_config_node_line(lr), 7);
    assert_int_equal(rl_config_node_column(lr), 9);
    assert_string_equal(rl_config_node_path(lr), "actor.optim.lr");
    assert_int_equal(rl_config_node_type(lr), RL_CONFIG_T_STRING);
    rl_config_free(c);
}

static void test_getter_errors(void **state)
{
    (void)state;
    rl_config *c = s_parse(JOB, "job.yaml");
    double d;
    int64_t i;
    int b;
    const char *s;
    size_t n;
    assert_int_equal(rl_config_get_double(c, "actor.optim.lr", &d), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "job.yaml:7:9: actor.optim.lr: expected a number, got 'fast'");
    /* a wrong type is an error even when a default is given */
    assert_int_equal(rl_config_get_double_or(c, "actor.optim.lr", 1.0, &d), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "job.yaml:7:9: actor.optim.lr: expected a number, got 'fast'");
    assert_int_equal(rl_config_get_int(c, "actor.optim.wd", &i), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "job.yaml:9:9: actor.optim.wd: expected an integer, got '1e-2'");
    assert_int_equal(rl_config_get_bool(c, "trainer.name", &b), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "job.yaml:2:9: trainer.name: expected a boolean, got 'demo'");
    assert_int_equal(rl_config_get_string(c, "actor.optim", &s), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "job.yaml:7:5: actor.optim: expected a string, got a map");
    assert_int_equal(rl_config_get_int(c, "actor.optim.betas", &i), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "job.yaml:8:12: actor.optim.betas: expected an integer, got a list");
    assert_int_equal(rl_config_list_len(c, "trainer", &n), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "job.yaml:2:3: trainer: expected a list, got a map");
    assert_int_equal(rl_config_get_string(c, "actor.none", &s), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "job.yaml:15:9: actor.none: expected a string, got null");
    /* missing keys name the deepest existing ancestor and its location */
    assert_int_equal(rl_config_get_double(c, "actor.optim.eps", &d), RL_ENOTFOUND);
    assert_string_equal(rl_error_message(), "job.yaml:7:5: actor.optim: missing key 'eps'");
    assert_int_equal(rl_config_get_int(c, "critic.lr", &i), RL_ENOTFOUND);
    assert_string_equal(rl_error_message(), "job.yaml:1:1: missing key 'critic'");
    assert_int_equal(rl_config_get_int(c, "actor.layers[5].dim", &i), RL_ENOTFOUND);
    assert_string_equal(rl_error_message(),
                        "job.yaml:11:5: actor.layers: missing item [5] (the list has 2 items)");
    /* a path through a scalar */
    assert_int_equal(rl_config_get_int(c, "trainer.epochs.x", &i), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "job.yaml:3:11: trainer.epochs: expected a map, got '3'");
    assert_int_equal(rl_config_get_int(c, "trainer..epochs", &i), RL_EINVAL);
    assert_string_equal(rl_error_message(), "job.yaml: malformed config path 'trainer..epochs'");
    assert_int_equal(rl_config_get_int(c, "trainer[", &i), RL_EINVAL);
    assert_string_equal(rl_error_message(), "job.yaml: malformed config path 'trainer['");
    rl_config_free(c);
}

static void test_yaml_syntax_errors(void **state)
{
    (void)state;
    const char *bad_indent = "a: 1\n  b: 2\n";
    assert_null(rl_config_parse_string(bad_indent, strlen(bad_indent), "job.yaml"));
    assert_int_equal(rl_error_code(), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "job.yaml:2:4: mapping values are not allowed in this context");
    const char *unclosed = "a: [1, 2\nb: 3\n";
    assert_null(rl_config_parse_string(unclosed, strlen(unclosed), "job.yaml"));
    assert_string_equal(rl_error_message(),
                        "job.yaml:2:2: did not find expected ',' or ']' while parsing a "
                        "flow sequence (started at line 1)");
    const char *dup = "x: 1\ny:\n  z: 1\n  z: 2\n";
    assert_null(rl_config_parse_string(dup, strlen(dup), "job.yaml"));
    assert_string_equal(rl_error_message(), "job.yaml:4:3: y.z: duplicate key");
    const char *two = "a: 1\n---\nb: 2\n";
    assert_null(rl_config_parse_string(two, strlen(two), "job.yaml"));
    assert_string_equal(rl_error_message(), "job.yaml:2:1: more than one YAML document");
    const char *complex_key = "? [a, b]\n: 1\n";
    assert_null(rl_config_parse_string(complex_key, strlen(complex_key), "job.yaml"));
    assert_string_equal(rl_error_message(), "job.yaml:1:3: map keys must be scalars");
    /* the same from a file on disk */
    char path[] = "/tmp/rlrt_test_config_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bad_indent, strlen(bad_indent)), (ssize_t)strlen(bad_indent));
    close(fd);
    assert_null(rl_config_parse_file(path));
    char want[256];
    snprintf(want, sizeof want, "%s:2:4: mapping values are not allowed in this context", path);
    assert_string_equal(rl_error_message(), want);
    unlink(path);
    assert_null(rl_config_parse_file("/nonexistent/job.yaml"));
    assert_int_equal(rl_error_code(), RL_EIO);
    assert_string_equal(rl_error_message(),
                        "/nonexistent/job.yaml: cannot open: No such file or directory");
    /* an empty file is an empty map */
    rl_config *e = rl_config_parse_string("", 0, "empty.yaml");
    assert_non_null(e);
    size_t n = 9;
    assert_int_equal(rl_config_map_len(e, "", &n), 0);
    assert_int_equal(n, 0);
    rl_config_free(e);
}

static void test_anchors_and_aliases(void **state)
{
    (void)state;
    rl_config *c = s_parse("base: &b {lr: 0.1, n: 2}\nother: *b\n", "a.yaml");
    double d;
    assert_int_equal(rl_config_get_double(c, "other.lr", &d), 0);
    assert_true(d == 0.1);
    assert_string_equal(
        rl_config_node_path(rl_config_node_at(rl_config_root(c), "other.n")), "other.n");
    rl_config_free(c);
}

/* The parser takes text from the network (a worker parses CONFIGURE's
 * config): nesting is bounded, so a deep input cannot overflow the stack. */
static void test_nesting_depth_limit(void **state)
{
    (void)state;
    /* 200 KB of '[' is 100000 levels: refused at the 65th */
    size_t deep = 100000;
    char *t = malloc(2 * deep + 1);
    assert_non_null(t);
    memset(t, '[', deep);
    memset(t + deep, ']', deep);
    t[2 * deep] = '\0';
    assert_null(rl_config_parse_string(t, 2 * deep, "deep.yaml"));
    assert_int_equal(rl_error_code(), RL_ECONFIG);
    assert_string_equal(rl_error_message(), "deep.yaml:1:65: nesting deeper than 64 levels");
    /* 64 levels parse, 65 do not */
    memset(t, '[', 64);
    memset(t + 64, ']', 64);
    rl_config *c = rl_config_parse_string(t, 128, "deep.yaml");
    assert_non_null(c);
    rl_config_free(c);
    memset(t, '[', 65);
    memset(t + 65, ']', 65);
    assert_null(rl_config_parse_string(t, 130, "deep.yaml"));
    assert_string_equal(rl_error_message(), "deep.yaml:1:65: nesting deeper than 64 levels");
    /* block maps count the same way, and so does a file */
    char *b = malloc(65 * 70 + 16), *p = b;
    assert_non_null(b);
    for (int i = 0; i < 65; i++)
        p += sprintf(p, "%*sk%d:\n", i, "", i);
    p += sprintf(p, "%*sv: 1\n", 65, "");
    char path[] = "/tmp/rlrt_test_config_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b, (size_t)(p - b)), (ssize_t)(p - b));
    close(fd);
    assert_null(rl_config_parse_file(path));
    char want[256];
    snprintf(want, sizeof want, "%s:65:65: nesting deeper than 64 levels", path);
    assert_string_equal(rl_error_message(), want);
    unlink(path);
    /* an alias cannot nest a tree deeper than that either */
    p = t;
    p += sprintf(p, "a: &a ");
    memset(p, '[', 60), p += 60;
    memset(p, ']', 60), p += 60;
    p += sprintf(p, "\nb: [[[[[*a]]]]]\n");
    assert_null(rl_config_parse_string(t, (size_t)(p - t), "deep.yaml"));
    assert_string_equal(rl_error_message(),
                        "deep.yaml:2:9: alias '*a' nests deeper than 64 levels");
    p = t + 6 + 120;
    p += sprintf(p, "\nb: [[[*a]]]\n");
    c = rl_config_parse_string(t, (size_t)(p - t), "deep.yaml");
    assert_non_null(c);
    size_t n = 0;
    assert_int_equal(rl_config_list_len(c, "b[0][0][0]", &n), 0);
    assert_int_equal(n, 1);
    rl_config_free(c);
    free(b);
    free(t);
}

/* "Billion laughs": aliases of aliases copy a bounded number of nodes (and
 * bytes of text) in all, and the message names the alias and the limit.
 * Paths count against the same bytes: a long key repeated in the path of
 * every entry below it is bounded too. */
static void test_alias_expansion_limit(void **state)
{
    (void)state;
    /* 7 levels of x10: 10^7 nodes from ~330 bytes */
    char bomb[1024], *p = bomb;
    p += sprintf(p, "a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for (char c = 'b'; c <= 'g'; c++) {
        p += sprintf(p, "%c: &%c [", c, c);
        for (int i = 0; i < 10; i++)
            p += sprintf(p, "%s*%c", i ? ", " : "", c - 1);
        p += sprintf(p, "]\n");
    }
    /* copies: b 10*11, c 10*111, d 10*1111, e 10*11111 (123440 in all);
     * each *e in f adds 111111: the 8th passes 1,000,000 */
    assert_null(rl_config_parse_string(bomb, (size_t)(p - bomb), "bomb.yaml"));
    assert_int_equal(rl_error_code(), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "bomb.yaml:6:36: alias '*e' expands the config past 1000000 nodes "
                        "copied by aliases");
    /* a 1 MiB scalar copied 10 times in b, then b 10 times in c: the 6th *b
     * passes 64 MiB of copied text */
    size_t big = 1 << 20;
    char *t = malloc(big + 256);
    assert_non_null(t);
    p = t;
    p += sprintf(p, "a: &a ");
    memset(p, 'x', big), p += big;
    p += sprintf(p, "\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                    "c: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n");
    assert_null(rl_config_parse_string(t, (size_t)(p - t), "big.yaml"));
    assert_int_equal(rl_error_code(), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "big.yaml:3:25: alias '*b' expands the config past 64 MiB of text");
    /* no alias at all, but every entry's path repeats a 100 KB key (an
     * explicit key may be that long): 1000 entries would hold 100 MB */
    p = t;
    p += sprintf(p, "? ");
    memset(p, 'k', 100000), p += 100000;
    p += sprintf(p, "\n: [");
    for (int i = 0; i < 1000; i++)
        p += sprintf(p, "%s1", i ? "," : "");
    p += sprintf(p, "]\n");
    assert_null(rl_config_parse_string(t, (size_t)(p - t), "keys.yaml"));
    assert_int_equal(rl_error_code(), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "keys.yaml:2:1344: the config's paths pass 64 MiB (long keys over many "
                        "entries)");
    free(t);
    /* within the limits, nested aliases still expand: 4 levels of x10 */
    p = bomb;
    p += sprintf(p, "a: &a {lr: 0.5, n: [1, 2]}\n");
    for (char c = 'b'; c <= 'e'; c++) {
        p += sprintf(p, "%c: &%c [", c, c);
        for (int i = 0; i < 10; i++)
            p += sprintf(p, "%s*%c", i ? ", " : "", c - 1);
        p += sprintf(p, "]\n");
    }
    rl_config *c = rl_config_parse_string(bomb, (size_t)(p - bomb), "ok.yaml");
    if (!c)
        fail_msg("parse failed: %s", rl_error_message());
    double d;
    int64_t i;
    assert_int_equal(rl_config_get_double(c, "e[9][3][7][2].lr", &d), 0);
    assert_true(d == 0.5);
    assert_int_equal(rl_config_get_int(c, "e[9][3][7][2].n[1]", &i), 0);
    assert_int_equal(i, 2);
    assert_string_equal(rl_config_node_path(
                            rl_config_node_at(rl_config_root(c), "e[9][3][7][2].n[1]")),
                        "e[9][3][7][2].n[1]");
    rl_config_free(c);
}

/* A map of many keys and many anchors and aliases parse right (the
 * duplicate check and the anchor lookup are hash tables: they scanned, and
 * these documents of well under 1 MB took seconds; speed is not asserted
 * here). */
static void test_many_keys_and_anchors(void **state)
{
    (void)state;
    enum { KEYS = 60000, ANCHORS = 40000 };
    char *t = malloc((size_t)KEYS * 16 + 64), *p = t;
    assert_non_null(t);
    p += sprintf(p, "m:\n");
    for (int i = 0; i < KEYS; i++)
        p += sprintf(p, "  k%d: %d\n", i, i);
    rl_config *c = rl_config_parse_string(t, (size_t)(p - t), "keys.yaml");
    if (!c)
        fail_msg("parse failed: %s", rl_error_message());
    int64_t v;
    assert_int_equal(rl_config_get_int(c, "m.k59999", &v), 0);
    assert_int_equal(v, 59999);
    rl_config_free(c);
    /* a duplicate among many keys is still found */
    p += sprintf(p, "  k12345: 0\n");
    assert_null(rl_config_parse_string(t, (size_t)(p - t), "keys.yaml"));
    char want[128];
    snprintf(want, sizeof want, "keys.yaml:%d:3: m.k12345: duplicate key", KEYS + 2);
    assert_string_equal(rl_error_message(), want);
    free(t);

    t = malloc((size_t)ANCHORS * 20 + 64), p = t;
    assert_non_null(t);
    p += sprintf(p, "a: [");
    for (int i = 0; i < ANCHORS; i++)
        p += sprintf(p, "%s&a%d %d", i ? ", " : "", i, i);
    p += sprintf(p, "]\nb: [");
    for (int i = 0; i < ANCHORS; i++)
        p += sprintf(p, "%s*a0", i ? ", " : "");
    p += sprintf(p, ", *a39999]\n");
    c = rl_config_parse_string(t, (size_t)(p - t), "anchors.yaml");
    if (!c)
        fail_msg("parse failed: %s", rl_error_message());
    assert_int_equal(rl_config_get_int(c, "b[39999]", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(rl_config_get_int(c, "b[40000]", &v), 0);
    assert_int_equal(v, 39999);
    rl_config_free(c);
    free(t);
    /* an anchor defined again stands for its latest node */
    c = s_parse("a: &x 1\nb: &x 2\nc: *x\n", "redef.yaml");
    assert_int_equal(rl_config_get_int(c, "c", &v), 0);
    assert_int_equal(v, 2);
    rl_config_free(c);
}

/* Structural equality: kinds, keys, scalar text and type. */
static int s_same(const rl_config_node *a, const rl_config_node *b)
{
    if (rl_config_node_kind(a) != rl_config_node_kind(b) ||
        rl_config_node_type(a) != rl_config_node_type(b) ||
        rl_config_node_len(a) != rl_config_node_len(b))
        return 0;
    if (rl_config_node_kind(a) == RL_CONFIG_SCALAR) {
        rl_config_type t = rl_config_node_type(a);
        if (t == RL_CONFIG_T_NULL)
            return 1;
        if (t == RL_CONFIG_T_BOOL) {
            int x, y;
            return !rl_config_node_bool(a, &x) && !rl_config_node_bool(b, &y) && x == y;
        }
        if (t == RL_CONFIG_T_INT) {
            int64_t x, y;
            return !rl_config_node_int(a, &x) && !rl_config_node_int(b, &y) && x == y;
        }
        return strcmp(rl_config_node_text(a), rl_config_node_text(b)) == 0;
    }
    for (size_t i = 0; i < rl_config_node_len(a); i++) {
        const char *ka = rl_config_node_key(a, i), *kb = rl_config_node_key(b, i);
        if ((ka || kb) && (!ka || !kb || strcmp(ka, kb)))
            return 0;
        if (!s_same(rl_config_node_item(a, i), rl_config_node_item(b, i)))
            return 0;
    }
    return 1;
}

static void test_subtree_round_trip(void **state)
{
    (void)state;
    const char *text = "actor:\n"
                       "  optim: {lr: 3.0e-4, betas: [0.9, 0.999], name: adamw}\n"
                       "  epochs: 2\n"
                       "  flags: {fsdp: true, ckpt: off}\n"
                       "  tag: \"007\"\n"
                       "  hex: 0x10\n"
                       "  nothing: ~\n"
                       "  note: \"tab\\there \\\"quoted\\\" and: colon\"\n"
                       "  empty: []\n"
                       "  open: {}\n"
                       "  text: 'it''s'\n"
                       "rollout: {n: 8}\n";
    rl_config *c = s_parse(text, "job.yaml");
    rl_config *sub = rl_config_subtree(c, "actor");
    assert_non_null(sub);
    /* locations still point into job.yaml */
    const rl_config_node *lr = rl_config_node_at(rl_config_root(sub), "optim.lr");
    assert_int_equal(rl_config_node_line(lr), 2);
    assert_string_equal(rl_config_node_path(lr), "actor.optim.lr");
    double d;
    assert_int_equal(rl_config_get_double(sub, "optim.lr", &d), 0);
    assert_true(d == 3.0e-4);
    assert_false(rl_config_has(sub, "rollout"));

    char *y = rl_config_to_yaml(sub, "");
    char *j = rl_config_to_json(sub, "");
    assert_non_null(y);
    assert_non_null(j);
    assert_string_equal(j, "{\"optim\":{\"lr\":3.0e-4,\"betas\":[0.9,0.999],\"name\":\"adamw\"},"
                           "\"epochs\":2,\"flags\":{\"fsdp\":true,\"ckpt\":false},"
                           "\"tag\":\"007\",\"hex\":16,\"nothing\":null,"
                           "\"note\":\"tab\\there \\\"quoted\\\" and: colon\",\"empty\":[],"
                           "\"open\":{},\"text\":\"it's\"}");
    rl_config *fy = rl_config_parse_string(y, strlen(y), "<wire>");
    rl_config *fj = rl_config_parse_string(j, strlen(j), "<wire>");
    assert_non_null(fy);
    assert_non_null(fj);
    assert_true(s_same(rl_config_root(sub), rl_config_root(fy)));
    assert_true(s_same(rl_config_root(sub), rl_config_root(fj)));
    const char *s;
    assert_int_equal(rl_config_get_string(fj, "note", &s), 0);
    assert_string_equal(s, "tab\there \"quoted\" and: colon");
    assert_int_equal(rl_config_node_type(rl_config_node_at(rl_config_root(fy), "tag")),
                     RL_CONFIG_T_STRING);
    /* a subtree of the subtree, and serialising a path directly */
    char *jo = rl_config_to_json(c, "actor.optim");
    assert_string_equal(jo, "{\"lr\":3.0e-4,\"betas\":[0.9,0.999],\"name\":\"adamw\"}");
    assert_null(rl_config_subtree(c, "critic"));
    assert_string_equal(rl_error_message(), "job.yaml:1:1: missing key 'critic'");
    free(jo);
    free(y);
    free(j);
    rl_config_free(fy);
    rl_config_free(fj);
    rl_config_free(sub);
    rl_config_free(c);
}

static const char *DEFAULTS = "algorithm:\n"
                              "  adv_estimator: grpo\n"
                              "  kl_coef: 0.001\n"
                              "  use_kl: false\n"
                              "actor:\n"
                              "  ppo_epochs: 1\n"
                              "  lr: 1.0e-6\n"
                              "  stop: [\"</s>\"]\n"
                              "  optim: {betas: [0.9, 0.999]}\n"
                              "reward:\n"
                              "  weights: {}\n"
                              "  model: ~\n";

static void test_overrides(void **state)
{
    (void)state;
    rl_config *c = s_parse(DEFAULTS, "<defaults>");
    int64_t i;
    double d;
    int b;
    const char *s;
    size_t n;
    const char *ok[] = {"actor.ppo_epochs=4",
                        "actor.lr=2",                 /* an integer for a number */
                        "algorithm.use_kl=true",
                        "algorithm.adv_estimator=rloo",
                        "actor.stop=[\"<eos>\", \"\\n\\n\"]",
                        "actor.optim.betas[1]=0.95",
                        "reward.weights.math=0.7",    /* open map: new key */
                        "reward.model={path: /m, dtype: bf16}", /* null: anything */
                        "algorithm.kl_coef=1e-3"};
    assert_int_equal(rl_config_override_all(c, 9, ok), 0);
    assert_int_equal(rl_config_get_int(c, "actor.ppo_epochs", &i), 0);
    assert_int_equal(i, 4);
    assert_int_equal(rl_config_get_double(c, "actor.lr", &d), 0);
    assert_true(d == 2.0);
    assert_int_equal(rl_config_get_bool(c, "algorithm.use_kl", &b), 0);
    assert_int_equal(b, 1);
    assert_int_equal(rl_config_get_string(c, "algorithm.adv_estimator", &s), 0);
    assert_string_equal(s, "rloo");
    assert_int_equal(rl_config_list_len(c, "actor.stop", &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(rl_config_get_string(c, "actor.stop[1]", &s), 0);
    assert_string_equal(s, "\n\n");
    assert_int_equal(rl_config_get_double(c, "actor.optim.betas[1]", &d), 0);
    assert_true(d == 0.95);
    assert_int_equal(rl_config_get_double(c, "reward.weights.math", &d), 0);
    assert_true(d == 0.7);
    assert_int_equal(rl_config_get_string(c, "reward.model.dtype", &s), 0);
    assert_string_equal(s, "bf16");
    assert_int_equal(rl_config_get_double(c, "algorithm.kl_coef", &d), 0);
    assert_true(d == 1e-3);
    /* a string override keeps text as written, even if it looks like YAML */
    assert_int_equal(rl_config_override(c, "algorithm.adv_estimator=a: b"), 0);
    assert_int_equal(rl_config_get_string(c, "algorithm.adv_estimator", &s), 0);
    assert_string_equal(s, "a: b");
    assert_int_equal(rl_config_override(c, "algorithm.adv_estimator='123'"), 0);
    assert_int_equal(rl_config_get_string(c, "algorithm.adv_estimator", &s), 0);
    assert_string_equal(s, "123");
    assert_int_equal(rl_config_node_type(rl_config_node_at(rl_config_root(c),
                                                           "algorithm.adv_estimator")),
                     RL_CONFIG_T_STRING);

    /* UTF-8 passes; anything else is refused before it reaches the tree
     * (the workers get the tree as JSON, which holds UTF-8 only) */
    assert_int_equal(rl_config_override(c, "algorithm.adv_estimator=gr\xc3\xa9po \xe2\x82\xac"), 0);
    assert_int_equal(rl_config_get_string(c, "algorithm.adv_estimator", &s), 0);
    assert_string_equal(s, "gr\xc3\xa9po \xe2\x82\xac");
    static const char *const bad_utf8[] = {
        "algorithm.adv_estimator=ab\xff",          /* not a lead byte */
        "algorithm.adv_estimator=ab\xc5" "3",      /* a lead byte without its tail */
        "algorithm.adv_estimator=ab\xc0\xaf",     /* overlong */
        "algorithm.adv_estimator=ab\xed\xa0\x80", /* a surrogate */
        "algorithm.adv_estimator=ab\xf4\x90\x80\x80", /* past U+10FFFF */
    };
    for (size_t i = 0; i < sizeof bad_utf8 / sizeof *bad_utf8; i++) {
        assert_int_equal(rl_config_override(c, bad_utf8[i]), RL_ECONFIG);
        assert_string_equal(rl_error_message(),
                            "override algorithm.adv_estimator=ab...: not valid UTF-8 at byte 26");
    }
    assert_int_equal(rl_config_get_string(c, "algorithm.adv_estimator", &s), 0);
    assert_string_equal(s, "gr\xc3\xa9po \xe2\x82\xac"); /* unchanged */

    /* errors */
    assert_int_equal(rl_config_override(c, "algorithm.kl_cof=0.1"), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "override algorithm.kl_cof=0.1: unknown key 'algorithm.kl_cof'; "
                        "did you mean 'algorithm.kl_coef'?");
    assert_int_equal(rl_config_override(c, "actor.ppo_epoch=2"), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "override actor.ppo_epoch=2: unknown key 'actor.ppo_epoch'; "
                        "did you mean 'actor.ppo_epochs'?");
    assert_int_equal(rl_config_override(c, "zzzzzzzz=1"), RL_ECONFIG);
    assert_string_equal(rl_error_message(), "override zzzzzzzz=1: unknown key 'zzzzzzzz'");
    assert_int_equal(rl_config_override(c, "actor.ppo_epochs=fast"), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "override actor.ppo_epochs=fast: expected an integer, got 'fast'");
    assert_int_equal(rl_config_override(c, "actor.ppo_epochs=2.5"), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "override actor.ppo_epochs=2.5: expected an integer, got '2.5'");
    /* the override's text is untyped ("=30" is a number) unless quoted in it */
    assert_int_equal(rl_config_override(c, "actor.ppo_epochs='30'"), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "override actor.ppo_epochs='30': expected an integer, got the string \"30\"");
    assert_int_equal(rl_config_override(c, "actor.lr=high"), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "override actor.lr=high: expected a number, got 'high'");
    assert_int_equal(rl_config_override(c, "algorithm.use_kl=1"), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "override algorithm.use_kl=1: expected a boolean, got '1'");
    assert_int_equal(rl_config_override(c, "actor.stop=</s>"), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "override actor.stop=</s>: expected a list, got '</s>'");
    assert_int_equal(rl_config_override(c, "actor.ppo_epochs=[1]"), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "override actor.ppo_epochs=[1]: expected an integer, got a list");
    assert_int_equal(rl_config_override(c, "actor.ppo_epochs="), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "override actor.ppo_epochs=: expected an integer, got null");
    assert_int_equal(rl_config_override(c, "actor.optim={betas: [1, 1]}"), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "override actor.optim={betas: [1, 1]}: 'actor.optim' is a map; "
                        "override its keys one by one (actor.optim.<key>=value)");
    assert_int_equal(rl_config_override(c, "actor.lr=[1, 2"), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "override actor.lr=[1, 2: <override>:2:1: did not find expected ',' "
                        "or ']' while parsing a flow sequence (started at line 1)");
    assert_int_equal(rl_config_override(c, "actor.lr"), RL_ECONFIG);
    assert_string_equal(rl_error_message(), "override 'actor.lr': expected key=value");
    /* failed overrides changed nothing */
    assert_int_equal(rl_config_get_int(c, "actor.ppo_epochs", &i), 0);
    assert_int_equal(i, 4);
    rl_config_free(c);
}

static void test_validate_and_load_job(void **state)
{
    (void)state;
    rl_config *def = s_parse(DEFAULTS, "<defaults>");
    rl_config *job = s_parse("algorithm:\n"
                             "  kl_coef: 0.01\n"
                             "  kl_cof: 0.1\n",
                             "job.yaml");
    assert_int_equal(rl_config_validate(job, def), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "job.yaml:3:3: unknown key 'algorithm.kl_cof'; did you mean "
                        "'algorithm.kl_coef'?");
    rl_config_free(job);
    job = s_parse("actor:\n  lr: fast\n", "job.yaml");
    assert_int_equal(rl_config_validate(job, def), RL_ECONFIG);
    assert_string_equal(rl_error_message(), "job.yaml:2:7: actor.lr: expected a number, got 'fast'");
    rl_config_free(job);
    job = s_parse("actor:\n  optim: {betas: [0.9, x]}\n", "job.yaml");
    assert_int_equal(rl_config_validate(job, def), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "job.yaml:2:24: actor.optim.betas[1]: expected a number, got 'x'");
    rl_config_free(job);
    job = s_parse("actor: 3\n", "job.yaml");
    assert_int_equal(rl_config_validate(job, def), RL_ECONFIG);
    assert_string_equal(rl_error_message(), "job.yaml:1:8: actor: expected a map, got '3'");
    rl_config_free(job);
    /* a quoted scalar is a string: not a number, an integer or a boolean,
     * however it reads; the message says it was a string */
    static const struct {
        const char *text, *want;
    } quoted[] = {
        {"actor:\n  ppo_epochs: \"30\"\n",
         "job.yaml:2:15: actor.ppo_epochs: expected an integer, got the string \"30\""},
        {"actor:\n  lr: '0.5'\n", "job.yaml:2:7: actor.lr: expected a number, got the string \"0.5\""},
        {"algorithm: {use_kl: \"true\"}\n",
         "job.yaml:1:21: algorithm.use_kl: expected a boolean, got the string \"true\""},
        {"actor:\n  optim: {betas: [0.9, \"0.95\"]}\n",
         "job.yaml:2:24: actor.optim.betas[1]: expected a number, got the string \"0.95\""},
        {"actor:\n  lr: !!str 1\n", "job.yaml:2:7: actor.lr: expected a number, got the string \"1\""},
    };
    for (size_t q = 0; q < sizeof quoted / sizeof quoted[0]; q++) {
        job = s_parse(quoted[q].text, "job.yaml");
        assert_int_equal(rl_config_validate(job, def), RL_ECONFIG);
        if (strcmp(rl_error_message(), quoted[q].want) != 0)
            fail_msg("'%s': got '%s', expected '%s'", quoted[q].text, rl_error_message(),
                     quoted[q].want);
        rl_config_free(job);
    }
    /* quoted where a string (or anything) goes is fine */
    job = s_parse("algorithm: {adv_estimator: \"rloo\"}\nreward: {model: \"3\"}\n", "job.yaml");
    assert_int_equal(rl_config_validate(job, def), 0);
    rl_config_free(job);
    job = s_parse("reward:\n  weights: {math: 1.0, code: 0.5}\n  model: {path: /x}\n",
                  "job.yaml");
    assert_int_equal(rl_config_validate(job, def), 0);
    /* merge: job values win, defaults fill in, locations follow the source */
    rl_config *m = rl_config_merge(def, job);
    double d;
    assert_int_equal(rl_config_get_double(m, "reward.weights.code", &d), 0);
    assert_true(d == 0.5);
    assert_int_equal(rl_config_get_double(m, "algorithm.kl_coef", &d), 0);
    assert_true(d == 0.001);
    const rl_config_node *k = rl_config_node_at(rl_config_root(m), "reward.weights.math");
    assert_string_equal(rl_config_node_file(k), "job.yaml");
    assert_int_equal(rl_config_node_line(k), 2);
    k = rl_config_node_at(rl_config_root(m), "algorithm.kl_coef");
    assert_string_equal(rl_config_node_file(k), "<defaults>");
    /* the open map stays open after the merge */
    assert_int_equal(rl_config_override(m, "reward.weights.format=0.1"), 0);
    rl_config_free(m);
    rl_config_free(job);
    rl_config_free(def);

    /* an empty section keeps its defaults */
    def = s_parse(DEFAULTS, "<defaults>");
    job = s_parse("actor:\n#  lr: 1\nalgorithm: {kl_coef: ~}\n", "job.yaml");
    assert_int_equal(rl_config_validate(job, def), 0);
    m = rl_config_merge(def, job);
    assert_int_equal(rl_config_get_double(m, "actor.lr", &d), 0);
    assert_true(d == 1.0e-6);
    assert_int_equal(rl_config_get_double_or(m, "algorithm.kl_coef", 0.5, &d), 0);
    assert_true(d == 0.5); /* an explicit null scalar does replace */
    rl_config_free(m);
    rl_config_free(job);
    rl_config_free(def);

    /* "lr: 1" in a job still stands for a number in later overrides */
    def = s_parse(DEFAULTS, "<defaults>");
    job = s_parse("actor: {lr: 1}\n", "job.yaml");
    assert_int_equal(rl_config_validate(job, def), 0);
    m = rl_config_merge(def, job);
    assert_int_equal(rl_config_override(m, "actor.lr=0.5"), 0);
    assert_int_equal(rl_config_get_double(m, "actor.lr", &d), 0);
    assert_true(d == 0.5);
    rl_config_free(m);
    rl_config_free(job);
    rl_config_free(def);

    /* the driver's sequence on a real file */
    char path[] = "/tmp/rlrt_test_job_XXXXXX";
    int fd = mkstemp(path);
    const char *text = "actor:\n  ppo_epochs: 2\n  lr: 3.0e-6\n";
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    const char *ov[] = {"actor.ppo_epochs=5"};
    rl_config *c = rl_config_load_job(DEFAULTS, path, 1, ov);
    assert_non_null(c);
    int64_t i;
    assert_int_equal(rl_config_get_int(c, "actor.ppo_epochs", &i), 0);
    assert_int_equal(i, 5);
    assert_int_equal(rl_config_get_double(c, "actor.lr", &d), 0);
    assert_true(d == 3.0e-6);
    assert_int_equal(rl_config_get_double(c, "algorithm.kl_coef", &d), 0);
    assert_true(d == 0.001);
    rl_config_free(c);
    const char *bad[] = {"actor.ppo_epochs=5", "algorithm.kl_cof=1"};
    assert_null(rl_config_load_job(DEFAULTS, path, 2, bad));
    assert_string_equal(rl_error_message(),
                        "override algorithm.kl_cof=1: unknown key 'algorithm.kl_cof'; did "
                        "you mean 'algorithm.kl_coef'?");
    fd = open(path, O_WRONLY | O_TRUNC);
    text = "actor:\n  ppo_epochs: 2\n  lrr: 3.0e-6\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_null(rl_config_load_job(DEFAULTS, path, 0, NULL));
    char want[256];
    snprintf(want, sizeof want, "%s:3:3: unknown key 'actor.lrr'; did you mean 'actor.lr'?",
             path);
    assert_string_equal(rl_error_message(), want);
    unlink(path);
}

/* A check between keys is located at the key the user wrote: an override
 * before the job file, the job file before the defaults and values a
 * program set; among equals the first named. */
static void test_error_among(void **state)
{
    (void)state;
    rl_config *def = s_parse(DEFAULTS, "<defaults>");
    rl_config *job = s_parse("actor:\n  ppo_epochs: 2\n", "job.yaml");
    rl_config *m = rl_config_merge(def, job);
    const char *const pair[] = {"actor.lr", "actor.ppo_epochs", NULL};
    assert_false(rl_config_user_set(m, "actor.lr"));
    assert_true(rl_config_user_set(m, "actor.ppo_epochs"));
    assert_false(rl_config_user_set(m, "no.such.key"));
    assert_int_equal(rl_config_error_among(m, pair, RL_ECONFIG, "%s", "too big"), RL_ECONFIG);
    assert_string_equal(rl_error_message(), "job.yaml:2:15: actor.ppo_epochs: too big");
    assert_int_equal(rl_config_override(m, "actor.lr=0.5"), 0);
    assert_true(rl_config_user_set(m, "actor.lr"));
    const char *const rev[] = {"actor.ppo_epochs", "actor.lr", NULL};
    assert_int_equal(rl_config_error_among(m, rev, RL_ECONFIG, "x"), RL_ECONFIG);
    assert_string_equal(rl_error_message(), "override actor.lr=0.5: actor.lr: x");
    assert_int_equal(rl_config_override(m, "actor.ppo_epochs=3"), 0);
    assert_int_equal(rl_config_error_among(m, rev, RL_ECONFIG, "y"), RL_ECONFIG);
    assert_string_equal(rl_error_message(), "override actor.ppo_epochs=3: actor.ppo_epochs: y");
    /* a value a program set is not the user's */
    assert_int_equal(rl_config_set_yaml(m, "actor.ppo_epochs", "7"), 0);
    assert_false(rl_config_user_set(m, "actor.ppo_epochs"));
    assert_int_equal(rl_config_error_among(m, rev, RL_ECONFIG, "z"), RL_ECONFIG);
    assert_string_equal(rl_error_message(), "override actor.lr=0.5: actor.lr: z");
    rl_config_free(m);
    /* none written by the user: the first named, where it is */
    m = rl_config_merge(def, job);
    const char *const dd[] = {"algorithm.kl_coef", "actor.lr", NULL};
    assert_int_equal(rl_config_error_among(m, dd, RL_ECONFIG, "w"), RL_ECONFIG);
    assert_string_equal(rl_error_message(), "<defaults>:3:12: algorithm.kl_coef: w");
    /* missing keys are skipped; none at all: the first path named */
    const char *const gone[] = {"no.such", "actor.ppo_epochs", NULL};
    assert_int_equal(rl_config_error_among(m, gone, RL_ECONFIG, "v"), RL_ECONFIG);
    assert_string_equal(rl_error_message(), "job.yaml:2:15: actor.ppo_epochs: v");
    const char *const none[] = {"no.such", NULL};
    assert_int_equal(rl_config_error_among(m, none, RL_ECONFIG, "u"), RL_ECONFIG);
    assert_string_equal(rl_error_message(), "no.such: u");
    rl_config_free(m);
    rl_config_free(job);
    rl_config_free(def);
}

static void test_set_yaml_and_check_keys(void **state)
{
    (void)state;
    rl_config *c = rl_config_new("<built>");
    assert_int_equal(rl_config_set_yaml(c, "a.b.c", "[1, 2, 3]"), 0);
    assert_int_equal(rl_config_set_yaml(c, "a.name", "'x y'"), 0);
    size_t n;
    assert_int_equal(rl_config_list_len(c, "a.b.c", &n), 0);
    assert_int_equal(n, 3);
    int64_t i;
    assert_int_equal(rl_config_get_int(c, "a.b.c[2]", &i), 0);
    assert_int_equal(i, 3);
    char *j = rl_config_to_json(c, "");
    assert_string_equal(j, "{\"a\":{\"b\":{\"c\":[1,2,3]},\"name\":\"x y\"}}");
    free(j);
    rl_config_free(c);

    rl_config *n0 = s_parse("name: n\nadress: x\n", "cluster.yaml");
    static const char *const keys[] = {"name", "address", "gpus", NULL};
    assert_int_equal(rl_config_node_check_keys(rl_config_root(n0), keys), RL_ECONFIG);
    assert_string_equal(rl_error_message(),
                        "cluster.yaml:2:1: unknown key 'adress'; did you mean 'address'?");
    rl_config_free(n0);
    assert_int_equal(rl_edit_distance("kitten", "sitting"), 3);
    assert_int_equal(rl_edit_distance("", "abc"), 3);
    assert_int_equal(rl_edit_distance("kl_coef", "kl_coef"), 0);
}

/* Declarative reads: every value lands in its field, and every bad value is
 * a located error that names the key, the bound and the value. */
typedef struct {
    int64_t batch;
    double temp, lr;
    int shuffle;
    const char *name, *opt;
    int est;
} s_opts;

static const rl_config_spec SPEC[] = {
    {"data.batch", RL_CFG_INT, offsetof(s_opts, batch), 1, 1 << 20, 0, NULL},
    {"rollout.temperature", RL_CFG_NUM, offsetof(s_opts, temp), 0, 100, RL_CFG_MIN_OPEN, NULL},
    {"actor.lr", RL_CFG_NUM, offsetof(s_opts, lr), 0, INFINITY, 0, NULL},
    {"data.shuffle", RL_CFG_BOOL, offsetof(s_opts, shuffle), 0, 0, 0, NULL},
    {"data.name", RL_CFG_STR, offsetof(s_opts, name), 0, 0, RL_CFG_NONEMPTY, NULL},
    {"data.optional", RL_CFG_STR, offsetof(s_opts, opt), 0, 0, 0, NULL},
    {"algorithm.estimator", RL_CFG_ENUM, offsetof(s_opts, est), 0, 0, 0, "grpo|rloo|reinforce_plus_plus"},
};

static const char *DEFAULTS_RANGED = "data: {batch: 16, shuffle: true, name: arith, optional: ~}\n"
                                     "rollout: {temperature: 1.0}\n"
                                     "actor: {lr: 1.0e-4}\n"
                                     "algorithm: {estimator: grpo}\n";

static int s_read_with(const char *override, s_opts *o)
{
    const char *ov[1] = {override};
    rl_config *c = rl_config_load_job(DEFAULTS_RANGED, NULL, override ? 1 : 0, ov);
    if (!c)
        return rl_error_code();
    memset(o, 0, sizeof *o);
    int rc = rl_config_read(c, SPEC, sizeof SPEC / sizeof SPEC[0], o);
    if (!rc) /* strings are borrowed from the tree: check them before it goes */
        rc = strcmp(o->name, "arith") == 0 || strcmp(o->name, "x") == 0 ? 0 : RL_EINVAL;
    rl_config_free(c);
    return rc;
}

static void test_read_specs(void **state)
{
    (void)state;
    s_opts o;
    assert_int_equal(s_read_with(NULL, &o), 0);
    assert_int_equal(o.batch, 16);
    assert_true(o.temp == 1.0 && o.lr == 1e-4 && o.shuffle == 1 && o.opt == NULL && o.est == 0);
    assert_int_equal(s_read_with("algorithm.estimator=reinforce_plus_plus", &o), 0);
    assert_int_equal(o.est, 2);
    struct { const char *ov, *msg; } bad[] = {
        {"data.batch=0", "override data.batch=0: data.batch: must be in [1, 1048576], got 0"},
        {"data.batch=-16", "override data.batch=-16: data.batch: must be in [1, 1048576], got -16"},
        {"rollout.temperature=0", "rollout.temperature: must be in (0, 100], got 0"},
        {"rollout.temperature=-1", "rollout.temperature: must be in (0, 100], got -1"},
        {"rollout.temperature=.nan", "rollout.temperature: must be in (0, 100], got .nan"},
        {"actor.lr=-1e-3", "actor.lr: must be >= 0, got -1e-3"},
        {"data.name=", "data.name: must not be empty"},
        {"algorithm.estimator=ppo",
         "algorithm.estimator: unknown value 'ppo' (expected one of: grpo,rloo,reinforce_plus_plus)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(s_read_with(bad[i].ov, &o), RL_ECONFIG);
        if (!strstr(rl_error_message(), bad[i].msg))
            fail_msg("%s: got '%s', want '%s'", bad[i].ov, rl_error_message(), bad[i].msg);
    }
    /* a job file's bad value points at its line */
    char path[] = "/tmp/rlrt_cfg_XXXXXX";
    int fd = mkstemp(path);
    const char *text = "data:\n  batch: -3\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    rl_config *c = rl_config_load_job(DEFAULTS_RANGED, path, 0, NULL);
    assert_non_null(c);
    assert_int_equal(rl_config_read(c, SPEC, 1, &o), RL_ECONFIG);
    char want[256];
    snprintf(want, sizeof want, "%s:2:10: data.batch: must be in [1, 1048576], got -3", path);
    assert_string_equal(rl_error_message(), want);
    /* a missing key is an error: no fallback in code */
    int64_t v;
    assert_int_equal(rl_config_get_int_in(c, "data.nothing", 0, 5, &v), RL_ENOTFOUND);
    assert_int_equal(rl_config_get_int_in(c, "data.batch", -5, 5, &v), 0);
    assert_int_equal(v, -3);
    /* the locations survive a trip through JSON (the CONFIGURE message) */
    char *json = rl_config_to_json(c, ""), *locs = rl_config_locations_json(c);
    assert_non_null(json);
    assert_non_null(locs);
    rl_config *w = rl_config_parse_string(json, strlen(json), "<driver config>");
    assert_non_null(w);
    assert_int_equal(rl_config_read(w, SPEC, 1, &o), RL_ECONFIG);
    assert_non_null(strstr(rl_error_message(), "<driver config>:1:"));
    assert_int_equal(rl_config_apply_locations(w, locs, strlen(locs)), 0);
    assert_int_equal(rl_config_read(w, SPEC, 1, &o), RL_ECONFIG);
    assert_string_equal(rl_error_message(), want);
    assert_int_equal(rl_config_apply_locations(w, "{\"files\": 3}", 13), RL_EINVAL);
    free(json);
    free(locs);
    rl_config_free(w);
    rl_config_free(c);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_typed_getters),
        cmocka_unit_test(test_getter_errors),
        cmocka_unit_test(test_yaml_syntax_errors),
        cmocka_unit_test(test_anchors_and_aliases),
        cmocka_unit_test(test_nesting_depth_limit),
        cmocka_unit_test(test_alias_expansion_limit),
        cmocka_unit_test(test_many_keys_and_anchors),
        cmocka_unit_test(test_subtree_round_trip),
        cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_validate_and_load_job),
        cmocka_unit_test(test_error_among),
        cmocka_unit_test(test_set_yaml_and_check_keys),
        cmocka_unit_test(test_read_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
