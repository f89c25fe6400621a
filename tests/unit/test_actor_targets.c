/* test_actor_targets.c — the actor's flow-matching losses against request
 * tensors of the wrong width, called in-process on the actor role (the
 * methods rl-worker serves): flow_matching_step's velocity_target and
 * update_flow's demo_target must have the model's velocity width per row.
 * Indexed with the model's width, a narrower target was read past its end
 * (a heap overread under ASan) and a wider one silently misread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The roles' defaults + `model_defaults` + `extra`, then key/value pairs. */
static rl_config *s_job(const char *model_defaults, const char *extra, const char *const *sets,
                        int nsets)
{
    size_t n = strlen(RL_ROLES_DEFAULTS) + strlen(model_defaults) + 1;
    char *t = malloc(n);
    assert_non_null(t);
    snprintf(t, n, "%s%s", RL_ROLES_DEFAULTS, model_defaults);
    rl_config *a = rl_config_parse_string(t, strlen(t), "defaults.yaml");
    free(t);
    assert_non_null(a);
    rl_config *b = rl_config_parse_string(extra, strlen(extra), "extra.yaml");
    assert_non_null(b);
    rl_config *m = rl_config_merge(a, b);
    rl_config_free(a);
    rl_config_free(b);
    assert_non_null(m);
    for (int i = 0; i < nsets; i += 2)
        if (rl_config_set_yaml(m, sets[i], sets[i + 1]))
            fail_msg("%s: %s", sets[i], rl_error_message());
    return m;
}

/* The flow_policy kind's and the flow RL methods' sections as YAML (the
 * caller frees it). */
static char *s_flow_yaml(void)
{
    const rl_config_section *secs[] = {&rl_model_base_section, &rl_model_flow_policy_section, &rl_flow_rl_section};
    const rl_config_default type = {"model.type", "flow_policy"};
    rl_config *t = rl_config_schema_defaults(secs, 3, &type, 1);
    char *y = t ? rl_config_to_yaml(t, "") : NULL;
    rl_config_free(t);
    assert_non_null(y);
    return y;
}

static int s_call(rl_worker_ctx *ctx, const char *name, const rl_dataproto *in)
{
    for (const rl_method *m = rl_role_actor.methods; m->name; m++)
        if (!strcmp(m->name, name)) {
            rl_dataproto *o = NULL;
            int rc = m->fn(ctx, in, &o);
            rl_dataproto_free(o);
            return rc;
        }
    fail_msg("the actor has no method %s", name);
    return -1;
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
    rl_config *job = s_job(RL_CLIP_FLOW_MODEL_DEFAULTS, RL_ACTOR_DIFFUSION_DEFAULTS, sets, 10);
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
    rl_config *job = s_job(flow, "", sets, 14);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_velocity_target_width),
        cmocka_unit_test(test_demo_target_width),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
