/* wire_decode.c — the untrusting side of the wire format: frames -> DataProto.
 *
 * Order of work: (1) scan the header bytes (bounded, iterative) so protobuf-c
 * never recurses deeper than RL_WIRE_MAX_META_DEPTH; (2) protobuf-c unpack
 * into an arena capped at 64 × the header size; (3) validate every field
 * against the frames; (4) build the DataProto. Only step 4 allocates tensors,
 * so a hostile header cannot make us allocate more than the frames it came
 * with. Control-plane envelopes get step 1 too (rl_wire_unpack_envelope).
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

/* ---- step 1: bounded structural scan ------------------------------------------ */

/* Which field of a message holds a submessage, and of which type: read from
 * protobuf-c's own descriptors (generated from proto/rl.proto), so a message
 * or field added to the schema is walked without touching this file. NULL:
 * the field is not a submessage (or not known here: skipped whole, as
 * protobuf-c keeps it as an unknown field). */
static const ProtobufCMessageDescriptor *s_child(const ProtobufCMessageDescriptor *msg,
                                                 uint64_t field)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(msg,
                                                                                (unsigned)field);
    return f && f->type == PROTOBUF_C_TYPE_MESSAGE ? f->descriptor : NULL;
}

static int s_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return -1;
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* Walks a message of type `root` without recursion and refuses Value nesting
 * deeper than RL_WIRE_MAX_META_DEPTH: protobuf-c's unpacker recurses once
 * per level with no limit, so a few MB of nested lists would overflow the
 * stack. `what` names the frame in messages ("header", "envelope"). */
static int s_scan(const uint8_t *buf, size_t len, const ProtobufCMessageDescriptor *root,
                  const char *what)
{
    struct { const uint8_t *end; const ProtobufCMessageDescriptor *type; }
        st[3 * RL_WIRE_MAX_META_DEPTH + 8];
    int sp = 0, depth = 0;
    const uint8_t *p = buf;
    st[sp].end = buf + len;
    st[sp++].type = root;
    while (sp > 0) {
        if (p == st[sp - 1].end) {
            if (st[--sp].type == &rl__value__descriptor)
                depth--;
            continue;
        }
        const uint8_t *end = st[sp - 1].end;
        uint64_t tag, v;
        if (s_varint(&p, end, &tag))
            return rl_error_set(RL_EPROTO, "%s: truncated or garbage protobuf (bad tag "
                                "varint at byte %zu of %zu)", what, (size_t)(p - buf), len);
        uint64_t field = tag >> 3;
        /* Field 0 and numbers past 2^29-1 are invalid; protobuf-c accepts a
         * non-canonical 0 tag and then cannot read its own re-encoding. */
        if (field == 0 || field > 536870911)
            return rl_error_set(RL_EPROTO, "%s: garbage protobuf (field number %" PRIu64
                                " at byte %zu of %zu)", what, field, (size_t)(p - buf), len);
        switch (tag & 7) {
        case 0:
            if (s_varint(&p, end, &v))
                return rl_error_set(RL_EPROTO, "%s: truncated or garbage protobuf (bad "
                                    "varint at byte %zu of %zu)", what, (size_t)(p - buf), len);
            break;
        case 1:
        case 5: {
            size_t w = (tag & 7) == 1 ? 8 : 4;
            if ((size_t)(end - p) < w)
                return rl_error_set(RL_EPROTO, "%s: truncated protobuf (fixed field at "
                                    "byte %zu of %zu)", what, (size_t)(p - buf), len);
            p += w;
            break;
        }
        case 2: {
            if (s_varint(&p, end, &v) || v > (uint64_t)(end - p))
                return rl_error_set(RL_EPROTO, "%s: truncated protobuf (length-delimited "
                                    "field %" PRIu64 " at byte %zu of %zu runs past its "
                                    "message)", what, field, (size_t)(p - buf), len);
            const ProtobufCMessageDescriptor *child = s_child(st[sp - 1].type, field);
            if (!child) {
                p += v;
                break;
            }
            if (child == &rl__value__descriptor && ++depth > RL_WIRE_MAX_META_DEPTH)
                return rl_error_set(RL_EPROTO, "%s: nesting depth expected at most %d, got "
                                    "more", root == &rl__data_proto_header__descriptor ? "meta" : what,
                                    RL_WIRE_MAX_META_DEPTH);
            if (sp == (int)(sizeof st / sizeof st[0]))
                return rl_error_set(RL_EPROTO, "%s: nesting depth expected at most %d "
                                    "messages, got more", what, sp);
            st[sp].end = p + v;
            st[sp++].type = child;
            break;
        }
        default:
            return rl_error_set(RL_EPROTO, "%s: garbage protobuf (wire type %u at byte "
                                "%zu of %zu)", what, (unsigned)(tag & 7), (size_t)(p - buf), len);
        }
    }
    return 0;
}

/* ---- step 2: unpack into an arena ---------------------------------------------------- */

/* protobuf-c allocates every submessage, repeated array and bytes field
 * separately; a bump arena makes that one or two mallocs and lets us cap how
 * much memory a hostile header can make us allocate. */
typedef struct s_chunk {
    struct s_chunk *next;
    size_t used, cap;
    max_align_t data[];
} s_chunk;

typedef struct s_pb_arena {
    s_chunk *head;
    size_t total, limit, first;
    int over;
} s_pb_arena;

static void *s_pb_alloc(void *ad, size_t size)
{
    s_pb_arena *a = ad;
    size = (size + 15) & ~(size_t)15;
    s_chunk *c = a->head;
    if (!c || c->cap - c->used < size) {
        /* first chunk sized to the header, later ones double */
        size_t cap = c ? c->cap * 2 : a->first;
        if (cap < size)
            cap = size;
        if (a->total + cap > a->limit) {
            a->over = 1;
            return NULL;
        }
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
        a->total += cap;
    }
    void *p = (char *)c->data + c->used;
    c->used += size;
    return p;
}

static void s_pb_free(void *ad, void *p)
{
    (void)ad;
    (void)p; /* everything goes at once in s_pb_arena_free */
}

static void s_pb_arena_free(s_pb_arena *a)
{
    for (s_chunk *c = a->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    a->head = NULL;
}

/* ---- step 3: validation ---------------------------------------------------------- */

static int s_is_list(int type)
{
    return type >= RL_COL_STRING_LIST && type <= RL_COL_BYTES_LIST;
}

static const char *s_kind_name(const Rl__Value *v)
{
    switch (v->kind_case) {
    case RL__VALUE__KIND_NULL_VALUE: return "null";
    case RL__VALUE__KIND_BOOL_VALUE: return "bool";
    case RL__VALUE__KIND_INT_VALUE: return "int";
    case RL__VALUE__KIND_DOUBLE_VALUE: return "double";
    case RL__VALUE__KIND_STRING_VALUE: return "string";
    case RL__VALUE__KIND_MAP_VALUE: return "map";
    case RL__VALUE__KIND_LIST_VALUE: return "list";
    default: return "nothing";
    }
}

static int s_check_tensor(const Rl__DataProtoHeader *h, size_t i, const rl_wire_frame *frames,
                          int n, const char **frame_user)
{
    const Rl__TensorSpec *s = h->tensors[i];
    const char *name = s->name;
    if (!name || !*name)
        return rl_error_set(RL_EPROTO, "tensors[%zu].name: expected a non-empty name, got \"\"",
                            i);
    if (!rl_dtype_valid(s->dtype))
        return rl_error_set(RL_EPROTO, "tensor '%s': dtype expected a code in %d..%d, got %d",
                            name, RL_DTYPE_MIN, RL_DTYPE_MAX, s->dtype);
    if (s->n_shape < 1 || s->n_shape > RL_TENSOR_MAX_DIMS)
        return rl_error_set(RL_EPROTO, "tensor '%s': ndim expected 1..%d, got %zu", name,
                            RL_TENSOR_MAX_DIMS, s->n_shape);
    int64_t numel = 1;
    for (size_t d = 0; d < s->n_shape; d++) {
        if (s->shape[d] < 0)
            return rl_error_set(RL_EPROTO, "tensor '%s': shape[%zu] expected >= 0, got %" PRId64,
                                name, d, s->shape[d]);
        if (__builtin_mul_overflow(numel, s->shape[d], &numel))
            return rl_error_set(RL_EPROTO, "tensor '%s': shape product overflows int64 at "
                                "shape[%zu] = %" PRId64, name, d, s->shape[d]);
    }
    size_t es = rl_dtype_size(s->dtype);
    int64_t nbytes;
    if (__builtin_mul_overflow(numel, (int64_t)es, &nbytes))
        return rl_error_set(RL_EPROTO, "tensor '%s': numel %" PRId64 " x %zu bytes overflows",
                            name, numel, es);
    if (s->nbytes != (uint64_t)nbytes)
        return rl_error_set(RL_EPROTO, "tensor '%s': nbytes expected %" PRId64 " (numel %" PRId64
                            " x %zu), got %" PRIu64, name, nbytes, numel, es, s->nbytes);
    if (s->frame < 1 || s->frame >= (uint32_t)n)
        return rl_error_set(RL_EPROTO, "tensor '%s': frame index expected 1..%d, got %u", name,
                            n - 1, s->frame);
    if (frame_user[s->frame])
        return rl_error_set(RL_EPROTO, "tensor '%s': frame %u already used by tensor '%s'",
                            name, s->frame, frame_user[s->frame]);
    frame_user[s->frame] = name;
    if (frames[s->frame].len != (uint64_t)nbytes)
        return rl_error_set(RL_EPROTO, "tensor '%s': frame %u length expected %" PRId64
                            " bytes, got %zu", name, s->frame, nbytes, frames[s->frame].len);
    if (nbytes > 0 && !frames[s->frame].data)
        return rl_error_set(RL_EINVAL, "tensor '%s': frame %u has a NULL data pointer", name,
                            s->frame);
    if (s->shape[0] != h->rows)
        return rl_error_set(RL_EPROTO, "tensor '%s': dim 0 expected %" PRId64 " (rows), got %"
                            PRId64, name, h->rows, s->shape[0]);
    return 0;
}

static const char *s_field_name(int kind)
{
    return kind == 0 ? "i64" : kind == 1 ? "f64" : "blobs";
}

static int s_check_column(const Rl__DataProtoHeader *h, size_t i)
{
    const Rl__Column *c = h->columns[i];
    const char *name = c->name;
    if (!name || !*name)
        return rl_error_set(RL_EPROTO, "columns[%zu].name: expected a non-empty name, got \"\"",
                            i);
    int type = c->type;
    if (type < RL_COL_STRING || type > RL_COL_BYTES_LIST)
        return rl_error_set(RL_EPROTO, "column '%s': type expected a code in %d..%d, got %d",
                            name, RL_COL_STRING, RL_COL_BYTES_LIST, type);
    /* kind: 0 = i64, 1 = f64, 2 = blobs */
    int kind = (type == RL_COL_INT64 || type == RL_COL_INT64_LIST) ? 0
             : (type == RL_COL_DOUBLE || type == RL_COL_DOUBLE_LIST) ? 1 : 2;
    size_t counts[3] = {c->n_i64, c->n_f64, c->n_blobs};
    for (int k = 0; k < 3; k++)
        if (k != kind && counts[k])
            return rl_error_set(RL_EPROTO, "column '%s' (%s): field %s expected empty, got %zu "
                                "values", name, rl_column_type_name(type), s_field_name(k),
                                counts[k]);
    uint64_t rows = (uint64_t)h->rows;
    uint64_t expect = rows;
    if (!s_is_list(type)) {
        if (c->n_list_len)
            return rl_error_set(RL_EPROTO, "column '%s' (%s): list_len expected empty, got %zu "
                                "values", name, rl_column_type_name(type), c->n_list_len);
    } else {
        if (c->n_list_len != rows)
            return rl_error_set(RL_EPROTO, "column '%s': list_len expected %" PRIu64
                                " entries (rows), got %zu", name, rows, c->n_list_len);
        expect = 0;
        for (size_t r = 0; r < c->n_list_len; r++) {
            if (c->list_len[r] < 0 || (uint64_t)c->list_len[r] > counts[kind] - expect)
                return rl_error_set(RL_EPROTO, "column '%s' row %zu: list length %" PRId64
                                    " is negative or runs past the %zu values", name, r,
                                    c->list_len[r], counts[kind]);
            expect += (uint64_t)c->list_len[r];
        }
    }
    if (counts[kind] != expect)
        return rl_error_set(RL_EPROTO, "column '%s': %s expected %" PRIu64 " values%s, got %zu",
                            name, s_field_name(kind), expect,
                            s_is_list(type) ? " (sum of list_len)" : " (rows)", counts[kind]);
    if (type == RL_COL_STRING || type == RL_COL_STRING_LIST)
        for (size_t k = 0; k < c->n_blobs; k++)
            if (c->blobs[k].len && memchr(c->blobs[k].data, 0, c->blobs[k].len))
                return rl_error_set(RL_EPROTO, "column '%s': string value %zu contains a NUL "
                                    "byte", name, k);
    return 0;
}

/* Duplicate names among tensors and columns, by sorting (a hostile header can
 * carry many thousands of names; pairwise comparison would be quadratic). */
typedef struct s_name {
    const char *name;
    int kind; /* 0 tensor, 1 column */
    size_t idx;
} s_name;

static int s_name_cmp(const void *a, const void *b)
{
    const s_name *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    if (x->kind != y->kind)
        return x->kind - y->kind;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int s_check_names(const Rl__DataProtoHeader *h)
{
    size_t n = h->n_tensors + h->n_columns;
    if (n < 2)
        return 0;
    s_name *v = malloc(n * sizeof *v);
    if (!v)
        return rl_error_set(RL_ENOMEM, "rl_wire_decode: out of memory");
    for (size_t i = 0; i < h->n_tensors; i++)
        v[i] = (s_name){h->tensors[i]->name, 0, i};
    for (size_t i = 0; i < h->n_columns; i++)
        v[h->n_tensors + i] = (s_name){h->columns[i]->name, 1, i};
    qsort(v, n, sizeof *v, s_name_cmp);
    int rc = 0;
    for (size_t i = 1; i < n && !rc; i++) {
        const s_name *a = &v[i - 1], *b = &v[i];
        if (strcmp(a->name, b->name))
            continue;
        if (a->kind == 0 && b->kind == 0)
            rc = rl_error_set(RL_EPROTO, "tensors[%zu].name: duplicate tensor name '%s' (also "
                              "tensors[%zu])", b->idx, b->name, a->idx);
        else if (a->kind == 1 && b->kind == 1)
            rc = rl_error_set(RL_EPROTO, "columns[%zu].name: duplicate column name '%s' (also "
                              "columns[%zu])", b->idx, b->name, a->idx);
        else
            rc = rl_error_set(RL_EPROTO, "columns[%zu].name: '%s' is also a tensor name",
                              b->idx, b->name);
    }
    free(v);
    return rc;
}

/* ---- step 4: building ------------------------------------------------------------ */

static json_t *s_json_from_value(const Rl__Value *v, int depth, const char *path, int *rc)
{
    char sub[256];
    if (depth > RL_WIRE_MAX_META_DEPTH) {
        *rc = rl_error_set(RL_EPROTO, "%s: nesting depth expected at most %d, got more", path,
                           RL_WIRE_MAX_META_DEPTH);
        return NULL;
    }
    switch (v->kind_case) {
    case RL__VALUE__KIND_NULL_VALUE: return json_null();
    case RL__VALUE__KIND_BOOL_VALUE: return json_boolean(v->bool_value);
    case RL__VALUE__KIND_INT_VALUE: return json_integer((json_int_t)v->int_value);
    case RL__VALUE__KIND_DOUBLE_VALUE:
        if (!isfinite(v->double_value)) {
            *rc = rl_error_set(RL_EPROTO, "%s: expected a finite double, got %g", path,
                               v->double_value);
            return NULL;
        }
        return json_real(v->double_value);
    case RL__VALUE__KIND_STRING_VALUE: {
        json_t *s = json_stringn((const char *)(v->string_value.len ? v->string_value.data
                                                : (const uint8_t *)""),
                                 v->string_value.len);
        if (!s)
            *rc = rl_error_set(RL_EPROTO, "%s: string of %zu bytes is not valid UTF-8", path,
                               v->string_value.len);
        return s;
    }
    case RL__VALUE__KIND_LIST_VALUE: {
        json_t *a = json_array();
        const Rl__ListValue *l = v->list_value;
        for (size_t i = 0; a && i < l->n_items; i++) {
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            json_t *x = s_json_from_value(l->items[i], depth + 1, sub, rc);
            if (!x || json_array_append_new(a, x)) {
                if (!x && !*rc)
                    *rc = rl_error_set(RL_ENOMEM, "%s: out of memory", sub);
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    case RL__VALUE__KIND_MAP_VALUE: {
        json_t *o = json_object();
        const Rl__MapValue *m = v->map_value;
        char key[128];
        for (size_t i = 0; o && i < m->n_entries; i++) {
            const Rl__MapEntry *e = m->entries[i];
            size_t kl = e->key.len;
            snprintf(key, sizeof key, "%.*s", (int)(kl < 100 ? kl : 100),
                     kl ? (const char *)e->key.data : "");
            snprintf(sub, sizeof sub, "%s.%s", path, key);
            char *k = malloc(kl + 1);
            if (!k) {
                *rc = rl_error_set(RL_ENOMEM, "%s: out of memory", sub);
                json_decref(o);
                return NULL;
            }
            if (kl)
                memcpy(k, e->key.data, kl);
            k[kl] = 0;
            const char *bad = NULL;
            if (memchr(k, 0, kl))
                bad = "key contains a NUL byte";
            else if (json_object_get(o, k))
                bad = "duplicate key";
            else if (!e->value)
                bad = "entry has no value";
            if (bad) {
                *rc = rl_error_set(RL_EPROTO, "%s: %s", sub, bad);
                free(k);
                json_decref(o);
                return NULL;
            }
            json_t *x = s_json_from_value(e->value, depth + 1, sub, rc);
            if (!x) {
                free(k);
                json_decref(o);
                return NULL;
            }
            if (json_object_set_new(o, k, x)) {
                *rc = rl_error_set(RL_EPROTO, "%s: key is not valid UTF-8", sub);
                free(k);
                json_decref(o);
                return NULL;
            }
            free(k);
        }
        return o;
    }
    default:
        *rc = rl_error_set(RL_EPROTO, "%s: value expected one of null/bool/int/double/string/"
                           "map/list, got nothing", path);
        return NULL;
    }
}

static char *s_strndup(const ProtobufCBinaryData *b)
{
    char *s = malloc(b->len + 1);
    if (s) {
        if (b->len)
            memcpy(s, b->data, b->len);
        s[b->len] = 0;
    }
    return s;
}

static int s_fill_column(rl_dataproto *dp, const Rl__Column *pc)
{
    rl_column *c = rl_dataproto_new_column(dp, pc->name, (rl_column_type)pc->type);
    if (!c)
        return rl_error_wrap(rl_error_code() ? rl_error_code() : RL_EPROTO, "column '%s'",
                             pc->name);
    int64_t rows = rl_column_rows(c);
    int rc = 0;
    size_t k = 0, scratch_cap = 0;
    char *scratch = NULL;
    for (int64_t r = 0; r < rows && !rc; r++) {
        switch (pc->type) {
        case RL_COL_INT64: rc = rl_column_set_i64(c, r, pc->i64[r]); break;
        case RL_COL_DOUBLE: rc = rl_column_set_f64(c, r, pc->f64[r]); break;
        case RL_COL_BYTES:
            rc = rl_column_set_bytes(c, r, pc->blobs[r].len ? pc->blobs[r].data : (void *)"",
                                     pc->blobs[r].len);
            break;
        case RL_COL_STRING: {
            /* one scratch buffer: the wire bytes are not NUL-terminated */
            size_t len = pc->blobs[r].len;
            if (len + 1 > scratch_cap) {
                char *g = realloc(scratch, len + 64);
                if (!g) {
                    rc = rl_error_set(RL_ENOMEM, "out of memory");
                    break;
                }
                scratch = g;
                scratch_cap = len + 64;
            }
            if (len)
                memcpy(scratch, pc->blobs[r].data, len);
            scratch[len] = 0;
            rc = rl_column_set_str(c, r, scratch);
            break;
        }
        case RL_COL_INT64_LIST:
            rc = rl_column_set_i64_list(c, r, pc->list_len[r] ? &pc->i64[k] : NULL,
                                        pc->list_len[r]);
            k += (size_t)pc->list_len[r];
            break;
        case RL_COL_DOUBLE_LIST:
            rc = rl_column_set_f64_list(c, r, pc->list_len[r] ? &pc->f64[k] : NULL,
                                        pc->list_len[r]);
            k += (size_t)pc->list_len[r];
            break;
        case RL_COL_STRING_LIST:
        case RL_COL_BYTES_LIST: {
            size_t m = (size_t)pc->list_len[r];
            const void **ptrs = calloc(m ? m : 1, sizeof *ptrs);
            size_t *lens = calloc(m ? m : 1, sizeof *lens);
            char **strs = calloc(m ? m : 1, sizeof *strs);
            if (!ptrs || !lens || !strs) {
                rc = rl_error_set(RL_ENOMEM, "out of memory");
            } else {
                for (size_t i = 0; i < m && !rc; i++) {
                    const ProtobufCBinaryData *b = &pc->blobs[k + i];
                    lens[i] = b->len;
                    if (pc->type == RL_COL_STRING_LIST) {
                        strs[i] = s_strndup(b);
                        if (!strs[i])
                            rc = rl_error_set(RL_ENOMEM, "out of memory");
                        ptrs[i] = strs[i];
                    } else {
                        ptrs[i] = b->len ? b->data : (const void *)"";
                    }
                }
                if (!rc)
                    rc = pc->type == RL_COL_STRING_LIST
                             ? rl_column_set_str_list(c, r, (const char *const *)ptrs,
                                                      (int64_t)m)
                             : rl_column_set_bytes_list(c, r, ptrs, lens, (int64_t)m);
                for (size_t i = 0; i < m; i++)
                    free(strs[i]);
            }
            free(ptrs);
            free(lens);
            free(strs);
            k += m;
            break;
        }
        }
    }
    free(scratch);
    return rc ? rl_error_wrap(rc, "column '%s'", pc->name) : 0;
}

static rl_tensor *s_make_tensor(const Rl__TensorSpec *s, const rl_wire_frame *f)
{
    rl_dtype dt = (rl_dtype)s->dtype;
    int nd = (int)s->n_shape;
    if (s->nbytes == 0)
        return rl_tensor_new(dt, nd, s->shape);
    size_t es = rl_dtype_size(dt);
    const char *d = f->data;
    if (f->owner && ((uintptr_t)d % es) == 0 && d >= (const char *)f->owner->data &&
        d + f->len <= (const char *)f->owner->data + f->owner->nbytes)
        return rl_tensor_from_storage(f->owner, (size_t)(d - (const char *)f->owner->data), dt,
                                      nd, s->shape);
    /* Misaligned (or unowned) bytes are copied so typed access stays defined. */
    return rl_tensor_from_data(dt, nd, s->shape, d);
}

int rl_wire_decode(const rl_wire_frame *frames, int n, rl_dataproto **out)
{
    if (!out)
        return rl_error_set(RL_EINVAL, "rl_wire_decode: NULL out");
    *out = NULL;
    if (n < 1 || !frames)
        return rl_error_set(RL_EPROTO, "frame count: expected at least 1 (the header), got %d",
                            frames ? n : 0);
    if (frames[0].len > RL_WIRE_MAX_HEADER_BYTES)
        return rl_error_set(RL_EPROTO, "header frame: expected at most %zu bytes, got %zu",
                            RL_WIRE_MAX_HEADER_BYTES, frames[0].len);
    if (!frames[0].data && frames[0].len)
        return rl_error_set(RL_EINVAL, "rl_wire_decode: header frame has a NULL data pointer");
    const uint8_t *hb = frames[0].len ? frames[0].data : (const uint8_t *)"";
    int rc = s_scan(hb, frames[0].len, &rl__data_proto_header__descriptor, "header");
    if (rc)
        return rc;
    /* Decoded structs take at most ~64x the wire bytes (an empty 2-byte
     * submessage becomes a ~100-byte struct); anything beyond is hostile. */
    s_pb_arena arena = {NULL, 0, frames[0].len * 64 + ((size_t)1 << 20),
                        frames[0].len * 3 + 1024, 0};
    ProtobufCAllocator alloc = {s_pb_alloc, s_pb_free, &arena};
    Rl__DataProtoHeader *h = rl__data_proto_header__unpack(&alloc, frames[0].len, hb);
    if (!h) {
        rc = arena.over
                 ? rl_error_set(RL_EPROTO, "header frame (%zu bytes): decoding it needs more "
                                "than %zu bytes of memory", frames[0].len, arena.limit)
                 : rl_error_set(RL_EPROTO, "header frame (%zu bytes): not a valid "
                                "rl.DataProtoHeader protobuf (truncated or garbage)",
                                frames[0].len);
        s_pb_arena_free(&arena);
        return rc;
    }
    const char **frame_user = NULL;
    rl_dataproto *dp = NULL;
    if (h->version != RL_WIRE_VERSION) {
        rc = rl_error_set(RL_EPROTO, "header.version: expected %d, got %u", RL_WIRE_VERSION,
                          h->version);
        goto out;
    }
    if (h->rows < -1 || h->rows > RL_WIRE_MAX_ROWS) {
        rc = rl_error_set(RL_EPROTO, "header.rows: expected -1..%" PRId64 ", got %" PRId64,
                          (int64_t)RL_WIRE_MAX_ROWS, h->rows);
        goto out;
    }
    if (h->rows == -1 && (h->n_tensors || h->n_columns)) {
        rc = rl_error_set(RL_EPROTO, "header.rows: expected >= 0 with %zu tensors and %zu "
                          "columns, got -1 (unset)", h->n_tensors, h->n_columns);
        goto out;
    }
    if (h->n_tensors > RL_WIRE_MAX_TENSORS) {
        rc = rl_error_set(RL_EPROTO, "header.tensors: expected at most %d, got %zu",
                          RL_WIRE_MAX_TENSORS, h->n_tensors);
        goto out;
    }
    if ((size_t)n != h->n_tensors + 1) {
        rc = rl_error_set(RL_EPROTO, "frame count: expected %zu (1 header + %zu tensors), got %d",
                          h->n_tensors + 1, h->n_tensors, n);
        goto out;
    }
    frame_user = calloc((size_t)n, sizeof *frame_user);
    if (!frame_user) {
        rc = rl_error_set(RL_ENOMEM, "rl_wire_decode: out of memory");
        goto out;
    }
    for (size_t i = 0; i < h->n_tensors; i++)
        if ((rc = s_check_tensor(h, i, frames, n, frame_user)))
            goto out;
    if (h->n_columns > RL_WIRE_MAX_COLUMNS) {
        rc = rl_error_set(RL_EPROTO, "header.columns: expected at most %d, got %zu",
                          RL_WIRE_MAX_COLUMNS, h->n_columns);
        goto out;
    }
    for (size_t i = 0; i < h->n_columns; i++)
        if ((rc = s_check_column(h, i)))
            goto out;
    if ((rc = s_check_names(h)))
        goto out;
    if (h->meta && h->meta->kind_case != RL__VALUE__KIND_MAP_VALUE) {
        rc = rl_error_set(RL_EPROTO, "meta: expected a map, got %s", s_kind_name(h->meta));
        goto out;
    }

    dp = rl_dataproto_new();
    if (!dp) {
        rc = rl_error_code() ? rl_error_code() : RL_ENOMEM;
        goto out;
    }
    if (h->rows >= 0 && (rc = rl_dataproto_set_rows(dp, h->rows)))
        goto out;
    for (size_t i = 0; i < h->n_tensors; i++) {
        const Rl__TensorSpec *s = h->tensors[i];
        rl_tensor *t = s_make_tensor(s, &frames[s->frame]);
        if (!t) {
            rc = rl_error_wrap(rl_error_code() ? rl_error_code() : RL_ENOMEM, "tensor '%s'",
                               s->name);
            goto out;
        }
        rc = rl_dataproto_add_tensor(dp, s->name, t);
        rl_tensor_release(t);
        if (rc)
            goto out;
    }
    for (size_t i = 0; i < h->n_columns; i++)
        if ((rc = s_fill_column(dp, h->columns[i])))
            goto out;
    if (h->meta) {
        json_t *m = s_json_from_value(h->meta, 1, "meta", &rc);
        if (!m) {
            if (!rc)
                rc = rl_error_set(RL_ENOMEM, "meta: out of memory");
            goto out;
        }
        if ((rc = rl_dataproto_set_meta(dp, m)))
            goto out;
    }
out:
    free(frame_user);
    s_pb_arena_free(&arena);
    if (rc) {
        rl_dataproto_free(dp);
        return rc;
    }
    *out = dp;
    return 0;
}

/* ---- zero-copy receive --------------------------------------------------------------- */

/* Storage release callback: the last tensor view of a received frame is gone. */
static void s_close_msg(void *data, void *ctx)
{
    (void)data;
    zmq_msg_close((zmq_msg_t *)ctx);
    free(ctx);
}

int rl_wire_decode_msgs(zmq_msg_t *msgs, int n, rl_dataproto **out)
{
    if (!out)
        return rl_error_set(RL_EINVAL, "rl_wire_decode_msgs: NULL out");
    *out = NULL;
    if (n < 1 || !msgs)
        return rl_error_set(RL_EPROTO, "frame count: expected at least 1 (the header), got %d",
                            msgs ? n : 0);
    rl_wire_frame *fr = calloc((size_t)n, sizeof *fr);
    int rc = 0, i = 0;
    if (!fr) {
        rc = rl_error_set(RL_ENOMEM, "rl_wire_decode_msgs: out of memory");
        goto out;
    }
    fr[0].data = zmq_msg_data(&msgs[0]);
    fr[0].len = zmq_msg_size(&msgs[0]);
    for (i = 1; i < n; i++) {
        size_t len = zmq_msg_size(&msgs[i]);
        if (len == 0) {
            fr[i].data = NULL;
            zmq_msg_close(&msgs[i]);
            continue;
        }
        /* Small frames keep their bytes inside the zmq_msg_t itself, so take
         * the data pointer only after the move to its final heap home. */
        zmq_msg_t *m = malloc(sizeof *m);
        if (!m) {
            rc = rl_error_set(RL_ENOMEM, "rl_wire_decode_msgs: out of memory");
            goto out;
        }
        zmq_msg_init(m);
        zmq_msg_move(m, &msgs[i]);
        zmq_msg_close(&msgs[i]);
        fr[i].data = zmq_msg_data(m);
        fr[i].len = len;
        fr[i].owner = rl_storage_wrap(zmq_msg_data(m), len, s_close_msg, m);
        if (!fr[i].owner) {
            zmq_msg_close(m);
            free(m);
            rc = rl_error_wrap(RL_ENOMEM, "rl_wire_decode_msgs: frame %d", i);
            i++; /* msgs[i] is already closed */
            goto out;
        }
    }
    rc = rl_wire_decode(fr, n, out);
out:
    if (fr)
        for (int j = 1; j < n; j++)
            if (fr[j].owner)
                rl_storage_release(fr[j].owner);
    for (int j = i > 1 ? i : 1; j < n; j++) /* frames never moved */
        zmq_msg_close(&msgs[j]);
    zmq_msg_close(&msgs[0]);
    free(fr);
    return rc;
}

int rl_wire_recv_dataproto(void *sock, rl_dataproto **out)
{
    if (!sock || !out)
        return rl_error_set(RL_EINVAL, "rl_wire_recv_dataproto: NULL argument");
    *out = NULL;
    int cap = 8, n = 0, rc = 0, dropped = 0;
    zmq_msg_t *msgs = malloc((size_t)cap * sizeof *msgs);
    if (!msgs)
        return rl_error_set(RL_ENOMEM, "rl_wire_recv_dataproto: out of memory");
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, 0) < 0) {
            int e = errno;
            zmq_msg_close(&m);
            rc = rl_error_set(e == EAGAIN ? RL_ETIMEOUT : RL_EIO,
                              "rl_wire_recv_dataproto: frame %d: %s", n + dropped,
                              zmq_strerror(e));
            break;
        }
        int more = zmq_msg_more(&m);
        if (n + dropped > RL_WIRE_MAX_TENSORS) {
            /* Drain the rest of the message so the socket stays in sync. */
            zmq_msg_close(&m);
            dropped++;
        } else {
            if (n == cap) {
                zmq_msg_t *g = realloc(msgs, (size_t)cap * 2 * sizeof *msgs);
                if (!g) {
                    zmq_msg_close(&m);
                    dropped++;
                    rc = rl_error_set(RL_ENOMEM, "rl_wire_recv_dataproto: out of memory");
                    if (!more)
                        break;
                    continue;
                }
                msgs = g;
                cap *= 2;
            }
            zmq_msg_init(&msgs[n]);
            zmq_msg_move(&msgs[n], &m);
            zmq_msg_close(&m);
            n++;
        }
        if (!more)
            break;
    }
    if (!rc && dropped)
        rc = rl_error_set(RL_EPROTO, "frame count: expected at most %d, got %d",
                          RL_WIRE_MAX_TENSORS + 1, n + dropped);
    if (rc) {
        for (int i = 0; i < n; i++)
            zmq_msg_close(&msgs[i]);
        free(msgs);
        return rc;
    }
    rc = rl_wire_decode_msgs(msgs, n, out);
    free(msgs);
    return rc;
}

/* A protobuf-c allocator that gives out at most `left` bytes in all (the
 * blocks are plain malloc ones: protobuf-c's default allocator frees them). */
typedef struct s_pb_budget {
    size_t left;
    int over;
} s_pb_budget;

static void *s_budget_alloc(void *ad, size_t size)
{
    s_pb_budget *b = ad;
    if (size > b->left) {
        b->over = 1;
        return NULL;
    }
    b->left -= size;
    return malloc(size);
}

static void s_budget_free(void *ad, void *p)
{
    (void)ad;
    free(p);
}

int rl_wire_unpack_envelope(const void *buf, size_t len, struct Rl__Envelope **out)
{
    if (!out)
        return rl_error_set(RL_EINVAL, "rl_wire_unpack_envelope: NULL out");
    *out = NULL;
    if (!buf && len)
        return rl_error_set(RL_EINVAL, "rl_wire_unpack_envelope: NULL buffer");
    if (len > RL_WIRE_MAX_ENVELOPE_BYTES)
        return rl_error_set(RL_EPROTO, "envelope frame: expected at most %zu bytes, got %zu",
                            RL_WIRE_MAX_ENVELOPE_BYTES, len);
    const uint8_t *b = len ? buf : (const uint8_t *)"";
    int rc = s_scan(b, len, &rl__envelope__descriptor, "envelope");
    if (rc)
        return rc;
    s_pb_budget budget = {len * 8 + ((size_t)64 << 20), 0};
    ProtobufCAllocator alloc = {s_budget_alloc, s_budget_free, &budget};
    Rl__Envelope *e = rl__envelope__unpack(&alloc, len, b);
    if (!e && budget.over)
        return rl_error_set(RL_EPROTO, "envelope frame (%zu bytes): decoding it needs more than "
                            "%zu bytes of memory", len, len * 8 + ((size_t)64 << 20));
    if (!e)
        return rl_error_set(RL_EPROTO, "envelope frame (%zu bytes): not a valid rl.Envelope "
                            "protobuf (truncated or garbage)", len);
    *out = e;
    return 0;
}
