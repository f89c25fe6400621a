/* test_metrics.c — CRC32C, TFRecord framing, TensorBoard events (against a
 * golden file written by the real `tensorboard` package, see
 * tests/reference/gen_tensorboard.py), metrics.jsonl, resume truncation and
 * the console line. Runs from the repo root. */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "common/metrics/metrics.h"
#include <jansson.h>

#define GOLDEN_DIR "tests/golden/metrics/"

static char s_dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(s_dir, sizeof s_dir, "/tmp/rl_test_metrics_XXXXXX");
    return mkdtemp(s_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static char *s_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

/* ---- CRC32C ----------------------------------------------------------------- */

static void test_crc32c_known_answers(void **state)
{
    (void)state;
    /* "123456789" check value of CRC-32C; the 32-byte vectors are RFC 3720
     * appendix B.4 (iSCSI). */
    assert_int_equal(rl_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(rl_crc32c(0, "", 0), 0);
    unsigned char buf[32];
    memset(buf, 0, 32);
    assert_int_equal(rl_crc32c(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, 32);
    assert_int_equal(rl_crc32c(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (unsigned char)i;
    assert_int_equal(rl_crc32c(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (unsigned char)(31 - i);
    assert_int_equal(rl_crc32c(0, buf, 32), 0x113FDB5Cu);
    /* continuing a CRC equals one pass */
    assert_int_equal(rl_crc32c(rl_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
    /* mask = rotate right by 15 plus a constant */
    assert_int_equal(rl_crc32c_mask(0), 0xa282ead8u);
    assert_int_equal(rl_crc32c_mask(0x00008000u), 0xa282ead9u);
    assert_int_equal(rl_crc32c_mask(1), 0xa282ead8u + 0x20000u);
}

/* ---- TFRecord ---------------------------------------------------------------- */

static uint64_t s_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void test_tfrecord_framing(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/records", s_dir);
    FILE *f = fopen(path, "wb");
    const char *recs[] = {"hello", "", "a longer record with \0 bytes"};
    size_t lens[] = {5, 0, 28};
    for (int i = 0; i < 3; i++)
        assert_int_equal(rl_tfrecord_write(f, recs[i], lens[i]), RL_OK);
    fclose(f);
    /* parse the bytes by hand */
    size_t n;
    unsigned char *b = (unsigned char *)s_slurp(path, &n);
    assert_int_equal(n, 3 * 16 + 5 + 0 + 28);
    size_t off = 0;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(s_le(b + off, 8), lens[i]);
        assert_int_equal(s_le(b + off + 8, 4), rl_crc32c_mask(rl_crc32c(0, b + off, 8)));
        if (lens[i])
            assert_memory_equal(b + off + 12, recs[i], lens[i]);
        assert_int_equal(s_le(b + off + 12 + lens[i], 4),
                         rl_crc32c_mask(rl_crc32c(0, recs[i], lens[i])));
        off += 16 + lens[i];
    }
    /* and with the reader */
    f = fopen(path, "rb");
    for (int i = 0; i < 3; i++) {
        void *d;
        size_t l;
        assert_int_equal(rl_tfrecord_read(f, &d, &l), 1);
        assert_int_equal(l, lens[i]);
        if (l)
            assert_memory_equal(d, recs[i], l);
        free(d);
    }
    void *d;
    size_t l;
    assert_int_equal(rl_tfrecord_read(f, &d, &l), 0);
    fclose(f);
    /* a flipped data byte and a truncated tail are reported */
    b[12] ^= 1;
    f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
    f = fopen(path, "rb");
    assert_int_equal(rl_tfrecord_read(f, &d, &l), RL_EPROTO);
    assert_string_equal(rl_error_message(), "tfrecord at byte 0: data CRC mismatch");
    fclose(f);
    b[12] ^= 1;
    b[3] ^= 1; /* length byte: header CRC */
    f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
    f = fopen(path, "rb");
    assert_int_equal(rl_tfrecord_read(f, &d, &l), RL_EPROTO);
    assert_string_equal(rl_error_message(), "tfrecord at byte 0: length CRC mismatch");
    fclose(f);
    b[3] ^= 1;
    f = fopen(path, "wb");
    fwrite(b, 1, n - 2, f);
    fclose(f);
    f = fopen(path, "rb");
    assert_int_equal(rl_tfrecord_read(f, &d, &l), 1);
    free(d);
    assert_int_equal(rl_tfrecord_read(f, &d, &l), 1);
    free(d);
    assert_int_equal(rl_tfrecord_read(f, &d, &l), RL_EPROTO);
    assert_string_equal(rl_error_message(),
                        "tfrecord at byte 37: truncated data (28 bytes announced)");
    fclose(f);
    free(b);
}

/* ---- golden event file from tensorboard ---------------------------------------- */

static void test_tensorboard_golden(void **state)
{
    (void)state;
    json_error_t err;
    json_t *meta = json_load_file(GOLDEN_DIR "tb_reference.json", 0, &err);
    if (!meta)
        fail_msg("%s: %s (run tests from the repo root)", GOLDEN_DIR "tb_reference.json",
                 err.text);
    size_t glen;
    char *golden = s_slurp(GOLDEN_DIR "tb_reference.tfevents", &glen);
    assert_non_null(golden);
    /* 1. our writer produces tensorboard's bytes */
    char path[128];
    snprintf(path, sizeof path, "%s/events.out.tfevents.1.test", s_dir);
    rl_tb_writer *w = rl_tb_writer_open(
        path, json_real_value(json_object_get(meta, "file_version_wall_time")));
    assert_non_null(w);
    json_t *events = json_object_get(meta, "events");
    size_t i, n_scalars = 0;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        json_t *tags = json_object_get(ev, "tags"), *vals = json_object_get(ev, "values");
        int n = (int)json_array_size(tags);
        const char *t[8];
        double v[8];
        for (int k = 0; k < n; k++) {
            t[k] = json_string_value(json_array_get(tags, (size_t)k));
            v[k] = json_number_value(json_array_get(vals, (size_t)k));
        }
        assert_int_equal(rl_tb_writer_scalars(w, json_integer_value(json_object_get(ev, "step")),
                                              json_real_value(json_object_get(ev, "wall_time")),
                                              t, v, n),
                         RL_OK);
        n_scalars += (size_t)n;
    }
    assert_int_equal(rl_tb_writer_close(w), RL_OK);
    size_t mlen;
    char *mine = s_slurp(path, &mlen);
    assert_int_equal(mlen, glen);
    assert_memory_equal(mine, golden, glen);
    free(mine);
    /* 2. our reader parses tensorboard's file */
    rl_tb_scalar *sc;
    int64_t ns;
    char *fv;
    assert_int_equal(rl_tb_read_scalars(GOLDEN_DIR "tb_reference.tfevents", &sc, &ns, &fv),
                     RL_OK);
    assert_string_equal(fv, "brain.Event:2");
    assert_int_equal(ns, (int64_t)n_scalars);
    int64_t at = 0;
    json_array_foreach(events, i, ev) {
        json_t *tags = json_object_get(ev, "tags"), *f32 = json_object_get(ev, "float32");
        for (size_t k = 0; k < json_array_size(tags); k++, at++) {
            assert_int_equal(sc[at].step, json_integer_value(json_object_get(ev, "step")));
            assert_true(sc[at].wall_time == json_real_value(json_object_get(ev, "wall_time")));
            assert_string_equal(sc[at].tag, json_string_value(json_array_get(tags, k)));
            /* tensorboard stores float32: compare exactly with its rounding */
            assert_true((double)sc[at].value == json_number_value(json_array_get(f32, k)));
        }
    }
    rl_tb_scalars_free(sc, ns);
    free(fv);
    free(golden);
    json_decref(meta);
}

/* ---- the sink ------------------------------------------------------------------- */

static void s_put_step(rl_metric_set *s, int64_t step)
{
    rl_metric_set_clear(s);
    assert_int_equal(rl_metric_set_put(s, "critic/score/mean", 0.1 * (double)step), RL_OK);
    assert_int_equal(rl_metric_set_put(s, "actor/pg_loss", (double)(-step)), RL_OK);
    assert_int_equal(rl_metric_set_put(s, "timing_s/gen", 1.0 / 3.0), RL_OK);
}

static void s_run(const char *dir, int64_t resume, int64_t from, int64_t to)
{
    rl_metrics *m = rl_metrics_open(dir, resume, 0);
    if (!m)
        fail_msg("rl_metrics_open: %s", rl_error_message());
    rl_metric_set *s = rl_metric_set_new();
    for (int64_t st = from; st <= to; st++) {
        s_put_step(s, st);
        assert_int_equal(rl_metrics_log_at(m, st, 1.7e9 + (double)st, s), RL_OK);
    }
    rl_metric_set_free(s);
    assert_int_equal(rl_metrics_close(m), RL_OK);
}

/* All scalars of all event files in dir/tensorboard, files in name order. */
static void s_read_tb_dir(const char *dir, char *out, size_t cap)
{
    char tbdir[160];
    snprintf(tbdir, sizeof tbdir, "%s/tensorboard", dir);
    struct dirent **names;
    int n = scandir(tbdir, &names, NULL, alphasort);
    assert_true(n >= 0);
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (strncmp(names[i]->d_name, "events.out.tfevents.", 20) == 0) {
            char p[512];
            snprintf(p, sizeof p, "%s/%s", tbdir, names[i]->d_name);
            rl_tb_scalar *sc;
            int64_t ns;
            char *fv;
            assert_int_equal(rl_tb_read_scalars(p, &sc, &ns, &fv), RL_OK);
            assert_string_equal(fv, "brain.Event:2");
            for (int64_t k = 0; k < ns; k++)
                len += (size_t)snprintf(out + len, cap - len, "%lld %.1f %s %.9g\n",
                                        (long long)sc[k].step, sc[k].wall_time, sc[k].tag,
                                        (double)sc[k].value);
            assert_true(len < cap);
            rl_tb_scalars_free(sc, ns);
            free(fv);
        }
        free(names[i]);
    }
    free(names);
}

static void test_jsonl_content(void **state)
{
    (void)state;
    char dir[128], path[160];
    snprintf(dir, sizeof dir, "%s/run_content/nested", s_dir);
    rl_metrics *m = rl_metrics_open(dir, -1, RL_METRICS_JSONL);
    assert_non_null(m);
    assert_null(rl_metrics_event_path(m));
    rl_metric_set *s = rl_metric_set_new();
    assert_int_equal(rl_metric_set_put(s, "critic/score/mean", 0.1), RL_OK);
    assert_int_equal(rl_metric_set_put(s, "val/accuracy", 3.0), RL_OK);
    assert_int_equal(rl_metric_set_put(s, "actor/pg_loss", NAN), RL_OK);
    assert_int_equal(rl_metric_set_put(s, "x\"y", 1e-300), RL_OK);
    assert_int_equal(rl_metric_set_put(s, "critic/score/mean", 0.25), RL_OK); /* replace */
    assert_int_equal(rl_metric_set_put(s, "step", 1), RL_EINVAL);
    assert_int_equal(rl_metric_set_count(s), 4);
    assert_int_equal(rl_metrics_log(m, 0, s), RL_OK);
    rl_metric_set_clear(s);
    assert_int_equal(rl_metrics_log(m, 3, s), RL_OK);
    assert_int_equal(rl_metrics_log(m, 2, s), RL_EINVAL); /* steps must not decrease */
    assert_int_equal(rl_metrics_close(m), RL_OK);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *text = s_slurp(path, NULL);
    assert_non_null(text);
    assert_string_equal(text, "{\"step\": 0, \"critic/score/mean\": 0.25, \"val/accuracy\": 3, "
                              "\"actor/pg_loss\": null, \"x\\\"y\": 1e-300}\n"
                              "{\"step\": 3}\n");
    free(text);
    rl_metric_set_free(s);
    /* the tensorboard directory is not created when only JSONL is asked */
    char tb[200];
    snprintf(tb, sizeof tb, "%s/tensorboard", dir);
    assert_int_not_equal(access(tb, F_OK), 0);
}

static void test_resume_truncates(void **state)
{
    (void)state;
    char full[128], res[128], pf[160], pr[160];
    snprintf(full, sizeof full, "%s/full", s_dir);
    snprintf(res, sizeof res, "%s/resumed", s_dir);
    s_run(full, -1, 0, 9);
    /* the interrupted run got to step 7 and died while writing step 8 */
    s_run(res, -1, 0, 7);
    snprintf(pr, sizeof pr, "%s/metrics.jsonl", res);
    FILE *f = fopen(pr, "a");
    fputs("{\"step\": 8, \"critic/sc", f);
    fclose(f);
    /* ... and so did its event file: append half a record */
    char tbdir[200];
    snprintf(tbdir, sizeof tbdir, "%s/tensorboard", res);
    struct dirent **names;
    int n = scandir(tbdir, &names, NULL, alphasort);
    assert_int_equal(n, 3); /* ".", "..", one event file */
    char evp[512];
    snprintf(evp, sizeof evp, "%s/%s", tbdir, names[2]->d_name);
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    f = fopen(evp, "ab");
    fwrite("\x20\0\0\0\0\0\0\0\x01\x02", 1, 10, f);
    fclose(f);
    /* resumed from the checkpoint of step 4 */
    s_run(res, 4, 5, 9);
    snprintf(pf, sizeof pf, "%s/metrics.jsonl", full);
    char *a = s_slurp(pf, NULL), *b = s_slurp(pr, NULL);
    assert_string_equal(b, a);
    free(a);
    free(b);
    static char ta[8192], tb[8192];
    s_read_tb_dir(full, ta, sizeof ta);
    s_read_tb_dir(res, tb, sizeof tb);
    assert_string_equal(tb, ta);
    /* 10 steps x 3 scalars, the first line is step 0 */
    int lines = 0;
    for (char *p = ta; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 30);
    assert_true(strncmp(ta, "0 1700000000.0 critic/score/mean 0\n", 35) == 0);
    /* resuming at step 4 refuses step 4 itself */
    rl_metrics *m = rl_metrics_open(res, 9, 0);
    rl_metric_set *s = rl_metric_set_new();
    assert_int_equal(rl_metrics_log(m, 9, s), RL_EINVAL);
    assert_int_equal(rl_metrics_log(m, 10, s), RL_OK);
    rl_metric_set_free(s);
    assert_int_equal(rl_metrics_close(m), RL_OK);
    /* a fresh run (-1) empties the old metrics */
    s_run(res, -1, 0, 0);
    a = s_slurp(pf, NULL);
    b = s_slurp(pr, NULL);
    *(strchr(a, '\n') + 1) = '\0';
    assert_string_equal(b, a);
    free(a);
    free(b);
}

static void test_console_line(void **state)
{
    (void)state;
    rl_metric_set *s = rl_metric_set_new();
    char buf[256];
    int n = rl_metrics_format_console(s, 3, buf, sizeof buf);
    assert_string_equal(buf, "step 3");
    assert_int_equal(n, 6);
    rl_metric_set_put(s, "timing_s/gen", 1.2);
    rl_metric_set_put(s, RL_M_REWARD_MEAN, 0.4);
    rl_metric_set_put(s, RL_M_SCORE_MEAN, 0.5125);
    rl_metric_set_put(s, RL_M_VAL_ACCURACY, 0.48);
    rl_metric_set_put(s, RL_M_RESPONSE_LEN, 23.44);
    rl_metric_set_put(s, RL_M_PPO_KL, 0.5);
    rl_metric_set_put(s, RL_M_KL_LOSS, 0.00123);
    rl_metric_set_put(s, RL_M_ENTROPY, 1.234);
    rl_metric_set_put(s, "timing_s/update_actor", 2.105);
    rl_metric_set_put(s, "timing_s/", 9);
    rl_metric_set_put(s, RL_M_THROUGHPUT, 1234.5);
    n = rl_metrics_format_console(s, 12, buf, sizeof buf);
    const char *want = "step 12 | reward 0.5125 | acc 0.480 | len 23.4 | kl 0.00123 | "
                       "ent 1.23 | gen 1.20s update_actor 2.10s | 1.23e+03 tok/s";
    assert_string_equal(buf, want);
    assert_int_equal(n, (int)strlen(want));
    /* truncation keeps a NUL and reports the full length */
    char small[10];
    n = rl_metrics_format_console(s, 12, small, sizeof small);
    assert_string_equal(small, "step 12 |");
    assert_int_equal(n, (int)strlen(want));
    /* with a training accuracy, validation gets its own field */
    rl_metric_set_put(s, RL_M_ACCURACY, 0.25);
    rl_metrics_format_console(s, 12, buf, sizeof buf);
    assert_non_null(strstr(buf, "| acc 0.250 |"));
    assert_non_null(strstr(buf, "tok/s | val acc 0.480"));
    rl_metric_set_free(s);
}

static void test_put_stats(void **state)
{
    (void)state;
    rl_metric_set *s = rl_metric_set_new();
    double v[] = {1.0, -2.0, 4.5, 0.5};
    assert_int_equal(rl_metric_set_put_stats(s, "critic/score", v, 4), RL_OK);
    double x;
    assert_int_equal(rl_metric_set_get(s, "critic/score/mean", &x), RL_OK);
    assert_true(x == 1.0); /* (1 - 2 + 4.5 + 0.5) / 4 */
    assert_int_equal(rl_metric_set_get(s, "critic/score/max", &x), RL_OK);
    assert_true(x == 4.5);
    assert_int_equal(rl_metric_set_get(s, "critic/score/min", &x), RL_OK);
    assert_true(x == -2.0);
    assert_string_equal(rl_metric_set_name(s, 0), "critic/score/mean");
    assert_int_equal(rl_metric_set_put_stats(s, "empty", v, 0), RL_OK);
    assert_int_equal(rl_metric_set_count(s), 3);
    assert_int_equal(rl_metric_set_get(s, "empty/mean", &x), RL_ENOTFOUND);
    rl_metric_set_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_known_answers),
        cmocka_unit_test(test_tfrecord_framing),
        cmocka_unit_test(test_tensorboard_golden),
        cmocka_unit_test(test_jsonl_content),
        cmocka_unit_test(test_resume_truncates),
        cmocka_unit_test(test_console_line),
        cmocka_unit_test(test_put_stats),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
