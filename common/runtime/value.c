/* value.c — rl.Value (proto) <-> jansson conversion for small arguments
 * carried by control messages (see common/runtime/value.h). */
#include "common/runtime/value.h"
#include "rlrt/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static Rl__Value *s_new_value(void)
{
    Rl__Value *v = malloc(sizeof *v);
    if (v)
        rl__value__init(v);
    return v;
}

/* NULL (no message) when an allocation fails; whatever was built is freed. */
Rl__Value *rl_value_from_json(const json_t *j)
{
    if (!j)
        return NULL;
    Rl__Value *v = s_new_value();
    if (!v)
        return NULL;
    switch (json_typeof(j)) {
    case JSON_NULL:
        v->kind_case = RL__VALUE__KIND_NULL_VALUE;
        v->null_value = 1;
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        v->kind_case = RL__VALUE__KIND_BOOL_VALUE;
        v->bool_value = json_is_true(j);
        break;
    case JSON_INTEGER:
        v->kind_case = RL__VALUE__KIND_INT_VALUE;
        v->int_value = json_integer_value(j);
        break;
    case JSON_REAL:
        v->kind_case = RL__VALUE__KIND_DOUBLE_VALUE;
        v->double_value = json_real_value(j);
        break;
    case JSON_STRING: {
        size_t n = json_string_length(j);
        v->kind_case = RL__VALUE__KIND_STRING_VALUE;
        v->string_value.data = malloc(n ? n : 1);
        v->string_value.len = n;
        if (!v->string_value.data)
            goto fail;
        if (n)
            memcpy(v->string_value.data, json_string_value(j), n);
        break;
    }
    case JSON_ARRAY: {
        Rl__ListValue *l = malloc(sizeof *l);
        if (!l)
            goto fail;
        rl__list_value__init(l);
        v->kind_case = RL__VALUE__KIND_LIST_VALUE;
        v->list_value = l;
        size_t n = json_array_size(j);
        l->items = calloc(n ? n : 1, sizeof *l->items);
        if (!l->items)
            goto fail;
        for (size_t i = 0; i < n; i++) {
            l->items[i] = rl_value_from_json(json_array_get(j, i));
            if (!l->items[i])
                goto fail;
            l->n_items = i + 1;
        }
        break;
    }
    case JSON_OBJECT: {
        Rl__MapValue *m = malloc(sizeof *m);
        if (!m)
            goto fail;
        rl__map_value__init(m);
        v->kind_case = RL__VALUE__KIND_MAP_VALUE;
        v->map_value = m;
        m->entries = calloc(json_object_size(j) ? json_object_size(j) : 1, sizeof *m->entries);
        if (!m->entries)
            goto fail;
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)j, key, val) {
            Rl__MapEntry *e = malloc(sizeof *e);
            if (!e)
                goto fail;
            rl__map_entry__init(e);
            m->entries[m->n_entries++] = e;
            e->key.len = strlen(key);
            e->key.data = (uint8_t *)strdup(key);
            e->value = rl_value_from_json(val);
            if (!e->key.data || !e->value)
                goto fail;
        }
        break;
    }
    }
    return v;
fail: /* rl_value_free frees what v holds so far */
    rl_value_free(v);
    return NULL;
}

void rl_value_free(Rl__Value *v)
{
    if (!v)
        return;
    switch (v->kind_case) {
    case RL__VALUE__KIND_STRING_VALUE: free(v->string_value.data); break;
    case RL__VALUE__KIND_LIST_VALUE:
        for (size_t i = 0; v->list_value->items && i < v->list_value->n_items; i++)
            rl_value_free(v->list_value->items[i]);
        free(v->list_value->items);
        free(v->list_value);
        break;
    case RL__VALUE__KIND_MAP_VALUE:
        for (size_t i = 0; v->map_value->entries && i < v->map_value->n_entries; i++) {
            free(v->map_value->entries[i]->key.data);
            rl_value_free(v->map_value->entries[i]->value);
            free(v->map_value->entries[i]);
        }
        free(v->map_value->entries);
        free(v->map_value);
        break;
    default: break;
    }
    free(v);
}

/* rl_value_to_json with `path` naming v in messages ("value", "value.k",
 * "value[2]"). Every NULL return leaves a message. */
static json_t *s_to_json(const Rl__Value *v, int depth, const char *path)
{
    if (!v)
        return json_null();
    if (depth > 64) {
        rl_error_set(RL_EPROTO, "%s: nested deeper than 64 levels", path);
        return NULL;
    }
    char sub[256];
    json_t *out = NULL;
    switch (v->kind_case) {
    case RL__VALUE__KIND_BOOL_VALUE: out = json_boolean(v->bool_value); break;
    case RL__VALUE__KIND_INT_VALUE: out = json_integer(v->int_value); break;
    case RL__VALUE__KIND_DOUBLE_VALUE:
        if (!isfinite(v->double_value)) {
            rl_error_set(RL_EPROTO, "%s: expected a finite double, got %g", path, v->double_value);
            return NULL;
        }
        out = json_real(v->double_value);
        break;
    case RL__VALUE__KIND_STRING_VALUE: {
        /* a NUL would cut the string for every json_string_value() reader */
        const char *p = v->string_value.len ? (const char *)v->string_value.data : "";
        if (memchr(p, 0, v->string_value.len)) {
            rl_error_set(RL_EPROTO, "%s: string of %zu bytes contains a NUL byte", path,
                         v->string_value.len);
            return NULL;
        }
        out = json_stringn(p, v->string_value.len);
        if (!out) {
            rl_error_set(RL_EPROTO, "%s: string of %zu bytes is not valid UTF-8", path,
                         v->string_value.len);
            return NULL;
        }
        break;
    }
    case RL__VALUE__KIND_LIST_VALUE: {
        json_t *a = json_array();
        if (!a)
            break;
        for (size_t i = 0; i < v->list_value->n_items; i++) {
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            json_t *x = s_to_json(v->list_value->items[i], depth + 1, sub);
            if (!x || json_array_append_new(a, x)) {
                if (x)
                    rl_error_set(RL_ENOMEM, "%s: out of memory", sub);
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    case RL__VALUE__KIND_MAP_VALUE: {
        json_t *o = json_object();
        if (!o)
            break;
        for (size_t i = 0; i < v->map_value->n_entries; i++) {
            const Rl__MapEntry *e = v->map_value->entries[i];
            size_t kl = e->key.len;
            const char *key = kl ? (const char *)e->key.data : "";
            const char *bad = NULL;
            if (memchr(key, 0, kl))
                bad = "contains a NUL byte";
            else if (json_object_getn(o, key, kl))
                bad = "is a duplicate";
            snprintf(sub, sizeof sub, "%s.%.*s", path, (int)(kl < 100 ? kl : 100), key);
            if (bad) {
                rl_error_set(RL_EPROTO, "%s: key (entry %zu, %zu bytes) %s", sub, i, kl, bad);
                json_decref(o);
                return NULL;
            }
            json_t *x = s_to_json(e->value, depth + 1, sub);
            if (!x) {
                json_decref(o);
                return NULL;
            }
            if (json_object_setn_new(o, key, kl, x)) { /* x is released */
                rl_error_set(RL_EPROTO, "%s: key (entry %zu, %zu bytes) is not valid UTF-8",
                             sub, i, kl);
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    default: return json_null();
    }
    if (!out)
        rl_error_set(RL_ENOMEM, "%s: out of memory", path);
    return out;
}

json_t *rl_value_to_json(const Rl__Value *v, int depth)
{
    return s_to_json(v, depth, "value");
}
