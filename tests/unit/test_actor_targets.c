/* test_actor_targets.c — the actor's flow-matching losses against request
 * tensors of the wrong width, called in-process on the actor role (the
 * methods rl-worker serves): flow_matching_step's velocity_target and
 * update_flow's demo_target must have the model's velocity width per row.
 * Indexed with the model's width, a narrower target was read past its end
 * (a heap overread under ASan) and a wider one silently misread. And the
 * generic update: the loss op a request names gives what the op's own
 * method gives; an unknown op, or one whose section the job lacks, is
 * refused; the actor section's ENUM choices are names the actor's parsers
 * take. save_model writes the dtype asked for and the files argument beside
 * the model, and refuses bad entries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "rlrt/config.h"
#include "common/nn/models/clip_flow.h"
#include "common/nn/models/flow_policy.h"
#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "workers/flow_rl.h"
#include "common/schema/flow_policy.h"
#include "common/schema/model.h"
#include "workers/contracts.h"
#include "workers/roles.h"
#include "common/algo/kl.h"
#include "common/algo/policy_loss.h"
#include "common/nn/engine/optim.h"
#include "common/tools/tools.h"

/* The roles' sections (+ `extra`, may be NULL) with `model_defaults` and
 * `yaml` (may be NULL) over them, then key/value pairs. */
static rl_config *s_job(const rl_config_section *extra, const char *model_defaults, const char *yaml,
                        const char *const *sets, int nsets)
{
    rl_config *m = rl_schema_job((const rl_config_section *const[]){RL_ROLES_SECTIONS, extra, NULL},
                                 (const char *const[]){model_defaults, yaml, NULL}, NULL, 0,
                                 NULL);
    if (!m)
        fail_msg("job: %s", rl_error_message());
    for (int i = 0; i < nsets; i += 2)
        if (rl_config_set_yaml(m, sets[i], sets[i + 1]))
            fail_msg("%s: %s", sets[i], rl_error_message());
    return m;
}

/* clip_flow's model keys as YAML: its kind's sections, model.type set */
static char *s_clip_flow_defaults(void)
{
    size_t n = 0;
    while (rl_model_kind_clip_flow.sections[n])
        n++;
    rl_config_default type = {"model.type", "clip_flow"};
    rl_config *d = rl_config_schema_defaults(rl_model_kind_clip_flow.sections, n, &type, 1);
    assert_non_null(d);
    char *y = rl_config_to_yaml(d, "");
    rl_config_free(d);
    assert_non_null(y);
    return y;
}

/* The flow_policy kind's and the flow RL methods' sections as YAML (the
 * caller frees it). */
static char *s_flow_yaml(void)
{
    const rl_config_section *secs[] = {&rl_model_base_section, &rl_model_flow_policy_section, &rl_flow_rl_section,
                                       &rl_estimator_section, &rl_discount_section};
    const rl_config_default type = {"model.type", "flow_policy"};
    rl_config *t = rl_config_schema_defaults(secs, sizeof secs / sizeof secs[0], &type, 1);
    char *y = t ? rl_config_to_yaml(t, "") : NULL;
    rl_config_free(t);
    assert_non_null(y);
    return y;
}

/* Calls method `name`; its reply's meta (a new reference) into *meta when
 * not NULL. */
static int s_call_meta(rl_worker_ctx *ctx, const char *name, const rl_dataproto *in, json_t **meta)
{
    for (const rl_method *m = rl_role_actor.methods; m->name; m++)
        if (!strcmp(m->name, name)) {
            rl_dataproto *o = NULL;
            int rc = m->fn(ctx, in, &o);
            if (meta)
                *meta = o ? json_deep_copy(rl_dataproto_meta(o)) : NULL;
            rl_dataproto_free(o);
            return rc;
        }
    fail_msg("the actor has no method %s", name);
    return -1;
}

static int s_call(rl_worker_ctx *ctx, const char *name, const rl_dataproto *in)
{
    return s_call_meta(ctx, name, in, NULL);
}

static void s_init(rl_worker_ctx *ctx)
{
    if (rl_role_actor.init(ctx))
        fail_msg("init: %s", rl_error_message());
    rl_dataproto *e = rl_dataproto_new_meta(json_object());
    if (s_call(ctx, RL_ACTOR_INIT_MODEL, e))
        fail_msg("init_model: %s", rl_error_message());
    rl_dataproto_free(e);
}

static void s_fill(rl_dataproto *in, const char *name, int nd, int64_t rows, int64_t width, float v)
{
    int64_t shape[2] = {rows, width};
    rl_tensor *t = rl_dataproto_new_tensor(in, name, RL_F32, nd, shape);
    assert_non_null(t);
    float *p = rl_tensor_data(t);
    for (int64_t i = 0; i < rows * (nd == 2 ? width : 1); i++)
        p[i] = v;
}

/* A call with target `name` of W floats a row on a model of velocity width
 * D: done when W == D, else RL_ESHAPE naming the tensor and both widths. */
static void s_expect_width(int rc, const char *name, int64_t W, int64_t D)
{
    if (W == D) {
        if (rc)
            fail_msg("a %s of the model's width: %s", name, rl_error_message());
        return;
    }
    assert_int_equal(rc, RL_ESHAPE);
    char want[160];
    snprintf(want, sizeof want, "tensor '%s': expected %lld floats per row (the model's "
                                "velocity), got %lld", name, (long long)D, (long long)W);
    if (!strstr(rl_error_message(), want))
        fail_msg("'%s' lacks '%s'", rl_error_message(), want);
}

static void test_velocity_target_width(void **state)
{
    (void)state;
    static const char *const sets[] = {"model.hidden_size", "16", "model.num_layers", "1",
                                       "model.height", "8", "model.width", "8",
                                       "model.time_embed_dim", "8"};
    char *cf1 = s_clip_flow_defaults();
    rl_config *job = s_job(&rl_actor_diffusion_section, cf1, NULL, sets, 10);
    free(cf1);
    rl_worker_ctx ctx = {.role = "actor", .rank = 0, .world_size = 1, .config = job};
    s_init(&ctx);
    const int64_t B = 16, D = 64; /* 8 × 8 pixels */
    for (int width = 0; width < 3; width++) {
        int64_t W = width == 0 ? 1 : width == 1 ? D + 1 : D;
        rl_dataproto *in = rl_dataproto_new();
        rl_dataproto_set_meta(in, json_pack("{s:I}", RL_ACTOR_GLOBAL_ROWS, (json_int_t)B));
        assert_non_null(rl_dataproto_new_tensor(in, RL_CF_PROMPT_IDS, RL_I32, 1, (int64_t[]){B}));
        s_fill(in, RL_CF_X_T, 2, B, D, 0.1f);
        s_fill(in, RL_CF_SIGMA, 1, B, 0, 0.5f);
        s_fill(in, RL_ACTOR_VELOCITY_TARGET, 2, B, W, 0.3f);
        s_expect_width(s_call(&ctx, RL_ACTOR_FLOW_STEP, in), RL_ACTOR_VELOCITY_TARGET, W, D);
        rl_dataproto_free(in);
    }
    rl_role_actor.fini(&ctx);
    rl_config_free(job);
}

static void test_demo_target_width(void **state)
{
    (void)state;
    static const char *const sets[] = {"model.hidden_size", "16", "model.num_layers", "1",
                                       "model.num_action_chunks", "8", "model.time_embed_dim", "8",
                                       "algorithm.loss_type", "flow_ipo", "algorithm.demo_coef",
                                       "1.0", "algorithm.demos", "x"};
    char *flow = s_flow_yaml();
    rl_config *job = s_job(NULL, flow, NULL, sets, 14);
    free(flow);
    rl_worker_ctx ctx = {.role = "actor", .rank = 0, .world_size = 1, .config = job};
    s_init(&ctx);
    const int64_t B = 16, D = 56; /* 8 chunks × 7 action dims */
    for (int width = 0; width < 2; width++) {
        int64_t W = width ? D : 1;
        rl_dataproto *in = rl_dataproto_new();
        rl_dataproto_set_meta(in, json_pack("{s:I}", RL_ACTOR_GLOBAL_ROWS, (json_int_t)B));
        s_fill(in, RL_FP_PROPRIO, 2, B, 39, 0.1f);
        s_fill(in, RL_FP_OBJECT, 2, B, 98, 0.1f);
        assert_non_null(rl_dataproto_new_tensor(in, RL_FP_TASK, RL_I64, 1, (int64_t[]){B}));
        s_fill(in, RL_FLOW_ACTION, 2, B, D, 0.1f);
        s_fill(in, RL_FLOW_EPS, 2, B, D, 0.2f);
        s_fill(in, RL_FLOW_T, 1, B, 0, 0.5f);
        s_fill(in, RL_FLOW_V_OLD, 2, B, D, 0.0f);
        s_fill(in, RL_FLOW_WEIGHTS, 1, B, 0, 0.5f);
        s_fill(in, RL_FLOW_MASK, 1, B, 0, 1.0f);
        s_fill(in, RL_FLOW_DEMO_PROPRIO, 2, B, 39, 0.1f);
        s_fill(in, RL_FLOW_DEMO_OBJECT, 2, B, 98, 0.1f);
        assert_non_null(rl_dataproto_new_tensor(in, RL_FLOW_DEMO_TASK, RL_I64, 1, (int64_t[]){B}));
        s_fill(in, RL_FLOW_DEMO_X_T, 2, B, D, 0.1f);
        s_fill(in, RL_FLOW_DEMO_T, 1, B, 0, 0.5f);
        s_fill(in, RL_FLOW_DEMO_TARGET, 2, B, W, 0.3f);
        s_expect_width(s_call(&ctx, RL_ACTOR_UPDATE_FLOW, in), RL_FLOW_DEMO_TARGET, W, D);
        rl_dataproto_free(in);
    }
    rl_role_actor.fini(&ctx);
    rl_config_free(job);
}

/* A flow-matching request for the clip_flow model of test_velocity_target_width. */
static rl_dataproto *s_fm_request(int64_t B, int64_t D, const char *loss)
{
    rl_dataproto *in = rl_dataproto_new();
    rl_dataproto_set_meta(in, json_pack("{s:I}", RL_ACTOR_GLOBAL_ROWS, (json_int_t)B));
    if (loss)
        json_object_set_new(rl_dataproto_meta(in), RL_ACTOR_LOSS, json_string(loss));
    assert_non_null(rl_dataproto_new_tensor(in, RL_CF_PROMPT_IDS, RL_I32, 1, (int64_t[]){B}));
    s_fill(in, RL_CF_X_T, 2, B, D, 0.1f);
    s_fill(in, RL_CF_SIGMA, 1, B, 0, 0.5f);
    s_fill(in, RL_ACTOR_VELOCITY_TARGET, 2, B, D, 0.3f);
    return in;
}

static void test_update_by_loss_name(void **state)
{
    (void)state;
    static const char *const sets[] = {"model.hidden_size", "16", "model.num_layers", "1",
                                       "model.height", "8", "model.width", "8",
                                       "model.time_embed_dim", "8"};
    const int64_t B = 8, D = 64;
    json_t *meta[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) { /* two actors of one seed: the op's own method, then `update` */
        char *cf2 = s_clip_flow_defaults();
        rl_config *job = s_job(&rl_actor_diffusion_section, cf2, NULL, sets, 10);
        free(cf2);
        rl_worker_ctx ctx = {.role = "actor", .rank = 0, .world_size = 1, .config = job};
        s_init(&ctx);
        rl_dataproto *in = s_fm_request(B, D, k ? RL_ACTOR_LOSS_FLOW_MATCHING : NULL);
        if (s_call_meta(&ctx, k ? RL_ACTOR_UPDATE_ANY : RL_ACTOR_FLOW_STEP, in, &meta[k]))
            fail_msg("%s: %s", k ? RL_ACTOR_UPDATE_ANY : RL_ACTOR_FLOW_STEP, rl_error_message());
        rl_dataproto_free(in);
        if (k) { /* an unknown op names the known ones */
            in = s_fm_request(B, D, "flow_match");
            assert_int_equal(s_call(&ctx, RL_ACTOR_UPDATE_ANY, in), RL_EINVAL);
            if (!strstr(rl_error_message(), "unknown loss 'flow_match' (known: ppo, sft, flow_matching, "
                                            "diffusion_grpo, flow_rl)"))
                fail_msg("unexpected message: %s", rl_error_message());
            rl_dataproto_free(in);
        }
        rl_role_actor.fini(&ctx);
        rl_config_free(job);
    }
    static const char *const keys[] = {RL_ACTOR_M_LOSS, RL_ACTOR_M_GRAD_NORM, RL_ACTOR_M_LR};
    for (int i = 0; i < 3; i++) {
        const json_t *a = json_object_get(meta[0], keys[i]), *b = json_object_get(meta[1], keys[i]);
        assert_true(json_is_real(a) && json_is_real(b));
        if (json_real_value(a) != json_real_value(b))
            fail_msg("%s: %.17g by %s, %.17g by update", keys[i], json_real_value(a), RL_ACTOR_FLOW_STEP,
                     json_real_value(b));
    }
    json_decref(meta[0]);
    json_decref(meta[1]);
    /* without the flow and diffusion section the op is refused, by either name */
    char *cf3 = s_clip_flow_defaults();
    rl_config *job = s_job(NULL, cf3, NULL, sets, 10);
    free(cf3);
    rl_worker_ctx ctx = {.role = "actor", .rank = 0, .world_size = 1, .config = job};
    s_init(&ctx);
    rl_dataproto *in = s_fm_request(B, D, RL_ACTOR_LOSS_FLOW_MATCHING);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(s_call(&ctx, k ? RL_ACTOR_UPDATE_ANY : RL_ACTOR_FLOW_STEP, in), RL_ESTATE);
        if (!strstr(rl_error_message(), "flow_matching_step: the job has no actor (flow and diffusion) "
                                        "section (actor.clip_range, ...)"))
            fail_msg("unexpected message: %s", rl_error_message());
    }
    rl_dataproto_free(in);
    rl_role_actor.fini(&ctx);
    rl_config_free(job);
}

/* Every choice of `path` (an ENUM key of `sec`) passes `ok`; the number of
 * choices. */
static int s_each_choice(const rl_config_section *sec, const char *path, int (*ok)(const char *))
{
    for (size_t i = 0; i < sec->n_keys; i++) {
        if (strcmp(sec->keys[i].path, path) != 0)
            continue;
        assert_int_equal(sec->keys[i].type, RL_CFG_ENUM);
        char list[256];
        snprintf(list, sizeof list, "%s", sec->keys[i].choices);
        int n = 0;
        for (char *save = NULL, *c = strtok_r(list, "|", &save); c; c = strtok_r(NULL, "|", &save), n++)
            if (!ok(c))
                fail_msg("%s: choice '%s' is refused: %s", path, c, rl_error_message());
        return n;
    }
    fail_msg("no key %s", path);
    return 0;
}

static int s_lr_ok(const char *n)
{
    rl_lr_kind k;
    return rl_lr_kind_parse(n, &k) == RL_OK;
}
static int s_agg_ok(const char *n)
{
    rl_loss_agg k;
    return rl_loss_agg_parse(n, &k) == RL_OK;
}
static int s_kl_ok(const char *n)
{
    rl_kl_kind k;
    return rl_kl_kind_parse(n, &k) == RL_OK;
}

static void test_section_choices(void **state)
{
    (void)state;
    const rl_config_section *a = &rl_actor_section;
    assert_int_equal(s_each_choice(a, RL_CFG_PATH(a, rl_actor_config, lr_schedule), s_lr_ok), 3);
    assert_int_equal(s_each_choice(a, RL_CFG_PATH(a, rl_actor_config, loss_agg), s_agg_ok), 4);
    assert_int_equal(s_each_choice(a, RL_CFG_PATH(a, rl_actor_config, kl_loss_type), s_kl_ok), 7);
    /* the multi-turn output bound is the tools' buffer */
    const rl_config_section *mt = &rl_rollout_multi_turn_section;
    const char *path = RL_CFG_PATH(mt, rl_rollout_multi_turn_config, max_tool_output);
    for (size_t i = 0; i < mt->n_keys; i++)
        if (!strcmp(mt->keys[i].path, path))
            assert_true(mt->keys[i].max == RL_TOOL_MAX_OUTPUT);
}

/* save_model: the weights as asked (bf16 with the metadata transformers
 * wants) and the files argument's copies and texts beside them; a file name
 * with '/', an entry with neither or a source that is missing, and an
 * unknown dtype are refused, naming what is wrong. */
static void test_save_model_files(void **state)
{
    (void)state;
    static const char *const sets[] = {"model.hidden_size", "16", "model.num_layers", "1",
                                       "model.height", "8", "model.width", "8",
                                       "model.time_embed_dim", "8"};
    char *cf = s_clip_flow_defaults();
    rl_config *job = s_job(NULL, cf, NULL, sets, 10);
    free(cf);
    rl_worker_ctx ctx = {.role = "actor", .rank = 0, .world_size = 1, .config = job};
    s_init(&ctx);
    char dir[] = "/tmp/rlrt_actor_save_XXXXXX", src[128], out[160], path[256];
    assert_non_null(mkdtemp(dir));
    snprintf(src, sizeof src, "%s/source.json", dir);
    FILE *f = fopen(src, "w");
    assert_non_null(f);
    fputs("{\"copied\": true}", f);
    fclose(f);
    snprintf(out, sizeof out, "%s/final", dir);
    rl_dataproto *in = rl_dataproto_new_meta(json_pack(
        "{s:s, s:s, s:{s:{s:s}, s:{s:s}}}", RL_ACTOR_PATH, out, RL_ACTOR_DTYPE, "bfloat16",
        RL_ACTOR_FILES, "tokenizer.json", "copy", src, "note.txt", "text", "hello"));
    if (s_call(&ctx, RL_ACTOR_SAVE_MODEL, in))
        fail_msg("save_model: %s", rl_error_message());
    rl_dataproto_free(in);
    static const char *const want[2][2] = {{"tokenizer.json", "{\"copied\": true}"},
                                           {"note.txt", "hello"}};
    for (int k = 0; k < 2; k++) {
        char buf[64] = "";
        snprintf(path, sizeof path, "%s/%s", out, want[k][0]);
        f = fopen(path, "r");
        assert_non_null(f);
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        assert_string_equal(buf, want[k][1]);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    f = fopen(path, "rb");
    assert_non_null(f);
    char head[512] = "";
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[n] = '\0';
    assert_non_null(strstr(head + 8, "\"__metadata__\":{\"format\":\"pt\"}"));
    assert_non_null(strstr(head + 8, "\"dtype\":\"BF16\""));
    static const char *const bad[][2] = {
        {"{\"path\": \"%s\", \"files\": {\"../x\": {\"text\": \"a\"}}}",
         "argument 'files': entry '../x' must be a plain file name"},
        {"{\"path\": \"%s\", \"files\": {\"x\": {}}}",
         "argument 'files': entry 'x' must be a plain file name with {\"copy\": path} or {\"text\": content}"},
        {"{\"path\": \"%s\", \"files\": {\"x\": {\"copy\": \"/nonexistent/rlrt\"}}}",
         "files: copying /nonexistent/rlrt into "},
        {"{\"path\": \"%s\", \"dtype\": \"float8\"}",
         "argument 'dtype' = 'float8', expected float32 or bfloat16"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char text[512];
        snprintf(text, sizeof text, bad[k][0], out);
        in = rl_dataproto_new_meta(json_loads(text, 0, NULL));
        assert_non_null(in);
        assert_true(s_call(&ctx, RL_ACTOR_SAVE_MODEL, in) < 0);
        if (!strstr(rl_error_message(), bad[k][1]))
            fail_msg("'%s' lacks '%s'", rl_error_message(), bad[k][1]);
        rl_dataproto_free(in);
    }
    rl_role_actor.fini(&ctx);
    rl_config_free(job);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    assert_int_equal(system(path), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_velocity_target_width),
        cmocka_unit_test(test_demo_target_width),
        cmocka_unit_test(test_update_by_loss_name),
        cmocka_unit_test(test_section_choices),
        cmocka_unit_test(test_save_model_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
