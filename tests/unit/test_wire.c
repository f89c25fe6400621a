/* test_wire.c — DataProto wire format: round trips over real ZeroMQ socket
 * pairs (inproc, ipc, tcp), zero-copy proofs, every decoder rejection by its
 * message, the committed fuzz seeds (wire-format stability) and replay of
 * every fuzz regression file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/common/fuzz_replay.h"
#include "rl.pb-c.h"
#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/wire.h"
#include "common/runtime/msg.h"
#include "tests/common/srcdir.h"

#define SEED_DIR "fuzz/seeds/fuzz_wire_decode"

#define assert_msg_contains(s) \
    do { \
        if (!strstr(rl_error_message(), (s))) \
            fail_msg("error message '%s' lacks '%s'", rl_error_message(), (s)); \
    } while (0)

/* ---- batch builders ---------------------------------------------------------------- */

static void s_fill(void *p, size_t n, uint32_t seed)
{
    /* xorshift bytes: cheap and every byte differs between tensors. */
    uint32_t x = seed * 2654435761u + 1;
    uint8_t *b = p;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        memcpy(b + i, &x, 4);
    }
    for (; i < n; i++)
        b[i] = (uint8_t)(i * 31 + seed);
}

/* A batch of `rows` rows with one tensor of every dtype (shapes (rows),
 * (rows, 3), (rows, 2, 2) in turn), every column type with varied cells and a
 * nested meta. */
static rl_dataproto *s_make_full(int64_t rows)
{
    rl_dataproto *dp = rl_dataproto_new();
    assert_int_equal(rl_dataproto_set_rows(dp, rows), 0);
    for (int d = RL_DTYPE_MIN; d <= RL_DTYPE_MAX; d++) {
        int64_t shape[3] = {rows, d % 3 == 1 ? 3 : 2, 2};
        int nd = 1 + d % 3;
        char name[32];
        snprintf(name, sizeof name, "t_%s", rl_dtype_name(d));
        rl_tensor *t = rl_dataproto_new_tensor(dp, name, (rl_dtype)d, nd, shape);
        assert_non_null(t);
        s_fill(rl_tensor_data(t), rl_tensor_nbytes(t), (uint32_t)d);
        if (d == RL_BOOL) {
            uint8_t *b = rl_tensor_data(t);
            for (size_t i = 0; i < rl_tensor_nbytes(t); i++)
                b[i] &= 1;
        }
    }
    const char *cn[] = {"", "c_str", "c_i64", "c_f64", "c_bytes", "c_str_list", "c_i64_list",
                        "c_f64_list", "c_bytes_list"};
    for (int ty = RL_COL_STRING; ty <= RL_COL_BYTES_LIST; ty++) {
        rl_column *c = rl_dataproto_new_column(dp, cn[ty], (rl_column_type)ty);
        assert_non_null(c);
        for (int64_t r = 0; r < rows; r++) {
            char s[64];
            snprintf(s, sizeof s, "row %lld \xce\xbb", (long long)r);
            uint8_t by[5] = {0, (uint8_t)r, 0xff, 0, 7};
            int64_t il[4] = {r, -r, INT64_MAX, INT64_MIN};
            double fl[3] = {r * 0.5, -1e300, 1.0 / 3.0};
            const char *sl[3] = {"a", "", s};
            const void *bl[2] = {by, by + 1};
            size_t bll[2] = {5, (size_t)(r % 4)};
            int n = (int)(r % 3);
            int rc = 0;
            switch (ty) {
            case RL_COL_STRING: rc = rl_column_set_str(c, r, r % 4 ? s : ""); break;
            case RL_COL_INT64: rc = rl_column_set_i64(c, r, r * 1000003 - 5); break;
            case RL_COL_DOUBLE: rc = rl_column_set_f64(c, r, r * 0.25 - 3.5); break;
            case RL_COL_BYTES: rc = rl_column_set_bytes(c, r, by, (size_t)(r % 6)); break;
            case RL_COL_STRING_LIST: rc = rl_column_set_str_list(c, r, sl, n); break;
            case RL_COL_INT64_LIST: rc = rl_column_set_i64_list(c, r, il, r % 5); break;
            case RL_COL_DOUBLE_LIST: rc = rl_column_set_f64_list(c, r, fl, n + 1); break;
            case RL_COL_BYTES_LIST: rc = rl_column_set_bytes_list(c, r, bl, bll, n % 3); break;
            }
            assert_int_equal(rc, 0);
        }
    }
    json_t *meta = json_pack("{s:i, s:f, s:s, s:b, s:n, s:[i, s, [f, {s:s}]], s:{s:{s:[]}, s:{}}}",
                             "step", 42, "lr", 1e-6, "recipe", "grpo \xe2\x9c\x93", "eval", 1,
                             "none", "list", 1, "two", 3.5, "deep", "x", "nest", "a", "b",
                             "empty");
    assert_non_null(meta);
    assert_int_equal(rl_dataproto_set_meta(dp, meta), 0);
    return dp;
}

/* One f32 tensor of about `bytes` bytes, (rows, 1024), plus a small column. */
static rl_dataproto *s_make_big(size_t bytes)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t shape[2] = {(int64_t)(bytes / 4096), 1024};
    rl_tensor *t = rl_dataproto_new_tensor(dp, "x", RL_F32, 2, shape);
    assert_non_null(t);
    s_fill(rl_tensor_data(t), rl_tensor_nbytes(t), 99);
    rl_column *c = rl_dataproto_new_column(dp, "id", RL_COL_INT64);
    for (int64_t r = 0; r < shape[0]; r++)
        rl_column_set_i64(c, r, r);
    return dp;
}

/* ---- socket pairs ----------------------------------------------------------------- */

typedef struct pair {
    void *ctx, *a, *b;
    char dir[64];
} pair;

static void s_pair_open(pair *p, const char *transport)
{
    memset(p, 0, sizeof *p);
    p->ctx = zmq_ctx_new();
    p->a = zmq_socket(p->ctx, ZMQ_PAIR);
    p->b = zmq_socket(p->ctx, ZMQ_PAIR);
    assert_non_null(p->a);
    assert_non_null(p->b);
    int ms = 20000;
    zmq_setsockopt(p->b, ZMQ_RCVTIMEO, &ms, sizeof ms);
    char ep[256];
    if (!strcmp(transport, "inproc")) {
        static int k;
        snprintf(ep, sizeof ep, "inproc://wire-test-%d", k++);
        assert_int_equal(zmq_bind(p->a, ep), 0);
    } else if (!strcmp(transport, "ipc")) {
        snprintf(p->dir, sizeof p->dir, "/tmp/rl-wire-XXXXXX");
        assert_non_null(mkdtemp(p->dir));
        snprintf(ep, sizeof ep, "ipc://%s/sock", p->dir);
        assert_int_equal(zmq_bind(p->a, ep), 0);
    } else {
        assert_int_equal(zmq_bind(p->a, "tcp://127.0.0.1:*"), 0);
        size_t len = sizeof ep;
        assert_int_equal(zmq_getsockopt(p->a, ZMQ_LAST_ENDPOINT, ep, &len), 0);
        assert_non_null(strstr(ep, "tcp://127.0.0.1:"));
    }
    assert_int_equal(zmq_connect(p->b, ep), 0);
}

static void s_pair_close(pair *p)
{
    int zero = 0;
    zmq_setsockopt(p->a, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(p->b, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(p->a);
    zmq_close(p->b);
    zmq_ctx_term(p->ctx);
    if (p->dir[0]) {
        char path[128];
        snprintf(path, sizeof path, "%s/sock", p->dir);
        unlink(path);
        rmdir(p->dir);
    }
}

/* Waits (up to 5 s) for the I/O thread to drop its references. */
static int s_wait_refcount(rl_storage *s, int want)
{
    for (int i = 0; i < 5000 && atomic_load(&s->refcount) != want; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&s->refcount);
}

/* Sends dp a -> b, receives, checks equality and zero copy on both sides. */
static void s_roundtrip(const char *transport, rl_dataproto *dp)
{
    pair p;
    s_pair_open(&p, transport);
    int nt = rl_dataproto_tensor_count(dp);
    int before[64];
    for (int i = 0; i < nt && i < 64; i++)
        before[i] = atomic_load(&rl_dataproto_tensor_at(dp, i)->storage->refcount);
    assert_int_equal(rl_wire_send_dataproto(p.a, dp, 0), 0);
    rl_dataproto *got = NULL;
    if (rl_wire_recv_dataproto(p.b, &got))
        fail_msg("%s: recv: %s", transport, rl_error_message());
    assert_non_null(got);
    assert_true(rl_dataproto_equal(dp, got));
    assert_int_equal(rl_dataproto_rows(got), rl_dataproto_rows(dp));
    assert_int_equal(rl_dataproto_tensor_count(got), nt);
    for (int i = 0; i < nt; i++) {
        const rl_tensor *t = rl_dataproto_tensor_at(got, i);
        const rl_tensor *src = rl_dataproto_tensor(dp, rl_dataproto_tensor_name(got, i));
        size_t nb = rl_tensor_nbytes(t);
        if (nb < 4096)
            continue; /* small frames may be packed unaligned by libzmq and copied */
        /* Zero copy on receive: the tensor's storage IS the received message. */
        zmq_msg_t *m = t->storage->ctx;
        assert_non_null(m);
        assert_ptr_equal(zmq_msg_data(m), t->storage->data);
        assert_int_equal(zmq_msg_size(m), nb);
        assert_ptr_equal(rl_tensor_data(t), t->storage->data);
        if (!strcmp(transport, "inproc"))
            /* inproc passes the very bytes: nothing was copied at all. */
            assert_ptr_equal(rl_tensor_data(t), rl_tensor_data(src));
    }
    rl_dataproto_free(got);
    /* Zero copy on send: the frames held storage references until the bytes
     * were written; once delivered they are all dropped again. */
    for (int i = 0; i < nt && i < 64; i++) {
        rl_storage *s = rl_dataproto_tensor_at(dp, i)->storage;
        assert_int_equal(s_wait_refcount(s, before[i]), before[i]);
    }
    s_pair_close(&p);
}

static const char *s_transports[] = {"inproc", "ipc", "tcp"};

static void test_roundtrip_empty(void **state)
{
    (void)state;
    for (int k = 0; k < 3; k++) {
        rl_dataproto *dp = rl_dataproto_new(); /* rows unset, nothing */
        s_roundtrip(s_transports[k], dp);
        rl_dataproto_free(dp);
        dp = rl_dataproto_new(); /* 0 rows, no tensors */
        assert_int_equal(rl_dataproto_set_rows(dp, 0), 0);
        s_roundtrip(s_transports[k], dp);
        rl_dataproto_free(dp);
        dp = s_make_full(0); /* 0 rows, every dtype and column type */
        s_roundtrip(s_transports[k], dp);
        rl_dataproto_free(dp);
    }
}

static void test_roundtrip_all_types(void **state)
{
    (void)state;
    for (int k = 0; k < 3; k++) {
        for (int64_t rows = 1; rows <= 37; rows += 12) {
            rl_dataproto *dp = s_make_full(rows);
            s_roundtrip(s_transports[k], dp);
            rl_dataproto_free(dp);
        }
    }
}

static void test_roundtrip_large(void **state)
{
    (void)state;
    size_t sizes[] = {1 << 20, 64u << 20};
    for (int s = 0; s < 2; s++) {
        rl_dataproto *dp = s_make_big(sizes[s]);
        for (int k = 0; k < 3; k++)
            s_roundtrip(s_transports[k], dp);
        rl_dataproto_free(dp);
    }
}

/* Envelope frames before and after the DataProto in the same message. */
static void test_envelope_framing(void **state)
{
    (void)state;
    pair p;
    s_pair_open(&p, "tcp");
    rl_dataproto *dp = s_make_full(3);
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Call call = RL__CALL__INIT;
    env.protocol_version = RL_PROTOCOL_VERSION;
    env.seq = 17;
    env.body_case = RL__ENVELOPE__BODY_CALL;
    env.call = &call;
    call.call_id = 5;
    call.method = "compute_reward";
    call.has_payload = 1;
    uint8_t eb[256];
    size_t el = rl__envelope__pack(&env, eb);
    assert_int_equal(zmq_send(p.a, eb, el, ZMQ_SNDMORE), (int)el);
    assert_int_equal(rl_wire_send_dataproto(p.a, dp, 0), 0);
    uint8_t rb[256];
    int n = zmq_recv(p.b, rb, sizeof rb, 0);
    assert_int_equal(n, (int)el);
    Rl__Envelope *e = rl__envelope__unpack(NULL, (size_t)n, rb);
    assert_non_null(e);
    assert_int_equal(e->body_case, RL__ENVELOPE__BODY_CALL);
    assert_string_equal(e->call->method, "compute_reward");
    assert_true(e->call->has_payload);
    rl__envelope__free_unpacked(e, NULL);
    rl_dataproto *got;
    assert_int_equal(rl_wire_recv_dataproto(p.b, &got), 0);
    assert_true(rl_dataproto_equal(dp, got));
    rl_dataproto_free(got);
    /* ZMQ_SNDMORE: a trailing frame after the DataProto. */
    assert_int_equal(rl_wire_send_dataproto(p.a, dp, ZMQ_SNDMORE), 0);
    assert_int_equal(zmq_send(p.a, "end", 3, 0), 3);
    zmq_msg_t *msgs = calloc(32, sizeof *msgs);
    int k = 0, more = 1;
    while (more) {
        zmq_msg_init(&msgs[k]);
        assert_true(zmq_msg_recv(&msgs[k], p.b, 0) >= 0);
        more = zmq_msg_more(&msgs[k]);
        k++;
    }
    assert_int_equal(k, rl_dataproto_tensor_count(dp) + 2);
    assert_int_equal(zmq_msg_size(&msgs[k - 1]), 3);
    zmq_msg_close(&msgs[k - 1]);
    assert_int_equal(rl_wire_decode_msgs(msgs, k - 1, &got), 0);
    assert_true(rl_dataproto_equal(dp, got));
    rl_dataproto_free(got);
    free(msgs);
    rl_dataproto_free(dp);
    s_pair_close(&p);
}

/* The lower-level path: record the received frame addresses, then decode. */
static void test_zero_copy_decode_msgs(void **state)
{
    (void)state;
    pair p;
    s_pair_open(&p, "tcp");
    rl_dataproto *dp = s_make_big(1 << 20);
    rl_storage *st = rl_dataproto_tensor(dp, "x")->storage;
    assert_int_equal(atomic_load(&st->refcount), 1);
    assert_int_equal(rl_wire_send_dataproto(p.a, dp, 0), 0);
    zmq_msg_t msgs[2];
    for (int i = 0; i < 2; i++) {
        zmq_msg_init(&msgs[i]);
        assert_true(zmq_msg_recv(&msgs[i], p.b, 0) >= 0);
    }
    assert_false(zmq_msg_more(&msgs[1]));
    const char *frame = zmq_msg_data(&msgs[1]);
    size_t flen = zmq_msg_size(&msgs[1]);
    rl_dataproto *got;
    assert_int_equal(rl_wire_decode_msgs(msgs, 2, &got), 0);
    const char *d = rl_tensor_data(rl_dataproto_tensor(got, "x"));
    assert_true(d >= frame && d + (1 << 20) <= frame + flen);
    assert_ptr_equal(d, frame);
    assert_true(rl_dataproto_equal(dp, got));
    /* The sender's extra reference was dropped by libzmq after the send. */
    assert_int_equal(s_wait_refcount(st, 1), 1);
    /* A view outlives the DataProto: the frame stays alive through it. */
    rl_tensor *keep = rl_tensor_retain(rl_dataproto_tensor(got, "x"));
    rl_dataproto_free(got);
    assert_true(memcmp(rl_tensor_data(keep), rl_tensor_data(rl_dataproto_tensor(dp, "x")),
                       1 << 20) == 0);
    rl_tensor_release(keep);
    rl_dataproto_free(dp);
    s_pair_close(&p);
}

/* Unaligned frames (which libzmq produces for small messages) are copied. */
static void test_unaligned_frame_copied(void **state)
{
    (void)state;
    rl_dataproto *dp = s_make_full(2);
    void *packed;
    size_t len;
    assert_int_equal(rl_wire_encode_packed(dp, &packed, &len), 0);
    /* Header frame, then one frame per tensor; wrap a misaligned copy. */
    zmq_msg_t *f;
    int n;
    assert_int_equal(rl_wire_encode(dp, &f, &n), 0);
    rl_wire_frame fr[16];
    char *buf = malloc(1 << 16);
    size_t off = 1; /* odd offset: every multi-byte dtype is misaligned */
    rl_storage *own = rl_storage_wrap(buf, 1 << 16, NULL, NULL);
    for (int i = 0; i < n; i++) {
        memcpy(buf + off, zmq_msg_data(&f[i]), zmq_msg_size(&f[i]));
        fr[i].data = buf + off;
        fr[i].len = zmq_msg_size(&f[i]);
        fr[i].owner = own;
        off += zmq_msg_size(&f[i]);
        zmq_msg_close(&f[i]);
    }
    free(f);
    rl_dataproto *got;
    assert_int_equal(rl_wire_decode(fr, n, &got), 0);
    assert_true(rl_dataproto_equal(dp, got));
    for (int i = 0; i < rl_dataproto_tensor_count(got); i++) {
        const rl_tensor *t = rl_dataproto_tensor_at(got, i);
        size_t es = rl_dtype_size(t->dtype);
        assert_int_equal((uintptr_t)rl_tensor_data(t) % es, 0);
        if (es == 1 && rl_tensor_nbytes(t))
            assert_ptr_equal(t->storage, own); /* bytes are always aligned: view */
    }
    rl_dataproto_free(got);
    assert_int_equal(atomic_load(&own->refcount), 1);
    rl_storage_release(own); /* frees buf */
    /* Packed round trip (copying path). */
    assert_int_equal(rl_wire_decode_packed(packed, len, &got), 0);
    assert_true(rl_dataproto_equal(dp, got));
    rl_dataproto_free(got);
    free(packed);
    rl_dataproto_free(dp);
}

/* ---- decoder rejections ------------------------------------------------------------ */

/* A small valid header for: rows 3, tensors a f32 (3,2) frame 1 and b i64 (3)
 * frame 2, column c int64 [1,2,3], meta {"k": 1}. Tests mutate it. */
typedef struct hdr {
    Rl__DataProtoHeader h;
    Rl__TensorSpec ts[2], *tsp[2];
    Rl__Column col, *colp[1];
    int64_t shape_a[9], shape_b[1], ci64[3];
    Rl__Value meta, v1;
    Rl__MapValue map;
    Rl__MapEntry ent, *entp[1];
    uint8_t fa[24], fb[24];
} hdr;

static void s_hdr_init(hdr *x)
{
    memset(x, 0, sizeof *x);
    rl__data_proto_header__init(&x->h);
    x->h.version = RL_WIRE_VERSION;
    x->h.rows = 3;
    for (int i = 0; i < 2; i++) {
        rl__tensor_spec__init(&x->ts[i]);
        x->tsp[i] = &x->ts[i];
    }
    x->shape_a[0] = 3;
    x->shape_a[1] = 2;
    x->ts[0].name = "a";
    x->ts[0].dtype = RL_F32;
    x->ts[0].shape = x->shape_a;
    x->ts[0].n_shape = 2;
    x->ts[0].frame = 1;
    x->ts[0].nbytes = 24;
    x->shape_b[0] = 3;
    x->ts[1].name = "b";
    x->ts[1].dtype = RL_I64;
    x->ts[1].shape = x->shape_b;
    x->ts[1].n_shape = 1;
    x->ts[1].frame = 2;
    x->ts[1].nbytes = 24;
    x->h.tensors = x->tsp;
    x->h.n_tensors = 2;
    rl__column__init(&x->col);
    x->col.name = "c";
    x->col.type = RL_COL_INT64;
    for (int i = 0; i < 3; i++)
        x->ci64[i] = i + 1;
    x->col.i64 = x->ci64;
    x->col.n_i64 = 3;
    x->colp[0] = &x->col;
    x->h.columns = x->colp;
    x->h.n_columns = 1;
    rl__value__init(&x->meta);
    rl__value__init(&x->v1);
    rl__map_value__init(&x->map);
    rl__map_entry__init(&x->ent);
    x->v1.kind_case = RL__VALUE__KIND_INT_VALUE;
    x->v1.int_value = 1;
    x->ent.key.data = (uint8_t *)"k";
    x->ent.key.len = 1;
    x->ent.value = &x->v1;
    x->entp[0] = &x->ent;
    x->map.entries = x->entp;
    x->map.n_entries = 1;
    x->meta.kind_case = RL__VALUE__KIND_MAP_VALUE;
    x->meta.map_value = &x->map;
    x->h.meta = &x->meta;
    for (int i = 0; i < 24; i++)
        x->fa[i] = x->fb[i] = (uint8_t)i;
}

/* Packs x and decodes it with frames [header, fa (la bytes), fb (lb bytes)]
 * truncated to n frames; returns the status (dp freed). */
static int s_hdr_decode_n(hdr *x, int n, size_t la, size_t lb)
{
    size_t hl = rl__data_proto_header__get_packed_size(&x->h);
    uint8_t *hb = malloc(hl + 1);
    rl__data_proto_header__pack(&x->h, hb);
    rl_wire_frame fr[3] = {{hb, hl, NULL}, {x->fa, la, NULL}, {x->fb, lb, NULL}};
    rl_dataproto *dp = NULL;
    int rc = rl_wire_decode(fr, n, &dp);
    if (rc == 0) {
        assert_non_null(dp);
        rl_dataproto_free(dp);
    } else {
        assert_null(dp);
    }
    free(hb);
    return rc;
}

static int s_hdr_decode(hdr *x)
{
    return s_hdr_decode_n(x, 3, 24, 24);
}

#define EXPECT_REJECT(call, code, text) \
    do { \
        int rc_ = (call); \
        if (rc_ != (code)) \
            fail_msg("%s: expected %s, got %s (%s)", #call, rl_status_name(code), \
                     rl_status_name(rc_), rl_error_message()); \
        assert_msg_contains(text); \
    } while (0)

static void test_decode_valid_baseline(void **state)
{
    (void)state;
    hdr x;
    s_hdr_init(&x);
    size_t hl = rl__data_proto_header__get_packed_size(&x.h);
    uint8_t *hb = malloc(hl);
    rl__data_proto_header__pack(&x.h, hb);
    rl_wire_frame fr[3] = {{hb, hl, NULL}, {x.fa, 24, NULL}, {x.fb, 24, NULL}};
    rl_dataproto *dp;
    assert_int_equal(rl_wire_decode(fr, 3, &dp), 0);
    assert_int_equal(rl_dataproto_rows(dp), 3);
    const rl_tensor *a = rl_dataproto_tensor_typed(dp, "a", RL_F32);
    assert_non_null(a);
    assert_int_equal(a->shape[1], 2);
    assert_memory_equal(rl_tensor_data(a), x.fa, 24);
    assert_int_equal(rl_column_i64(rl_dataproto_column(dp, "c"), 2), 3);
    assert_int_equal(json_integer_value(json_object_get(rl_dataproto_meta(dp), "k")), 1);
    rl_dataproto_free(dp);
    free(hb);
}

static void test_decode_rejects_frames(void **state)
{
    (void)state;
    hdr x;
    rl_dataproto *dp;
    EXPECT_REJECT(rl_wire_decode(NULL, 0, &dp), RL_EPROTO,
                  "frame count: expected at least 1 (the header), got 0");
    s_hdr_init(&x);
    EXPECT_REJECT(s_hdr_decode_n(&x, 2, 24, 24), RL_EPROTO,
                  "frame count: expected 3 (1 header + 2 tensors), got 2");
    EXPECT_REJECT(s_hdr_decode_n(&x, 1, 24, 24), RL_EPROTO, "expected 3 (1 header + 2 tensors), got 1");
    EXPECT_REJECT(s_hdr_decode_n(&x, 3, 23, 24), RL_EPROTO,
                  "tensor 'a': frame 1 length expected 24 bytes, got 23");
    EXPECT_REJECT(s_hdr_decode_n(&x, 3, 24, 0), RL_EPROTO,
                  "tensor 'b': frame 2 length expected 24 bytes, got 0");
    x.ts[1].frame = 5;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "tensor 'b': frame index expected 1..2, got 5");
    x.ts[1].frame = 0;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "tensor 'b': frame index expected 1..2, got 0");
    x.ts[1].frame = 1;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "tensor 'b': frame 1 already used by tensor 'a'");
    s_hdr_init(&x);
    x.h.version = 2;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "header.version: expected 1, got 2");
}

static void test_decode_rejects_tensor_specs(void **state)
{
    (void)state;
    hdr x;
    s_hdr_init(&x);
    x.ts[0].nbytes = 20;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO,
                  "tensor 'a': nbytes expected 24 (numel 6 x 4), got 20");
    s_hdr_init(&x);
    x.shape_a[1] = -2;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "tensor 'a': shape[1] expected >= 0, got -2");
    s_hdr_init(&x);
    x.shape_a[1] = INT64_C(1) << 61; /* 3 x 2^61 fits, x 4 does not */
    x.shape_a[2] = 4;
    x.ts[0].n_shape = 3;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO,
                  "tensor 'a': shape product overflows int64 at shape[2] = 4");
    s_hdr_init(&x);
    x.shape_a[1] = INT64_C(1) << 61; /* numel fits, numel x 4 bytes does not */
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "x 4 bytes overflows");
    s_hdr_init(&x);
    x.shape_a[1] = INT64_MAX;
    x.shape_a[0] = 0;
    x.h.rows = 0;
    x.shape_b[0] = 0;
    /* 0 x huge = 0 elements: valid dims, but frames must be empty */
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "tensor 'a': nbytes expected 0 (numel 0 x 4), got 24");
    s_hdr_init(&x);
    for (int d = 0; d < 9; d++)
        x.shape_a[d] = d ? 1 : 3;
    x.ts[0].n_shape = 9;
    x.ts[0].nbytes = 12;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "tensor 'a': ndim expected 1..8, got 9");
    x.ts[0].n_shape = 0;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "tensor 'a': ndim expected 1..8, got 0");
    s_hdr_init(&x);
    x.ts[1].dtype = 42;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "tensor 'b': dtype expected a code in 1..9, got 42");
    x.ts[1].dtype = 0;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "tensor 'b': dtype expected a code in 1..9, got 0");
    s_hdr_init(&x);
    x.shape_b[0] = 2;
    x.ts[1].nbytes = 16;
    EXPECT_REJECT(s_hdr_decode_n(&x, 3, 24, 16), RL_EPROTO,
                  "tensor 'b': dim 0 expected 3 (rows), got 2");
    s_hdr_init(&x);
    x.ts[1].name = "a";
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO,
                  "tensors[1].name: duplicate tensor name 'a' (also tensors[0])");
    x.ts[1].name = "";
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "tensors[1].name: expected a non-empty name");
    s_hdr_init(&x);
    x.h.rows = -1;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO,
                  "header.rows: expected >= 0 with 2 tensors and 1 columns, got -1");
    x.h.rows = -7;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "header.rows: expected -1..2147483648, got -7");
}

/* header.rows is bounded (RL_WIRE_MAX_ROWS) even when no tensor or column
 * pins it, or only a zero-width tensor does: a batch claiming 2^62 + 1 rows
 * used to decode, and padding it for a chunk wrapped malloc's size. */
static void test_decode_rejects_huge_rows(void **state)
{
    (void)state;
    /* version 1, rows = 2^62 + 1 (sint64), nothing else */
    static const uint8_t raw[] = {0x08, 0x01, 0x10, 0x82, 0x80, 0x80, 0x80, 0x80,
                                  0x80, 0x80, 0x80, 0x80, 0x01};
    rl_wire_frame g = {raw, sizeof raw, NULL};
    rl_dataproto *dp = NULL;
    int rc = rl_wire_decode(&g, 1, &dp);
    if (rc == 0) {
        int64_t rows = rl_dataproto_rows(dp);
        rl_dataproto_free(dp);
        fail_msg("a header of %lld rows and no tensors was accepted", (long long)rows);
    }
    EXPECT_REJECT(rc, RL_EPROTO, "header.rows: expected -1..2147483648, got 4611686018427387905");
    assert_null(dp);
    /* a zero-width tensor [2^62 + 1, 0] with no bytes */
    hdr x;
    s_hdr_init(&x);
    x.h.rows = (INT64_C(1) << 62) + 1;
    x.shape_a[0] = x.h.rows;
    x.shape_a[1] = 0;
    x.ts[0].nbytes = 0;
    x.h.n_tensors = 1;
    x.h.n_columns = 0;
    EXPECT_REJECT(s_hdr_decode_n(&x, 2, 0, 0), RL_EPROTO,
                  "header.rows: expected -1..2147483648, got 4611686018427387905");
    x.h.rows = x.shape_a[0] = RL_WIRE_MAX_ROWS + 1;
    EXPECT_REJECT(s_hdr_decode_n(&x, 2, 0, 0), RL_EPROTO,
                  "header.rows: expected -1..2147483648, got 2147483649");
    /* the bound itself is accepted */
    x.h.rows = x.shape_a[0] = RL_WIRE_MAX_ROWS;
    assert_int_equal(s_hdr_decode_n(&x, 2, 0, 0), 0);
    /* and the encoder does not write what the decoder would refuse */
    rl_dataproto *big = rl_dataproto_new();
    assert_non_null(rl_dataproto_new_tensor(big, "w", RL_F32, 2,
                                            (int64_t[]){RL_WIRE_MAX_ROWS + 1, 0}));
    void *buf = NULL;
    size_t len = 0;
    assert_int_equal(rl_wire_encode_header(big, &buf, &len), RL_EINVAL);
    assert_string_equal(rl_error_message(), "DataProto has 2147483649 rows; the wire format "
                                            "allows at most 2147483648");
    assert_null(buf);
    rl_dataproto_free(big);
}

static void test_decode_rejects_columns(void **state)
{
    (void)state;
    hdr x;
    s_hdr_init(&x);
    x.col.type = 9;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "column 'c': type expected a code in 1..8, got 9");
    x.col.type = 0;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "column 'c': type expected a code in 1..8, got 0");
    s_hdr_init(&x);
    x.col.n_i64 = 2;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "column 'c': i64 expected 3 values (rows), got 2");
    s_hdr_init(&x);
    x.col.type = RL_COL_DOUBLE; /* values in the wrong field */
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO,
                  "column 'c' (double): field i64 expected empty, got 3 values");
    s_hdr_init(&x);
    x.col.name = "a";
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "columns[0].name: 'a' is also a tensor name");
    x.col.name = "";
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "columns[0].name: expected a non-empty name");
    /* two columns of the same name */
    s_hdr_init(&x);
    Rl__Column *two[2] = {&x.col, &x.col};
    x.h.columns = two;
    x.h.n_columns = 2;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO,
                  "columns[1].name: duplicate column name 'c' (also columns[0])");
    /* too many columns is refused before any name comparison */
    Rl__Column **many = malloc((RL_WIRE_MAX_COLUMNS + 1) * sizeof *many);
    for (int i = 0; i <= RL_WIRE_MAX_COLUMNS; i++)
        many[i] = &x.col;
    x.h.columns = many;
    x.h.n_columns = RL_WIRE_MAX_COLUMNS + 1;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "header.columns: expected at most 4096, got 4097");
    free(many);
    /* list columns: list_len count and sum */
    s_hdr_init(&x);
    int64_t ll[3] = {1, 0, 1};
    x.col.type = RL_COL_INT64_LIST;
    x.col.list_len = ll;
    x.col.n_list_len = 3;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "column 'c': i64 expected 2 values (sum of list_len), got 3");
    x.col.n_list_len = 2;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "column 'c': list_len expected 3 entries (rows), got 2");
    x.col.n_list_len = 3;
    ll[1] = -1;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "column 'c' row 1: list length -1 is negative");
    ll[1] = 5;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "column 'c' row 1: list length 5 is negative or runs past the 3 values");
    ll[1] = 1;
    assert_int_equal(s_hdr_decode(&x), 0);
    s_hdr_init(&x);
    x.col.list_len = ll;
    x.col.n_list_len = 3;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "column 'c' (int64): list_len expected empty, got 3 values");
    /* strings must not hold NUL bytes */
    s_hdr_init(&x);
    ProtobufCBinaryData bl[3] = {{1, (uint8_t *)"x"}, {3, (uint8_t *)"a\0b"}, {0, NULL}};
    x.col.type = RL_COL_STRING;
    x.col.n_i64 = 0;
    x.col.blobs = bl;
    x.col.n_blobs = 3;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "column 'c': string value 1 contains a NUL byte");
    x.col.type = RL_COL_BYTES; /* fine as bytes */
    assert_int_equal(s_hdr_decode(&x), 0);
}

static void test_decode_rejects_meta(void **state)
{
    (void)state;
    hdr x;
    s_hdr_init(&x);
    x.meta.kind_case = RL__VALUE__KIND_INT_VALUE;
    x.meta.int_value = 3;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "meta: expected a map, got int");
    s_hdr_init(&x);
    x.v1.kind_case = RL__VALUE__KIND__NOT_SET;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "meta.k: value expected one of null/bool/int/double/string/map/list, got nothing");
    s_hdr_init(&x);
    x.v1.kind_case = RL__VALUE__KIND_DOUBLE_VALUE;
    x.v1.double_value = NAN;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "meta.k: expected a finite double, got nan");
    s_hdr_init(&x);
    x.v1.kind_case = RL__VALUE__KIND_STRING_VALUE;
    x.v1.string_value.data = (uint8_t *)"\xff\xfe";
    x.v1.string_value.len = 2;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "meta.k: string of 2 bytes is not valid UTF-8");
    s_hdr_init(&x);
    Rl__MapEntry *two[2] = {&x.ent, &x.ent};
    x.map.entries = two;
    x.map.n_entries = 2;
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "meta.k: duplicate key");
    s_hdr_init(&x);
    x.ent.key.data = (uint8_t *)"\xc3";
    EXPECT_REJECT(s_hdr_decode(&x), RL_EPROTO, "key is not valid UTF-8");
}

/* Nested lists [[[...]]] of `levels` Values built from raw protobuf bytes
 * (inside out), as a header with meta {"d": <that>}. Returns a malloc'd frame. */
static uint8_t *s_deep_header(int levels, size_t *len)
{
    size_t cap = (size_t)levels * 24 + 64;
    uint8_t *b = malloc(cap);
    size_t start = cap;
    /* innermost value: null_value = true  (field 1 varint) */
    b[--start] = 1;
    b[--start] = 0x08;
    for (int i = 1; i < levels; i++) {
        size_t inner = cap - start;
        uint8_t tmp[10];
        /* ListValue { items(1) = Value } then Value { list_value(7) = ListValue } */
        for (int wrap = 0; wrap < 2; wrap++) {
            size_t l = cap - start, k = 0;
            uint64_t v = l;
            do {
                tmp[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
                v >>= 7;
            } while (v);
            for (size_t j = k; j > 0; j--)
                b[--start] = tmp[j - 1];
            b[--start] = wrap == 0 ? 0x0a : 0x3a;
        }
        (void)inner;
    }
    /* MapEntry { key "d", value(2) = Value }, MapValue { entries(1) },
     * Value { map_value(6) }, header { version 1, meta(5) } */
    uint8_t tags[4] = {0x12, 0x0a, 0x32, 0x2a};
    for (int w = 0; w < 4; w++) {
        size_t l = cap - start, k = 0;
        uint8_t tmp[10];
        uint64_t v = l + (w == 0 ? 0 : 0);
        do {
            tmp[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
            v >>= 7;
        } while (v);
        for (size_t j = k; j > 0; j--)
            b[--start] = tmp[j - 1];
        b[--start] = tags[w];
        if (w == 0) { /* key "d" goes in front of the value */
            b[--start] = 'd';
            b[--start] = 1;
            b[--start] = 0x0a;
        }
    }
    b[--start] = 1;
    b[--start] = 0x08; /* version = 1 */
    *len = cap - start;
    memmove(b, b + start, *len);
    return b;
}

static void test_decode_rejects_deep_meta(void **state)
{
    (void)state;
    /* Depth counts meta itself (1) then "d" (2): levels + 1 in all. */
    int ok_levels = RL_WIRE_MAX_META_DEPTH - 1;
    size_t len;
    uint8_t *b = s_deep_header(ok_levels, &len);
    rl_wire_frame f = {b, len, NULL};
    rl_dataproto *dp;
    if (rl_wire_decode(&f, 1, &dp))
        fail_msg("depth %d: %s", ok_levels + 1, rl_error_message());
    json_t *j = json_object_get(rl_dataproto_meta(dp), "d");
    int depth = 0;
    while (json_is_array(j)) {
        depth++;
        j = json_array_get(j, 0);
    }
    assert_true(json_is_null(j));
    assert_int_equal(depth, ok_levels - 1);
    /* and it can be sent back out */
    void *pk;
    size_t pl;
    assert_int_equal(rl_wire_encode_packed(dp, &pk, &pl), 0);
    free(pk);
    rl_dataproto_free(dp);
    free(b);
    b = s_deep_header(ok_levels + 1, &len);
    f.data = b;
    f.len = len;
    EXPECT_REJECT(rl_wire_decode(&f, 1, &dp), RL_EPROTO, "meta: nesting depth expected at most 64, got more");
    free(b);
    /* Far deeper than any stack would survive in a recursive unpacker. */
    b = s_deep_header(200000, &len);
    f.data = b;
    f.len = len;
    EXPECT_REJECT(rl_wire_decode(&f, 1, &dp), RL_EPROTO, "nesting depth expected at most 64");
    free(b);
    /* The encoder refuses to produce what the decoder would refuse. */
    dp = rl_dataproto_new();
    json_t *deep = json_null();
    for (int i = 0; i < RL_WIRE_MAX_META_DEPTH + 1; i++) {
        json_t *a = json_array();
        json_array_append_new(a, deep);
        deep = a;
    }
    json_object_set_new(rl_dataproto_meta(dp), "d", deep);
    EXPECT_REJECT(rl_wire_encode_packed(dp, &pk, &pl), RL_EINVAL, "meta: nesting deeper than 64");
    rl_dataproto_free(dp);
}

static void test_decode_rejects_garbage(void **state)
{
    (void)state;
    hdr x;
    s_hdr_init(&x);
    size_t hl = rl__data_proto_header__get_packed_size(&x.h);
    uint8_t *hb = malloc(hl);
    rl__data_proto_header__pack(&x.h, hb);
    rl_dataproto *dp;
    int truncated = 0;
    for (size_t cut = 1; cut < hl; cut++) {
        rl_wire_frame fr[3] = {{hb, cut, NULL}, {x.fa, 24, NULL}, {x.fb, 24, NULL}};
        int rc = rl_wire_decode(fr, 3, &dp);
        if (rc == 0) { /* a prefix ending on a field boundary can be valid */
            rl_dataproto_free(dp);
            continue;
        }
        assert_null(dp);
        if (strstr(rl_error_message(), "truncated"))
            truncated++;
    }
    assert_true(truncated > 0);
    uint8_t junk[32];
    memset(junk, 0xff, sizeof junk);
    rl_wire_frame g = {junk, sizeof junk, NULL};
    EXPECT_REJECT(rl_wire_decode(&g, 1, &dp), RL_EPROTO, "header: truncated or garbage protobuf");
    uint8_t wt7[2] = {0x0f, 0x00};
    g.data = wt7;
    g.len = 2;
    EXPECT_REJECT(rl_wire_decode(&g, 1, &dp), RL_EPROTO, "header: garbage protobuf (wire type 7");
    /* Field number 0 (here a non-canonical tag, which protobuf-c accepts but
     * then re-encodes into bytes it rejects: found by fuzz_wire_envelope). */
    uint8_t f0[3] = {0x80, 0x00, 0x01};
    g.data = f0;
    g.len = 3;
    EXPECT_REJECT(rl_wire_decode(&g, 1, &dp), RL_EPROTO, "header: garbage protobuf (field number 0");
    Rl__Envelope *env = NULL;
    EXPECT_REJECT(rl_wire_unpack_envelope(f0, 3, &env), RL_EPROTO,
                  "envelope: garbage protobuf (field number 0");
    /* Well-formed protobuf with the wrong field types. */
    uint8_t wrong[3] = {0x0a, 0x01, 0x00}; /* version as length-delimited */
    g.data = wrong;
    g.len = 3;
    EXPECT_REJECT(rl_wire_decode(&g, 1, &dp), RL_EPROTO, "not a valid rl.DataProtoHeader protobuf");
    /* Empty header frame: version 0. */
    g.len = 0;
    EXPECT_REJECT(rl_wire_decode(&g, 1, &dp), RL_EPROTO, "header.version: expected 1, got 0");
    /* Packed framing. */
    uint8_t pk[6] = {4, 0, 0, 0, 1, 2};
    EXPECT_REJECT(rl_wire_decode_packed(pk, 6, &dp), RL_EPROTO,
                  "packed frames: frame 0 length 4 exceeds the 2 bytes left");
    EXPECT_REJECT(rl_wire_decode_packed(pk, 3, &dp), RL_EPROTO,
                  "packed frames: 3 trailing bytes, expected a 4-byte length");
    free(hb);
}

/* Sending what cannot be encoded fails cleanly and leaks no reference. */
static void test_send_errors(void **state)
{
    (void)state;
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_PUSH); /* never connected: DONTWAIT gives EAGAIN */
    rl_dataproto *dp = s_make_big(1 << 16);
    rl_storage *st = rl_dataproto_tensor(dp, "x")->storage;
    EXPECT_REJECT(rl_wire_send_dataproto(s, dp, ZMQ_DONTWAIT), RL_ETIMEOUT,
                  "rl_wire_send_dataproto: frame 0 of 2");
    assert_int_equal(atomic_load(&st->refcount), 1);
    rl_dataproto_free(dp);
    zmq_close(s);
    zmq_ctx_term(ctx);
}

/* Too many frames: refused, and the rest of that message is drained so the
 * next DataProto on the socket still decodes. A receive timeout is
 * RL_ETIMEOUT. */
static void test_recv_frame_limit_and_timeout(void **state)
{
    (void)state;
    pair p;
    s_pair_open(&p, "inproc");
    int n = RL_WIRE_MAX_TENSORS + 4;
    for (int i = 0; i < n; i++)
        assert_int_equal(zmq_send(p.a, "", 0, i < n - 1 ? ZMQ_SNDMORE : 0), 0);
    rl_dataproto *dp = s_make_full(2), *got = NULL;
    assert_int_equal(rl_wire_send_dataproto(p.a, dp, 0), 0);
    EXPECT_REJECT(rl_wire_recv_dataproto(p.b, &got), RL_EPROTO,
                  "frame count: expected at most 4097, got 4100");
    assert_null(got);
    assert_int_equal(rl_wire_recv_dataproto(p.b, &got), 0);
    assert_true(rl_dataproto_equal(dp, got));
    rl_dataproto_free(got);
    int ms = 50;
    zmq_setsockopt(p.b, ZMQ_RCVTIMEO, &ms, sizeof ms);
    EXPECT_REJECT(rl_wire_recv_dataproto(p.b, &got), RL_ETIMEOUT, "rl_wire_recv_dataproto: frame 0");
    rl_dataproto_free(dp);
    s_pair_close(&p);
}

static size_t s_put_len(uint8_t *b, size_t start, uint64_t v)
{
    uint8_t t[10];
    size_t k = 0;
    do {
        t[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    for (size_t j = k; j > 0; j--)
        b[--start] = t[j - 1];
    return start;
}

/* Envelope { call { args = [[[...null...]]] (levels Values) } } as raw bytes. */
static uint8_t *s_deep_envelope(int levels, size_t *len)
{
    size_t cap = (size_t)levels * 24 + 64, start = cap;
    uint8_t *b = malloc(cap);
    b[--start] = 1;
    b[--start] = 0x08; /* Value.null_value */
    for (int i = 1; i < levels; i++)
        for (int w = 0; w < 2; w++) {
            start = s_put_len(b, start, cap - start);
            b[--start] = w == 0 ? 0x0a : 0x3a; /* ListValue.items, Value.list_value */
        }
    start = s_put_len(b, start, cap - start);
    b[--start] = 0x22; /* Call.args (4) */
    start = s_put_len(b, start, cap - start);
    b[--start] = 0x6a; /* Envelope.call (13) */
    b[--start] = RL_PROTOCOL_VERSION;
    b[--start] = 0x08; /* Envelope.protocol_version */
    *len = cap - start;
    memmove(b, b + start, *len);
    return b;
}

/* Plain rl__envelope__unpack() overflows the stack on ~200k nested lists
 * (checked by hand: SIGSEGV); rl_wire_unpack_envelope() refuses them. */
/* Appends the varint v at p; returns the new end. */
static uint8_t *s_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* An Envelope{protocol_version 1, call{args: list of n empty Values}}: each
 * item is 2 bytes on the wire and a struct of ~50 bytes unpacked. */
static uint8_t *s_wide_envelope(size_t n, size_t *len)
{
    size_t items = 2 * n;
    uint8_t *b = malloc(items + 64), *p = b;
    assert_non_null(b);
    uint8_t list_hdr[16], *lh = list_hdr, args_hdr[16], *ah = args_hdr, call_hdr[16], *ch = call_hdr;
    lh = s_varint(lh, items);                               /* ListValue bytes */
    size_t value_len = 1 + (size_t)(lh - list_hdr) + items; /* Value{list_value} */
    ah = s_varint(ah, value_len);
    size_t call_len = 1 + (size_t)(ah - args_hdr) + value_len; /* Call{args} */
    ch = s_varint(ch, call_len);
    *p++ = 0x08; /* protocol_version = 1 */
    *p++ = 0x01;
    *p++ = 0x6a; /* call (field 13) */
    memcpy(p, call_hdr, (size_t)(ch - call_hdr));
    p += ch - call_hdr;
    *p++ = 0x22; /* args (field 4) */
    memcpy(p, args_hdr, (size_t)(ah - args_hdr));
    p += ah - args_hdr;
    *p++ = 0x32; /* list_value (field 6) */
    memcpy(p, list_hdr, (size_t)(lh - list_hdr));
    p += lh - list_hdr;
    for (size_t i = 0; i < n; i++) {
        *p++ = 0x0a; /* items: an empty Value */
        *p++ = 0x00;
    }
    *len = (size_t)(p - b);
    return b;
}

/* A small frame must not unpack into much more memory than it is: a list of
 * empty Values takes ~50× its bytes; the unpacking has a budget of 8× + 64
 * MiB, and frames over RL_WIRE_MAX_ENVELOPE_BYTES are refused unread. */
static void test_envelope_memory_budget(void **state)
{
    (void)state;
    size_t len;
    Rl__Envelope *e = NULL;
    uint8_t *b = s_wide_envelope(1000, &len); /* a small one unpacks */
    if (rl_wire_unpack_envelope(b, len, &e))
        fail_msg("1000 items: %s", rl_error_message());
    assert_int_equal(e->call->args->list_value->n_items, 1000);
    rl__envelope__free_unpacked(e, NULL);
    free(b);
    b = s_wide_envelope((size_t)2 << 20, &len); /* 4 MiB: ~200 MiB unpacked */
    EXPECT_REJECT(rl_wire_unpack_envelope(b, len, &e), RL_EPROTO, "decoding it needs more than");
    assert_null(e);
    free(b);
    b = calloc(RL_WIRE_MAX_ENVELOPE_BYTES + 1, 1);
    assert_non_null(b);
    EXPECT_REJECT(rl_wire_unpack_envelope(b, RL_WIRE_MAX_ENVELOPE_BYTES + 1, &e), RL_EPROTO,
                  "envelope frame: expected at most 67108864 bytes, got 67108865");
    free(b);
}

static void test_envelope_unpack_depth(void **state)
{
    (void)state;
    size_t len;
    Rl__Envelope *e = NULL;
    uint8_t *b = s_deep_envelope(RL_WIRE_MAX_META_DEPTH, &len);
    if (rl_wire_unpack_envelope(b, len, &e))
        fail_msg("depth %d: %s", RL_WIRE_MAX_META_DEPTH, rl_error_message());
    assert_int_equal(e->protocol_version, RL_PROTOCOL_VERSION);
    assert_int_equal(e->body_case, RL__ENVELOPE__BODY_CALL);
    const Rl__Value *v = e->call->args;
    int depth = 1;
    while (v->kind_case == RL__VALUE__KIND_LIST_VALUE) {
        v = v->list_value->items[0];
        depth++;
    }
    assert_int_equal(depth, RL_WIRE_MAX_META_DEPTH);
    rl__envelope__free_unpacked(e, NULL);
    free(b);
    b = s_deep_envelope(RL_WIRE_MAX_META_DEPTH + 1, &len);
    EXPECT_REJECT(rl_wire_unpack_envelope(b, len, &e), RL_EPROTO,
                  "envelope: nesting depth expected at most 64, got more");
    assert_null(e);
    free(b);
    b = s_deep_envelope(200000, &len);
    EXPECT_REJECT(rl_wire_unpack_envelope(b, len, &e), RL_EPROTO, "nesting depth");
    free(b);
    uint8_t junk[4] = {0x6a, 0x10, 0x22, 0x00};
    EXPECT_REJECT(rl_wire_unpack_envelope(junk, 4, &e), RL_EPROTO,
                  "envelope: truncated protobuf (length-delimited field 13");
    /* every body kind round trips */
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Heartbeat hb = RL__HEARTBEAT__INIT;
    env.protocol_version = RL_PROTOCOL_VERSION;
    env.body_case = RL__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    hb.time_ns = 123456789;
    uint8_t buf[64];
    size_t n = rl__envelope__pack(&env, buf);
    assert_int_equal(rl_wire_unpack_envelope(buf, n, &e), 0);
    assert_int_equal(e->heartbeat->time_ns, 123456789);
    rl__envelope__free_unpacked(e, NULL);
}

/* ---- seeds and regressions -------------------------------------------------------- */

/* The seed set: deterministic batches covering every dtype, column type and
 * meta kind. The committed files must decode to exactly these, so this also
 * pins the wire format: an incompatible change breaks this test. */
static rl_dataproto *s_seed(int i)
{
    switch (i) {
    case 0: return rl_dataproto_new();
    case 1: {
        rl_dataproto *dp = rl_dataproto_new();
        rl_dataproto_set_rows(dp, 0);
        return dp;
    }
    case 2: return s_make_full(0);
    case 3: return s_make_full(1);
    case 4: return s_make_full(4);
    case 5: {
        hdr x;
        s_hdr_init(&x);
        rl_dataproto *dp = rl_dataproto_new();
        int64_t sh[2] = {3, 2};
        rl_tensor *a = rl_tensor_from_data(RL_F32, 2, sh, x.fa);
        rl_tensor *b = rl_tensor_from_data(RL_I64, 1, sh, x.fb);
        rl_dataproto_add_tensor(dp, "a", a);
        rl_dataproto_add_tensor(dp, "b", b);
        rl_tensor_release(a);
        rl_tensor_release(b);
        rl_column *c = rl_dataproto_new_column(dp, "c", RL_COL_INT64);
        for (int r = 0; r < 3; r++)
            rl_column_set_i64(c, r, r + 1);
        json_object_set_new(rl_dataproto_meta(dp), "k", json_integer(1));
        return dp;
    }
    default: return NULL;
    }
}

static int s_read_file(const char *path, uint8_t **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *buf = malloc(n > 0 ? (size_t)n : 1);
    *len = fread(*buf, 1, (size_t)(n > 0 ? n : 0), f);
    fclose(f);
    return 0;
}

static void test_seeds_match_encoder(void **state)
{
    (void)state;
    const char *write = getenv("RL_WIRE_WRITE_SEEDS");
    char dir[4096];
    if (rl_test_srcpath(dir, sizeof dir, SEED_DIR))
        fail_msg("%s", rl_error_message());
    for (int i = 0; ; i++) {
        rl_dataproto *dp = s_seed(i);
        if (!dp)
            break;
        void *pk;
        size_t pl;
        assert_int_equal(rl_wire_encode_packed(dp, &pk, &pl), 0);
        char path[4200];
        snprintf(path, sizeof path, "%s/seed-%02d.bin", dir, i);
        if (write) {
            FILE *f = fopen(path, "wb");
            assert_non_null(f);
            assert_int_equal(fwrite(pk, 1, pl, f), pl);
            fclose(f);
        }
        uint8_t *fb;
        size_t fl;
        if (s_read_file(path, &fb, &fl))
            fail_msg("%s: missing (regenerate with RL_WIRE_WRITE_SEEDS=1)", path);
        rl_dataproto *got;
        if (rl_wire_decode_packed(fb, fl, &got))
            fail_msg("%s: %s", path, rl_error_message());
        if (!rl_dataproto_equal(dp, got))
            fail_msg("%s: decodes to a different DataProto than the encoder's seed %d", path, i);
        assert_int_equal(fl, pl); /* the encoding itself is stable */
        assert_memory_equal(fb, pk, pl);
        rl_dataproto_free(got);
        free(fb);
        free(pk);
        rl_dataproto_free(dp);
    }
}

/* The runtime's receive path uses the depth-checked unpacker: a hostile
 * nested envelope is an error for that peer, not a crashed driver. */
static void test_runtime_recv_refuses_deep_envelope(void **state)
{
    (void)state;
    void *ctx = zmq_ctx_new();
    void *router = zmq_socket(ctx, ZMQ_ROUTER), *dealer = zmq_socket(ctx, ZMQ_DEALER);
    assert_int_equal(zmq_bind(router, "inproc://wire-deep-env"), 0);
    assert_int_equal(zmq_connect(dealer, "inproc://wire-deep-env"), 0);
    size_t len;
    uint8_t *b = s_deep_envelope(200000, &len);
    assert_int_equal(zmq_send(dealer, b, len, 0), (int)len);
    free(b);
    zmq_pollitem_t it = {router, 0, ZMQ_POLLIN, 0};
    assert_int_equal(zmq_poll(&it, 1, 5000), 1);
    rl_msg m;
    EXPECT_REJECT(rl_msg_recv(router, 1, &m), RL_EPROTO, "nesting depth expected at most 64");
    assert_true(m.id_len > 0); /* the caller can still answer that peer */
    assert_null(m.env);
    rl_msg_clear(&m);
    /* the socket stays in step: the next message is fine */
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Heartbeat hb = RL__HEARTBEAT__INIT;
    env.body_case = RL__ENVELOPE__BODY_HEARTBEAT;
    env.heartbeat = &hb;
    assert_int_equal(rl_msg_send(dealer, NULL, 0, &env, NULL), 0);
    assert_int_equal(zmq_poll(&it, 1, 5000), 1);
    assert_int_equal(rl_msg_recv(router, 1, &m), 0);
    assert_int_equal(m.env->body_case, RL__ENVELOPE__BODY_HEARTBEAT);
    rl_msg_clear(&m);
    int zero = 0;
    zmq_setsockopt(dealer, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(dealer);
    zmq_close(router);
    zmq_ctx_term(ctx);
}

#define ENV_SEED_DIR "fuzz/seeds/fuzz_wire_envelope"

/* Seeds for fuzz_wire_envelope: one envelope of each kind that carries
 * fields, written with RL_WIRE_WRITE_SEEDS=1 and checked to unpack. */
static void test_envelope_seeds(void **state)
{
    (void)state;
    const char *write = getenv("RL_WIRE_WRITE_SEEDS");
    char dir[4096];
    if (rl_test_srcpath(dir, sizeof dir, ENV_SEED_DIR))
        fail_msg("%s", rl_error_message());
    Rl__Value leaf = RL__VALUE__INIT, args = RL__VALUE__INIT, *items[1] = {&leaf};
    Rl__ListValue lv = RL__LIST_VALUE__INIT;
    leaf.kind_case = RL__VALUE__KIND_STRING_VALUE;
    leaf.string_value.data = (uint8_t *)"greedy";
    leaf.string_value.len = 6;
    lv.items = items;
    lv.n_items = 1;
    args.kind_case = RL__VALUE__KIND_LIST_VALUE;
    args.list_value = &lv;
    Rl__Hello hello = RL__HELLO__INIT;
    char *devs[2] = {"cpu", "cuda:0"};
    hello.role = "rollout";
    hello.rank = 1;
    hello.world_size = 2;
    hello.node = "node0";
    hello.pid = 4242;
    hello.devices = devs;
    hello.n_devices = 2;
    hello.data_endpoint = "tcp://127.0.0.1:5555";
    Rl__Call call = RL__CALL__INIT;
    call.call_id = 9;
    call.method = "generate";
    call.has_payload = 1;
    call.args = &args;
    Rl__Reply reply = RL__REPLY__INIT;
    reply.call_id = 9;
    reply.result = &args;
    Rl__Error err = RL__ERROR__INIT;
    err.call_id = 9;
    err.code = RL_ESHAPE;
    err.message = "tensor 'x': dim 0 expected 4, got 3";
    Rl__Configure conf = RL__CONFIGURE__INIT;
    conf.config.data = (uint8_t *)"lr: 1e-6\n";
    conf.config.len = 9;
    conf.config_format = "yaml";
    conf.heartbeat_ms = 1000;
    conf.liveness = 3;
    conf.extra = &args;
    for (int i = 0; i < 5; i++) {
        Rl__Envelope env = RL__ENVELOPE__INIT;
        env.protocol_version = RL_PROTOCOL_VERSION;
        env.seq = (uint64_t)i + 1;
        switch (i) {
        case 0: env.body_case = RL__ENVELOPE__BODY_HELLO; env.hello = &hello; break;
        case 1: env.body_case = RL__ENVELOPE__BODY_CONFIGURE; env.configure = &conf; break;
        case 2: env.body_case = RL__ENVELOPE__BODY_CALL; env.call = &call; break;
        case 3: env.body_case = RL__ENVELOPE__BODY_REPLY; env.reply = &reply; break;
        default: env.body_case = RL__ENVELOPE__BODY_ERROR; env.error = &err; break;
        }
        uint8_t buf[512];
        size_t n = rl__envelope__pack(&env, buf);
        char path[4200];
        snprintf(path, sizeof path, "%s/seed-%02d.bin", dir, i);
        if (write) {
            mkdir(dir, 0755);
            FILE *f = fopen(path, "wb");
            assert_non_null(f);
            assert_int_equal(fwrite(buf, 1, n, f), n);
            fclose(f);
        }
        uint8_t *fb;
        size_t fl;
        if (s_read_file(path, &fb, &fl))
            fail_msg("%s: missing (regenerate with RL_WIRE_WRITE_SEEDS=1)", path);
        assert_int_equal(fl, n);
        assert_memory_equal(fb, buf, n);
        Rl__Envelope *e;
        assert_int_equal(rl_wire_unpack_envelope(fb, fl, &e), 0);
        assert_int_equal(e->body_case, env.body_case);
        assert_int_equal(e->seq, (uint64_t)i + 1);
        rl__envelope__free_unpacked(e, NULL);
        free(fb);
    }
}

/* Replays one regression input through the decoder it was found against.
 * Every input: an error leaves no object and says why; what decodes
 * survives a re-encode round trip. Inputs named by fuzz/gen_regressions.py
 * also carry the expected outcome: accept-* must decode, reject-* must be
 * refused, and the deep-nesting ones (the class of the protobuf-c stack
 * overflow that crashed the driver) by the nesting-depth check. */
static void s_replay(const char *name, const uint8_t *b, size_t n, void *ctx)
{
    int envelope = *(const int *)ctx;
    int want_ok = !strncmp(name, "accept-", 7), want_err = !strncmp(name, "reject-", 7);
    int rc;
    rl_error_clear();
    if (envelope) {
        Rl__Envelope *e = NULL;
        rc = rl_wire_unpack_envelope(b, n, &e);
        if (rc == 0)
            rl__envelope__free_unpacked(e, NULL);
        else if (e != NULL || rl_error_message()[0] == 0)
            fail_msg("%s: refused without a message or left an object", name);
    } else {
        rl_dataproto *dp = NULL;
        rc = rl_wire_decode_packed(b, n, &dp);
        if (rc) {
            if (dp != NULL || rl_error_message()[0] == 0)
                fail_msg("%s: refused without a message or left an object", name);
        } else {
            /* valid: must survive a round trip unchanged */
            void *pk;
            size_t pl;
            rl_dataproto *again;
            assert_int_equal(rl_wire_encode_packed(dp, &pk, &pl), 0);
            assert_int_equal(rl_wire_decode_packed(pk, pl, &again), 0);
            assert_true(rl_dataproto_equal(dp, again));
            rl_dataproto_free(again);
            free(pk);
            rl_dataproto_free(dp);
        }
    }
    if (want_ok && rc)
        fail_msg("%s: expected to decode, got %s", name, rl_error_message());
    if (want_err && !rc)
        fail_msg("%s: expected to be refused, but it decodes", name);
    if (want_err && strstr(name, "deep") && !strstr(rl_error_message(), "nesting depth"))
        fail_msg("%s: expected the nesting-depth refusal, got %s", name, rl_error_message());
}

static void test_replay_fuzz_regressions(void **state)
{
    (void)state;
    int header = 0, envelope = 1;
    int a = rl_fuzz_replay("fuzz_wire_decode", s_replay, &header);
    int b = rl_fuzz_replay("fuzz_wire_envelope", s_replay, &envelope);
    assert_true(a > 0 && b > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_empty),
        cmocka_unit_test(test_roundtrip_all_types),
        cmocka_unit_test(test_roundtrip_large),
        cmocka_unit_test(test_envelope_framing),
        cmocka_unit_test(test_zero_copy_decode_msgs),
        cmocka_unit_test(test_unaligned_frame_copied),
        cmocka_unit_test(test_decode_valid_baseline),
        cmocka_unit_test(test_decode_rejects_frames),
        cmocka_unit_test(test_decode_rejects_tensor_specs),
        cmocka_unit_test(test_decode_rejects_huge_rows),
        cmocka_unit_test(test_decode_rejects_columns),
        cmocka_unit_test(test_decode_rejects_meta),
        cmocka_unit_test(test_decode_rejects_deep_meta),
        cmocka_unit_test(test_decode_rejects_garbage),
        cmocka_unit_test(test_send_errors),
        cmocka_unit_test(test_recv_frame_limit_and_timeout),
        cmocka_unit_test(test_envelope_unpack_depth),
        cmocka_unit_test(test_envelope_memory_budget),
        cmocka_unit_test(test_runtime_recv_refuses_deep_envelope),
        cmocka_unit_test(test_seeds_match_encoder),
        cmocka_unit_test(test_envelope_seeds),
        cmocka_unit_test(test_replay_fuzz_regressions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
