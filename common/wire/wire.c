/* wire.c — DataProto <-> ZeroMQ multipart frames (see include/rlrt/wire.h).
 *
 * Encoding builds an rl.DataProtoHeader whose strings, shapes and column
 * cells point straight into the DataProto (nothing is copied before packing),
 * packs it into frame 0 and hands every tensor's bytes to libzmq with
 * zmq_msg_init_data(). Decoding first walks the header bytes with a small
 * schema-aware scanner (protobuf-c unpacks recursively with no depth limit, so
 * hostile meta nesting must be refused before it gets there), then unpacks,
 * validates every field against the frames, and only then builds the
 * DataProto.
 */
#include "rlrt/wire.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl.pb-c.h"
#include "rlrt/error.h"

/* ---- a tiny arena for the encoder's temporary protobuf structs ------------- */

typedef struct s_arena {
    void **blocks;
    size_t n, cap;
} s_arena;

static void *s_alloc(s_arena *a, size_t size)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        void **b = realloc(a->blocks, cap * sizeof *b);
        if (!b)
            return NULL;
        a->blocks = b;
        a->cap = cap;
    }
    void *p = calloc(1, size ? size : 1);
    if (p)
        a->blocks[a->n++] = p;
    return p;
}

static void s_arena_free(s_arena *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->blocks[i]);
    free(a->blocks);
    a->blocks = NULL;
    a->n = a->cap = 0;
}

/* ---- encode: meta -------------------------------------------------------------- */

static int s_value_from_json(s_arena *a, const json_t *j, Rl__Value *v, int depth)
{
    rl__value__init(v);
    if (depth > RL_WIRE_MAX_META_DEPTH)
        return rl_error_set(RL_EINVAL, "meta: nesting deeper than %d levels cannot be sent",
                            RL_WIRE_MAX_META_DEPTH);
    switch (json_typeof(j)) {
    case JSON_NULL:
        v->kind_case = RL__VALUE__KIND_NULL_VALUE;
        v->null_value = 1;
        return 0;
    case JSON_TRUE:
    case JSON_FALSE:
        v->kind_case = RL__VALUE__KIND_BOOL_VALUE;
        v->bool_value = json_is_true(j);
        return 0;
    case JSON_INTEGER:
        v->kind_case = RL__VALUE__KIND_INT_VALUE;
        v->int_value = (int64_t)json_integer_value(j);
        return 0;
    case JSON_REAL:
        v->kind_case = RL__VALUE__KIND_DOUBLE_VALUE;
        v->double_value = json_real_value(j);
        return 0;
    case JSON_STRING:
        v->kind_case = RL__VALUE__KIND_STRING_VALUE;
        v->string_value.data = (uint8_t *)json_string_value(j);
        v->string_value.len = json_string_length(j);
        return 0;
    case JSON_ARRAY: {
        Rl__ListValue *l = s_alloc(a, sizeof *l);
        size_t n = json_array_size(j);
        if (!l)
            return rl_error_set(RL_ENOMEM, "meta: out of memory");
        rl__list_value__init(l);
        l->items = s_alloc(a, n * sizeof *l->items);
        Rl__Value *vals = s_alloc(a, n * sizeof *vals);
        if (!l->items || !vals)
            return rl_error_set(RL_ENOMEM, "meta: out of memory");
        l->n_items = n;
        for (size_t i = 0; i < n; i++) {
            l->items[i] = &vals[i];
            int rc = s_value_from_json(a, json_array_get(j, i), &vals[i], depth + 1);
            if (rc)
                return rc;
        }
        v->kind_case = RL__VALUE__KIND_LIST_VALUE;
        v->list_value = l;
        return 0;
    }
    case JSON_OBJECT: {
        Rl__MapValue *m = s_alloc(a, sizeof *m);
        size_t n = json_object_size(j);
        if (!m)
            return rl_error_set(RL_ENOMEM, "meta: out of memory");
        rl__map_value__init(m);
        m->entries = s_alloc(a, n * sizeof *m->entries);
        Rl__MapEntry *ents = s_alloc(a, n * sizeof *ents);
        Rl__Value *vals = s_alloc(a, n * sizeof *vals);
        if (!m->entries || !ents || !vals)
            return rl_error_set(RL_ENOMEM, "meta: out of memory");
        size_t i = 0;
        const char *key;
        json_t *child;
        json_object_foreach((json_t *)j, key, child) {
            if (i >= n)
                break;
            rl__map_entry__init(&ents[i]);
            ents[i].key.data = (uint8_t *)key;
            ents[i].key.len = strlen(key);
            ents[i].value = &vals[i];
            m->entries[i] = &ents[i];
            int rc = s_value_from_json(a, child, &vals[i], depth + 1);
            if (rc)
                return rc;
            i++;
        }
        m->n_entries = i;
        v->kind_case = RL__VALUE__KIND_MAP_VALUE;
        v->map_value = m;
        return 0;
    }
    }
    return rl_error_set(RL_EINVAL, "meta: unknown JSON type %d", (int)json_typeof(j));
}

/* ---- encode: header ---------------------------------------------------------- */

static int s_is_list(int type)
{
    return type >= RL_COL_STRING_LIST && type <= RL_COL_BYTES_LIST;
}

static int s_column_to_pb(s_arena *a, const rl_column *c, Rl__Column *pc)
{
    rl__column__init(pc);
    const char *name = rl_column_name(c);
    int type = (int)rl_column_get_type(c);
    int64_t rows = rl_column_rows(c);
    pc->name = (char *)name;
    pc->type = type;
    if (rows < 0)
        return rl_error_set(RL_EINVAL, "column '%s': negative row count %" PRId64, name, rows);
    size_t n = (size_t)rows;
    if (!s_is_list(type)) {
        switch (type) {
        case RL_COL_INT64:
            if (!(pc->i64 = s_alloc(a, n * sizeof *pc->i64)))
                goto oom;
            for (size_t r = 0; r < n; r++)
                pc->i64[r] = rl_column_i64(c, (int64_t)r);
            pc->n_i64 = n;
            return 0;
        case RL_COL_DOUBLE:
            if (!(pc->f64 = s_alloc(a, n * sizeof *pc->f64)))
                goto oom;
            for (size_t r = 0; r < n; r++)
                pc->f64[r] = rl_column_f64(c, (int64_t)r);
            pc->n_f64 = n;
            return 0;
        case RL_COL_STRING:
        case RL_COL_BYTES:
            if (!(pc->blobs = s_alloc(a, n * sizeof *pc->blobs)))
                goto oom;
            for (size_t r = 0; r < n; r++) {
                size_t len = 0;
                const void *p;
                if (type == RL_COL_STRING) {
                    p = rl_column_str(c, (int64_t)r);
                    len = p ? strlen(p) : 0;
                } else {
                    p = rl_column_bytes(c, (int64_t)r, &len);
                }
                pc->blobs[r].data = (uint8_t *)(p ? p : "");
                pc->blobs[r].len = p ? len : 0;
            }
            pc->n_blobs = n;
            return 0;
        default:
            return rl_error_set(RL_EINVAL, "column '%s': unknown column type %d", name, type);
        }
    }
    if (!(pc->list_len = s_alloc(a, n * sizeof *pc->list_len)))
        goto oom;
    pc->n_list_len = n;
    size_t total = 0;
    for (size_t r = 0; r < n; r++) {
        int64_t len = rl_column_list_len(c, (int64_t)r);
        if (len < 0)
            return rl_error_set(RL_EINVAL, "column '%s' row %zu: negative list length", name, r);
        pc->list_len[r] = len;
        total += (size_t)len;
    }
    size_t k = 0;
    switch (type) {
    case RL_COL_INT64_LIST:
        if (!(pc->i64 = s_alloc(a, total * sizeof *pc->i64)))
            goto oom;
        for (size_t r = 0; r < n; r++) {
            const int64_t *v = rl_column_list_i64(c, (int64_t)r);
            if (pc->list_len[r] > 0)
                memcpy(&pc->i64[k], v, (size_t)pc->list_len[r] * sizeof *v);
            k += (size_t)pc->list_len[r];
        }
        pc->n_i64 = total;
        return 0;
    case RL_COL_DOUBLE_LIST:
        if (!(pc->f64 = s_alloc(a, total * sizeof *pc->f64)))
            goto oom;
        for (size_t r = 0; r < n; r++) {
            const double *v = rl_column_list_f64(c, (int64_t)r);
            if (pc->list_len[r] > 0)
                memcpy(&pc->f64[k], v, (size_t)pc->list_len[r] * sizeof *v);
            k += (size_t)pc->list_len[r];
        }
        pc->n_f64 = total;
        return 0;
    default: /* string / bytes lists */
        if (!(pc->blobs = s_alloc(a, total * sizeof *pc->blobs)))
            goto oom;
        for (size_t r = 0; r < n; r++) {
            for (int64_t i = 0; i < pc->list_len[r]; i++, k++) {
                size_t len = 0;
                const void *p = rl_column_list_item(c, (int64_t)r, i, &len);
                if (p && type == RL_COL_STRING_LIST)
                    len = strlen(p);
                pc->blobs[k].data = (uint8_t *)(p ? p : "");
                pc->blobs[k].len = p ? len : 0;
            }
        }
        pc->n_blobs = total;
        return 0;
    }
oom:
    return rl_error_set(RL_ENOMEM, "column '%s': out of memory encoding %zu rows", name, n);
}

int rl_wire_encode_header(const rl_dataproto *dp, void **buf, size_t *len)
{
    if (!dp || !buf || !len)
        return rl_error_set(RL_EINVAL, "rl_wire_encode_header: NULL argument");
    *buf = NULL;
    *len = 0;
    s_arena a = {0};
    int rc = 0;
    Rl__DataProtoHeader h;
    rl__data_proto_header__init(&h);
    h.version = RL_WIRE_VERSION;
    h.rows = rl_dataproto_rows(dp);

    int nt = rl_dataproto_tensor_count(dp), nc = rl_dataproto_column_count(dp);
    if (h.rows > RL_WIRE_MAX_ROWS) { /* the decoder would refuse it */
        rc = rl_error_set(RL_EINVAL, "DataProto has %" PRId64 " rows; the wire format allows at "
                          "most %" PRId64, (int64_t)h.rows, RL_WIRE_MAX_ROWS);
        goto out;
    }
    if (nt > RL_WIRE_MAX_TENSORS) {
        rc = rl_error_set(RL_EINVAL, "DataProto has %d tensors; the wire format allows at most %d",
                          nt, RL_WIRE_MAX_TENSORS);
        goto out;
    }
    if (nc > RL_WIRE_MAX_COLUMNS) {
        rc = rl_error_set(RL_EINVAL, "DataProto has %d columns; the wire format allows at most %d",
                          nc, RL_WIRE_MAX_COLUMNS);
        goto out;
    }
    Rl__TensorSpec *specs = s_alloc(&a, (size_t)nt * sizeof *specs);
    h.tensors = s_alloc(&a, (size_t)nt * sizeof *h.tensors);
    Rl__Column *cols = s_alloc(&a, (size_t)nc * sizeof *cols);
    h.columns = s_alloc(&a, (size_t)nc * sizeof *h.columns);
    Rl__Value *meta = s_alloc(&a, sizeof *meta);
    if (!specs || !h.tensors || !cols || !h.columns || !meta) {
        rc = rl_error_set(RL_ENOMEM, "rl_wire_encode_header: out of memory");
        goto out;
    }
    for (int i = 0; i < nt; i++) {
        const rl_tensor *t = rl_dataproto_tensor_at(dp, i);
        Rl__TensorSpec *s = &specs[i];
        rl__tensor_spec__init(s);
        s->name = (char *)rl_dataproto_tensor_name(dp, i);
        s->dtype = (int32_t)t->dtype;
        s->n_shape = (size_t)t->ndim;
        s->shape = (int64_t *)t->shape;
        s->frame = (uint32_t)(i + 1);
        s->nbytes = rl_tensor_nbytes(t);
        h.tensors[i] = s;
    }
    h.n_tensors = (size_t)nt;
    for (int i = 0; i < nc; i++) {
        const rl_column *c = rl_dataproto_column_at(dp, i);
        if (rl_dataproto_tensor(dp, rl_column_name(c))) {
            rc = rl_error_set(RL_EINVAL,
                              "column '%s': name also used by a tensor; the wire format "
                              "requires distinct names", rl_column_name(c));
            goto out;
        }
        if ((rc = s_column_to_pb(&a, c, &cols[i])))
            goto out;
        h.columns[i] = &cols[i];
    }
    h.n_columns = (size_t)nc;
    const json_t *m = rl_dataproto_meta_const(dp);
    if (m && json_object_size(m) > 0) {
        if ((rc = s_value_from_json(&a, m, meta, 1)))
            goto out;
        h.meta = meta;
    }
    size_t n = rl__data_proto_header__get_packed_size(&h);
    uint8_t *b = malloc(n ? n : 1);
    if (!b) {
        rc = rl_error_set(RL_ENOMEM, "rl_wire_encode_header: out of memory for %zu bytes", n);
        goto out;
    }
    rl__data_proto_header__pack(&h, b);
    *buf = b;
    *len = n;
out:
    s_arena_free(&a);
    return rc;
}

/* ---- encode: frames ---------------------------------------------------------- */

static void s_free_buf(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* Called by libzmq, possibly from its I/O thread, once the frame is sent. */
static void s_release_storage(void *data, void *hint)
{
    (void)data;
    rl_storage_release((rl_storage *)hint);
}

int rl_wire_encode(const rl_dataproto *dp, zmq_msg_t **frames, int *n_frames)
{
    if (!dp || !frames || !n_frames)
        return rl_error_set(RL_EINVAL, "rl_wire_encode: NULL argument");
    *frames = NULL;
    *n_frames = 0;
    void *hbuf;
    size_t hlen;
    int rc = rl_wire_encode_header(dp, &hbuf, &hlen);
    if (rc)
        return rc;
    int nt = rl_dataproto_tensor_count(dp);
    zmq_msg_t *f = calloc((size_t)nt + 1, sizeof *f);
    if (!f) {
        free(hbuf);
        return rl_error_set(RL_ENOMEM, "rl_wire_encode: out of memory");
    }
    if (zmq_msg_init_data(&f[0], hbuf, hlen, s_free_buf, NULL) != 0) {
        free(hbuf);
        free(f);
        return rl_error_set(RL_ENOMEM, "rl_wire_encode: zmq_msg_init_data: %s",
                            zmq_strerror(errno));
    }
    for (int i = 0; i < nt; i++) {
        rl_tensor *t = rl_dataproto_tensor_at(dp, i);
        size_t nb = rl_tensor_nbytes(t);
        if (nb == 0) {
            zmq_msg_init(&f[i + 1]);
            continue;
        }
        rl_storage_retain(t->storage);
        if (zmq_msg_init_data(&f[i + 1], rl_tensor_data(t), nb, s_release_storage,
                              t->storage) != 0) {
            rl_storage_release(t->storage);
            for (int j = 0; j <= i; j++)
                zmq_msg_close(&f[j]);
            free(f);
            return rl_error_set(RL_ENOMEM, "rl_wire_encode: tensor '%s': zmq_msg_init_data: %s",
                                rl_dataproto_tensor_name(dp, i), zmq_strerror(errno));
        }
    }
    *frames = f;
    *n_frames = nt + 1;
    return 0;
}

int rl_wire_send_dataproto(void *sock, const rl_dataproto *dp, int flags)
{
    if (!sock)
        return rl_error_set(RL_EINVAL, "rl_wire_send_dataproto: NULL socket");
    zmq_msg_t *f;
    int n;
    int rc = rl_wire_encode(dp, &f, &n);
    if (rc)
        return rc;
    int i;
    for (i = 0; i < n; i++) {
        int fl = flags & ZMQ_DONTWAIT;
        fl |= i < n - 1 ? ZMQ_SNDMORE : (flags & ZMQ_SNDMORE);
        if (zmq_msg_send(&f[i], sock, fl) < 0) {
            int e = errno;
            rc = rl_error_set(e == EAGAIN ? RL_ETIMEOUT : RL_EIO,
                              "rl_wire_send_dataproto: frame %d of %d: %s", i, n,
                              zmq_strerror(e));
            break;
        }
    }
    for (; i < n; i++) /* unsent frames still own their references */
        zmq_msg_close(&f[i]);
    free(f);
    return rc;
}

/* ---- packed byte format ----------------------------------------------------- */

static int s_unpack_frames(const void *buf, size_t len, rl_wire_frame *frames, int max,
                           int *n_out)
{
    const uint8_t *p = buf, *end = p + len;
    int n = 0;
    while (p < end) {
        if ((size_t)(end - p) < 4)
            return rl_error_set(RL_EPROTO, "packed frames: %zu trailing bytes, expected a "
                                "4-byte length", (size_t)(end - p));
        uint32_t fl = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                      (uint32_t)p[3] << 24;
        p += 4;
        if (fl > (size_t)(end - p))
            return rl_error_set(RL_EPROTO, "packed frames: frame %d length %u exceeds the "
                                "%zu bytes left", n, fl, (size_t)(end - p));
        if (n == max)
            return rl_error_set(RL_EPROTO, "packed frames: more than %d frames", max);
        frames[n].data = p;
        frames[n].len = fl;
        frames[n].owner = NULL;
        n++;
        p += fl;
    }
    *n_out = n;
    return 0;
}

int rl_wire_decode_packed(const void *buf, size_t len, rl_dataproto **out)
{
    if (!out)
        return rl_error_set(RL_EINVAL, "rl_wire_decode_packed: NULL out");
    *out = NULL;
    if (!buf && len)
        return rl_error_set(RL_EINVAL, "rl_wire_decode_packed: NULL buffer");
    int max = RL_WIRE_MAX_TENSORS + 1, n = 0;
    rl_wire_frame *frames = malloc((size_t)max * sizeof *frames);
    if (!frames)
        return rl_error_set(RL_ENOMEM, "rl_wire_decode_packed: out of memory");
    int rc = s_unpack_frames(buf, len, frames, max, &n);
    if (!rc)
        rc = rl_wire_decode(frames, n, out);
    free(frames);
    return rc;
}

int rl_wire_encode_packed(const rl_dataproto *dp, void **buf, size_t *len)
{
    if (!buf || !len)
        return rl_error_set(RL_EINVAL, "rl_wire_encode_packed: NULL argument");
    *buf = NULL;
    *len = 0;
    void *h;
    size_t hl;
    int rc = rl_wire_encode_header(dp, &h, &hl);
    if (rc)
        return rc;
    int nt = rl_dataproto_tensor_count(dp);
    size_t total = 4 + hl;
    for (int i = 0; i < nt; i++)
        total += 4 + rl_tensor_nbytes(rl_dataproto_tensor_at(dp, i));
    uint8_t *b = malloc(total), *p = b;
    if (!b) {
        free(h);
        return rl_error_set(RL_ENOMEM, "rl_wire_encode_packed: out of memory for %zu bytes",
                            total);
    }
    for (int i = -1; i < nt; i++) {
        const void *src = h;
        size_t n = hl;
        if (i >= 0) {
            const rl_tensor *t = rl_dataproto_tensor_at(dp, i);
            src = rl_tensor_data(t);
            n = rl_tensor_nbytes(t);
        }
        if (n > UINT32_MAX) {
            free(h);
            free(b);
            return rl_error_set(RL_ERANGE, "rl_wire_encode_packed: frame of %zu bytes does "
                                "not fit a u32 length", n);
        }
        p[0] = (uint8_t)n;
        p[1] = (uint8_t)(n >> 8);
        p[2] = (uint8_t)(n >> 16);
        p[3] = (uint8_t)(n >> 24);
        p += 4;
        if (n)
            memcpy(p, src, n);
        p += n;
    }
    free(h);
    *buf = b;
    *len = total;
    return 0;
}
