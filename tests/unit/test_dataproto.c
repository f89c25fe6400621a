/* test_dataproto.c — every DataProto operation and its error messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"

#define assert_msg_contains(s) \
    do { \
        if (!strstr(rl_error_message(), (s))) \
            fail_msg("error message '%s' lacks '%s'", rl_error_message(), (s)); \
    } while (0)

/* rows × 3 f32 tensor "x" with x[r][j] = base + 10 r + j, i64 "id" = base + r,
 * string column "uid" = "u<base+r>", int64 list column "toks" = [r, r+1 ...]
 * of length r % 3, meta {"step": 7}. */
static rl_dataproto *s_make(int64_t rows, int base)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t shape[2] = {rows, 3};
    rl_tensor *x = rl_dataproto_new_tensor(dp, "x", RL_F32, 2, shape);
    rl_tensor *id = rl_dataproto_new_tensor(dp, "id", RL_I64, 1, shape);
    assert_non_null(x);
    assert_non_null(id);
    float *xd = rl_tensor_data(x);
    int64_t *idd = rl_tensor_data(id);
    rl_column *uid = rl_dataproto_new_column(dp, "uid", RL_COL_STRING);
    rl_column *toks = rl_dataproto_new_column(dp, "toks", RL_COL_INT64_LIST);
    assert_non_null(uid);
    assert_non_null(toks);
    for (int64_t r = 0; r < rows; r++) {
        for (int j = 0; j < 3; j++)
            xd[r * 3 + j] = (float)(base + 10 * r + j);
        idd[r] = base + r;
        char buf[32];
        snprintf(buf, sizeof buf, "u%lld", (long long)(base + r));
        assert_int_equal(rl_column_set_str(uid, r, buf), 0);
        int64_t l[3] = {r, r + 1, r + 2};
        assert_int_equal(rl_column_set_i64_list(toks, r, l, r % 3), 0);
    }
    json_object_set_new(rl_dataproto_meta(dp), "step", json_integer(7));
    return dp;
}

static int64_t s_id(const rl_dataproto *dp, int64_t r)
{
    return ((const int64_t *)rl_tensor_data(rl_dataproto_tensor(dp, "id")))[r];
}

/* Checks row r of dp equals row `src` of a batch made by s_make(_, base). */
static void s_check_row(const rl_dataproto *dp, int64_t r, int base, int64_t src)
{
    const float *x = rl_tensor_data(rl_dataproto_tensor(dp, "x"));
    assert_int_equal(s_id(dp, r), base + src);
    assert_true(x[r * 3 + 2] == (float)(base + 10 * src + 2));
    char buf[32];
    snprintf(buf, sizeof buf, "u%lld", (long long)(base + src));
    assert_string_equal(rl_column_str(rl_dataproto_column(dp, "uid"), r), buf);
    const rl_column *toks = rl_dataproto_column(dp, "toks");
    assert_int_equal(rl_column_list_len(toks, r), src % 3);
    if (src % 3)
        assert_int_equal(rl_column_list_i64(toks, r)[0], src);
}

static void test_tensor_basics(void **state)
{
    (void)state;
    int64_t shape[3] = {4, 2, 3};
    rl_tensor *t = rl_tensor_new(RL_BF16, 3, shape);
    assert_non_null(t);
    assert_int_equal(t->numel, 24);
    assert_int_equal(rl_tensor_nbytes(t), 48);
    assert_int_equal(rl_tensor_row_bytes(t), 12);
    rl_tensor *v = rl_tensor_view_rows(t, 1, 3);
    assert_ptr_equal(v->storage, t->storage);
    assert_int_equal(atomic_load(&t->storage->refcount), 2);
    assert_ptr_equal(rl_tensor_data(v), (char *)rl_tensor_data(t) + 12);
    char buf[64];
    assert_string_equal(rl_tensor_describe(v, buf, sizeof buf), "bf16[2, 2, 3]");
    rl_tensor_release(t);
    assert_int_equal(atomic_load(&v->storage->refcount), 1);
    rl_tensor_release(v);

    int64_t bad[2] = {INT64_MAX / 2, 4};
    assert_null(rl_tensor_new(RL_F32, 2, bad));
    assert_msg_contains("overflows");
    int64_t neg[1] = {-1};
    assert_null(rl_tensor_new(RL_F32, 1, neg));
    assert_msg_contains("negative");
    assert_null(rl_tensor_new((rl_dtype)42, 1, shape));
    assert_msg_contains("unknown dtype code 42");
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    assert_null(rl_tensor_new(RL_F32, 9, nine));
    assert_msg_contains("ndim 9");
}

/* Storages of 32 MiB and more come from mmap (no memset pass): still zeroed,
 * 64-byte aligned, and a concat into one is exact. */
static void test_large_storage(void **state)
{
    (void)state;
    for (size_t mib = 31; mib <= 33; mib++) {
        size_t n = mib << 20;
        rl_storage *st = rl_storage_new(n + 3);
        assert_non_null(st);
        assert_int_equal((uintptr_t)st->data % 64, 0);
        const unsigned char *p = st->data;
        size_t nonzero = 0;
        for (size_t i = 0; i < n + 3; i += 4093)
            nonzero += p[i] != 0;
        assert_int_equal(nonzero, 0);
        memset(st->data, 0xab, n + 3);
        rl_storage_release(st);
    }
    rl_dataproto *part[2];
    for (int k = 0; k < 2; k++) {
        part[k] = rl_dataproto_new();
        int64_t shape[2] = {4, (int64_t)((20u << 20) / 4 / 4)};
        float *x = rl_tensor_data(rl_dataproto_new_tensor(part[k], "x", RL_F32, 2, shape));
        for (int64_t i = 0; i < shape[0] * shape[1]; i++)
            x[i] = (float)(k * 7 + (i % 1000));
    }
    rl_dataproto *cat = rl_dataproto_concat(part, 2);
    assert_non_null(cat);
    const float *y = rl_tensor_data(rl_dataproto_tensor(cat, "x"));
    int64_t half = 4 * (int64_t)((20u << 20) / 4 / 4);
    for (int64_t i = 0; i < 2 * half; i += 997)
        assert_true(y[i] == (float)((i / half) * 7 + ((i % half) % 1000)));
    rl_dataproto_free(cat);
    rl_dataproto_free(part[0]);
    rl_dataproto_free(part[1]);
}

static void test_half_conversions(void **state)
{
    (void)state;
    float vals[] = {0.0f, 1.0f, -2.5f, 65504.0f, 1e-7f, 3.14159f, 1e30f};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        float b = rl_bf16_to_f32(rl_f32_to_bf16(vals[i]));
        assert_true(b == vals[i] || (b - vals[i]) / vals[i] < 8e-3f);
    }
    assert_int_equal(rl_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(rl_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(rl_f32_to_f16(1e6f), 0x7c00);
    assert_int_equal(rl_f32_to_f16(-2.0f), 0xc000);
    assert_true(rl_f16_to_f32(0x0001) == 5.9604644775390625e-08f); /* smallest subnormal */
    assert_true(rl_f16_to_f32(rl_f32_to_f16(0.333333f)) - 0.333333f < 1e-3f);
    assert_int_equal(rl_f32_to_bf16(1.0f), 0x3f80);
    rl_dtype d;
    assert_int_equal(rl_dtype_parse("bfloat16", &d), 0);
    assert_int_equal(d, RL_BF16);
    assert_int_equal(rl_dtype_parse("F64", &d), 0);
    assert_int_equal(d, RL_F64);
    assert_int_equal(rl_dtype_parse("float128", &d), RL_EDTYPE);
}

static void test_add_errors(void **state)
{
    (void)state;
    rl_dataproto *dp = s_make(4, 0);
    int64_t shape[1] = {5};
    rl_tensor *t = rl_tensor_new(RL_F32, 1, shape);
    assert_int_equal(rl_dataproto_add_tensor(dp, "y", t), RL_ESHAPE);
    assert_string_equal(rl_error_message(), "tensor 'y': expected 4 rows, got 5");
    assert_int_equal(rl_dataproto_add_tensor(dp, "x", t), RL_EEXIST);
    assert_msg_contains("'x' already exists as a tensor");
    assert_int_equal(rl_dataproto_add_tensor(dp, "uid", t), RL_EEXIST);
    assert_msg_contains("'uid' already exists as a column");
    rl_tensor_release(t);
    rl_tensor *scalar = rl_tensor_new(RL_F32, 0, NULL);
    assert_int_equal(rl_dataproto_add_tensor(dp, "s", scalar), RL_ESHAPE);
    assert_msg_contains("0-d");
    rl_tensor_release(scalar);
    assert_null(rl_dataproto_tensor_typed(dp, "x", RL_F64));
    assert_string_equal(rl_error_message(), "tensor 'x': expected dtype f64, got f32");
    assert_null(rl_dataproto_tensor_typed(dp, "nope", RL_F32));
    assert_msg_contains("'nope' not in the batch");
    rl_column *uid = rl_dataproto_column(dp, "uid");
    assert_int_equal(rl_column_set_i64(uid, 0, 3), RL_EDTYPE);
    assert_string_equal(rl_error_message(), "column 'uid' holds string values, not int64");
    assert_int_equal(rl_column_set_str(uid, 4, "z"), RL_ERANGE);
    assert_msg_contains("row 4 outside [0, 4)");
    assert_int_equal(rl_dataproto_remove(dp, "nope"), RL_ENOTFOUND);
    assert_int_equal(rl_dataproto_remove(dp, "toks"), 0);
    assert_null(rl_dataproto_column(dp, "toks"));
    rl_dataproto_free(dp);

    rl_dataproto *empty = rl_dataproto_new();
    assert_null(rl_dataproto_new_column(empty, "c", RL_COL_INT64));
    assert_msg_contains("rows unknown");
    assert_int_equal(rl_dataproto_set_rows(empty, 2), 0);
    assert_non_null(rl_dataproto_new_column(empty, "c", RL_COL_INT64));
    assert_int_equal(rl_dataproto_set_rows(empty, 3), RL_ESHAPE);
    rl_dataproto_free(empty);
}

static void test_all_column_types(void **state)
{
    (void)state;
    rl_dataproto *dp = rl_dataproto_new();
    rl_dataproto_set_rows(dp, 2);
    rl_column *s = rl_dataproto_new_column(dp, "s", RL_COL_STRING);
    rl_column *i = rl_dataproto_new_column(dp, "i", RL_COL_INT64);
    rl_column *d = rl_dataproto_new_column(dp, "d", RL_COL_DOUBLE);
    rl_column *b = rl_dataproto_new_column(dp, "b", RL_COL_BYTES);
    rl_column *sl = rl_dataproto_new_column(dp, "sl", RL_COL_STRING_LIST);
    rl_column *fl = rl_dataproto_new_column(dp, "fl", RL_COL_DOUBLE_LIST);
    rl_column *bl = rl_dataproto_new_column(dp, "bl", RL_COL_BYTES_LIST);
    assert_string_equal(rl_column_str(s, 0), "");
    rl_column_set_str(s, 1, "héllo");
    rl_column_set_i64(i, 1, -9);
    rl_column_set_f64(d, 0, 0.25);
    const char raw[4] = {0, 1, 0, 2};
    rl_column_set_bytes(b, 0, raw, 4);
    const char *items[3] = {"a", "", "ccc"};
    rl_column_set_str_list(sl, 0, items, 3);
    double f[2] = {1.5, -2};
    rl_column_set_f64_list(fl, 1, f, 2);
    const void *bp[2] = {raw, raw + 1};
    size_t bls[2] = {4, 0};
    rl_column_set_bytes_list(bl, 1, bp, bls, 2);

    assert_string_equal(rl_column_str(s, 1), "héllo");
    assert_int_equal(rl_column_i64(i, 1), -9);
    assert_true(rl_column_f64(d, 0) == 0.25);
    size_t len;
    const char *got = rl_column_bytes(b, 0, &len);
    assert_int_equal(len, 4);
    assert_memory_equal(got, raw, 4);
    assert_int_equal(rl_column_list_len(sl, 0), 3);
    assert_string_equal(rl_column_list_item(sl, 0, 2, &len), "ccc");
    assert_int_equal(len, 3);
    assert_string_equal(rl_column_list_item(sl, 0, 1, &len), "");
    assert_null(rl_column_list_item(sl, 0, 3, &len));
    assert_true(rl_column_list_f64(fl, 1)[1] == -2.0);
    assert_int_equal(rl_column_list_len(bl, 1), 2);
    assert_memory_equal(rl_column_list_item(bl, 1, 0, &len), raw, 4);

    /* index with duplicates keeps every type */
    int64_t idx[3] = {1, 0, 1};
    rl_dataproto *ix = rl_dataproto_index(dp, idx, 3);
    assert_non_null(ix);
    assert_string_equal(rl_column_str(rl_dataproto_column(ix, "s"), 2), "héllo");
    assert_int_equal(rl_column_list_len(rl_dataproto_column(ix, "sl"), 1), 3);
    assert_int_equal(rl_column_list_len(rl_dataproto_column(ix, "bl"), 0), 2);
    rl_dataproto *back = rl_dataproto_index(ix, (int64_t[]){1, 0}, 2);
    assert_true(rl_dataproto_equal(back, dp));
    rl_dataproto_free(back);
    rl_dataproto_free(ix);
    rl_dataproto_free(dp);
}

static void test_concat_and_errors(void **state)
{
    (void)state;
    rl_dataproto *a = s_make(3, 0), *b = s_make(2, 100), *c = rl_dataproto_new();
    rl_dataproto_set_rows(c, 0);
    rl_dataproto *items[2] = {a, b};
    rl_dataproto *ab = rl_dataproto_concat(items, 2);
    assert_non_null(ab);
    assert_int_equal(rl_dataproto_rows(ab), 5);
    for (int r = 0; r < 3; r++)
        s_check_row(ab, r, 0, r);
    for (int r = 0; r < 2; r++)
        s_check_row(ab, 3 + r, 100, r);
    assert_int_equal(json_integer_value(json_object_get(rl_dataproto_meta(ab), "step")), 7);

    /* dtype mismatch names key and both dtypes */
    rl_dataproto *bad = s_make(2, 0);
    rl_dataproto_remove(bad, "id");
    int64_t sh[1] = {2};
    rl_dataproto_new_tensor(bad, "id", RL_I32, 1, sh);
    rl_dataproto *items2[2] = {a, bad};
    assert_null(rl_dataproto_concat(items2, 2));
    assert_string_equal(rl_error_message(), "concat item 1: tensor 'id': expected dtype i64, got i32");
    /* trailing shape mismatch */
    rl_dataproto_remove(bad, "id");
    rl_dataproto_new_tensor(bad, "id", RL_I64, 1, sh);
    rl_dataproto_remove(bad, "x");
    int64_t sh2[2] = {2, 4};
    rl_dataproto_new_tensor(bad, "x", RL_F32, 2, sh2);
    assert_null(rl_dataproto_concat(items2, 2));
    assert_string_equal(rl_error_message(),
                        "concat item 1: tensor 'x': expected shape f32[3, 3] (any rows), got f32[2, 4]");
    /* missing key */
    rl_dataproto_remove(bad, "uid");
    assert_null(rl_dataproto_concat(items2, 2));
    assert_msg_contains("expected 2 tensors and 2 columns, got 2 and 1");
    rl_dataproto_free(bad);
    rl_dataproto_free(ab);
    rl_dataproto_free(a);
    rl_dataproto_free(b);
    rl_dataproto_free(c);
}

static void test_chunk_pad_and_split(void **state)
{
    (void)state;
    rl_dataproto *dp = s_make(7, 0);
    rl_dataproto *out[3];
    int64_t pad = -1;
    assert_int_equal(rl_dataproto_chunk(dp, 3, 0, out, &pad), 0);
    assert_int_equal(pad, 0);
    assert_int_equal(rl_dataproto_rows(out[0]), 3);
    assert_int_equal(rl_dataproto_rows(out[1]), 2);
    assert_int_equal(rl_dataproto_rows(out[2]), 2);
    s_check_row(out[1], 0, 0, 3);
    /* views: chunk shares storage */
    assert_ptr_equal(rl_dataproto_tensor(out[2], "x")->storage, rl_dataproto_tensor(dp, "x")->storage);
    rl_dataproto *cat = rl_dataproto_concat(out, 3);
    assert_true(rl_dataproto_equal(cat, dp));
    rl_dataproto_free(cat);
    for (int k = 0; k < 3; k++)
        rl_dataproto_free(out[k]);

    assert_int_equal(rl_dataproto_chunk(dp, 3, 1, out, &pad), 0);
    assert_int_equal(pad, 2);
    for (int k = 0; k < 3; k++)
        assert_int_equal(rl_dataproto_rows(out[k]), 3);
    s_check_row(out[2], 1, 0, 7 % 7); /* padded rows repeat from the start */
    s_check_row(out[2], 2, 0, 1);
    cat = rl_dataproto_concat(out, 3);
    rl_dataproto *stripped = rl_dataproto_slice(cat, 0, rl_dataproto_rows(cat) - pad);
    assert_true(rl_dataproto_equal(stripped, dp));
    rl_dataproto_free(stripped);
    rl_dataproto_free(cat);
    for (int k = 0; k < 3; k++)
        rl_dataproto_free(out[k]);

    /* more chunks than rows, pad cycles */
    rl_dataproto *two = s_make(2, 0), *o5[5];
    assert_int_equal(rl_dataproto_chunk(two, 5, 1, o5, &pad), 0);
    assert_int_equal(pad, 3);
    s_check_row(o5[4], 0, 0, 0);
    s_check_row(o5[3], 0, 0, 1);
    for (int k = 0; k < 5; k++)
        rl_dataproto_free(o5[k]);
    assert_int_equal(rl_dataproto_chunk(two, 5, 0, o5, &pad), 0);
    assert_int_equal(rl_dataproto_rows(o5[4]), 0);
    for (int k = 0; k < 5; k++)
        rl_dataproto_free(o5[k]);
    rl_dataproto_free(two);
    assert_int_equal(rl_dataproto_chunk(dp, 0, 0, out, &pad), RL_EINVAL);

    rl_dataproto **parts;
    int n;
    assert_int_equal(rl_dataproto_split(dp, 3, &parts, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(rl_dataproto_rows(parts[2]), 1);
    s_check_row(parts[2], 0, 0, 6);
    for (int k = 0; k < n; k++)
        rl_dataproto_free(parts[k]);
    free(parts);
    assert_int_equal(rl_dataproto_split(dp, 0, &parts, &n), RL_EINVAL);
    rl_dataproto_free(dp);
}

static void test_union(void **state)
{
    (void)state;
    rl_dataproto *a = s_make(3, 0);
    rl_dataproto *b = s_make(3, 0);
    rl_dataproto_remove(b, "x");
    int64_t sh[1] = {3};
    float *adv = rl_tensor_data(rl_dataproto_new_tensor(b, "adv", RL_F32, 1, sh));
    adv[1] = 2.0f;
    json_object_set_new(rl_dataproto_meta(b), "temperature", json_real(0.7));
    rl_dataproto *u = rl_dataproto_union(a, b);
    assert_non_null(u);
    assert_int_equal(rl_dataproto_tensor_count(u), 3);
    assert_true(((float *)rl_tensor_data(rl_dataproto_tensor(u, "adv")))[1] == 2.0f);
    assert_non_null(json_object_get(rl_dataproto_meta(u), "temperature"));
    rl_dataproto_free(u);

    ((int64_t *)rl_tensor_data(rl_dataproto_tensor(b, "id")))[2] = 99;
    assert_null(rl_dataproto_union(a, b));
    assert_string_equal(rl_error_message(), "union: tensor 'id' differs between the two batches");
    ((int64_t *)rl_tensor_data(rl_dataproto_tensor(b, "id")))[2] = 2;
    rl_column_set_str(rl_dataproto_column(b, "uid"), 0, "other");
    assert_null(rl_dataproto_union(a, b));
    assert_string_equal(rl_error_message(), "union: column 'uid' differs between the two batches");
    rl_column_set_str(rl_dataproto_column(b, "uid"), 0, "u0");
    json_object_set_new(rl_dataproto_meta(b), "step", json_integer(8));
    assert_null(rl_dataproto_union(a, b));
    assert_string_equal(rl_error_message(), "union: meta key 'step' differs between the two batches");
    rl_dataproto *c = s_make(4, 0);
    assert_null(rl_dataproto_union(a, c));
    assert_string_equal(rl_error_message(), "union: expected 3 rows, got 4");
    rl_dataproto_free(a);
    rl_dataproto_free(b);
    rl_dataproto_free(c);
}

static void test_repeat_select_index_reorder_pop(void **state)
{
    (void)state;
    rl_dataproto *dp = s_make(3, 0);
    rl_dataproto *ri = rl_dataproto_repeat(dp, 2, 1);
    rl_dataproto *rt = rl_dataproto_repeat(dp, 2, 0);
    int64_t want_i[6] = {0, 0, 1, 1, 2, 2}, want_t[6] = {0, 1, 2, 0, 1, 2};
    for (int r = 0; r < 6; r++) {
        s_check_row(ri, r, 0, want_i[r]);
        s_check_row(rt, r, 0, want_t[r]);
    }
    rl_dataproto_free(ri);
    rl_dataproto_free(rt);
    assert_null(rl_dataproto_repeat(dp, 0, 1));

    const char *keep[1] = {"x"};
    const char *keepc[1] = {"uid"};
    rl_dataproto *sel = rl_dataproto_select(dp, keep, 1, keepc, 1);
    assert_int_equal(rl_dataproto_tensor_count(sel), 1);
    assert_int_equal(rl_dataproto_column_count(sel), 1);
    assert_ptr_equal(rl_dataproto_tensor(sel, "x"), rl_dataproto_tensor(dp, "x")); /* view */
    rl_dataproto_free(sel);
    const char *missing[1] = {"nope"};
    assert_null(rl_dataproto_select(dp, missing, 1, NULL, 0));
    assert_string_equal(rl_error_message(), "select: tensor 'nope' not in the batch");

    int64_t idx[4] = {2, 2, 0, 1};
    rl_dataproto *ix = rl_dataproto_index(dp, idx, 4);
    for (int r = 0; r < 4; r++)
        s_check_row(ix, r, 0, idx[r]);
    rl_dataproto_free(ix);
    int64_t badidx[2] = {0, 3};
    assert_null(rl_dataproto_index(dp, badidx, 2));
    assert_string_equal(rl_error_message(), "index: row 3 at position 1 outside [0, 3)");

    int64_t perm[3] = {2, 0, 1};
    assert_int_equal(rl_dataproto_reorder(dp, perm), 0);
    for (int r = 0; r < 3; r++)
        s_check_row(dp, r, 0, perm[r]);
    int64_t notperm[3] = {0, 0, 1};
    assert_int_equal(rl_dataproto_reorder(dp, notperm), RL_EINVAL);
    assert_msg_contains("position 1 holds 0 (repeated)");

    const char *names[2] = {"x", "toks"};
    rl_dataproto *popped = rl_dataproto_pop(dp, names, 2);
    assert_non_null(popped);
    assert_null(rl_dataproto_tensor(dp, "x"));
    assert_null(rl_dataproto_column(dp, "toks"));
    assert_non_null(rl_dataproto_tensor(popped, "x"));
    assert_non_null(rl_dataproto_column(popped, "toks"));
    assert_int_equal(rl_dataproto_rows(popped), 3);
    assert_null(rl_dataproto_pop(dp, names, 1));
    assert_string_equal(rl_error_message(), "pop: no tensor or column named 'x'");
    rl_dataproto_free(popped);

    rl_dataproto *sl = rl_dataproto_slice(dp, 1, 3);
    assert_int_equal(rl_dataproto_rows(sl), 2);
    assert_int_equal(s_id(sl, 0), 0);
    rl_dataproto_free(sl);
    assert_null(rl_dataproto_slice(dp, 2, 5));
    assert_string_equal(rl_error_message(), "slice [2, 5) outside [0, 3)");
    rl_dataproto_free(dp);
}

static void test_empty_batches(void **state)
{
    (void)state;
    rl_dataproto *dp = s_make(0, 0);
    assert_int_equal(rl_dataproto_rows(dp), 0);
    rl_dataproto *out[2];
    int64_t pad;
    assert_int_equal(rl_dataproto_chunk(dp, 2, 1, out, &pad), 0);
    assert_int_equal(pad, 0);
    assert_int_equal(rl_dataproto_rows(out[1]), 0);
    rl_dataproto *cat = rl_dataproto_concat(out, 2);
    assert_true(rl_dataproto_equal(cat, dp));
    rl_dataproto_free(cat);
    rl_dataproto_free(out[0]);
    rl_dataproto_free(out[1]);
    rl_dataproto *rep = rl_dataproto_repeat(dp, 3, 1);
    assert_int_equal(rl_dataproto_rows(rep), 0);
    rl_dataproto_free(rep);
    rl_dataproto_free(dp);
}

/* Row counts near the int64 range (a header may claim them for a batch with
 * no tensors or zero-width ones): every operation that sizes an index array
 * or sums rows refuses with RL_ERANGE naming the sizes instead of wrapping
 * a malloc size or a signed sum. */
static void test_huge_row_counts(void **state)
{
    (void)state;
    const int64_t huge = (INT64_C(1) << 62) + 1;
    rl_dataproto *dp = rl_dataproto_new();
    assert_int_equal(rl_dataproto_set_rows(dp, huge), 0);
    int64_t shape[2] = {huge, 0}; /* zero-width: no bytes */
    assert_non_null(rl_dataproto_new_tensor(dp, "w", RL_F32, 2, shape));
    /* chunk with padding: (2^62 + 2) x 8 bytes of row indices wraps size_t */
    rl_dataproto *out[2] = {NULL, NULL};
    int64_t pad = -1;
    assert_int_equal(rl_dataproto_chunk(dp, 2, 1, out, &pad), RL_ERANGE);
    assert_msg_contains("pad: 4611686018427387905 rows + 1 padding rows (divisor 2)");
    assert_null(out[0]);
    assert_null(rl_dataproto_pad_to_divisor(dp, 2, NULL));
    assert_int_equal(rl_error_code(), RL_ERANGE);
    rl_dataproto_free(dp);

    /* padding 5 rows up to a divisor of INT64_MAX */
    dp = s_make(5, 0);
    assert_null(rl_dataproto_pad_to_divisor(dp, INT64_MAX, NULL));
    assert_int_equal(rl_error_code(), RL_ERANGE);
    assert_msg_contains("pad: 5 rows + 9223372036854775802 padding rows");
    /* a split size near INT64_MAX is one piece, not a wrapped count */
    rl_dataproto **parts = NULL;
    int n = -1;
    assert_int_equal(rl_dataproto_split(dp, INT64_MAX, &parts, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rl_dataproto_rows(parts[0]), 5);
    rl_dataproto_free(parts[0]);
    free(parts);
    rl_dataproto_free(dp);

    /* split into more pieces than an int counts */
    dp = rl_dataproto_new();
    assert_int_equal(rl_dataproto_set_rows(dp, INT64_C(1) << 62), 0);
    parts = NULL;
    n = -1;
    assert_int_equal(rl_dataproto_split(dp, 1, &parts, &n), RL_ERANGE);
    assert_msg_contains("split: 4611686018427387904 rows in pieces of 1 make 4611686018427387904 "
                        "pieces, expected at most 2147483647");
    assert_null(parts);
    /* concat: 2^62 + 2^62 rows overflow int64 */
    rl_dataproto *two[2] = {dp, dp};
    assert_null(rl_dataproto_concat(two, 2));
    assert_int_equal(rl_error_code(), RL_ERANGE);
    assert_msg_contains("concat item 1: its 4611686018427387904 rows added to the "
                        "4611686018427387904 rows before it overflow int64");
    rl_dataproto_free(dp);

    /* repeat: rows x times fits int64, x 8 bytes does not fit size_t */
    dp = rl_dataproto_new();
    assert_int_equal(rl_dataproto_set_rows(dp, (INT64_C(1) << 61) + 1), 0);
    assert_null(rl_dataproto_repeat(dp, 2, 0));
    assert_int_equal(rl_error_code(), RL_ERANGE);
    assert_msg_contains("repeat: 2305843009213693953 rows × 2 = 4611686018427387906 row indices");
    rl_dataproto_free(dp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensor_basics),
        cmocka_unit_test(test_half_conversions),
        cmocka_unit_test(test_large_storage),
        cmocka_unit_test(test_add_errors),
        cmocka_unit_test(test_all_column_types),
        cmocka_unit_test(test_concat_and_errors),
        cmocka_unit_test(test_chunk_pad_and_split),
        cmocka_unit_test(test_union),
        cmocka_unit_test(test_repeat_select_index_reorder_pop),
        cmocka_unit_test(test_empty_batches),
        cmocka_unit_test(test_huge_row_counts),
    };
    return cmocka_run_group_tests_name("dataproto", tests, NULL, NULL);
}
