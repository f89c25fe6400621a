/* tokenizer.c — loading a tokenizer: tokenizer.json (Hugging Face's byte-level
 * BPE) or rlrt's char tokenizer, the kind picked from the file
 * (common/text/tokenizer.h). */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/core/util.h"
#include "common/text/tokenizer_internal.h"
#include "rlrt/error.h"

static char *s_read_file(const char *path, size_t *len)
{
    char *buf = rl_file_read_all(path, len);
    if (!buf)
        rl_error_wrap(rl_error_code(), "tokenizer: cannot open '%s'", path);
    return buf;
}

static json_t *s_parse(const char *json, size_t len, const char *what)
{
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    if (!root) {
        rl_error_set(RL_EPROTO, "%s: invalid JSON at line %d column %d: %s", what, je.line,
                     je.column, je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        rl_error_set(RL_EPROTO, "%s: top level is not a JSON object", what);
        return NULL;
    }
    return root;
}

rl_tokenizer *rl_tokenizer_from_hf_json(const char *json, size_t len)
{
    if (!json) {
        rl_error_set(RL_EINVAL, "rl_tokenizer_from_hf_json: json is NULL");
        return NULL;
    }
    json_t *root = s_parse(json, len, "tokenizer.json");
    if (!root)
        return NULL;
    rl_tokenizer *t = rl_tok_bpe_from_json(root, "tokenizer.json");
    json_decref(root);
    return t;
}

static rl_tokenizer *s_load(const char *path, bool allow_char)
{
    if (!path) {
        rl_error_set(RL_EINVAL, "tokenizer: path is NULL");
        return NULL;
    }
    size_t len;
    char *buf = s_read_file(path, &len);
    if (!buf)
        return NULL;
    json_t *root = s_parse(buf, len, path);
    free(buf);
    if (!root)
        return NULL;
    rl_tokenizer *t;
    json_t *type = json_object_get(root, "type");
    if (allow_char && json_is_string(type) && strcmp(json_string_value(type), "rlrt-char") == 0)
        t = rl_tok_char_from_json(root, path);
    else
        t = rl_tok_bpe_from_json(root, path);
    json_decref(root);
    return t;
}

rl_tokenizer *rl_tokenizer_load_hf(const char *path) { return s_load(path, false); }
rl_tokenizer *rl_tokenizer_load(const char *path) { return s_load(path, true); }

