/* test_nn_hf_dir.c — a Hugging Face model directory as a job's start
 * (common/nn/models/lm/lm_hf.h): the architecture from config.json and the
 * job's disagreeing keys refused with both values; other families, RoPE
 * scaling and a missing tokenizer refused; the tokenizer's default; the
 * model.path alias; sharded weights (model.safetensors.index.json) loaded
 * and a missing or inconsistent shard named (common/nn/engine/safetensors.h);
 * the special tokens of tokenizer_config.json / generation_config.json
 * (common/text/tokenizer.h); a model saved in bf16 with the metadata
 * transformers wants and loaded back (rlrt/nn/model.h). Files are written
 * into a fresh temporary directory per test; the transformers-written
 * checkpoint is tests/golden/nn_hf (tests/reference/gen_nn_io.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>

#include "common/core/util.h"
#include "common/data/data.h"
#include "common/nn/engine/safetensors.h"
#include "common/nn/models/lm/lm_hf.h"
#include "common/nn/models/lm/lm_model.h"
#include "common/schema/algorithm.h"
#include "common/schema/lm.h"
#include "common/schema/model.h"
#include "common/text/tokenizer.h"
#include "rlrt/config.h"
#include "rlrt/dtype.h"
#include "rlrt/error.h"
#include "rlrt/nn/model.h"

#define assert_msg_contains(msg, s)                                   \
    do {                                                              \
        if (!strstr((msg), (s)))                                      \
            fail_msg("message '%s' lacks '%s'", (msg), (s));          \
    } while (0)

static char s_dir[64];

static int s_setup(void **state)
{
    (void)state;
    snprintf(s_dir, sizeof s_dir, "/tmp/rlrt_hfdir_XXXXXX");
    return mkdtemp(s_dir) ? 0 : -1;
}

static int s_teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void s_write(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", s_dir, name);
    if (rl_file_write_atomic(path, text, strlen(text)))
        fail_msg("%s: %s", path, rl_error_message());
}

static void s_remove(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", s_dir, name);
    unlink(path);
}

/* A Qwen2 config.json (hidden 16, 2 layers, 4 heads, 2 kv heads) with
 * `extra` JSON members spliced in (e.g. "\"rope_scaling\": {...},"). */
static void s_config(const char *model_type, const char *extra)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{%s\"model_type\": \"%s\", \"vocab_size\": 40, \"hidden_size\": 16,"
             " \"intermediate_size\": 24, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
             " \"num_key_value_heads\": 2, \"max_position_embeddings\": 64,"
             " \"rope_theta\": 1000000.0, \"rms_norm_eps\": 1e-05, \"tie_word_embeddings\": true,"
             " \"eos_token_id\": 3, \"torch_dtype\": \"bfloat16\"}\n",
             extra ? extra : "", model_type);
    s_write("config.json", text);
}

/* A tiny model's weights as dir/model.safetensors in `dtype`. */
static void s_weights_as(rl_dtype dtype)
{
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", s_dir);
    rl_lm_config c;
    if (rl_lm_config_from_hf_json(path, &c))
        fail_msg("%s", rl_error_message());
    rl_lm *net = rl_lm_new(&c, RL_DEVICE_CPU);
    assert_non_null(net);
    assert_int_equal(rl_lm_init_random(net, 5, 0.02f), 0);
    snprintf(path, sizeof path, "%s/model.safetensors", s_dir);
    assert_int_equal(rl_safetensors_write_params(path, rl_lm_manifest(net), rl_lm_params(net),
                                                 dtype, NULL), 0);
    rl_lm_free(net);
}

static void s_weights(void) { s_weights_as(RL_BF16); }

/* The job of an LM recipe's model and data sections: job.yaml holds `yaml`. */
static rl_config *s_job(const char *yaml, int n, const char *const *over)
{
    const rl_config_section *const secs[] = {&rl_model_base_section, &rl_lm_model_section,
                                             &rl_lm_data_section, &rl_batch_section};
    rl_config *known = rl_config_schema_defaults(secs, 4, NULL, 0);
    char path[256];
    snprintf(path, sizeof path, "%s/job.yaml", s_dir);
    assert_int_equal(rl_file_write_atomic(path, yaml, strlen(yaml)), 0);
    rl_config *c = known ? rl_config_load_job_tree(known, path, n, over) : NULL;
    rl_config_free(known);
    if (!c)
        fail_msg("job: %s", rl_error_message());
    return c;
}

/* The job's model.init_from: <dir> with `more` YAML lines under model:. */
static rl_config *s_job_dir(const char *more, int n, const char *const *over)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml, "model:\n  init_from: %s\n%s", s_dir, more ? more : "");
    return s_job(yaml, n, over);
}

static void test_architecture_from_config_json(void **state)
{
    (void)state;
    s_config("qwen2", NULL);
    s_weights();
    s_write("tokenizer.json", "{}");
    /* an explicit key that agrees is fine; the rest come from config.json */
    rl_config *job = s_job_dir("  num_layers: 2\n", 0, NULL);
    if (rl_lm_hf_job_prepare(job))
        fail_msg("%s", rl_error_message());
    const rl_lm_model_config *m = rl_config_section_get(job, &rl_lm_model_section);
    assert_non_null(m);
    assert_int_equal(m->vocab_size, 40);
    assert_int_equal(m->hidden_size, 16);
    assert_int_equal(m->intermediate_size, 24);
    assert_int_equal(m->num_heads, 4);
    assert_int_equal(m->num_kv_heads, 2);
    assert_int_equal(m->max_seq_len, 64);
    assert_true(m->rope_theta == 1e6);
    assert_true((float)m->rms_norm_eps == 1e-5f);
    assert_int_equal(m->qkv_bias, 1); /* qwen2 */
    assert_int_equal(m->tie_word_embeddings, 1);
    assert_int_equal(m->eos_token_id, 3);
    const rl_lm_data_config *d = rl_config_section_get(job, &rl_lm_data_section);
    assert_non_null(d);
    char want[256];
    snprintf(want, sizeof want, "%s/tokenizer.json", s_dir);
    assert_string_equal(d->tokenizer, want);
    /* the model the job builds is the directory's, weights and all */
    assert_int_equal(rl_model_check_config(job), 0);
    rl_model *built = rl_model_build(job, 1);
    if (!built)
        fail_msg("build: %s", rl_error_message());
    rl_model *loaded = rl_model_load_dir(s_dir);
    if (!loaded)
        fail_msg("load_dir: %s", rl_error_message());
    assert_int_equal(rl_model_num_params(built), rl_model_num_params(loaded));
    assert_memory_equal(rl_model_params(built), rl_model_params(loaded),
                        sizeof(float) * (size_t)rl_model_num_params(built));
    rl_model_free(loaded);
    /* f16 weights load too (each within f16's rounding of the same init) */
    s_weights_as(RL_F16);
    loaded = rl_model_load_dir(s_dir);
    if (!loaded)
        fail_msg("load_dir (f16): %s", rl_error_message());
    for (int64_t i = 0; i < rl_model_num_params(built); i++) {
        float a = rl_model_params(built)[i], b = rl_model_params(loaded)[i];
        if (!(fabsf(a - b) <= fabsf(a) / 128 + 1e-6f))
            fail_msg("param %lld: bf16 %g, f16 %g", (long long)i, (double)a, (double)b);
    }
    rl_model_free(built);
    rl_model_free(loaded);
    rl_config_free(job);

    /* a key the job sets that disagrees: located, both values named */
    job = s_job_dir("  hidden_size: 32\n", 0, NULL);
    assert_int_equal(rl_lm_hf_job_prepare(job), RL_ECONFIG);
    snprintf(want, sizeof want, "job.yaml:3:16: model.hidden_size: 32 in the job, but "
             "%s/config.json has hidden_size = 16", s_dir);
    assert_msg_contains(rl_error_message(), want);
    rl_config_free(job);
    const char *over[] = {"model.qkv_bias=false"};
    job = s_job_dir(NULL, 1, over);
    assert_int_equal(rl_lm_hf_job_prepare(job), RL_ECONFIG);
    assert_msg_contains(rl_error_message(), "override model.qkv_bias=false: model.qkv_bias: false "
                        "in the job, but");
    assert_msg_contains(rl_error_message(), "has qkv_bias (qwen2: always; llama: attention_bias) = true");
    rl_config_free(job);
    const char *over2[] = {"model.rope_theta=10000"};
    job = s_job_dir(NULL, 1, over2);
    assert_int_equal(rl_lm_hf_job_prepare(job), RL_ECONFIG);
    assert_msg_contains(rl_error_message(), "model.rope_theta: 10000 in the job, but");
    assert_msg_contains(rl_error_message(), "has rope_theta = 1000000");
    rl_config_free(job);

    /* an explicit tokenizer wins; a directory without config.json is left alone */
    job = s_job("model:\n  init_from: /nonexistent/dir\ndata:\n  tokenizer: arith\n", 0, NULL);
    assert_int_equal(rl_lm_hf_job_prepare(job), 0);
    const rl_lm_model_config *m2 = rl_config_section_get(job, &rl_lm_model_section);
    assert_int_equal(m2->hidden_size, 128); /* the default */
    rl_config_free(job);
}

static void test_refusals(void **state)
{
    (void)state;
    char want[512];
    s_config("mistral", NULL);
    s_write("model.safetensors", "x");
    rl_config *job = s_job_dir(NULL, 0, NULL);
    assert_int_equal(rl_lm_hf_job_prepare(job), RL_ECONFIG);
    snprintf(want, sizeof want, "job.yaml:2:14: model.init_from: %s/config.json: key "
             "'model_type' = 'mistral' is not supported (expected 'qwen2' or 'llama')", s_dir);
    assert_msg_contains(rl_error_message(), want);
    rl_config_free(job);

    s_config("llama", "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0},");
    job = s_job_dir(NULL, 0, NULL);
    assert_int_equal(rl_lm_hf_job_prepare(job), RL_ECONFIG);
    assert_msg_contains(rl_error_message(), "key 'rope_scaling' is set (type 'llama3'): RoPE "
                        "scaling is not supported");
    rl_config_free(job);

    /* no tokenizer: refused unless the job names one; rlrt_tokenizer.json serves */
    s_config("llama", NULL);
    s_weights();
    job = s_job_dir(NULL, 0, NULL);
    assert_int_equal(rl_lm_hf_job_prepare(job), RL_ENOTFOUND);
    snprintf(want, sizeof want, "job.yaml:2:14: model.init_from: %s has no tokenizer.json (nor "
             "rlrt_tokenizer.json", s_dir);
    assert_msg_contains(rl_error_message(), want);
    assert_msg_contains(rl_error_message(), "or name a tokenizer with data.tokenizer");
    rl_config_free(job);
    s_write(RL_LM_RLRT_TOKENIZER, "{}");
    job = s_job_dir(NULL, 0, NULL);
    assert_int_equal(rl_lm_hf_job_prepare(job), 0);
    snprintf(want, sizeof want, "%s/%s", s_dir, RL_LM_RLRT_TOKENIZER);
    assert_string_equal(((const rl_lm_data_config *)rl_config_section_get(job, &rl_lm_data_section))->tokenizer,
                        want);
    assert_int_equal(((const rl_lm_model_config *)rl_config_section_get(job, &rl_lm_model_section))->qkv_bias, 0);
    rl_config_free(job);

    /* no weights */
    s_remove("model.safetensors");
    job = s_job_dir(NULL, 0, NULL);
    assert_int_equal(rl_lm_hf_job_prepare(job), RL_ENOTFOUND);
    assert_msg_contains(rl_error_message(), "no model.safetensors and no model.safetensors.index.json");
    rl_config_free(job);
}

static void test_model_path_alias(void **state)
{
    (void)state;
    s_config("qwen2", NULL);
    s_weights();
    s_write("tokenizer.json", "{}");
    char yaml[512], want[512];
    snprintf(yaml, sizeof yaml, "model:\n  path: %s\n", s_dir);
    rl_config *job = s_job(yaml, 0, NULL);
    assert_int_equal(rl_lm_hf_job_prepare(job), 0);
    const rl_model_base_config *b = rl_config_section_get(job, &rl_model_base_section);
    assert_string_equal(b->init_from, s_dir);
    assert_int_equal(((const rl_lm_model_config *)rl_config_section_get(job, &rl_lm_model_section))->hidden_size, 16);
    rl_config_free(job);
    snprintf(yaml, sizeof yaml, "model:\n  path: %s\n  init_from: /elsewhere\n", s_dir);
    job = s_job(yaml, 0, NULL);
    assert_int_equal(rl_lm_hf_job_prepare(job), RL_ECONFIG);
    snprintf(want, sizeof want, "job.yaml:2:9: model.path: '%s', but model.init_from is "
             "'/elsewhere'", s_dir);
    assert_msg_contains(rl_error_message(), want);
    rl_config_free(job);
}

/* The tiny model's views split over two shards with an index. */
static rl_lm *s_sharded(void)
{
    s_config("qwen2", NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", s_dir);
    rl_lm_config c;
    assert_int_equal(rl_lm_config_from_hf_json(path, &c), 0);
    rl_lm *net = rl_lm_new(&c, RL_DEVICE_CPU);
    assert_int_equal(rl_lm_init_random(net, 9, 0.5f), 0);
    const rl_param_manifest *m = rl_lm_manifest(net);
    rl_st_entry *e = calloc((size_t)m->count, sizeof *e);
    json_t *map = json_object();
    int n[2] = {0, 0};
    rl_st_entry *part[2] = {e, e + m->count / 2};
    for (int v = 0; v < m->count; v++) {
        int s = v >= m->count / 2;
        part[s][n[s]++] = (rl_st_entry){m->views[v].name, RL_F32, m->views[v].ndim, m->views[v].shape,
                                        rl_lm_params(net) + m->views[v].offset};
        json_object_set_new(map, m->views[v].name, json_string(s ? "b.safetensors" : "a.safetensors"));
    }
    snprintf(path, sizeof path, "%s/a.safetensors", s_dir);
    assert_int_equal(rl_safetensors_write(path, part[0], n[0], NULL), 0);
    snprintf(path, sizeof path, "%s/b.safetensors", s_dir);
    assert_int_equal(rl_safetensors_write(path, part[1], n[1], NULL), 0);
    json_t *index = json_pack("{s:{s:i}, s:o}", "metadata", "total_size", 1, "weight_map", map);
    snprintf(path, sizeof path, "%s/%s", s_dir, RL_ST_INDEX_FILE);
    assert_int_equal(json_dump_file(index, path, 0), 0);
    json_decref(index);
    free(e);
    return net;
}

static void s_index_edit(const char *tensor, const char *shard)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", s_dir, RL_ST_INDEX_FILE);
    json_t *index = json_load_file(path, 0, NULL);
    json_t *map = json_object_get(index, "weight_map");
    if (shard)
        json_object_set_new(map, tensor, json_string(shard));
    else
        json_object_del(map, tensor);
    assert_int_equal(json_dump_file(index, path, 0), 0);
    json_decref(index);
}

static void test_sharded_weights(void **state)
{
    (void)state;
    rl_lm *net = s_sharded();
    const rl_param_manifest *m = rl_lm_manifest(net);
    assert_int_equal(rl_safetensors_dir_check(s_dir), 0);
    float *got = calloc((size_t)m->total, sizeof(float));
    if (rl_safetensors_dir_read_params(s_dir, m, got))
        fail_msg("%s", rl_error_message());
    assert_memory_equal(got, rl_lm_params(net), sizeof(float) * (size_t)m->total);
    /* the lm kind loads it too, and the job's check passes */
    rl_model *lm = rl_model_load_dir(s_dir);
    if (!lm)
        fail_msg("%s", rl_error_message());
    assert_memory_equal(rl_model_params(lm), rl_lm_params(net), sizeof(float) * (size_t)m->total);
    rl_model_free(lm);

    char want[512];
    /* a tensor the index maps to the wrong shard */
    const char *first = m->views[0].name; /* in a.safetensors */
    s_index_edit(first, "b.safetensors");
    assert_int_equal(rl_safetensors_dir_check(s_dir), RL_ENOTFOUND);
    snprintf(want, sizeof want, "the index puts tensor '%s' in shard 'b.safetensors', which does "
             "not hold it", first);
    assert_msg_contains(rl_error_message(), want);
    /* a shard's tensor the index does not list */
    s_index_edit(first, NULL);
    assert_int_equal(rl_safetensors_dir_check(s_dir), RL_EPROTO);
    snprintf(want, sizeof want, "shard 'a.safetensors' holds tensor '%s', which the index does "
             "not list", first);
    assert_msg_contains(rl_error_message(), want);
    s_index_edit(first, "../a.safetensors");
    assert_int_equal(rl_safetensors_dir_check(s_dir), RL_EPROTO);
    assert_msg_contains(rl_error_message(), "must be a file name in the directory, got ../a.safetensors");
    s_index_edit(first, "a.safetensors");
    assert_int_equal(rl_safetensors_dir_read_params(s_dir, m, got), 0);
    /* a missing shard: named, with its path and a tensor it holds */
    s_remove("b.safetensors");
    assert_int_equal(rl_safetensors_dir_check(s_dir), RL_ENOTFOUND);
    snprintf(want, sizeof want, "%s/model.safetensors.index.json: shard 'b.safetensors' is "
             "missing (%s/b.safetensors: No such file or directory); the index puts %d tensors "
             "there, e.g. '", s_dir, s_dir, m->count - m->count / 2);
    assert_msg_contains(rl_error_message(), want);
    assert_int_equal(rl_safetensors_dir_read_params(s_dir, m, got), RL_ENOTFOUND);
    /* ...and the job that starts from it is refused up front, at its key */
    s_write("tokenizer.json", "{}");
    rl_config *job = s_job_dir(NULL, 0, NULL);
    assert_int_equal(rl_lm_hf_job_prepare(job), RL_ENOTFOUND);
    assert_msg_contains(rl_error_message(), "job.yaml:2:14: model.init_from: ");
    assert_msg_contains(rl_error_message(), "shard 'b.safetensors' is missing");
    rl_config_free(job);
    free(got);
    rl_lm_free(net);
}

/* A BPE tokenizer.json (the committed Qwen2-style golden) in the directory. */
static void s_tokenizer(void)
{
    size_t len;
    char *text = rl_file_read_all("tests/golden/nn_tok/qwen2.json", &len);
    assert_non_null(text);
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer.json", s_dir);
    assert_int_equal(rl_file_write_atomic(path, text, len), 0);
    free(text);
}

static rl_tokenizer *s_open_tok(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer.json", s_dir);
    return rl_task_tokenizer_open(path);
}

static void test_tokenizer_special_tokens(void **state)
{
    (void)state;
    s_tokenizer();
    rl_tokenizer *t = s_open_tok();
    if (!t)
        fail_msg("%s", rl_error_message());
    int32_t eot = rl_tokenizer_token_to_id(t, "<|endoftext|>"), think = rl_tokenizer_token_to_id(t, "<think>"),
            end = rl_tokenizer_token_to_id(t, "</think>");
    assert_true(eot >= 0 && think >= 0 && end >= 0);
    /* without the files: the guess, and PAD is EOS */
    assert_int_equal(rl_tokenizer_special_id(t, RL_TOK_EOS), eot);
    rl_tokenizer_free(t);
    /* tokenizer_config.json: an added-token object, a string, a huge integer */
    s_write("tokenizer_config.json",
            "{\"model_max_length\": 1000000000000000019884624838656,"
            " \"eos_token\": {\"__type\": \"AddedToken\", \"content\": \"<think>\"},"
            " \"bos_token\": \"</think>\", \"pad_token\": null}");
    t = s_open_tok();
    if (!t)
        fail_msg("%s", rl_error_message());
    assert_int_equal(rl_tokenizer_special_id(t, RL_TOK_EOS), think);
    assert_int_equal(rl_tokenizer_special_id(t, RL_TOK_BOS), end);
    assert_int_equal(rl_tokenizer_special_id(t, RL_TOK_PAD), think); /* none: EOS */
    rl_tokenizer_free(t);
    /* generation_config.json where tokenizer_config.json is silent */
    char gen[128];
    snprintf(gen, sizeof gen, "{\"eos_token_id\": [%d, %d], \"pad_token_id\": %d}", end, think, eot);
    s_write("tokenizer_config.json", "{\"bos_token\": null}");
    s_write("generation_config.json", gen);
    t = s_open_tok();
    if (!t)
        fail_msg("%s", rl_error_message());
    assert_int_equal(rl_tokenizer_special_id(t, RL_TOK_EOS), end);
    assert_int_equal(rl_tokenizer_special_id(t, RL_TOK_PAD), eot);
    rl_tokenizer_free(t);
    /* a token the tokenizer does not have, an id outside it */
    char want[512];
    s_write("tokenizer_config.json", "{\"eos_token\": \"<|im_end|>\"}");
    assert_null(s_open_tok());
    snprintf(want, sizeof want, "%s/tokenizer_config.json: eos_token '<|im_end|>' is not a token "
             "of the tokenizer", s_dir);
    assert_msg_contains(rl_error_message(), want);
    s_write("tokenizer_config.json", "{}");
    s_write("generation_config.json", "{\"eos_token_id\": 999999}");
    assert_null(s_open_tok());
    assert_msg_contains(rl_error_message(), "generation_config.json: eos_token_id 999999 is outside "
                        "the tokenizer's");
    s_write("generation_config.json", "{\"pad_token_id\": \"x\"}");
    assert_null(s_open_tok());
    assert_msg_contains(rl_error_message(), "'pad_token_id' must be a token id or a list of them");
}

static void test_save_bf16_for_transformers(void **state)
{
    (void)state;
    /* the checkpoint transformers wrote loads as an lm model */
    rl_model *m = rl_model_load_dir("tests/golden/nn_hf");
    if (!m)
        fail_msg("%s", rl_error_message());
    assert_string_equal(rl_model_kind_name(m), "lm");
    char out[128], path[256];
    snprintf(out, sizeof out, "%s/final", s_dir);
    assert_int_equal(rl_model_save_as(m, out, RL_BF16), 0);
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    rl_safetensors *st = rl_safetensors_open(path);
    assert_non_null(st);
    const char *fmt = rl_safetensors_metadata(st, "format");
    assert_non_null(fmt);
    assert_string_equal(fmt, "pt");
    assert_int_equal(rl_safetensors_dtype(st, 0), RL_BF16);
    rl_safetensors_close(st);
    snprintf(path, sizeof path, "%s/config.json", out);
    json_t *cfg = json_load_file(path, 0, NULL);
    assert_non_null(cfg);
    assert_string_equal(json_string_value(json_object_get(cfg, "torch_dtype")), "bfloat16");
    assert_string_equal(json_string_value(json_object_get(cfg, "model_type")), "qwen2");
    json_decref(cfg);
    /* back in: each weight is its bf16 rounding */
    rl_model *back = rl_model_load_dir(out);
    if (!back)
        fail_msg("%s", rl_error_message());
    const float *a = rl_model_params(m), *b = rl_model_params(back);
    for (int64_t i = 0; i < rl_model_num_params(m); i++)
        if (!(fabsf(a[i] - b[i]) <= fabsf(a[i]) * (1.0f / 256)))
            fail_msg("param %lld: %g saved as bf16 came back as %g", (long long)i, (double)a[i],
                     (double)b[i]);
    rl_model_free(back);
    /* f32: the metadata too, and exact */
    assert_int_equal(rl_model_save(m, out), 0);
    back = rl_model_load_dir(out);
    assert_non_null(back);
    assert_memory_equal(rl_model_params(back), a, sizeof(float) * (size_t)rl_model_num_params(m));
    rl_model_free(back);
    assert_int_equal(rl_model_save_as(m, out, RL_I32), RL_EDTYPE);
    rl_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_architecture_from_config_json, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_model_path_alias, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_sharded_weights, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_tokenizer_special_tokens, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_save_bf16_for_transformers, s_setup, s_teardown),
    };
    return cmocka_run_group_tests_name("nn_hf_dir", tests, NULL, NULL);
}
