/* params.c — flat parameter buffer manifest (see rlrt/nn/params.h). */
#include "rlrt/nn/params.h"
#include "rlrt/error.h"

#include <stdlib.h>
#include <string.h>

rl_param_manifest *rl_param_manifest_new(void)
{
    rl_param_manifest *m = calloc(1, sizeof *m);
    if (!m)
        rl_error_set(RL_ENOMEM, "param manifest: out of memory");
    return m;
}

void rl_param_manifest_free(rl_param_manifest *m)
{
    if (!m)
        return;
    free(m->views);
    free(m);
}

int rl_param_manifest_find(const rl_param_manifest *m, const char *name)
{
    for (int i = 0; i < m->count; i++)
        if (strcmp(m->views[i].name, name) == 0)
            return i;
    return -1;
}

int rl_param_manifest_add(rl_param_manifest *m, const char *name, int ndim,
                          const int64_t *shape)
{
    if (!name || !*name || strlen(name) >= RL_PARAM_NAME_MAX)
        return rl_error_set(RL_EINVAL, "param name '%s' is empty or longer than %d",
                            name ? name : "(null)", RL_PARAM_NAME_MAX - 1);
    if (ndim < 0 || ndim > RL_PARAM_MAX_DIMS)
        return rl_error_set(RL_EINVAL, "param '%s': ndim %d not in [0, %d]", name, ndim,
                            RL_PARAM_MAX_DIMS);
    if (rl_param_manifest_find(m, name) >= 0)
        return rl_error_set(RL_EEXIST, "param '%s' added twice", name);
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || (shape[d] > 0 && numel > INT64_MAX / shape[d]))
            return rl_error_set(RL_EINVAL, "param '%s': bad dim %d = %lld", name, d,
                                (long long)shape[d]);
        numel *= shape[d];
    }
    if (m->count == m->capacity) {
        int cap = m->capacity ? 2 * m->capacity : 16;
        rl_param_view *v = realloc(m->views, sizeof *v * (size_t)cap);
        if (!v)
            return rl_error_set(RL_ENOMEM, "param manifest: out of memory");
        m->views = v;
        m->capacity = cap;
    }
    rl_param_view *v = &m->views[m->count];
    memset(v, 0, sizeof *v);
    memcpy(v->name, name, strlen(name) + 1);
    v->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        v->shape[d] = shape[d];
    v->numel = numel;
    v->offset = m->total;
    m->total += numel;
    return m->count++;
}

int rl_param_manifest_equal(const rl_param_manifest *a, const rl_param_manifest *b)
{
    if (a->count != b->count || a->total != b->total)
        return 0;
    for (int i = 0; i < a->count; i++) {
        const rl_param_view *x = &a->views[i], *y = &b->views[i];
        if (strcmp(x->name, y->name) || x->ndim != y->ndim || x->offset != y->offset)
            return 0;
        for (int d = 0; d < x->ndim; d++)
            if (x->shape[d] != y->shape[d])
                return 0;
    }
    return 1;
}

float *rl_param_buffer_new(int64_t n)
{
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);
    bytes = (bytes + 63) & ~(size_t)63;
    float *p = aligned_alloc(64, bytes);
    if (!p) {
        rl_error_set(RL_ENOMEM, "param buffer of %lld floats: out of memory", (long long)n);
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

void rl_param_buffer_free(float *p) { free(p); }
