/* checkpoint.c — training-state checkpoints (see common/nn/engine/checkpoint.h). */
#include "common/nn/engine/checkpoint.h"
#include "rlrt/error.h"
#include "common/core/util.h"
#include "common/nn/engine/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#define S_FORMAT "rlrt-checkpoint-1"
#define S_MODEL "model.safetensors"
#define S_OPTIM "optimizer.safetensors"
#define S_STATE "trainer_state.json"

/* ---- small filesystem helpers ---------------------------------------------- */

static int s_join(char *out, size_t cap, const char *a, const char *b)
{
    if (snprintf(out, cap, "%s/%s", a, b) >= (int)cap)
        return rl_error_set(RL_EINVAL, "path '%s/%s' is too long", a, b);
    return RL_OK;
}

/* The first line of root/latest (the newest step's directory name) in buf;
 * "" when the file is missing or empty. s_join's error when the path does
 * not fit (buf "" too). */
static int s_read_latest(const char *root, char *buf, size_t cap)
{
    char file[RL_CKPT_PATH_MAX];
    buf[0] = '\0';
    int rc = s_join(file, sizeof file, root, "latest");
    if (rc != RL_OK)
        return rc;
    FILE *f = fopen(file, "r");
    if (f) {
        if (!fgets(buf, (int)cap, f))
            buf[0] = '\0';
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = '\0';
    return RL_OK;
}
static int s_rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 ? -1 : 0;
}

static int s_rm_rf(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) < 0)
        return errno == ENOENT ? RL_OK : rl_error_set(RL_EIO, "%s: %s", path, strerror(errno));
    if (nftw(path, s_rm_cb, 16, FTW_DEPTH | FTW_PHYS) < 0)
        return rl_error_set(RL_EIO, "%s: cannot remove: %s", path, strerror(errno));
    return RL_OK;
}

static int s_is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* "step_<digits>" exactly -> 1 and *step; anything else -> 0. */
static int s_parse_step_name(const char *name, int64_t *step)
{
    if (strncmp(name, "step_", 5) != 0 || !name[5])
        return 0;
    int64_t v = 0;
    for (const char *p = name + 5; *p; p++) {
        if (*p < '0' || *p > '9' || v > (INT64_MAX - 9) / 10)
            return 0;
        v = v * 10 + (*p - '0');
    }
    *step = v;
    return 1;
}

/* ---- RNG and trainer state JSON --------------------------------------------- */

static json_t *s_u32_array(const uint32_t *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer((json_int_t)v[i]));
    return a;
}

json_t *rl_rng_to_json(const rl_rng *g)
{
    return json_pack("{s:o, s:o, s:o, s:i}", "key", s_u32_array(g->key, 2), "counter",
                     s_u32_array(g->counter, 4), "lanes", s_u32_array(g->lanes, 4), "used",
                     g->used);
}

static int s_read_u32s(const json_t *j, const char *field, uint32_t *out, int n)
{
    json_t *a = json_object_get(j, field);
    if (!json_is_array(a) || json_array_size(a) != (size_t)n)
        return rl_error_set(RL_EPROTO, "rng: field '%s' must be an array of %d integers", field, n);
    for (int i = 0; i < n; i++) {
        json_t *x = json_array_get(a, (size_t)i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 ||
            json_integer_value(x) > (json_int_t)UINT32_MAX)
            return rl_error_set(RL_EPROTO, "rng: field '%s'[%d] is not a uint32", field, i);
        out[i] = (uint32_t)json_integer_value(x);
    }
    return RL_OK;
}

int rl_rng_from_json(const json_t *j, rl_rng *g)
{
    if (!json_is_object(j))
        return rl_error_set(RL_EPROTO, "rng: expected an object");
    rl_rng r;
    memset(&r, 0, sizeof r);
    int rc;
    if ((rc = s_read_u32s(j, "key", r.key, 2)) < 0 ||
        (rc = s_read_u32s(j, "counter", r.counter, 4)) < 0 ||
        (rc = s_read_u32s(j, "lanes", r.lanes, 4)) < 0)
        return rc;
    json_t *u = json_object_get(j, "used");
    if (!json_is_integer(u) || json_integer_value(u) < 0 || json_integer_value(u) > 4)
        return rl_error_set(RL_EPROTO, "rng: field 'used' must be an integer in [0, 4]");
    r.used = (int)json_integer_value(u);
    *g = r;
    return RL_OK;
}

int rl_train_state_set_rng(rl_train_state *s, const char *name, const rl_rng *g)
{
    if (!name || !*name || strlen(name) >= RL_CKPT_NAME_MAX)
        return rl_error_set(RL_EINVAL, "rng name '%s' empty or longer than %d",
                            name ? name : "(null)", RL_CKPT_NAME_MAX - 1);
    rl_rng *have = rl_train_state_get_rng(s, name);
    if (have) {
        *have = *g;
        return RL_OK;
    }
    if (s->n_rng >= RL_CKPT_MAX_RNG)
        return rl_error_set(RL_ERANGE, "train state: more than %d rng streams", RL_CKPT_MAX_RNG);
    snprintf(s->rng[s->n_rng].name, RL_CKPT_NAME_MAX, "%s", name);
    s->rng[s->n_rng].rng = *g;
    s->n_rng++;
    return RL_OK;
}

rl_rng *rl_train_state_get_rng(rl_train_state *s, const char *name)
{
    for (int i = 0; i < s->n_rng; i++)
        if (strcmp(s->rng[i].name, name) == 0)
            return &s->rng[i].rng;
    return NULL;
}

static json_t *s_state_to_json(const rl_train_state *s)
{
    json_t *rng = json_object();
    for (int i = 0; rng && i < s->n_rng; i++)
        json_object_set_new(rng, s->rng[i].name, rl_rng_to_json(&s->rng[i].rng));
    json_t *lr = json_pack("{s:s, s:f, s:I, s:I, s:f}", "kind", rl_lr_kind_name(s->lr.kind),
                           "base_lr", s->lr.base_lr, "warmup_steps",
                           (json_int_t)s->lr.warmup_steps, "total_steps",
                           (json_int_t)s->lr.total_steps, "min_ratio", s->lr.min_ratio);
    json_t *extra = s->extra ? json_incref(s->extra) : json_object();
    /* "checksums": the directory is sealed, so a missing RL_CKPT_SUMS is damage */
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:s}", "format", S_FORMAT, "step",
                     (json_int_t)s->step, "epoch", (json_int_t)s->epoch, "data_position",
                     (json_int_t)s->data_position, "lr_step", (json_int_t)s->lr_step,
                     "lr_schedule", lr, "rng", rng, "extra", extra, "checksums", RL_CKPT_SUMS);
}

/* The counts of a checkpoint (steps, epochs, positions) are at most 2^53:
 * far past any run, and every sum of two of them stays an exact int64. */
#define S_MAX_COUNT (INT64_C(1) << 53)

static int s_get_i64(const char *path, const json_t *j, const char *key, int64_t *out)
{
    json_t *x = json_object_get(j, key);
    if (!json_is_integer(x))
        return rl_error_set(RL_EPROTO, "%s: key '%s' missing or not an integer", path, key);
    if (json_integer_value(x) < 0 || json_integer_value(x) > S_MAX_COUNT)
        return rl_error_set(RL_EPROTO, "%s: key '%s': expected 0 .. 2^53, got %lld", path, key,
                            (long long)json_integer_value(x));
    *out = (int64_t)json_integer_value(x);
    return RL_OK;
}

static int s_get_num(const char *path, const json_t *j, const char *key, double *out)
{
    json_t *x = json_object_get(j, key);
    if (!json_is_number(x))
        return rl_error_set(RL_EPROTO, "%s: key '%s' missing or not a number", path, key);
    *out = json_number_value(x);
    return RL_OK;
}

/* Parses trainer_state.json; with `s` NULL only validates. */
static int s_state_from_json(const char *path, const json_t *j, rl_train_state *s)
{
    rl_train_state t;
    memset(&t, 0, sizeof t);
    if (!json_is_object(j))
        return rl_error_set(RL_EPROTO, "%s: expected a JSON object", path);
    json_t *f = json_object_get(j, "format");
    if (!json_is_string(f) || strcmp(json_string_value(f), S_FORMAT) != 0)
        return rl_error_set(RL_EPROTO, "%s: key 'format' must be \"%s\"", path, S_FORMAT);
    int rc;
    if ((rc = s_get_i64(path, j, "step", &t.step)) < 0 ||
        (rc = s_get_i64(path, j, "epoch", &t.epoch)) < 0 ||
        (rc = s_get_i64(path, j, "data_position", &t.data_position)) < 0 ||
        (rc = s_get_i64(path, j, "lr_step", &t.lr_step)) < 0)
        return rc;
    json_t *lr = json_object_get(j, "lr_schedule");
    if (!json_is_object(lr))
        return rl_error_set(RL_EPROTO, "%s: key 'lr_schedule' missing or not an object", path);
    json_t *kind = json_object_get(lr, "kind");
    if (!json_is_string(kind) || rl_lr_kind_parse(json_string_value(kind), &t.lr.kind) < 0)
        return rl_error_set(RL_EPROTO, "%s: key 'lr_schedule.kind' missing or unknown", path);
    if ((rc = s_get_num(path, lr, "base_lr", &t.lr.base_lr)) < 0 ||
        (rc = s_get_i64(path, lr, "warmup_steps", &t.lr.warmup_steps)) < 0 ||
        (rc = s_get_i64(path, lr, "total_steps", &t.lr.total_steps)) < 0 ||
        (rc = s_get_num(path, lr, "min_ratio", &t.lr.min_ratio)) < 0)
        return rc;
    json_t *rng = json_object_get(j, "rng");
    if (!json_is_object(rng))
        return rl_error_set(RL_EPROTO, "%s: key 'rng' missing or not an object", path);
    const char *name;
    json_t *val;
    json_object_foreach(rng, name, val) {
        rl_rng g;
        if ((rc = rl_rng_from_json(val, &g)) < 0)
            return rl_error_wrap(rc, "%s: rng '%s'", path, name);
        if ((rc = rl_train_state_set_rng(&t, name, &g)) < 0)
            return rl_error_wrap(rc, "%s", path);
    }
    json_t *extra = json_object_get(j, "extra");
    if (extra && !json_is_object(extra))
        return rl_error_set(RL_EPROTO, "%s: key 'extra' is not an object", path);
    if (s) {
        t.extra = extra ? json_incref(extra) : NULL;
        *s = t;
    }
    return RL_OK;
}

/* ---- checksums: SHA256SUMS --------------------------------------------------------- */

#define S_SUMS_MAX (64 * 1024)  /* bytes of a SHA256SUMS file */
#define S_SUMS_FILES 256        /* files one directory may list */
#define S_SELF "# sha256 of the lines above: "
#define S_HEX 64

static void s_hex(const unsigned char *d, char out[S_HEX + 1])
{
    static const char x[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++)
        out[2 * i] = x[d[i] >> 4], out[2 * i + 1] = x[d[i] & 15];
    out[S_HEX] = '\0';
}

static int s_sha256_mem(const void *data, size_t len, char out[S_HEX + 1])
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (!EVP_Digest(data, len, d, &n, EVP_sha256(), NULL) || n != 32)
        return rl_error_set(RL_EIO, "sha256: OpenSSL's digest failed");
    s_hex(d, out);
    return RL_OK;
}

/* An open descriptor of the regular file `path` (a FIFO or a device named
 * like a checkpoint file must not block or never end a read), or -1 with
 * the error set. */
static int s_open_regular(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return rl_error_set(errno == ENOENT ? RL_ENOTFOUND : RL_EIO, "%s: cannot open: %s", path,
                            strerror(errno)), -1;
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return rl_error_set(RL_EPROTO, "%s: not a regular file", path), -1;
    }
    return fd;
}

/* The sha256 of file `path`, read in 1 MiB blocks. */
static int s_sha256_file(const char *path, char out[S_HEX + 1])
{
    int fd = s_open_regular(path);
    if (fd < 0)
        return rl_error_code();
    enum { BLOCK = 1 << 20 };
    unsigned char *buf = malloc(BLOCK);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int rc = RL_OK;
    if (!buf || !ctx) {
        rc = rl_error_set(RL_ENOMEM, "%s: out of memory for its sha256", path);
        goto out;
    }
    if (!EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
        rc = rl_error_set(RL_EIO, "sha256: OpenSSL's digest failed");
        goto out;
    }
    for (;;) {
        ssize_t k = read(fd, buf, BLOCK);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            rc = rl_error_set(RL_EIO, "%s: read failed: %s", path, strerror(errno));
            goto out;
        }
        if (k == 0)
            break;
        if (!EVP_DigestUpdate(ctx, buf, (size_t)k)) {
            rc = rl_error_set(RL_EIO, "sha256: OpenSSL's digest failed");
            goto out;
        }
    }
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (!EVP_DigestFinal_ex(ctx, d, &n) || n != 32)
        rc = rl_error_set(RL_EIO, "sha256: OpenSSL's digest failed");
    else
        s_hex(d, out);
out:
    EVP_MD_CTX_free(ctx);
    free(buf);
    close(fd);
    return rc;
}

/* A file name SHA256SUMS may list: a plain name of this directory, printable,
 * nothing sha256sum would escape. */
static int s_sums_name_ok(const char *name, size_t len)
{
    if (len == 0 || len > 255 || (len == 1 && name[0] == '.') ||
        (len == 2 && name[0] == '.' && name[1] == '.'))
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x21 || c == 0x7f || c == '/' || c == '\\')
            return 0;
    }
    return 1;
}

static int s_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int rl_checkpoint_seal(const char *dir)
{
    DIR *dp = dir ? opendir(dir) : NULL;
    if (!dp)
        return rl_error_set(RL_EIO, "checkpoint seal %s: %s", dir ? dir : "(null)",
                            dir ? strerror(errno) : "NULL directory");
    char *names[S_SUMS_FILES];
    int n = 0, rc = RL_OK;
    struct dirent *de;
    while ((de = readdir(dp))) {
        const char *nm = de->d_name;
        if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0 || strcmp(nm, RL_CKPT_SUMS) == 0 ||
            strstr(nm, ".tmp.")) /* rl_file_write_atomic's leftovers: <name>.tmp.XXXXXX */
            continue;
        char path[RL_CKPT_PATH_MAX];
        struct stat sb;
        if ((rc = s_join(path, sizeof path, dir, nm)) < 0)
            break;
        if (lstat(path, &sb) < 0 || !S_ISREG(sb.st_mode)) {
            rc = rl_error_set(RL_EINVAL, "checkpoint seal: %s is not a regular file", path);
            break;
        }
        if (!s_sums_name_ok(nm, strlen(nm)) || n == S_SUMS_FILES) {
            rc = rl_error_set(RL_EINVAL, "checkpoint seal: %s: %s", path,
                              n == S_SUMS_FILES ? "more files than SHA256SUMS may list"
                                                : "a name SHA256SUMS cannot list");
            break;
        }
        if (!(names[n] = strdup(nm))) {
            rc = rl_error_set(RL_ENOMEM, "checkpoint seal: out of memory");
            break;
        }
        n++;
    }
    closedir(dp);
    char *text = NULL;
    size_t cap = 128 + (size_t)n * (S_HEX + 2 + 256 + 1) + sizeof S_SELF + S_HEX + 2, len = 0;
    if (!rc && !(text = malloc(cap)))
        rc = rl_error_set(RL_ENOMEM, "checkpoint seal: out of memory");
    if (!rc) {
        qsort(names, (size_t)n, sizeof names[0], s_cmp_str);
        len = (size_t)snprintf(text, cap, "# rlrt checkpoint: the sha256 of every file here "
                                          "(check: sha256sum -c %s)\n", RL_CKPT_SUMS);
    }
    for (int i = 0; !rc && i < n; i++) {
        char path[RL_CKPT_PATH_MAX], hex[S_HEX + 1];
        if ((rc = s_join(path, sizeof path, dir, names[i])) < 0 ||
            (rc = s_sha256_file(path, hex)) < 0)
            break;
        len += (size_t)snprintf(text + len, cap - len, "%s  %s\n", hex, names[i]);
    }
    char self[S_HEX + 1];
    if (!rc && !(rc = s_sha256_mem(text, len, self)))
        len += (size_t)snprintf(text + len, cap - len, "%s%s\n", S_SELF, self);
    char path[RL_CKPT_PATH_MAX];
    if (!rc && !(rc = s_join(path, sizeof path, dir, RL_CKPT_SUMS)))
        rc = rl_file_write_atomic(path, text, len);
    free(text);
    for (int i = 0; i < n; i++)
        free(names[i]);
    return rc;
}

/* Checks `dir` against its SHA256SUMS (text, len bytes): the file's own line
 * first, then every file it lists; `need` (NULL-terminated) must be listed. */
static int s_sums_check(const char *dir, const char *sums, char *text, size_t len,
                        const char *const *need)
{
    /* the last line: the sha256 of everything before it */
    size_t self_len = sizeof S_SELF - 1 + S_HEX + 1;
    if (len < self_len || text[len - 1] != '\n' ||
        strncmp(text + len - self_len, S_SELF, sizeof S_SELF - 1) != 0 ||
        (len > self_len && text[len - self_len - 1] != '\n'))
        return rl_error_set(RL_EPROTO, "%s: damaged: its last line is not '%s<sha256>'", sums,
                            S_SELF);
    char want[S_HEX + 1], got[S_HEX + 1];
    memcpy(want, text + len - 1 - S_HEX, S_HEX);
    want[S_HEX] = '\0';
    int rc = s_sha256_mem(text, len - self_len, got);
    if (rc)
        return rc;
    if (strcmp(want, got) != 0)
        return rl_error_set(RL_EPROTO, "%s: damaged: sha256 of its lines expected %.64s (its last "
                            "line), got %s", sums, want, got);
    text[len - self_len] = '\0';
    const char *listed[S_SUMS_FILES];
    int n = 0, line = 0;
    for (char *p = text, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n'); /* every line ends in '\n': the last one checked above */
        *nl = '\0';
        line++;
        if (p[0] == '#')
            continue;
        size_t k = strlen(p);
        int hex = k > S_HEX + 2 && p[S_HEX] == ' ' && p[S_HEX + 1] == ' ';
        for (int i = 0; hex && i < S_HEX; i++)
            hex = (p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f');
        if (!hex || !s_sums_name_ok(p + S_HEX + 2, k - S_HEX - 2))
            return rl_error_set(RL_EPROTO, "%s:%d: damaged: expected '<sha256>  <file name>'", sums,
                                line);
        const char *name = p + S_HEX + 2;
        for (int i = 0; i < n; i++)
            if (strcmp(listed[i], name) == 0)
                return rl_error_set(RL_EPROTO, "%s:%d: '%s' listed twice", sums, line, name);
        if (n == S_SUMS_FILES)
            return rl_error_set(RL_EPROTO, "%s: lists more than %d files", sums, S_SUMS_FILES);
        listed[n++] = name;
    }
    for (int i = 0; need && need[i]; i++) {
        int found = 0;
        for (int j = 0; j < n && !found; j++)
            found = strcmp(listed[j], need[i]) == 0;
        if (!found)
            return rl_error_set(RL_EPROTO, "%s: does not list %s", sums, need[i]);
    }
    for (int i = 0; i < n; i++) {
        const char *name = listed[i];
        char path[RL_CKPT_PATH_MAX], have[S_HEX + 1];
        if ((rc = s_join(path, sizeof path, dir, name)) < 0)
            return rc;
        if ((rc = s_sha256_file(path, have)) < 0)
            return rl_error_wrap(rc, "%s (listed in %s)", name, RL_CKPT_SUMS);
        if (memcmp(have, name - S_HEX - 2, S_HEX) != 0)
            return rl_error_set(RL_EPROTO, "%s: damaged: sha256 expected %.64s (%s), got %s", path,
                                name - S_HEX - 2, RL_CKPT_SUMS, have);
    }
    return RL_OK;
}

/* Verifies one directory; *sealed = 0 (RL_OK) when it has no SHA256SUMS and
 * `required` is 0. */
static int s_verify_dir(const char *dir, const char *const *need, int required, int *sealed)
{
    char sums[RL_CKPT_PATH_MAX];
    int rc = s_join(sums, sizeof sums, dir, RL_CKPT_SUMS);
    if (rc)
        return rc;
    *sealed = 0;
    struct stat sb;
    if (lstat(sums, &sb) < 0 && errno == ENOENT) {
        if (!required)
            return RL_OK;
        return rl_error_set(RL_EPROTO, "%s: missing (trainer_state.json says the checkpoint has "
                            "checksums)", sums);
    }
    int fd = s_open_regular(sums);
    if (fd < 0)
        return rl_error_code() == RL_ENOTFOUND ? RL_EPROTO : rl_error_code();
    char *text = malloc(S_SUMS_MAX + 1);
    ssize_t len = 0, k = 0;
    while (text && len <= S_SUMS_MAX &&
           ((k = read(fd, text + len, (size_t)(S_SUMS_MAX + 1 - len))) > 0 || (k < 0 && errno == EINTR)))
        len += k > 0 ? k : 0;
    int err = errno;
    close(fd);
    if (!text || k < 0 || len > S_SUMS_MAX) {
        free(text);
        return rl_error_set(RL_EPROTO, "%s: %s", sums,
                            !text ? "out of memory"
                            : k < 0 ? strerror(err)
                                    : "larger than 64 KiB");
    }
    text[len] = '\0';
    if (memchr(text, '\0', (size_t)len)) {
        free(text);
        return rl_error_set(RL_EPROTO, "%s: damaged: holds a NUL byte", sums);
    }
    rc = s_sums_check(dir, sums, text, (size_t)len, need);
    free(text);
    *sealed = rc == RL_OK;
    return rc;
}

/* "checksums" in dir/trainer_state.json: the step was sealed when saved. */
static int s_state_says_sealed(const char *dir)
{
    char file[RL_CKPT_PATH_MAX];
    if (s_join(file, sizeof file, dir, S_STATE))
        return 0;
    json_t *j = json_load_file(file, 0, NULL);
    int yes = json_is_string(json_object_get(j, "checksums"));
    json_decref(j);
    return yes;
}

/* Appends `dir` to the list `which` (cap bytes) of unverified directories. */
static void s_unverified(char *which, size_t cap, int *count, const char *dir)
{
    (*count)++;
    if (!which || !cap)
        return;
    size_t k = strlen(which);
    snprintf(which + k, cap - k, "%s%s", k ? ", " : "", dir);
}

int rl_checkpoint_verify(const char *dir, int *unverified, char *which, size_t cap)
{
    int dummy;
    if (!unverified)
        unverified = &dummy;
    *unverified = 0;
    if (which && cap)
        which[0] = '\0';
    if (!dir)
        return rl_error_set(RL_EINVAL, "checkpoint verify: NULL directory");
    if (!rl_checkpoint_is_complete(dir))
        return rl_error_code() ? rl_error_code() : RL_EPROTO;
    static const char *const need[] = {S_MODEL, S_OPTIM, S_STATE, NULL};
    int sealed, rc = s_verify_dir(dir, need, s_state_says_sealed(dir), &sealed);
    if (rc)
        return rc;
    if (!sealed)
        s_unverified(which, cap, unverified, dir);
    /* the directories of the same step beside it: <dir>.<name> */
    char parent[RL_CKPT_PATH_MAX];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    const char *base = slash ? dir + (slash - parent) + 1 : dir;
    if (!slash)
        snprintf(parent, sizeof parent, ".");
    else if (slash == parent)
        parent[1] = '\0';
    else
        *slash = '\0';
    size_t blen = strlen(base);
    DIR *dp = opendir(parent);
    if (!dp)
        return rl_error_set(RL_EIO, "%s: %s", parent, strerror(errno));
    struct dirent *de;
    while (!rc && (de = readdir(dp))) {
        const char *nm = de->d_name;
        if (strncmp(nm, base, blen) != 0 || nm[blen] != '.' || !nm[blen + 1] ||
            strcmp(nm + blen, ".tmp") == 0 || strcmp(nm + blen, ".old") == 0)
            continue;
        char sib[RL_CKPT_PATH_MAX];
        struct stat sb;
        if (snprintf(sib, sizeof sib, "%s/%s", slash ? parent : ".", nm) >= (int)sizeof sib) {
            rc = rl_error_set(RL_EINVAL, "path '%s/%s' is too long", parent, nm);
            break;
        }
        if (stat(sib, &sb) < 0 || !S_ISDIR(sb.st_mode))
            continue;
        if (!(rc = s_verify_dir(sib, NULL, 0, &sealed)) && !sealed)
            s_unverified(which, cap, unverified, sib);
    }
    closedir(dp);
    return rc;
}

/* ---- save ------------------------------------------------------------------------ */

static int s_write_optimizer(const char *path, const rl_checkpoint_data *d)
{
    const rl_param_manifest *m = d->manifest;
    int have = d->exp_avg && d->exp_avg_sq;
    int n = have ? 2 * m->count : 0;
    rl_st_entry *e = calloc((size_t)(n > 0 ? n : 1), sizeof *e);
    char *names = calloc((size_t)(n > 0 ? n : 1), RL_PARAM_NAME_MAX + 16);
    if (!e || !names) {
        free(e);
        free(names);
        return rl_error_set(RL_ENOMEM, "%s: out of memory", path);
    }
    for (int i = 0; i < n; i++) {
        const rl_param_view *v = &m->views[i / 2];
        char *nm = names + (size_t)i * (RL_PARAM_NAME_MAX + 16);
        snprintf(nm, RL_PARAM_NAME_MAX + 16, "%s.%s", (i % 2) ? "exp_avg_sq" : "exp_avg",
                 v->name);
        e[i].name = nm;
        e[i].dtype = RL_F32;
        e[i].ndim = v->ndim;
        e[i].shape = v->shape;
        e[i].data = ((i % 2) ? d->exp_avg_sq : d->exp_avg) + v->offset;
    }
    char b1[32], b2[32], eps[32], wd[32], step[32];
    snprintf(b1, sizeof b1, "%.17g", d->adamw.beta1);
    snprintf(b2, sizeof b2, "%.17g", d->adamw.beta2);
    snprintf(eps, sizeof eps, "%.17g", d->adamw.eps);
    snprintf(wd, sizeof wd, "%.17g", d->adamw.weight_decay);
    snprintf(step, sizeof step, "%" PRId64, d->adamw_step);
    json_t *meta = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "format", S_FORMAT,
                             "has_moments", have ? "1" : "0", "optimizer", "adamw", "step", step,
                             "beta1", b1, "beta2", b2, "eps", eps, "weight_decay", wd);
    int rc = meta ? rl_safetensors_write(path, e, n, meta)
                  : rl_error_set(RL_ENOMEM, "%s: out of memory", path);
    json_decref(meta);
    free(e);
    free(names);
    return rc;
}

int rl_checkpoint_save(const char *root, const rl_checkpoint_data *d,
                       const rl_train_state *state)
{
    if (!root || !d || !d->manifest || !d->params || !state)
        return rl_error_set(RL_EINVAL, "checkpoint save: NULL root, data, manifest, params or "
                            "state");
    if (state->step < 0)
        return rl_error_set(RL_EINVAL, "checkpoint save: step %" PRId64 " < 0", state->step);
    if ((d->exp_avg == NULL) != (d->exp_avg_sq == NULL))
        return rl_error_set(RL_EINVAL, "checkpoint save: exp_avg and exp_avg_sq must both be "
                            "given or both NULL");
    if (state->extra && !json_is_object(state->extra))
        return rl_error_set(RL_EINVAL, "checkpoint save: state->extra must be a JSON object");
    int rc = rl_mkdir_p(root);
    if (rc < 0)
        return rc;
    char name[64], tmp[RL_CKPT_PATH_MAX], fin[RL_CKPT_PATH_MAX], old[RL_CKPT_PATH_MAX],
        file[RL_CKPT_PATH_MAX];
    snprintf(name, sizeof name, "step_%" PRId64, state->step);
    if ((rc = s_join(fin, sizeof fin, root, name)) < 0)
        return rc;
    if (snprintf(tmp, sizeof tmp, "%s.tmp", fin) >= (int)sizeof tmp ||
        snprintf(old, sizeof old, "%s.old", fin) >= (int)sizeof old)
        return rl_error_set(RL_EINVAL, "checkpoint path '%s' is too long", fin);
    /* leftovers of a crashed save of the same step */
    if ((rc = s_rm_rf(tmp)) < 0 || (rc = s_rm_rf(old)) < 0)
        return rc;
    if (mkdir(tmp, 0755) < 0)
        return rl_error_set(RL_EIO, "%s: mkdir failed: %s", tmp, strerror(errno));

    rl_dtype pd = d->param_dtype ? d->param_dtype : RL_F32;
    if ((rc = s_join(file, sizeof file, tmp, S_MODEL)) < 0 ||
        (rc = rl_safetensors_write_params(file, d->manifest, d->params, pd,
                                          d->model_metadata)) < 0)
        goto fail;
    if ((rc = s_join(file, sizeof file, tmp, S_OPTIM)) < 0 ||
        (rc = s_write_optimizer(file, d)) < 0)
        goto fail;
    json_t *js = s_state_to_json(state);
    char *text = js ? json_dumps(js, JSON_INDENT(1) | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(js);
    if (!text) {
        rc = rl_error_set(RL_ENOMEM, "checkpoint save: out of memory for %s", S_STATE);
        goto fail;
    }
    if ((rc = s_join(file, sizeof file, tmp, S_STATE)) == RL_OK)
        rc = rl_file_write_atomic(file, text, strlen(text));
    free(text);
    if (rc < 0)
        goto fail;
    if (d->write_extra && (rc = d->write_extra(tmp, d->write_extra_arg)) < 0)
        goto fail;
    /* the checksums of every file, written last: the directory is sealed */
    if ((rc = rl_checkpoint_seal(tmp)) < 0 || (rc = rl_fsync_dir(tmp)) < 0)
        goto fail;

    /* publish: step_N.tmp -> step_N (moving an existing step_N aside first) */
    struct stat sb;
    int replaced = 0;
    if (lstat(fin, &sb) == 0) {
        if (rename(fin, old) < 0) {
            rc = rl_error_set(RL_EIO, "%s: cannot move the existing checkpoint aside: %s", fin,
                              strerror(errno));
            goto fail;
        }
        replaced = 1;
    }
    if (rename(tmp, fin) < 0) {
        rc = rl_error_set(RL_EIO, "%s: rename from %s failed: %s", fin, tmp, strerror(errno));
        if (replaced)
            (void)rename(old, fin);
        goto fail;
    }
    if ((rc = rl_fsync_dir(root)) < 0)
        return rc;
    if (replaced && (rc = s_rm_rf(old)) < 0)
        return rc;
    char line[80];
    int len = snprintf(line, sizeof line, "%s\n", name);
    if ((rc = s_join(file, sizeof file, root, "latest")) < 0)
        return rc;
    return rl_file_write_atomic(file, line, (size_t)len);

fail:
    {
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", rl_error_message());
        s_rm_rf(tmp);
        return rl_error_set(rc, "checkpoint save %s: %s", fin, keep);
    }
}

/* ---- find / load --------------------------------------------------------------- */

int rl_checkpoint_is_complete(const char *dir)
{
    char file[RL_CKPT_PATH_MAX];
    static const char *files[] = {S_MODEL, S_OPTIM, S_STATE};
    for (int i = 0; i < 3; i++) {
        if (s_join(file, sizeof file, dir, files[i]) < 0)
            return 0;
        if (!s_is_file(file)) {
            rl_error_set(RL_ENOTFOUND, "%s: missing %s", dir, files[i]);
            return 0;
        }
        if (i < 2) { /* headers validate sizes: catches truncation */
            rl_safetensors *st = rl_safetensors_open(file);
            if (!st)
                return 0;
            rl_safetensors_close(st);
        }
    }
    json_error_t err;
    json_t *j = json_load_file(file, 0, &err);
    if (!j) {
        rl_error_set(RL_EPROTO, "%s: invalid JSON: %s", file, err.text);
        return 0;
    }
    int ok = s_state_from_json(file, j, NULL) == RL_OK;
    json_decref(j);
    return ok;
}

static void s_note(char *note, size_t cap, const char *fmt, const char *a, const char *b)
{
    size_t k = strlen(note);
    if (k + 4 >= cap)
        return;
    if (k)
        note[k++] = ';', note[k++] = ' ', note[k] = '\0';
    snprintf(note + k, cap - k, fmt, a, b);
}

/* The step numbers of root's step_<N> directories, newest first, in a
 * malloc'd array (*steps, *n). Closes dp. With a note buffer, partial saves
 * (step_<N>.tmp) are mentioned there. */
static int s_list_steps(DIR *dp, const char *root, char *note, size_t note_cap, int64_t **steps,
                        int *n)
{
    int64_t *v = NULL;
    int cnt = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        int64_t s;
        size_t len = strlen(de->d_name);
        if (note && len > 4 && strcmp(de->d_name + len - 4, ".tmp") == 0 &&
            strncmp(de->d_name, "step_", 5) == 0) {
            s_note(note, note_cap, "ignored partial checkpoint %s/%s (interrupted "
                   "save)", root, de->d_name);
            continue;
        }
        if (!s_parse_step_name(de->d_name, &s))
            continue;
        if (cnt == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *p = realloc(v, sizeof *p * (size_t)cap);
            if (!p) {
                free(v);
                closedir(dp);
                return rl_error_set(RL_ENOMEM, "%s: out of memory", root);
            }
            v = p;
        }
        v[cnt++] = s;
    }
    closedir(dp);
    /* insertion sort: checkpoint counts are small */
    for (int i = 1; i < cnt; i++)
        for (int j = i; j > 0 && v[j] > v[j - 1]; j--) {
            int64_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    *steps = v;
    *n = cnt;
    return RL_OK;
}

int rl_checkpoint_find(const char *root, rl_checkpoint_info *info)
{
    memset(info, 0, sizeof *info);
    info->step = -1;
    DIR *dp = opendir(root);
    if (!dp)
        return rl_error_set(errno == ENOENT ? RL_ENOTFOUND : RL_EIO,
                            "%s: no checkpoint directory: %s", root, strerror(errno));
    int64_t *steps = NULL;
    int n = 0;
    if (s_list_steps(dp, root, info->note, sizeof info->note, &steps, &n))
        return rl_error_code();
    int rc = RL_ENOTFOUND;
    for (int i = 0; i < n; i++) {
        char dir[RL_CKPT_PATH_MAX];
        if (snprintf(dir, sizeof dir, "%s/step_%" PRId64, root, steps[i]) >= (int)sizeof dir)
            continue;
        int unverified = 0;
        char which[1024];
        if (rl_checkpoint_verify(dir, &unverified, which, sizeof which) == RL_OK) {
            snprintf(info->dir, sizeof info->dir, "%s", dir);
            info->step = steps[i];
            info->unverified = unverified;
            if (unverified)
                s_note(info->note, sizeof info->note, "%s: no " RL_CKPT_SUMS " (saved before "
                       "checkpoints carried checksums): %s files cannot be verified", which,
                       unverified > 1 ? "their" : "its");
            rc = RL_OK;
            break;
        }
        char why[900];
        snprintf(why, sizeof why, "%s", rl_error_message());
        s_note(info->note, sizeof info->note, "skipped damaged or incomplete checkpoint %s (%s)",
               dir, why);
    }
    free(steps);
    if (rc == RL_OK) {
        /* `latest` is a hint for other tools; say so when it disagrees */
        char buf[128];
        if (s_read_latest(root, buf, sizeof buf) == RL_OK) {
            const char *base = strrchr(info->dir, '/') + 1;
            if (strcmp(buf, base) != 0)
                s_note(info->note, sizeof info->note, "'latest' names '%s' but the newest "
                       "intact checkpoint is %s", buf, base);
        }
        return RL_OK;
    }
    if (n > 0) /* step_<N> directories appear complete (renamed into place): these were damaged */
        return rl_error_set(RL_EPROTO, "%s: %d checkpoint(s), none complete: %s", root, n,
                            info->note);
    return rl_error_set(RL_ENOTFOUND, "%s: no complete checkpoint%s%s", root,
                        info->note[0] ? ": " : "", info->note);
}

static int s_meta_float(const rl_safetensors *st, const char *path, const char *key, double *out)
{
    const char *s = rl_safetensors_metadata(st, key);
    char *end = NULL;
    if (!s || !*s)
        return rl_error_set(RL_EPROTO, "%s: metadata '%s' missing", path, key);
    *out = strtod(s, &end);
    if (*end)
        return rl_error_set(RL_EPROTO, "%s: metadata '%s' = '%s' is not a number", path, key, s);
    return RL_OK;
}

static int s_load_optimizer(const char *path, rl_checkpoint_data *d)
{
    rl_safetensors *st = rl_safetensors_open(path);
    if (!st)
        return rl_error_code();
    const rl_param_manifest *m = d->manifest;
    int rc = RL_OK;
    const char *fmt = rl_safetensors_metadata(st, "format");
    const char *have = rl_safetensors_metadata(st, "has_moments");
    const char *step = rl_safetensors_metadata(st, "step");
    if (!fmt || strcmp(fmt, S_FORMAT) != 0 || !have || !step) {
        rc = rl_error_set(RL_EPROTO, "%s: metadata 'format', 'has_moments' or 'step' missing or "
                          "wrong", path);
        goto out;
    }
    char *end = NULL;
    errno = 0;
    long long t = strtoll(step, &end, 10);
    if (end == step || *end || errno == ERANGE || t < 0 || t > S_MAX_COUNT || step[0] < '0' ||
        step[0] > '9') {
        rc = rl_error_set(RL_EPROTO, "%s: metadata 'step' = '%s' is not a step count (0 .. 2^53)",
                          path, step);
        goto out;
    }
    if ((rc = s_meta_float(st, path, "beta1", &d->adamw.beta1)) < 0 ||
        (rc = s_meta_float(st, path, "beta2", &d->adamw.beta2)) < 0 ||
        (rc = s_meta_float(st, path, "eps", &d->adamw.eps)) < 0 ||
        (rc = s_meta_float(st, path, "weight_decay", &d->adamw.weight_decay)) < 0)
        goto out;
    d->adamw_step = t;
    if (strcmp(have, "1") != 0) {
        d->adamw_step = 0;
        goto out;
    }
    if (!d->exp_avg || !d->exp_avg_sq) {
        rc = rl_error_set(RL_EINVAL, "%s: checkpoint has AdamW moments but exp_avg/exp_avg_sq "
                          "are NULL", path);
        goto out;
    }
    if (rl_safetensors_count(st) != 2 * m->count) {
        rc = rl_error_set(RL_ESHAPE, "%s: %d moment tensors, expected %d (2 per view)", path,
                          rl_safetensors_count(st), 2 * m->count);
        goto out;
    }
    for (int i = 0; i < 2 * m->count; i++) {
        const rl_param_view *v = &m->views[i / 2];
        char nm[RL_PARAM_NAME_MAX + 16];
        snprintf(nm, sizeof nm, "%s.%s", (i % 2) ? "exp_avg_sq" : "exp_avg", v->name);
        int k = rl_safetensors_find(st, nm);
        if (k < 0) {
            rc = rl_error_set(RL_ENOTFOUND, "%s: tensor '%s' missing", path, nm);
            goto out;
        }
        const rl_st_tensor *te = rl_safetensors_tensor(st, k);
        int same = te->ndim == v->ndim && te->dtype == RL_F32;
        for (int dd = 0; same && dd < v->ndim; dd++)
            same = te->shape[dd] == v->shape[dd];
        if (!same) {
            rc = rl_error_set(RL_ESHAPE, "%s: tensor '%s' is not f32 with the shape of view '%s'",
                              path, nm, v->name);
            goto out;
        }
        float *dst = ((i % 2) ? d->exp_avg_sq : d->exp_avg) + v->offset;
        if ((rc = rl_safetensors_read_f32(st, k, dst, v->numel)) < 0)
            goto out;
        for (int64_t e = 0; e < v->numel; e++) /* what AdamW can hold: NaN here ends the run later */
            if (!isfinite(dst[e]) || ((i % 2) && dst[e] < 0.0f)) {
                rc = rl_error_set(RL_EPROTO, "%s: tensor '%s'[%lld] = %g (expected a finite "
                                             "moment%s)", path, nm, (long long)e, (double)dst[e],
                                  (i % 2) ? ", >= 0" : "");
                goto out;
            }
    }
out:
    rl_safetensors_close(st);
    return rc;
}

int rl_checkpoint_load(const char *dir, rl_checkpoint_data *d, rl_train_state *state)
{
    if (!dir || !d || !d->manifest || !d->params || !state)
        return rl_error_set(RL_EINVAL, "checkpoint load: NULL dir, data, manifest, params or "
                            "state");
    char file[RL_CKPT_PATH_MAX];
    int rc;
    if ((rc = s_join(file, sizeof file, dir, S_STATE)) < 0)
        return rc;
    json_error_t err;
    json_t *j = json_load_file(file, 0, &err);
    if (!j)
        return rl_error_set(RL_EPROTO, "%s:%d: invalid JSON: %s", file, err.line, err.text);
    rl_train_state st;
    rc = s_state_from_json(file, j, &st);
    json_decref(j);
    if (rc < 0)
        return rc;
    const char *base = strrchr(dir, '/');
    int64_t named;
    if (s_parse_step_name(base ? base + 1 : dir, &named) && named != st.step) {
        json_decref(st.extra);
        return rl_error_set(RL_EPROTO, "%s: key 'step' = %" PRId64 ", but the directory is "
                            "step_%" PRId64, file, st.step, named);
    }
    if ((rc = s_join(file, sizeof file, dir, S_MODEL)) < 0 ||
        (rc = rl_safetensors_read_params(file, d->manifest, d->params)) < 0)
        goto fail;
    if ((rc = s_join(file, sizeof file, dir, S_OPTIM)) < 0 ||
        (rc = s_load_optimizer(file, d)) < 0)
        goto fail;
    *state = st;
    return RL_OK;
fail:
    json_decref(st.extra);
    return rc;
}

/* ---- retention ----------------------------------------------------------------- */

int rl_checkpoint_prune(const char *root, int keep)
{
    if (keep < 1)
        return rl_error_set(RL_EINVAL, "checkpoint prune: keep = %d < 1", keep);
    char latest[128];
    s_read_latest(root, latest, sizeof latest); /* "" if unreadable: no step is kept for it */
    DIR *dp = opendir(root);
    if (!dp)
        return rl_error_set(RL_EIO, "%s: %s", root, strerror(errno));
    int64_t *steps = NULL;
    int n = 0;
    if (s_list_steps(dp, root, NULL, 0, &steps, &n))
        return rl_error_code();
    int rc = RL_OK, kept = 0;
    for (int i = 0; i < n && rc == RL_OK; i++) {
        char name[64], dir[RL_CKPT_PATH_MAX];
        snprintf(name, sizeof name, "step_%" PRId64, steps[i]);
        if (s_join(dir, sizeof dir, root, name) < 0)
            continue;
        int complete = rl_checkpoint_is_complete(dir);
        if (strcmp(name, latest) == 0 || (complete && kept < keep)) {
            kept += complete;
            continue;
        }
        if (complete)
            rc = s_rm_rf(dir);
    }
    free(steps);
    return rc;
}
