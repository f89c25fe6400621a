/* test_nn_checkpoint.c — training-state checkpoints: bit-exact resume on a
 * toy problem with hand-computed gradients, latest-complete discovery with
 * partial/broken checkpoints, error paths, and saves that die: a full disk
 * (a file-size limit) and kill -9 at random moments leave the previous
 * checkpoint intact and loadable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <openssl/evp.h>

#include "rlrt/error.h"
#include "common/core/rng.h"
#include "rlrt/dtype.h"
#include "rlrt/nn/params.h"
#include "common/nn/engine/optim.h"
#include "common/nn/engine/checkpoint.h"

static char s_root[256];

static int s_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)f;
    return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static int s_setup(void **state)
{
    (void)state;
    snprintf(s_root, sizeof s_root, "/tmp/rl_test_ckpt_XXXXXX");
    return mkdtemp(s_root) ? 0 : -1;
}

static int s_teardown(void **state)
{
    (void)state;
    return nftw(s_root, s_rm_cb, 8, FTW_DEPTH | FTW_PHYS);
}

/* ---- the toy trainer --------------------------------------------------------------- */

#define NTARGET 10

typedef struct toy {
    rl_param_manifest *m;
    float *p, *g;
    rl_adamw *opt;
    rl_train_state st;
    double difficulty; /* carried in state.extra like AEPO's difficulty state */
} toy;

static void toy_init(toy *t)
{
    memset(t, 0, sizeof *t);
    t->m = rl_param_manifest_new();
    int64_t a[2] = {3, 4}, b[1] = {4}, c[1] = {5};
    rl_param_manifest_add(t->m, "layer.weight", 2, a);
    rl_param_manifest_add(t->m, "layer.bias", 1, b);
    rl_param_manifest_add(t->m, "head.weight", 1, c);
    t->p = rl_param_buffer_new(t->m->total);
    t->g = rl_param_buffer_new(t->m->total);
    rl_adamw_config cfg = {0.9, 0.95, 1e-8, 0.1};
    t->opt = rl_adamw_new(&cfg, t->m, 0, t->m->total);
    rl_adamw_set_no_decay(t->opt, t->m, rl_param_pred_no_decay_1d, NULL);
    rl_lr_schedule lr = {RL_LR_COSINE, 0.05, 3, 20, 0.1};
    t->st.lr = lr;
    rl_rng g;
    rl_rng_init(&g, 1234, 0);
    rl_train_state_set_rng(&t->st, "noise", &g);
    rl_rng_init(&g, 1234, 1);
    rl_train_state_set_rng(&t->st, "sampler", &g);
    for (int64_t i = 0; i < t->m->total; i++)
        t->p[i] = (float)(0.1 * (double)i - 1.0);
    t->difficulty = 0.5;
}

static void toy_free(toy *t)
{
    rl_param_buffer_free(t->p);
    rl_param_buffer_free(t->g);
    rl_adamw_free(t->opt);
    rl_param_manifest_free(t->m);
    json_decref(t->st.extra);
}

/* loss = Σ_i h_i/2 (p_i - c_i)² with targets c picked by the data position,
 * plus RNG noise and a difficulty-dependent offset: every piece of state
 * influences the gradient, so a resume that misses one diverges. */
static void toy_step(toy *t)
{
    rl_rng *noise = rl_train_state_get_rng(&t->st, "noise");
    rl_rng *sampler = rl_train_state_get_rng(&t->st, "sampler");
    double loss = 0;
    int64_t n = t->m->total;
    uint64_t pick = rl_rng_below(sampler, NTARGET);
    for (int64_t i = 0; i < n; i++) {
        float h = 1.0f + (float)(i % 3);
        float c = (float)((t->st.data_position + (int64_t)pick + i) % NTARGET) * 0.1f;
        float d = t->p[i] - c;
        loss += 0.5 * h * d * d;
        t->g[i] = h * d + 0.05f * rl_rng_normal(noise) + (float)(1e-3 * t->difficulty);
    }
    float norm;
    assert_int_equal(rl_grad_clip_norm(t->g, n, 1.0f, &norm), RL_OK);
    double lr = rl_lr_at(&t->st.lr, t->st.lr_step);
    assert_int_equal(rl_adamw_step(t->opt, lr, t->p, t->g), RL_OK);
    t->difficulty = 0.9 * t->difficulty + 0.1 * loss / (double)n;
    t->st.step++;
    t->st.lr_step++;
    t->st.data_position += 3;
    if (t->st.data_position >= NTARGET) {
        t->st.epoch++;
        t->st.data_position -= NTARGET;
    }
}

static rl_checkpoint_data toy_data(toy *t)
{
    rl_checkpoint_data d;
    memset(&d, 0, sizeof d);
    d.manifest = t->m;
    d.params = t->p;
    d.param_dtype = RL_F32;
    d.exp_avg = t->opt->m;
    d.exp_avg_sq = t->opt->v;
    d.adamw = t->opt->cfg;
    d.adamw_step = t->opt->step;
    return d;
}

static void toy_save(toy *t, const char *root)
{
    json_decref(t->st.extra);
    t->st.extra = json_pack("{s:{s:f, s:[i, i]}}", "aepo", "difficulty", t->difficulty,
                            "bins", 3, 7);
    rl_checkpoint_data d = toy_data(t);
    if (rl_checkpoint_save(root, &d, &t->st) != RL_OK)
        fail_msg("save: %s", rl_error_message());
}

static void toy_load(toy *t, const char *dir)
{
    rl_checkpoint_data d = toy_data(t);
    json_decref(t->st.extra);
    t->st.extra = NULL;
    if (rl_checkpoint_load(dir, &d, &t->st) != RL_OK)
        fail_msg("load: %s", rl_error_message());
    assert_true(d.adamw.beta1 == t->opt->cfg.beta1 && d.adamw.beta2 == t->opt->cfg.beta2 &&
                d.adamw.eps == t->opt->cfg.eps &&
                d.adamw.weight_decay == t->opt->cfg.weight_decay);
    t->opt->step = d.adamw_step;
    json_t *diff = json_object_get(json_object_get(t->st.extra, "aepo"), "difficulty");
    assert_true(json_is_real(diff));
    t->difficulty = json_real_value(diff);
}

static void test_resume_is_bit_exact(void **state)
{
    (void)state;
    enum { N = 14 };
    char root[512];
    snprintf(root, sizeof root, "%s/resume", s_root);
    toy a, b;
    toy_init(&a);
    for (int i = 0; i < N; i++)
        toy_step(&a);

    toy_init(&b);
    for (int i = 0; i < N / 2; i++)
        toy_step(&b);
    toy_save(&b, root);
    toy_free(&b);

    toy c; /* a fresh process: nothing carried over but the files */
    toy_init(&c);
    memset(c.p, 0, sizeof(float) * (size_t)c.m->total);
    c.difficulty = -1;
    rl_checkpoint_info info;
    assert_int_equal(rl_checkpoint_find(root, &info), RL_OK);
    assert_int_equal(info.step, N / 2);
    assert_string_equal(info.note, "");
    toy_load(&c, info.dir);
    assert_int_equal(c.st.step, N / 2);
    assert_int_equal(c.opt->step, N / 2);
    for (int i = N / 2; i < N; i++)
        toy_step(&c);

    assert_memory_equal(a.p, c.p, sizeof(float) * (size_t)a.m->total);
    assert_memory_equal(a.opt->m, c.opt->m, sizeof(float) * (size_t)a.m->total);
    assert_memory_equal(a.opt->v, c.opt->v, sizeof(float) * (size_t)a.m->total);
    assert_memory_equal(&a.st.rng, &c.st.rng, sizeof a.st.rng);
    assert_true(a.difficulty == c.difficulty);
    assert_int_equal(a.st.epoch, c.st.epoch);
    assert_int_equal(a.st.data_position, c.st.data_position);
    assert_int_equal(a.st.lr_step, c.st.lr_step);
    assert_true(a.st.lr.base_lr == c.st.lr.base_lr && a.st.lr.kind == c.st.lr.kind &&
                a.st.lr.min_ratio == c.st.lr.min_ratio);
    /* the run did move: not trivially equal */
    assert_true(fabsf(a.p[0] - (-1.0f)) > 1e-3f);
    toy_free(&a);
    toy_free(&c);
}

static void s_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_find_skips_partial(void **state)
{
    (void)state;
    char root[512], p[1024];
    snprintf(root, sizeof root, "%s/find", s_root);
    assert_int_equal(rl_checkpoint_find(root, &(rl_checkpoint_info){0}), RL_ENOTFOUND);
    toy t;
    toy_init(&t);
    toy_step(&t);
    toy_step(&t);
    toy_save(&t, root); /* step_2 */
    toy_step(&t);
    toy_step(&t);
    toy_save(&t, root); /* step_4 */
    snprintf(p, sizeof p, "%s/latest", root);
    FILE *f = fopen(p, "r");
    char line[64] = "";
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    assert_string_equal(line, "step_4\n");

    /* an interrupted save (step_6.tmp) and a broken newer one (step_8: no
     * model file) */
    snprintf(p, sizeof p, "%s/step_6.tmp", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/step_8", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/step_8/trainer_state.json", root);
    s_write(p, "{}");
    rl_checkpoint_info info;
    assert_int_equal(rl_checkpoint_find(root, &info), RL_OK);
    assert_int_equal(info.step, 4);
    assert_non_null(strstr(info.dir, "/step_4"));
    assert_non_null(strstr(info.note, "step_6.tmp"));
    assert_non_null(strstr(info.note, "step_8"));
    assert_non_null(strstr(info.note, "model.safetensors"));
    assert_false(rl_checkpoint_is_complete(p) );

    /* a truncated model file makes step_4 incomplete: falls back to step_2 */
    char model[1024];
    snprintf(model, sizeof model, "%s/step_4/model.safetensors", root);
    struct stat sb;
    stat(model, &sb);
    assert_int_equal(truncate(model, sb.st_size - 5), 0);
    assert_int_equal(rl_checkpoint_find(root, &info), RL_OK);
    assert_int_equal(info.step, 2);
    assert_non_null(strstr(info.note, "step_4"));
    assert_non_null(strstr(info.note, "'latest' names 'step_4' but"));

    /* a crash after publishing step_10 but before `latest` moved: the newest
     * complete directory wins */
    for (int i = 0; i < 6; i++)
        toy_step(&t);
    toy_save(&t, root); /* step_10 */
    snprintf(p, sizeof p, "%s/latest", root);
    s_write(p, "step_2\n");
    assert_int_equal(rl_checkpoint_find(root, &info), RL_OK);
    assert_int_equal(info.step, 10);

    /* the next save of step 6 clears the leftover .tmp */
    t.st.step = 6;
    toy_save(&t, root);
    snprintf(p, sizeof p, "%s/step_6.tmp", root);
    assert_int_not_equal(stat(p, &sb), 0);
    /* saving an existing step replaces it */
    toy_save(&t, root);
    snprintf(p, sizeof p, "%s/step_6", root);
    assert_true(rl_checkpoint_is_complete(p));

    /* prune keeps the newest 2 complete + whatever latest names */
    assert_int_equal(rl_checkpoint_prune(root, 2), RL_OK);
    snprintf(p, sizeof p, "%s/step_10", root);
    assert_int_equal(stat(p, &sb), 0);
    snprintf(p, sizeof p, "%s/step_6", root);
    assert_int_equal(stat(p, &sb), 0);
    snprintf(p, sizeof p, "%s/step_2", root);
    assert_int_not_equal(stat(p, &sb), 0);
    toy_free(&t);
}

static void test_load_errors_and_no_optimizer(void **state)
{
    (void)state;
    char root[512], dir[1024];
    snprintf(root, sizeof root, "%s/errs", s_root);
    toy t;
    toy_init(&t);
    toy_step(&t);
    /* params only (e.g. an exported policy), bf16 */
    rl_checkpoint_data d = toy_data(&t);
    d.exp_avg = d.exp_avg_sq = NULL;
    d.param_dtype = RL_BF16;
    assert_int_equal(rl_checkpoint_save(root, &d, &t.st), RL_OK);
    snprintf(dir, sizeof dir, "%s/step_1", root);
    float *q = rl_param_buffer_new(t.m->total);
    float *mm = rl_param_buffer_new(t.m->total);
    mm[0] = 123.0f;
    rl_checkpoint_data l = toy_data(&t);
    l.params = q;
    l.exp_avg = mm;
    rl_train_state st;
    assert_int_equal(rl_checkpoint_load(dir, &l, &st), RL_OK);
    assert_int_equal(l.adamw_step, 0);
    assert_float_equal(mm[0], 123.0f, 0); /* untouched */
    for (int64_t i = 0; i < t.m->total; i++)
        assert_float_equal(q[i], rl_bf16_to_f32(rl_f32_to_bf16(t.p[i])), 0);
    assert_int_equal(json_object_size(st.extra), 0);
    json_decref(st.extra);

    /* a manifest that does not match the checkpoint: names the view */
    rl_param_manifest *m2 = rl_param_manifest_new();
    int64_t s[1] = {3};
    rl_param_manifest_add(m2, "other", 1, s);
    float *p2 = rl_param_buffer_new(3);
    rl_checkpoint_data bad = {0};
    bad.manifest = m2;
    bad.params = p2;
    assert_int_not_equal(rl_checkpoint_load(dir, &bad, &st), RL_OK);
    assert_non_null(strstr(rl_error_message(), "not in the parameter manifest"));

    /* moments in the checkpoint but no buffers to load them into */
    d = toy_data(&t);
    assert_int_equal(rl_checkpoint_save(root, &d, &t.st), RL_OK);
    l = toy_data(&t);
    l.exp_avg = l.exp_avg_sq = NULL;
    assert_int_equal(rl_checkpoint_load(dir, &l, &st), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "exp_avg"));

    /* corrupt trainer_state.json */
    char p[1200];
    snprintf(p, sizeof p, "%s/trainer_state.json", dir);
    s_write(p, "{\"format\": \"rlrt-checkpoint-1\", \"step\": \"x\"}");
    assert_int_equal(rl_checkpoint_load(dir, &l, &st), RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "'step'"));
    assert_false(rl_checkpoint_is_complete(dir));

    /* bad arguments */
    d.exp_avg_sq = NULL;
    assert_int_equal(rl_checkpoint_save(root, &d, &t.st), RL_EINVAL);
    t.st.extra = json_integer(3);
    d = toy_data(&t);
    assert_int_equal(rl_checkpoint_save(root, &d, &t.st), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "extra"));

    rl_param_buffer_free(q);
    rl_param_buffer_free(mm);
    rl_param_buffer_free(p2);
    rl_param_manifest_free(m2);
    toy_free(&t);
}

/* Rewrites key `key` of dir/trainer_state.json to the JSON `value`. */
static void s_state_set(const char *dir, const char *key, const char *value)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/trainer_state.json", dir);
    json_t *j = json_load_file(p, 0, NULL), *v = json_loads(value, JSON_DECODE_ANY, NULL);
    assert_non_null(j);
    assert_non_null(v);
    json_object_set_new(j, key, v);
    assert_int_equal(json_dump_file(j, p, 0), 0);
    json_decref(j);
}

/* Rewrites the metadata 'step' of dir/optimizer.safetensors to `value` (the
 * header is rewritten with its new length; the data stays). */
static void s_optim_step_set(const char *dir, const char *value)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/optimizer.safetensors", dir);
    FILE *f = fopen(p, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)size);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    uint64_t n;
    memcpy(&n, buf, 8);
    json_t *h = json_loadb((const char *)buf + 8, (size_t)n, 0, NULL);
    assert_non_null(h);
    json_object_set_new(json_object_get(h, "__metadata__"), "step", json_string(value));
    char *text = json_dumps(h, JSON_COMPACT);
    uint64_t m = strlen(text);
    f = fopen(p, "wb");
    assert_non_null(f);
    fwrite(&m, 8, 1, f);
    fwrite(text, 1, m, f);
    fwrite(buf + 8 + n, 1, (size_t)size - 8 - n, f);
    fclose(f);
    free(text);
    json_decref(h);
    free(buf);
}

/* A checkpoint is untrusted when read: counts out of range, a step that is
 * not its directory's, an optimizer step that is no count, moments AdamW
 * cannot hold are refused naming the file and the key; a root whose
 * step_<N> directories are all damaged is an error, not "no checkpoint"
 * (a resume would start afresh and write over them). */
static void test_load_refuses_tampered_values(void **state)
{
    (void)state;
    char root[512], dir[1024];
    snprintf(root, sizeof root, "%s/tamper", s_root);
    toy t;
    toy_init(&t);
    toy_step(&t);
    toy_save(&t, root);
    snprintf(dir, sizeof dir, "%s/step_1", root);
    rl_checkpoint_data l = toy_data(&t);
    rl_train_state st;
    static const struct {
        const char *key, *value, *want;
    } bad[] = {
        {"step", "5", "key 'step' = 5, but the directory is step_1"},
        {"step", "-1", "key 'step': expected 0 .. 2^53, got -1"},
        {"epoch", "9223372036854775807", "key 'epoch': expected 0 .. 2^53, got 9223372036854775807"},
        {"data_position", "-3", "key 'data_position': expected 0 .. 2^53, got -3"},
        {"lr_step", "-5", "key 'lr_step': expected 0 .. 2^53, got -5"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        toy_save(&t, root);
        s_state_set(dir, bad[i].key, bad[i].value);
        assert_int_equal(rl_checkpoint_load(dir, &l, &st), RL_EPROTO);
        if (!strstr(rl_error_message(), bad[i].want))
            fail_msg("%s = %s: '%s' lacks '%s'", bad[i].key, bad[i].value, rl_error_message(),
                     bad[i].want);
    }
    static const char *const bad_steps[] = {"", "99999999999999999999", "-1", " 1", "+1", "1x"};
    for (size_t i = 0; i < sizeof bad_steps / sizeof bad_steps[0]; i++) {
        toy_save(&t, root);
        s_optim_step_set(dir, bad_steps[i]);
        assert_int_equal(rl_checkpoint_load(dir, &l, &st), RL_EPROTO);
        char want[160];
        snprintf(want, sizeof want, "metadata 'step' = '%s' is not a step count", bad_steps[i]);
        if (!strstr(rl_error_message(), want))
            fail_msg("'%s' lacks '%s'", rl_error_message(), want);
    }
    toy_save(&t, root); /* the untampered checkpoint loads */
    if (rl_checkpoint_load(dir, &l, &st))
        fail_msg("load: %s", rl_error_message());
    json_decref(st.extra);
    /* moments AdamW cannot hold */
    t.opt->v[2] = -1.0f;
    toy_save(&t, root);
    assert_int_equal(rl_checkpoint_load(dir, &l, &st), RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "= -1 (expected a finite moment, >= 0)"));
    t.opt->v[2] = 0.0f;
    t.opt->m[1] = NAN;
    toy_save(&t, root);
    assert_int_equal(rl_checkpoint_load(dir, &l, &st), RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "= nan (expected a finite moment)"));
    t.opt->m[1] = 0.0f;
    /* every step_<N> damaged: an error naming them, not "nothing saved" */
    toy_save(&t, root);
    s_state_set(dir, "step", "-1");
    rl_checkpoint_info info;
    assert_int_equal(rl_checkpoint_find(root, &info), RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "1 checkpoint(s), none complete"));
    assert_non_null(strstr(rl_error_message(), "step_1"));
    toy_free(&t);
}

/* Reads dir/name whole (*len bytes, malloc'd). */
static unsigned char *s_slurp(const char *dir, const char *name, long *len)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    if (!f)
        fail_msg("%s: cannot open", p);
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)*len + 1);
    assert_int_equal(fread(buf, 1, (size_t)*len, f), (size_t)*len);
    fclose(f);
    buf[*len] = '\0';
    return buf;
}

static void s_spill(const char *dir, const char *name, const unsigned char *buf, long len)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
}

/* Damage that keeps a file well-formed, so only a checksum can tell: in a
 * safetensors file four floats of the tensor data overwritten (the last
 * 16 bytes, finite values), in a JSON file one digit of a number changed. */
static void s_damage(const char *dir, const char *name)
{
    long len;
    unsigned char *buf = s_slurp(dir, name, &len);
    size_t n = strlen(name);
    if (n > 12 && strcmp(name + n - 12, ".safetensors") == 0) {
        float four[4] = {0.25f, -0.5f, 0.75f, 1.5f};
        assert_true(len > 16);
        memcpy(buf + len - 16, four, sizeof four);
    } else {
        /* the last digit of the first number after "key": in value */
        char *p = strstr((char *)buf, "\"difficulty\":");
        if (!p)
            p = strstr((char *)buf, "\"data_position\":");
        if (!p)
            p = strstr((char *)buf, "\"hidden_size\":");
        assert_non_null(p);
        p = strpbrk(p, "0123456789");
        assert_non_null(p);
        while (p[1] >= '0' && p[1] <= '9')
            p++;
        *p = *p == '7' ? '3' : '7';
    }
    s_spill(dir, name, buf, len);
    free(buf);
}

/* Bit-level damage to any file of a checkpoint (four floats overwritten
 * inside model.safetensors, a moment changed in optimizer.safetensors, a
 * digit of trainer_state.json) is noticed: rl_checkpoint_find skips that
 * step, names the file with the expected and actual checksums, and falls
 * back to the previous intact checkpoint, which loads. */
static void test_bit_damage_skips_step(void **state)
{
    (void)state;
    static const char *const files[] = {"model.safetensors", "optimizer.safetensors",
                                        "trainer_state.json"};
    char root[512], dir[1024];
    snprintf(root, sizeof root, "%s/damage", s_root);
    toy t;
    toy_init(&t);
    toy_step(&t);
    toy_step(&t);
    toy_save(&t, root); /* step_2 */
    toy_step(&t);
    toy_step(&t);
    snprintf(dir, sizeof dir, "%s/step_4", root);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        toy_save(&t, root); /* step_4, intact */
        rl_checkpoint_info info;
        assert_int_equal(rl_checkpoint_find(root, &info), RL_OK);
        assert_int_equal(info.step, 4);
        s_damage(dir, files[i]);
        if (rl_checkpoint_find(root, &info))
            fail_msg("%s damaged: find: %s", files[i], rl_error_message());
        if (info.step != 2)
            fail_msg("%s damaged: resumes from step %lld, expected the intact step 2 (note: %s)",
                     files[i], (long long)info.step, info.note);
        if (!strstr(info.note, "step_4") || !strstr(info.note, files[i]) ||
            !strstr(info.note, "expected") || !strstr(info.note, "got"))
            fail_msg("%s damaged: the note does not name the step, the file and the checksums: %s",
                     files[i], info.note);
        toy u;
        toy_init(&u);
        toy_load(&u, info.dir);
        assert_int_equal(u.st.step, 2);
        toy_free(&u);
    }
    toy_free(&t);
}

/* rl_checkpoint_find on root: step `want`, with `needle` in the note. */
static void s_find_expect(const char *root, int64_t want, const char *needle)
{
    rl_checkpoint_info info;
    if (rl_checkpoint_find(root, &info))
        fail_msg("find: %s", rl_error_message());
    if (info.step != want || (needle && !strstr(info.note, needle)))
        fail_msg("find gave step %lld (expected %lld), note '%s' (expected '%s' in it)",
                 (long long)info.step, (long long)want, info.note, needle ? needle : "");
}

static int s_write_config(const char *dir, void *arg)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/config.json", dir);
    s_write(p, (const char *)arg);
    return RL_OK;
}

/* The manifest SHA256SUMS: sha256sum checks it; damage to the manifest
 * itself, a manifest gone from a checkpoint that says it has one, damage to
 * a caller's extra file (write_extra) and to a sealed directory of the same
 * step beside it (step_N.<name>, the rollout's EMA) all skip the step naming
 * what is damaged; a hostile manifest (paths out of the directory, a file
 * listed twice, the model not listed, 100 KiB) is refused; a checkpoint of
 * before checksums loads, said to be unverified. */
static void test_manifest(void **state)
{
    (void)state;
    char root[300], dir[400], p[600], cmd[1400];
    snprintf(root, sizeof root, "%s/manifest", s_root);
    toy t;
    toy_init(&t);
    toy_step(&t);
    toy_save(&t, root); /* step_1 */
    toy_step(&t);
    rl_checkpoint_data d = toy_data(&t);
    d.write_extra = s_write_config;
    d.write_extra_arg = (void *)"{\"model\": {\"hidden_size\": 64}}\n";
    json_decref(t.st.extra);
    t.st.extra = json_pack("{s:{s:f}}", "aepo", "difficulty", t.difficulty);
    assert_int_equal(rl_checkpoint_save(root, &d, &t.st), RL_OK); /* step_2 */
    snprintf(dir, sizeof dir, "%s/step_2", root);
    snprintf(cmd, sizeof cmd, "cd '%s' && sha256sum --strict --quiet -c SHA256SUMS", dir);
    assert_int_equal(system(cmd), 0);
    long len;
    unsigned char *sums = s_slurp(dir, "SHA256SUMS", &len);
    assert_non_null(strstr((char *)sums, "  config.json\n"));
    s_find_expect(root, 2, NULL);

    /* the extra file damaged */
    s_damage(dir, "config.json");
    s_find_expect(root, 1, "config.json: damaged: sha256 expected");
    s_write_config(dir, d.write_extra_arg);
    s_find_expect(root, 2, NULL);

    /* the manifest damaged: a digit of a sha256, of its own line; gone */
    for (int which = 0; which < 2; which++) {
        unsigned char *b = malloc((size_t)len);
        memcpy(b, sums, (size_t)len);
        char *at = which == 0 ? strstr((char *)b, "  model.safetensors") - 10
                              : (char *)b + len - 5;
        *at = *at == 'a' ? 'b' : 'a';
        s_spill(dir, "SHA256SUMS", b, len);
        free(b);
        s_find_expect(root, 1, "SHA256SUMS: damaged: sha256 of its lines expected");
    }
    snprintf(p, sizeof p, "%s/SHA256SUMS", dir);
    unlink(p);
    s_find_expect(root, 1, "SHA256SUMS: missing (trainer_state.json says the checkpoint has checksums)");
    /* a FIFO or a device in a file's place is refused, not read (it would block or never end) */
    snprintf(p, sizeof p, "%s/SHA256SUMS", dir);
    assert_int_equal(mkfifo(p, 0644), 0);
    s_find_expect(root, 1, "SHA256SUMS: not a regular file");
    unlink(p);
    s_spill(dir, "SHA256SUMS", sums, len);
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    assert_int_equal(mkfifo(p, 0644), 0);
    s_find_expect(root, 1, "config.json: not a regular file");
    unlink(p);
    assert_int_equal(symlink("/dev/zero", p), 0);
    s_find_expect(root, 1, "config.json: not a regular file");
    unlink(p);
    s_write_config(dir, d.write_extra_arg);
    s_find_expect(root, 2, NULL);

    /* hostile manifests, each sealed with a correct last line */
    static const struct {
        const char *lines, *want;
    } bad[] = {
        {"%s  ../step_1/model.safetensors\n", "expected '<sha256>  <file name>'"},
        {"%s  /etc/passwd\n", "expected '<sha256>  <file name>'"},
        {"%s  trainer_state.json\n%s  trainer_state.json\n", "listed twice"},
        {"%s  trainer_state.json\n", "does not list model.safetensors"},
        {"%s  no_such_file\n%s  model.safetensors\n%s  optimizer.safetensors\n%s  trainer_state.json\n",
         "no_such_file (listed in SHA256SUMS): "},
        {"%.63s  model.safetensors\n", "expected '<sha256>  <file name>'"},
    };
    const char *zeros = "0000000000000000000000000000000000000000000000000000000000000000";
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[1024], text[1200];
        int n = snprintf(body, sizeof body, bad[i].lines, zeros, zeros, zeros, zeros);
        unsigned char dg[EVP_MAX_MD_SIZE];
        unsigned int dn;
        EVP_Digest(body, (size_t)n, dg, &dn, EVP_sha256(), NULL);
        int k = snprintf(text, sizeof text, "%s# sha256 of the lines above: ", body);
        for (unsigned int j = 0; j < 32; j++)
            k += snprintf(text + k, sizeof text - (size_t)k, "%02x", dg[j]);
        k += snprintf(text + k, sizeof text - (size_t)k, "\n");
        s_spill(dir, "SHA256SUMS", (const unsigned char *)text, k);
        int unv = -1;
        assert_int_not_equal(rl_checkpoint_verify(dir, &unv, NULL, 0), RL_OK);
        if (!strstr(rl_error_message(), bad[i].want))
            fail_msg("manifest '%s': '%s' lacks '%s'", bad[i].lines, rl_error_message(), bad[i].want);
    }
    unsigned char *big = malloc(100 * 1024);
    memset(big, '#', 100 * 1024);
    s_spill(dir, "SHA256SUMS", big, 100 * 1024);
    free(big);
    assert_int_equal(rl_checkpoint_verify(dir, NULL, NULL, 0), RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "larger than 64 KiB"));
    s_spill(dir, "SHA256SUMS", sums, len);
    s_find_expect(root, 2, NULL);
    free(sums);

    /* a sealed directory of the same step beside it */
    char ema[450];
    snprintf(ema, sizeof ema, "%s.ema", dir);
    mkdir(ema, 0755);
    snprintf(p, sizeof p, "%s/model.safetensors", ema);
    snprintf(cmd, sizeof cmd, "cp '%s/model.safetensors' '%s'", dir, p);
    assert_int_equal(system(cmd), 0);
    s_find_expect(root, 2, "step_2.ema: no SHA256SUMS"); /* not sealed: unverified */
    assert_int_equal(rl_checkpoint_seal(ema), RL_OK);
    s_find_expect(root, 2, NULL);
    s_damage(ema, "model.safetensors");
    s_find_expect(root, 1, "step_2.ema/model.safetensors: damaged: sha256 expected");
    snprintf(cmd, sizeof cmd, "rm -r '%s'", ema);
    assert_int_equal(system(cmd), 0);
    mkdir(ema, 0755);
    snprintf(p, sizeof p, "%s/sub", ema);
    mkdir(p, 0755);
    assert_int_equal(rl_checkpoint_seal(ema), RL_EINVAL); /* a sealed directory holds files only */
    assert_non_null(strstr(rl_error_message(), "not a regular file"));
    snprintf(cmd, sizeof cmd, "rm -r '%s'", ema);
    assert_int_equal(system(cmd), 0);

    /* a checkpoint saved before checksums: no manifest, no "checksums" key */
    snprintf(p, sizeof p, "%s/SHA256SUMS", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/trainer_state.json", dir);
    json_t *j = json_load_file(p, 0, NULL);
    assert_int_equal(json_object_del(j, "checksums"), 0);
    assert_int_equal(json_dump_file(j, p, 0), 0);
    json_decref(j);
    rl_checkpoint_info info;
    assert_int_equal(rl_checkpoint_find(root, &info), RL_OK);
    assert_int_equal(info.step, 2);
    assert_int_equal(info.unverified, 1);
    assert_non_null(strstr(info.note, "its files cannot be verified"));
    toy u;
    toy_init(&u);
    toy_load(&u, info.dir);
    assert_int_equal(u.st.step, 2);
    toy_free(&u);
    toy_free(&t);
}

static void test_rng_json_roundtrip(void **state)
{
    (void)state;
    rl_rng g, h;
    rl_rng_init(&g, 0xdeadbeefcafeULL, 77);
    for (int i = 0; i < 7; i++) /* mid-block: lanes and `used` matter */
        rl_rng_u32(&g);
    json_t *j = rl_rng_to_json(&g);
    assert_int_equal(rl_rng_from_json(j, &h), RL_OK);
    json_decref(j);
    for (int i = 0; i < 20; i++)
        assert_int_equal(rl_rng_u32(&g), rl_rng_u32(&h));
    json_t *bad = json_pack("{s:[i,i], s:[i,i,i,i], s:[i,i,i,i], s:i}", "key", 1, 2, "counter",
                            1, 2, 3, 4, "lanes", 1, 2, 3, -1, "used", 0);
    assert_int_equal(rl_rng_from_json(bad, &h), RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "'lanes'[3]"));
    json_decref(bad);
    rl_train_state s = {0};
    char name[16];
    for (int i = 0; i < RL_CKPT_MAX_RNG; i++) {
        snprintf(name, sizeof name, "r%d", i);
        assert_int_equal(rl_train_state_set_rng(&s, name, &g), RL_OK);
    }
    assert_int_equal(rl_train_state_set_rng(&s, "one_more", &g), RL_ERANGE);
    assert_int_equal(rl_train_state_set_rng(&s, "r3", &h), RL_OK); /* replace is fine */
}

/* A toy with 2^20 extra parameters: big enough that a save takes a while. */
static void toy_init_big(toy *t)
{
    toy_init(t);
    int64_t big[1] = {1 << 20};
    rl_param_manifest_add(t->m, "big.weight", 1, big);
    rl_param_buffer_free(t->p);
    rl_param_buffer_free(t->g);
    rl_adamw_free(t->opt);
    t->p = rl_param_buffer_new(t->m->total);
    t->g = rl_param_buffer_new(t->m->total);
    rl_adamw_config cfg = {0.9, 0.95, 1e-8, 0.1};
    t->opt = rl_adamw_new(&cfg, t->m, 0, t->m->total);
    for (int64_t i = 0; i < t->m->total; i++)
        t->p[i] = (float)(0.001 * (double)(i % 997));
}

static void s_expect_step(const char *root, int64_t step)
{
    rl_checkpoint_info info;
    if (rl_checkpoint_find(root, &info))
        fail_msg("find: %s", rl_error_message());
    assert_int_equal(info.step, step);
    toy t;
    toy_init_big(&t);
    toy_load(&t, info.dir);
    assert_int_equal(t.st.step, step);
    toy_free(&t);
}

static void test_full_disk_keeps_previous(void **state)
{
    (void)state;
    char root[300];
    snprintf(root, sizeof root, "%s/full", s_root);
    toy t;
    toy_init_big(&t);
    toy_step(&t);
    toy_save(&t, root); /* step 1, complete */
    toy_step(&t);
    /* the "disk" fills up: writes past 1 MiB fail with EFBIG */
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 1 << 20;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    rl_checkpoint_data d = toy_data(&t);
    int rc = rl_checkpoint_save(root, &d, &t.st);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rl_error_message());
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    assert_int_equal(rc, RL_EIO);
    /* the error names the file and the cause */
    if (!strstr(msg, root) || !strstr(msg, "File too large"))
        fail_msg("the error names neither the path nor the cause: %s", msg);
    s_expect_step(root, 1);
    toy_free(&t);
}

static void test_kill9_during_save_keeps_previous(void **state)
{
    (void)state;
    char root[300];
    snprintf(root, sizeof root, "%s/killed", s_root);
    toy t;
    toy_init_big(&t);
    toy_step(&t);
    toy_save(&t, root); /* step 1, complete */
    int64_t step = 1;
    srand(7);
    for (int trial = 0; trial < 12; trial++) {
        toy_step(&t);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            rl_checkpoint_data d = toy_data(&t);
            _exit(rl_checkpoint_save(root, &d, &t.st) == RL_OK ? 0 : 1);
        }
        struct timespec ts = {0, (long)(rand() % 40) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        /* whatever the moment, the newest complete checkpoint is the previous
         * one or the new one (renamed into place before the kill landed),
         * and it loads */
        rl_checkpoint_info info;
        if (rl_checkpoint_find(root, &info))
            fail_msg("trial %d: find: %s", trial, rl_error_message());
        if (info.step != step && info.step != t.st.step)
            fail_msg("trial %d: newest checkpoint is step %lld, expected %lld or %lld", trial,
                     (long long)info.step, (long long)step, (long long)t.st.step);
        step = info.step;
        s_expect_step(root, step);
    }
    toy_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_is_bit_exact),
        cmocka_unit_test(test_find_skips_partial),
        cmocka_unit_test(test_load_errors_and_no_optimizer),
        cmocka_unit_test(test_load_refuses_tampered_values),
        cmocka_unit_test(test_bit_damage_skips_step),
        cmocka_unit_test(test_manifest),
        cmocka_unit_test(test_rng_json_roundtrip),
        cmocka_unit_test(test_full_disk_keeps_previous),
        cmocka_unit_test(test_kill9_during_save_keeps_previous),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
