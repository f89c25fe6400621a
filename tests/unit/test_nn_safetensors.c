/* test_nn_safetensors.c — safetensors reader/writer, parameter load/save and
 * Hugging Face config.json parsing.
 *
 * Independent references: files written by the Python `safetensors` package
 * and a tiny Qwen2 checkpoint written by `transformers`
 * (tests/reference/gen_nn_io.py); a file written by librlrt that the
 * generator checked with `safetensors`; and one hand-built header per
 * validation rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/common/fuzz_replay.h"
#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "rlrt/nn/params.h"
#include "common/nn/engine/safetensors.h"
#include "common/nn/models/lm/lm_config.h"
#include "rlrt/runtime/collective.h"
#include "tests/common/golden.h"

static char s_tmpdir[256];

static int s_setup(void **state)
{
    (void)state;
    snprintf(s_tmpdir, sizeof s_tmpdir, "/tmp/rl_test_st_XXXXXX");
    return mkdtemp(s_tmpdir) ? 0 : -1;
}

static int s_teardown(void **state)
{
    (void)state;
    DIR *d = opendir(s_tmpdir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        snprintf(p, sizeof p, "%s/%s", s_tmpdir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(s_tmpdir);
    return 0;
}

static uint8_t *s_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

/* ---- interop with the Python safetensors package ---------------------------------- */

static void test_read_python_file(void **state)
{
    (void)state;
    rl_safetensors *st = rl_safetensors_open("tests/golden/nn_io/st_python.safetensors");
    assert_non_null(st);
    rl_golden *g = rl_golden_load("tests/golden/nn_io/st_python_expected.safetensors");
    assert_non_null(g);
    assert_int_equal(rl_safetensors_count(st), rl_golden_count(g));
    assert_string_equal(rl_safetensors_metadata(st, "format"), "pt");
    assert_null(rl_safetensors_metadata(st, "absent"));
    for (int k = 0; k < rl_golden_count(g); k++) {
        const rl_golden_array *e = rl_golden_at(g, k);
        int i = rl_safetensors_find(st, e->name);
        assert_true(i >= 0);
        const rl_st_tensor *t = rl_safetensors_tensor(st, i);
        /* golden.py stores a 0-d array as shape [1] (np.ascontiguousarray) */
        if (strcmp(e->name, "scalar") != 0) {
            assert_int_equal(t->ndim, e->ndim);
            for (int d = 0; d < e->ndim; d++)
                assert_int_equal(t->shape[d], e->shape[d]);
        }
        assert_int_equal(t->numel, e->numel);
        if (e->dtype == RL_GOLDEN_F64) {
            float *got = malloc(sizeof(float) * (size_t)(t->numel + 1));
            double *want = rl_golden_f64(g, e->name, NULL);
            assert_int_equal(rl_safetensors_read_f32(st, i, got, t->numel), RL_OK);
            /* bf16/f16 -> f32 is exact; f64 -> f32 rounds */
            double tol = t->dtype == RL_F64 ? 1e-7 : 0.0;
            assert_int_equal(rl_check_close_f32(e->name, got, want, t->numel, 0, tol), 0);
            free(got);
            free(want);
        } else {
            int64_t *want = rl_golden_i64(g, e->name, NULL);
            for (int64_t j = 0; j < t->numel; j++) {
                int64_t v = 0;
                const uint8_t *p = t->data;
                switch (t->dtype) {
                case RL_I64: memcpy(&v, p + 8 * j, 8); break;
                case RL_I32: { int32_t x; memcpy(&x, p + 4 * j, 4); v = x; } break;
                case RL_U8:
                case RL_BOOL: v = p[j]; break;
                default: fail_msg("unexpected dtype for %s", e->name);
                }
                assert_int_equal(v, want[j]);
            }
            free(want);
        }
    }
    /* dtypes as the package wrote them */
    assert_int_equal(rl_safetensors_dtype(st, rl_safetensors_find(st, "b.bf16")), RL_BF16);
    assert_int_equal(rl_safetensors_dtype(st, rl_safetensors_find(st, "c.f16")), RL_F16);
    assert_int_equal(rl_safetensors_dtype(st, rl_safetensors_find(st, "h.bool")), RL_BOOL);
    assert_int_equal(rl_safetensors_ndim(st, rl_safetensors_find(st, "scalar")), 0);
    assert_int_equal(rl_safetensors_numel(st, rl_safetensors_find(st, "empty")), 0);
    /* integer tensors are not floats */
    float x[3];
    assert_int_equal(rl_safetensors_read_f32(st, rl_safetensors_find(st, "e.i64"), x, 3),
                     RL_EDTYPE);
    assert_non_null(strstr(rl_error_message(), "e.i64"));
    rl_golden_free(g);
    rl_safetensors_close(st);
}

/* The views gen_nn_io.py:c_written_params() describes. */
static rl_param_manifest *s_c_manifest(float **params)
{
    rl_param_manifest *m = rl_param_manifest_new();
    int64_t a[2] = {2, 3}, b[1] = {3}, c[1] = {4};
    rl_param_manifest_add(m, "w", 2, a);
    rl_param_manifest_add(m, "norm", 1, b);
    rl_param_manifest_add(m, "big", 1, c);
    float *p = rl_param_buffer_new(m->total);
    for (int i = 0; i < 6; i++)
        p[i] = (float)(i * 0.25 - 0.5);
    for (int i = 0; i < 3; i++)
        p[6 + i] = (float)(1 + i / 8.0);
    p[9] = 1e30f;
    p[10] = -1e-30f;
    p[11] = 65504.0f;
    p[12] = 3.14159f;
    *params = p;
    return m;
}

/* gen_nn_io.py verified with `safetensors` that this writer's output reads
 * back with the same values, and committed the file: the writer must keep
 * producing exactly those bytes. */
static void test_write_matches_golden(void **state)
{
    (void)state;
    float *p;
    rl_param_manifest *m = s_c_manifest(&p);
    char path[512];
    snprintf(path, sizeof path, "%s/c.safetensors", s_tmpdir);
    assert_int_equal(rl_safetensors_write_params(path, m, p, RL_F32, NULL), RL_OK);
    size_t la, lb;
    uint8_t *a = s_read_file(path, &la);
    uint8_t *b = s_read_file("tests/golden/nn_io/st_from_c.safetensors", &lb);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    /* header padded so the data starts 8-byte aligned */
    uint64_t hlen;
    memcpy(&hlen, a, 8);
    assert_int_equal((8 + hlen) % 8, 0);
    free(a);
    free(b);
    /* no temporary file left behind */
    DIR *d = opendir(s_tmpdir);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)))
        files += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(files, 1);
    rl_param_buffer_free(p);
    rl_param_manifest_free(m);
}

static void test_params_roundtrip_dtypes(void **state)
{
    (void)state;
    float *p;
    rl_param_manifest *m = s_c_manifest(&p);
    float *q = rl_param_buffer_new(m->total);
    char path[512];
    snprintf(path, sizeof path, "%s/rt.safetensors", s_tmpdir);
    rl_dtype dts[4] = {RL_F32, RL_BF16, RL_F16, RL_F64};
    json_t *meta = json_pack("{s:s}", "origin", "test");
    for (int k = 0; k < 4; k++) {
        assert_int_equal(rl_safetensors_write_params(path, m, p, dts[k], meta), RL_OK);
        memset(q, 0, sizeof(float) * (size_t)m->total);
        assert_int_equal(rl_safetensors_read_params(path, m, q), RL_OK);
        for (int64_t i = 0; i < m->total; i++) {
            float want = p[i];
            if (dts[k] == RL_BF16)
                want = rl_bf16_to_f32(rl_f32_to_bf16(p[i]));
            else if (dts[k] == RL_F16)
                want = rl_f16_to_f32(rl_f32_to_f16(p[i]));
            assert_memory_equal(&q[i], &want, sizeof(float));
        }
        rl_safetensors *st = rl_safetensors_open(path);
        assert_non_null(st);
        assert_string_equal(rl_safetensors_metadata(st, "origin"), "test");
        assert_int_equal(rl_safetensors_dtype(st, 0), dts[k]);
        rl_safetensors_close(st);
    }
    json_decref(meta);
    assert_int_equal(rl_safetensors_write_params(path, m, p, RL_I32, NULL), RL_EDTYPE);
    json_t *bad = json_pack("{s:i}", "n", 3);
    assert_int_equal(rl_safetensors_write_params(path, m, p, RL_F32, bad), RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "'n'"));
    json_decref(bad);
    rl_param_buffer_free(q);
    rl_param_buffer_free(p);
    rl_param_manifest_free(m);
}

static void test_generic_writer_roundtrip(void **state)
{
    (void)state;
    double f64[3] = {1.5, -2.25, 1e300};
    int64_t i64[2] = {-7, INT64_MAX};
    int32_t i32[4] = {1, 2, 3, -4};
    uint8_t u8[5] = {0, 1, 2, 254, 255}, bo[2] = {1, 0};
    int8_t i8[3] = {-128, 0, 127};
    uint16_t bf[3] = {rl_f32_to_bf16(1.0f), rl_f32_to_bf16(-3.5f), rl_f32_to_bf16(INFINITY)};
    float sc = 42.0f;
    int64_t s3[1] = {3}, s2[1] = {2}, s22[2] = {2, 2}, s5[1] = {5}, s0[2] = {0, 4};
    rl_st_entry e[] = {
        {"u8", RL_U8, 1, s5, u8},     {"bf", RL_BF16, 1, s3, bf}, {"f64", RL_F64, 1, s3, f64},
        {"i64", RL_I64, 1, s2, i64},  {"i32", RL_I32, 2, s22, i32}, {"bool", RL_BOOL, 1, s2, bo},
        {"i8", RL_I8, 1, s3, i8},     {"scalar", RL_F32, 0, NULL, &sc},
        {"empty", RL_F32, 2, s0, NULL},
    };
    int n = (int)(sizeof e / sizeof e[0]);
    char path[512];
    snprintf(path, sizeof path, "%s/gen.safetensors", s_tmpdir);
    assert_int_equal(rl_safetensors_write(path, e, n, NULL), RL_OK);
    rl_safetensors *st = rl_safetensors_open(path);
    assert_non_null(st);
    assert_int_equal(rl_safetensors_count(st), n);
    assert_null(rl_safetensors_metadata_json(st));
    for (int k = 0; k < n; k++) {
        int i = rl_safetensors_find(st, e[k].name);
        assert_true(i >= 0);
        const rl_st_tensor *t = rl_safetensors_tensor(st, i);
        assert_int_equal(t->dtype, e[k].dtype);
        assert_int_equal(t->ndim, e[k].ndim);
        size_t esz = rl_dtype_size(e[k].dtype);
        /* natural alignment of every tensor (writer orders by dtype size) */
        assert_int_equal((uintptr_t)t->data % esz, 0);
        if (t->nbytes)
            assert_memory_equal(t->data, e[k].data, t->nbytes);
    }
    rl_safetensors_close(st);
    /* writer rejects bad input, naming it */
    rl_st_entry dup[2] = {{"x", RL_F32, 0, NULL, &sc}, {"x", RL_F64, 0, NULL, f64}};
    assert_int_equal(rl_safetensors_write(path, dup, 2, NULL), RL_EEXIST);
    assert_non_null(strstr(rl_error_message(), "'x'"));
    rl_st_entry res[1] = {{"__metadata__", RL_F32, 0, NULL, &sc}};
    assert_int_equal(rl_safetensors_write(path, res, 1, NULL), RL_EINVAL);
    int64_t neg[1] = {-1};
    rl_st_entry ng[1] = {{"neg", RL_F32, 1, neg, &sc}};
    assert_int_equal(rl_safetensors_write(path, ng, 1, NULL), RL_ESHAPE);
    assert_non_null(strstr(rl_error_message(), "'neg'"));
    /* the failed writes left the good file intact */
    st = rl_safetensors_open(path);
    assert_non_null(st);
    assert_int_equal(rl_safetensors_count(st), n);
    rl_safetensors_close(st);
    /* a directory that does not exist: clean error */
    assert_int_equal(rl_safetensors_write("/nonexistent-dir/x.safetensors", e, 1, NULL), RL_EIO);
    assert_non_null(strstr(rl_error_message(), "/nonexistent-dir/x.safetensors"));
}

/* ---- header validation ------------------------------------------------------------- */

/* File image: 8-byte length, header text, then `ndata` bytes of data. */
static uint8_t *s_image(const char *header, size_t ndata, size_t *len)
{
    size_t h = strlen(header);
    *len = 8 + h + ndata;
    uint8_t *b = calloc(1, *len + 1);
    uint64_t hl = h;
    memcpy(b, &hl, 8);
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < ndata; i++)
        b[8 + h + i] = (uint8_t)i;
    return b;
}

static void s_expect_bad(const char *header, size_t ndata, int code, const char *needle1,
                         const char *needle2)
{
    size_t len;
    uint8_t *img = s_image(header, ndata, &len);
    rl_error_clear();
    rl_safetensors *st = rl_safetensors_from_memory(img, len, "hdr.safetensors");
    if (st)
        fail_msg("header accepted but should fail: %s", header);
    const char *msg = rl_error_message();
    if (code && rl_error_code() != code)
        fail_msg("header %s: code %s, want %s (%s)", header, rl_status_name(rl_error_code()),
                 rl_status_name(code), msg);
    if (!strstr(msg, "hdr.safetensors") || (needle1 && !strstr(msg, needle1)) ||
        (needle2 && !strstr(msg, needle2)))
        fail_msg("header %s: message '%s' lacks '%s' / '%s'", header, msg,
                 needle1 ? needle1 : "", needle2 ? needle2 : "");
    free(img);
}

#define T1(x) "{\"t\":" x "}"

static void test_header_validation(void **state)
{
    (void)state;
    /* a good one first, so the failures below are about the one change */
    size_t len;
    uint8_t *ok = s_image(T1("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"), 8, &len);
    rl_safetensors *st = rl_safetensors_from_memory(ok, len, "ok");
    assert_non_null(st);
    rl_safetensors_close(st);
    free(ok);

    /* JSON level */
    s_expect_bad("{\"t\":", 0, RL_EPROTO, "not valid JSON", NULL);
    s_expect_bad("[1,2]", 0, RL_EPROTO, "array", "expected an object");
    s_expect_bad("{\"a\":{},\"a\":{}}", 0, RL_EPROTO, "not valid JSON", "duplicate");
    s_expect_bad("{\"t\":{}} x", 0, RL_EPROTO, "not valid JSON", NULL);
    /* entry shape */
    s_expect_bad(T1("3"), 0, RL_EPROTO, "'t'", "integer");
    s_expect_bad(T1("{\"shape\":[1],\"data_offsets\":[0,4]}"), 4, RL_EPROTO, "'t'",
                 "missing field 'dtype'");
    s_expect_bad(T1("{\"dtype\":\"F32\",\"data_offsets\":[0,4]}"), 4, RL_EPROTO, "'t'",
                 "missing field 'shape'");
    s_expect_bad(T1("{\"dtype\":\"F32\",\"shape\":[1]}"), 4, RL_EPROTO, "'t'",
                 "missing field 'data_offsets'");
    s_expect_bad(T1("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}"), 4,
                 RL_EPROTO, "'t'", "unknown field 'x'");
    /* dtype */
    s_expect_bad(T1("{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}"), 4, RL_EPROTO,
                 "field 'dtype'", "expected a string");
    s_expect_bad(T1("{\"dtype\":\"I16\",\"shape\":[1],\"data_offsets\":[0,2]}"), 2, RL_EDTYPE,
                 "'t'", "unsupported dtype 'I16'");
    s_expect_bad(T1("{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}"), 4, RL_EDTYPE,
                 "'t'", "'f32'");
    s_expect_bad(T1("{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,1]}"), 1,
                 RL_EDTYPE, "'t'", "F8_E4M3");
    /* shape */
    s_expect_bad(T1("{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}"), 8, RL_EPROTO,
                 "field 'shape'", "expected an array");
    s_expect_bad(T1("{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}"), 8, RL_EPROTO,
                 "field 'shape'[0]", "real");
    s_expect_bad(T1("{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}"), 8, RL_ESHAPE,
                 "field 'shape'[0]", "negative");
    s_expect_bad(T1("{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}"),
                 4, RL_ESHAPE, "'t'", "9 dims");
    s_expect_bad(T1("{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}"),
                 4, RL_ERANGE, "'t'", "overflows");
    s_expect_bad(T1("{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,4]}"),
                 4, RL_ERANGE, "'t'", "byte size");
    /* data_offsets */
    s_expect_bad(T1("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":\"0\"}"), 4, RL_EPROTO,
                 "field 'data_offsets'", "string");
    s_expect_bad(T1("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}"), 8, RL_EPROTO,
                 "field 'data_offsets'", "3 elements");
    s_expect_bad(T1("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]}"), 4,
                 RL_EPROTO, "field 'data_offsets'[1]", "string");
    s_expect_bad(T1("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}"), 4, RL_ERANGE,
                 "field 'data_offsets'[0]", "negative");
    s_expect_bad(T1("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}"), 4, RL_ERANGE,
                 "'t'", "end before begin");
    s_expect_bad(T1("{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}"), 8, RL_ERANGE,
                 "'t'", "exceeds the data section");
    s_expect_bad(T1("{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}"), 8, RL_ESHAPE,
                 "'t'", "needs 12");
    /* layout of the data section */
    s_expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                 12, RL_EPROTO, "'b'", "overlaps tensor 'a'");
    s_expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                 12, RL_EPROTO, "'b'", "gap");
    s_expect_bad(T1("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}"), 8, RL_EPROTO,
                 "'t'", "gap");
    s_expect_bad(T1("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}"), 8, RL_EPROTO,
                 "cover 4 bytes", "has 8");
    /* metadata and names */
    s_expect_bad("{\"__metadata__\":[\"x\"]}", 0, RL_EPROTO, "'__metadata__'", "array");
    s_expect_bad("{\"__metadata__\":{\"k\":1}}", 0, RL_EPROTO, "'__metadata__'", "'k'");
    s_expect_bad("{\"\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0, RL_EPROTO,
                 "empty name", NULL);
}

static void test_length_field_and_truncation(void **state)
{
    (void)state;
    uint8_t tiny[5] = {1, 2, 3, 4, 5};
    assert_null(rl_safetensors_from_memory(tiny, 5, "tiny"));
    assert_non_null(strstr(rl_error_message(), "truncated"));
    uint8_t zero[8] = {0};
    assert_null(rl_safetensors_from_memory(zero, 8, "zero"));
    assert_non_null(strstr(rl_error_message(), "header length is 0"));
    uint8_t huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
    assert_null(rl_safetensors_from_memory(huge, 16, "huge"));
    assert_non_null(strstr(rl_error_message(), "limit"));
    uint8_t longer[16] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    assert_null(rl_safetensors_from_memory(longer, 16, "longer"));
    assert_non_null(strstr(rl_error_message(), "header length 100 exceeds"));
    /* every prefix of a real file fails cleanly (the full file succeeds) */
    size_t len;
    uint8_t *full = s_read_file("tests/golden/nn_io/st_python.safetensors", &len);
    assert_non_null(full);
    for (size_t k = 0; k < len; k++) {
        uint8_t *cut = malloc(k + 1); /* exact-size copy: ASan sees any over-read */
        memcpy(cut, full, k);
        rl_safetensors *st = rl_safetensors_from_memory(cut, k, "cut");
        if (st)
            fail_msg("prefix of %zu/%zu bytes accepted", k, len);
        free(cut);
    }
    rl_safetensors *st = rl_safetensors_from_memory(full, len, "full");
    assert_non_null(st);
    rl_safetensors_close(st);
    /* a truncated file on disk: error names the path */
    char path[512];
    snprintf(path, sizeof path, "%s/trunc.safetensors", s_tmpdir);
    FILE *f = fopen(path, "wb");
    fwrite(full, 1, len - 3, f);
    fclose(f);
    assert_null(rl_safetensors_open(path));
    assert_non_null(strstr(rl_error_message(), "trunc.safetensors"));
    assert_true(rl_safetensors_read_params(path, NULL, NULL) < 0);
    assert_non_null(strstr(rl_error_message(), "trunc.safetensors"));
    free(full);
    assert_null(rl_safetensors_open("/nonexistent/x.safetensors"));
    assert_int_equal(rl_error_code(), RL_ENOTFOUND);
    /* empty file */
    snprintf(path, sizeof path, "%s/empty.safetensors", s_tmpdir);
    f = fopen(path, "wb");
    fclose(f);
    assert_null(rl_safetensors_open(path));
    assert_non_null(strstr(rl_error_message(), "truncated"));
}

/* Every input the fuzzer found interesting enough to keep, and the
 * hand-made edge cases, must still be handled without a crash (ASan build:
 * without any invalid access); float tensors of a file that opens convert.
 * Inputs named by fuzz/gen_regressions.py carry the expected outcome:
 * accept-* opens, reject-* is refused with a message. */
static void s_replay_st(const char *name, const uint8_t *b, size_t len, void *ctx)
{
    (void)ctx;
    rl_error_clear();
    rl_safetensors *st = rl_safetensors_from_memory(b, len, name);
    for (int i = 0; st && i < rl_safetensors_count(st); i++) {
        const rl_st_tensor *t = rl_safetensors_tensor(st, i);
        if (t->dtype == RL_F32 || t->dtype == RL_BF16 || t->dtype == RL_F16 ||
            t->dtype == RL_F64) {
            float *out = malloc(sizeof(float) * (size_t)(t->numel + 1));
            assert_int_equal(rl_safetensors_read_f32(st, i, out, t->numel), RL_OK);
            free(out);
        }
    }
    if (!strncmp(name, "accept-", 7) && !st)
        fail_msg("%s: expected to open, got %s", name, rl_error_message());
    if (!strncmp(name, "reject-", 7) && (st || rl_error_message()[0] == 0))
        fail_msg("%s: expected to be refused with a message", name);
    rl_safetensors_close(st);
}

static void test_fuzz_regressions(void **state)
{
    (void)state;
    assert_true(rl_fuzz_replay("fuzz_safetensors", s_replay_st, NULL) > 0);
}

/* ---- Hugging Face config.json + model.safetensors ------------------------------------ */

static void s_add(rl_param_manifest *m, const char *name, int64_t a, int64_t b)
{
    int64_t s[2] = {a, b};
    assert_true(rl_param_manifest_add(m, name, b ? 2 : 1, s) >= 0);
}

/* HF layout of a Llama/Qwen2 decoder: Linear weights are [out, in]. */
static rl_param_manifest *s_hf_manifest(const rl_lm_config *c)
{
    rl_param_manifest *m = rl_param_manifest_new();
    int hd = c->hidden_size / c->num_heads, kv = c->num_kv_heads * hd;
    char n[160];
    s_add(m, "model.embed_tokens.weight", c->vocab_size, c->hidden_size);
    for (int l = 0; l < c->num_layers; l++) {
#define L(x) (snprintf(n, sizeof n, "model.layers.%d.%s", l, x), n)
        s_add(m, L("input_layernorm.weight"), c->hidden_size, 0);
        s_add(m, L("self_attn.q_proj.weight"), c->hidden_size, c->hidden_size);
        s_add(m, L("self_attn.k_proj.weight"), kv, c->hidden_size);
        s_add(m, L("self_attn.v_proj.weight"), kv, c->hidden_size);
        if (c->qkv_bias) {
            s_add(m, L("self_attn.q_proj.bias"), c->hidden_size, 0);
            s_add(m, L("self_attn.k_proj.bias"), kv, 0);
            s_add(m, L("self_attn.v_proj.bias"), kv, 0);
        }
        s_add(m, L("self_attn.o_proj.weight"), c->hidden_size, c->hidden_size);
        s_add(m, L("post_attention_layernorm.weight"), c->hidden_size, 0);
        s_add(m, L("mlp.gate_proj.weight"), c->intermediate_size, c->hidden_size);
        s_add(m, L("mlp.up_proj.weight"), c->intermediate_size, c->hidden_size);
        s_add(m, L("mlp.down_proj.weight"), c->hidden_size, c->intermediate_size);
#undef L
    }
    s_add(m, "model.norm.weight", c->hidden_size, 0);
    if (!c->tie_word_embeddings)
        s_add(m, "lm_head.weight", c->vocab_size, c->hidden_size);
    return m;
}

static void test_hf_qwen2_checkpoint(void **state)
{
    (void)state;
    rl_lm_config c;
    assert_int_equal(rl_lm_config_from_hf_json("tests/golden/nn_hf/config.json", &c), RL_OK);
    assert_int_equal(c.vocab_size, 97);
    assert_int_equal(c.hidden_size, 64);
    assert_int_equal(c.intermediate_size, 128);
    assert_int_equal(c.num_layers, 2);
    assert_int_equal(c.num_heads, 4);
    assert_int_equal(c.num_kv_heads, 2);
    assert_int_equal(c.max_seq_len, 128);
    assert_float_equal(c.rope_theta, 10000.0f, 0);
    assert_float_equal(c.rms_norm_eps, 1e-6f, 0);
    assert_int_equal(c.tie_word_embeddings, 0);
    assert_int_equal(c.qkv_bias, 1);
    assert_int_equal(c.value_head, 0);
    assert_int_equal(c.bos_token_id, 1);
    assert_int_equal(c.eos_token_id, 2); /* the list [2, 3]: first */
    assert_int_equal(c.pad_token_id, 0);

    rl_param_manifest *m = s_hf_manifest(&c);
    float *p = rl_param_buffer_new(m->total);
    assert_int_equal(rl_safetensors_read_params("tests/golden/nn_hf/model.safetensors", m, p),
                     RL_OK);
    rl_golden *g = rl_golden_load("tests/golden/nn_hf/param_stats.safetensors");
    assert_non_null(g);
    assert_int_equal(rl_golden_count(g), 3 * m->count);
    for (int i = 0; i < m->count; i++) {
        const rl_param_view *v = &m->views[i];
        char key[200];
        snprintf(key, sizeof key, "%s.shape", v->name);
        int64_t k;
        int64_t *shape = rl_golden_i64(g, key, &k);
        assert_int_equal(k, v->ndim);
        for (int d = 0; d < v->ndim; d++)
            assert_int_equal(shape[d], v->shape[d]);
        free(shape);
        snprintf(key, sizeof key, "%s.head", v->name);
        double *head = rl_golden_f64(g, key, &k);
        assert_int_equal(rl_check_close_f32(key, p + v->offset, head, k, 0, 0), 0);
        free(head);
        double sum = 0;
        for (int64_t j = 0; j < v->numel; j++)
            sum += p[v->offset + j];
        snprintf(key, sizeof key, "%s.sum", v->name);
        double want = rl_golden_scalar(g, key);
        assert_int_equal(rl_check_close_f64(key, &sum, &want, 1, 1e-9, 1e-12), 0);
    }
    rl_golden_free(g);

    /* FSDP shards: every rank's range equals the slice of the full load */
    rl_safetensors *mf = rl_safetensors_open("tests/golden/nn_hf/model.safetensors");
    assert_non_null(mf);
    for (int world = 1; world <= 5; world += 2) {
        for (int r = 0; r < world; r++) {
            int64_t lo, hi;
            rl_shard_range(m->total, world, r, &lo, &hi);
            float *sh = malloc(sizeof(float) * (size_t)(hi - lo + 1));
            assert_int_equal(rl_safetensors_load_params_range(mf, m, lo, hi, sh), RL_OK);
            assert_memory_equal(sh, p + lo, sizeof(float) * (size_t)(hi - lo));
            free(sh);
        }
    }
    assert_int_equal(rl_safetensors_load_params_range(mf, m, 5, m->total + 1, p), RL_ERANGE);
    rl_safetensors_close(mf);

    /* a tensor the manifest lacks: error naming it */
    rl_lm_config tied = c;
    tied.tie_word_embeddings = 1;
    rl_param_manifest *mt = s_hf_manifest(&tied);
    assert_int_equal(rl_safetensors_read_params("tests/golden/nn_hf/model.safetensors", mt, p),
                     RL_EINVAL);
    assert_non_null(strstr(rl_error_message(), "'lm_head.weight'"));
    assert_non_null(strstr(rl_error_message(), "model.safetensors"));
    rl_param_manifest_free(mt);
    /* a view the file lacks: RL_ENOTFOUND naming it */
    rl_param_manifest *mx = s_hf_manifest(&c);
    int64_t one[1] = {1};
    rl_param_manifest_add(mx, "value_head.weight", 1, one);
    float *px = rl_param_buffer_new(mx->total);
    assert_int_equal(rl_safetensors_read_params("tests/golden/nn_hf/model.safetensors", mx, px),
                     RL_ENOTFOUND);
    assert_non_null(strstr(rl_error_message(), "'value_head.weight'"));
    rl_param_buffer_free(px);
    rl_param_manifest_free(mx);
    /* a shape mismatch: RL_ESHAPE with both shapes */
    rl_lm_config wide = c;
    wide.intermediate_size = 96;
    rl_param_manifest *mw = s_hf_manifest(&wide);
    float *pw = rl_param_buffer_new(mw->total);
    assert_int_equal(rl_safetensors_read_params("tests/golden/nn_hf/model.safetensors", mw, pw),
                     RL_ESHAPE);
    assert_non_null(strstr(rl_error_message(), "[96, 64]"));
    assert_non_null(strstr(rl_error_message(), "[128, 64]"));
    rl_param_buffer_free(pw);
    rl_param_manifest_free(mw);

    /* the logits file the lead's transformer test uses is well-formed */
    rl_safetensors *lg = rl_safetensors_open("tests/golden/nn_hf/logits.safetensors");
    assert_non_null(lg);
    int li = rl_safetensors_find(lg, "logits");
    assert_true(li >= 0);
    assert_int_equal(rl_safetensors_ndim(lg, li), 3);
    assert_int_equal(rl_safetensors_shape(lg, li)[2], c.vocab_size);
    rl_safetensors_close(lg);
    rl_param_buffer_free(p);
    rl_param_manifest_free(m);
}

static void test_hf_llama_config(void **state)
{
    (void)state;
    rl_lm_config c;
    assert_int_equal(rl_lm_config_from_hf_json("tests/golden/nn_hf/llama_config.json", &c), RL_OK);
    assert_int_equal(c.vocab_size, 1000);
    assert_int_equal(c.hidden_size, 128);
    assert_int_equal(c.intermediate_size, 344);
    assert_int_equal(c.num_layers, 3);
    assert_int_equal(c.num_heads, 8);
    assert_int_equal(c.num_kv_heads, 4);
    assert_int_equal(c.max_seq_len, 512);
    assert_float_equal(c.rope_theta, 500000.0f, 0);
    assert_float_equal(c.rms_norm_eps, 1e-5f, 0);
    assert_int_equal(c.tie_word_embeddings, 1);
    assert_int_equal(c.qkv_bias, 0);
    assert_int_equal(c.bos_token_id, 128000);
    assert_int_equal(c.eos_token_id, 128001);
    assert_int_equal(c.pad_token_id, -1);
    /* writer -> reader round trip (transformers reads the writer's output:
     * checked by gen_nn_io.py) */
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", s_tmpdir);
    for (int qkv = 0; qkv < 2; qkv++) {
        rl_lm_config w = c, r;
        w.qkv_bias = qkv;
        w.value_head = qkv;
        assert_int_equal(rl_lm_config_to_hf_json(&w, path), RL_OK);
        assert_int_equal(rl_lm_config_from_hf_json(path, &r), RL_OK);
        assert_memory_equal(&w, &r, sizeof w);
    }
}

static void s_config_bad(const char *json, const char *needle)
{
    char path[512];
    snprintf(path, sizeof path, "%s/bad_config.json", s_tmpdir);
    FILE *f = fopen(path, "w");
    fputs(json, f);
    fclose(f);
    rl_lm_config c;
    int rc = rl_lm_config_from_hf_json(path, &c);
    if (rc != RL_ECONFIG)
        fail_msg("config %s: rc %d, want RL_ECONFIG", json, rc);
    if (!strstr(rl_error_message(), needle) || !strstr(rl_error_message(), "bad_config.json"))
        fail_msg("config %s: message '%s' lacks '%s' or the file name", json,
                 rl_error_message(), needle);
}

#define BASE "\"vocab_size\":10,\"hidden_size\":8,\"intermediate_size\":16," \
             "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"max_position_embeddings\":32"

static void test_hf_config_errors(void **state)
{
    (void)state;
    s_config_bad("{" BASE "}", "'model_type'");
    s_config_bad("{\"model_type\":\"gpt2\"," BASE "}", "'gpt2'");
    s_config_bad("{\"model_type\":\"llama\",\"vocab_size\":10,\"hidden_size\":8,"
                 "\"intermediate_size\":16,\"num_attention_heads\":2,"
                 "\"max_position_embeddings\":32}", "'num_hidden_layers'");
    s_config_bad("{\"model_type\":\"llama\"," BASE ",\"rope_theta\":\"1e4\"}", "'rope_theta'");
    s_config_bad("{\"model_type\":\"llama\"," BASE ",\"tie_word_embeddings\":1}",
                 "'tie_word_embeddings'");
    s_config_bad("{\"model_type\":\"llama\"," BASE ",\"eos_token_id\":[\"x\"]}", "'eos_token_id'");
    s_config_bad("{\"model_type\":\"llama\"," BASE ",\"num_key_value_heads\":3}",
                 "num_key_value_heads");
    s_config_bad("{\"model_type\":\"llama\"," BASE ",\"hidden_act\":\"gelu\"}", "'hidden_act'");
    s_config_bad("{\"model_type\":\"llama\"," BASE ",\"rope_scaling\":{\"type\":\"linear\"}}",
                 "'rope_scaling'");
    s_config_bad("{\"model_type\":\"qwen2\"," BASE ",\"use_sliding_window\":true}",
                 "'use_sliding_window'");
    s_config_bad("{\"model_type\":\"llama\"," BASE ",\"vocab_size\":-1}", "duplicate");
    s_config_bad("{\"model_type\":\"llama\",\"vocab_size\":0,\"hidden_size\":8,"
                 "\"intermediate_size\":16,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
                 "\"max_position_embeddings\":32}", "'vocab_size'");
    s_config_bad("[1]", "expected an object");
    s_config_bad("{\"model_type\":", "cannot read");
    /* defaults when optional keys are absent */
    char path[512];
    snprintf(path, sizeof path, "%s/min_config.json", s_tmpdir);
    FILE *f = fopen(path, "w");
    fputs("{\"model_type\":\"llama\"," BASE ",\"attention_bias\":true}", f);
    fclose(f);
    rl_lm_config c;
    assert_int_equal(rl_lm_config_from_hf_json(path, &c), RL_OK);
    assert_int_equal(c.num_kv_heads, 2);
    assert_int_equal(c.qkv_bias, 1);
    assert_float_equal(c.rope_theta, 10000.0f, 0);
    assert_int_equal(c.bos_token_id, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_python_file),
        cmocka_unit_test(test_write_matches_golden),
        cmocka_unit_test(test_params_roundtrip_dtypes),
        cmocka_unit_test(test_generic_writer_roundtrip),
        cmocka_unit_test(test_header_validation),
        cmocka_unit_test(test_length_field_and_truncation),
        cmocka_unit_test(test_fuzz_regressions),
        cmocka_unit_test(test_hf_qwen2_checkpoint),
        cmocka_unit_test(test_hf_llama_config),
        cmocka_unit_test(test_hf_config_errors),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
