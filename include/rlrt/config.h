/* rlrt/config.h — YAML configuration trees, typed getters, dotted overrides.
 *
 * Purpose: rl-driver and rl-worker read job.yaml / cluster.yaml into an
 * rl_config tree (parsed with libyaml). Every node remembers the file, line
 * and column it came from, so every error names them:
 *
 *     job.yaml:12:5: actor.optim.lr: expected a number, got 'fast'
 *
 * A job's known keys are a built-in defaults tree (YAML text compiled into the
 * program) merged with the job file. rl_config_validate() rejects keys of the
 * job file that the defaults do not know (suggesting the nearest known key by
 * edit distance) and values of the wrong type; rl_config_override() applies a
 * command-line `key=value`, parsing the value as the existing value's type.
 * rl_config_load_job() does all of it in the order a driver needs.
 *
 * Paths: keys joined by '.', list items by "[i]" or ".i":
 * "actor.optim.lr", "nodes[0].address", "nodes.0.address". The empty path ""
 * is the root. Keys that contain '.' cannot be addressed by path (use the node
 * API to iterate them).
 *
 * Scalar types: a scalar keeps its text and whether it was quoted. A plain
 * scalar is an integer (decimal or 0x hex), a number (anything strtod takes,
 * plus .inf/.nan), a boolean (true/false, yes/no, on/off; any case), null
 * (~, null, or empty) or a string. Quoted scalars ("30", '0.5', !!str 1)
 * are strings for type checks: rl_config_validate() refuses one where the
 * defaults hold an integer, a number or a boolean ("job.yaml:3:16:
 * trainer.total_steps: expected an integer, got the string \"30\""). The
 * integer/number/boolean getters still accept a quoted numeric text so
 * that a JSON round trip (which quotes e.g. ".inf") loses nothing. The
 * string getter accepts any scalar.
 *
 * Open maps and nulls in the defaults: an EMPTY map in the defaults tree
 * ("weights: {}") accepts any keys in the job file and in overrides; a null
 * default ("tokenizer: ~") accepts a value of any type.
 *
 * Invariants: map keys are unique (duplicates are a parse error); nodes never
 * change kind except through rl_config_set_yaml()/rl_config_override().
 *
 * Ownership: rl_config_parse_*(), rl_config_subtree(), rl_config_merge() and
 * rl_config_load_job() return a tree the caller frees with rl_config_free().
 * Node pointers (rl_config_node) are borrowed from their tree and valid until
 * the tree is freed or modified. Strings returned by getters are borrowed the
 * same way. rl_config_to_yaml()/rl_config_to_json() return malloc'd text the
 * caller free()s.
 */
#ifndef RLRT_CONFIG_H
#define RLRT_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_config rl_config;
typedef struct rl_config_node rl_config_node;

typedef enum rl_config_kind {
    RL_CONFIG_SCALAR = 1,
    RL_CONFIG_MAP = 2,
    RL_CONFIG_LIST = 3
} rl_config_kind;

/* The value type of a node as the type checks see it. */
typedef enum rl_config_type {
    RL_CONFIG_T_NULL = 0,
    RL_CONFIG_T_BOOL,
    RL_CONFIG_T_INT,
    RL_CONFIG_T_NUMBER, /* a float literal (an integer literal is T_INT) */
    RL_CONFIG_T_STRING,
    RL_CONFIG_T_LIST,
    RL_CONFIG_T_MAP
} rl_config_type;

/* ---- parsing and freeing --------------------------------------------------- */

/* Parses a YAML file (one document; an empty file is an empty map). Errors:
 * RL_EIO (cannot read), RL_ECONFIG ("job.yaml:3:7: <libyaml's problem>"). */
rl_config *rl_config_parse_file(const char *path);
/* Parses YAML (or JSON: it is YAML flow syntax) text of `len` bytes; `name`
 * stands for the file name in locations and messages. The text may come
 * from a network peer, so both parsers refuse (RL_ECONFIG, with file:line:col)
 * maps/lists nested deeper than 64 levels ("nesting deeper than 64 levels",
 * also through an alias), aliases that copy more than 1,000,000 nodes in all
 * ("alias '*a' expands the config past 1000000 nodes copied by aliases"),
 * and trees whose paths plus the text that aliases copy pass 64 MiB. */
rl_config *rl_config_parse_string(const char *text, size_t len,
                                  const char *name);
/* A tree holding an empty map, named `name`. */
rl_config *rl_config_new(const char *name);
void rl_config_free(rl_config *c);
/* The file name the tree was read from (or the name given). */
const char *rl_config_name(const rl_config *c);

/* ---- typed getters by path --------------------------------------------------
 * rl_config_get_X(): a missing key is RL_ENOTFOUND with
 *     "job.yaml:4:3: actor.optim: missing key 'lr'"
 * (the location of the deepest existing ancestor); a wrong type is RL_ECONFIG
 * with "job.yaml:12:5: actor.optim.lr: expected a number, got 'fast'".
 * rl_config_get_X_or(): a missing key (or a null value) gives `def` and 0; a
 * wrong type is still an error. */
int rl_config_get_string(const rl_config *c, const char *path,
                         const char **out);
int rl_config_get_int(const rl_config *c, const char *path, int64_t *out);
int rl_config_get_double(const rl_config *c, const char *path, double *out);
int rl_config_get_bool(const rl_config *c, const char *path, int *out);
int rl_config_get_string_or(const rl_config *c, const char *path,
                            const char *def, const char **out);
int rl_config_get_int_or(const rl_config *c, const char *path, int64_t def,
                         int64_t *out);
int rl_config_get_double_or(const rl_config *c, const char *path, double def,
                            double *out);
int rl_config_get_bool_or(const rl_config *c, const char *path, int def,
                          int *out);
/* Number of items of the list at `path` (RL_ECONFIG if not a list). */
int rl_config_list_len(const rl_config *c, const char *path, size_t *out);
/* Number of entries of the map at `path` and the key of entry i (file
 * order). */
int rl_config_map_len(const rl_config *c, const char *path, size_t *out);
int rl_config_map_key(const rl_config *c, const char *path, size_t i,
                      const char **out);
/* 1 if `path` names a node, else 0. */
int rl_config_has(const rl_config *c, const char *path);

/* ---- nodes -------------------------------------------------------------------
 * Borrowed views for walking a tree (schemas with lists of maps, such as
 * cluster.yaml, read through these). */
const rl_config_node *rl_config_root(const rl_config *c);
/* The node at `path` below `n`, or NULL (no message is set). */
const rl_config_node *rl_config_node_at(const rl_config_node *n,
                                        const char *path);
rl_config_kind rl_config_node_kind(const rl_config_node *n);
rl_config_type rl_config_node_type(const rl_config_node *n);
/* Dotted path from the root of its tree, e.g. "roles.actor.placement[1]"
 * ("" for the root). */
const char *rl_config_node_path(const rl_config_node *n);
const char *rl_config_node_file(const rl_config_node *n);
int rl_config_node_line(const rl_config_node *n);   /* 1-based */
int rl_config_node_column(const rl_config_node *n); /* 1-based */
/* Scalar text (NULL for maps and lists); quoted: 1 if written quoted. */
const char *rl_config_node_text(const rl_config_node *n);
int rl_config_node_quoted(const rl_config_node *n);
/* Map entries or list items. For lists rl_config_node_key() is NULL. */
size_t rl_config_node_len(const rl_config_node *n);
const char *rl_config_node_key(const rl_config_node *n, size_t i);
const rl_config_node *rl_config_node_item(const rl_config_node *n, size_t i);
/* Location of the KEY of map entry i (errors about a key point there). */
int rl_config_node_key_line(const rl_config_node *n, size_t i);
int rl_config_node_key_column(const rl_config_node *n, size_t i);
/* Typed reads of one node (same messages as the path getters). */
int rl_config_node_string(const rl_config_node *n, const char **out);
int rl_config_node_int(const rl_config_node *n, int64_t *out);
int rl_config_node_double(const rl_config_node *n, double *out);
int rl_config_node_bool(const rl_config_node *n, int *out);
/* Sets "file:line:col: path: " + printf message and returns `code`. */
int rl_config_node_error(const rl_config_node *n, int code, const char *fmt,
                         ...) __attribute__((format(printf, 3, 4)));
/* RL_ECONFIG unless every key of map `n` is one of `allowed` (NULL
 * terminated): "cluster.yaml:7:5: nodes[0]: unknown key 'adress'; did you
 * mean 'address'?" (the location is the key's). */
int rl_config_node_check_keys(const rl_config_node *n,
                              const char *const *allowed);
/* "a string", "an integer", "a number", "a boolean", "null", "a list",
 * "a map". */
const char *rl_config_type_name(rl_config_type t);

/* ---- subtrees, merging, serialisation ------------------------------------- */

/* Deep copy of the subtree at `path` (locations and paths are kept, so errors
 * still point into the original file). RL_ENOTFOUND if missing. */
rl_config *rl_config_subtree(const rl_config *c, const char *path);
/* Deep copy of `base` with `over` laid on top: maps merge key by key
 * (recursively), anything else in `over` replaces, except that a null over
 * a map keeps the map (a section whose lines are all commented out keeps
 * its defaults). Neither input changes. */
rl_config *rl_config_merge(const rl_config *base, const rl_config *over);
/* Block-style YAML of the subtree at `path` ("" = whole tree); scalars keep
 * their quoting, so parsing it back gives the same types. */
char *rl_config_to_yaml(const rl_config *c, const char *path);
/* Compact JSON of the subtree at `path`: integers, numbers, booleans and
 * nulls that are valid JSON literals are written bare, everything else as
 * JSON strings. rl_config_parse_string() reads it back. */
char *rl_config_to_json(const rl_config *c, const char *path);

/* ---- setting values, overrides, validation ----------------------------------- */

/* Replaces (or adds, creating intermediate maps) the node at `path` with the
 * YAML value `yaml` (e.g. "3", "[1, 2]", "{a: 1}", "'text'"). */
int rl_config_set_yaml(rl_config *c, const char *path, const char *yaml);
/* Applies one command-line override "key=value" to a merged job tree. The key
 * must name an existing node (else RL_ECONFIG "override algorithm.kl_cof=0.1:
 * unknown key 'algorithm.kl_cof'; did you mean 'algorithm.kl_coef'?"). The
 * value is parsed as YAML flow text and must have the existing value's type:
 * an integer for an integer, an integer or a number for a number, a boolean
 * for a boolean, a list for a list; for a string any scalar text is taken as
 * the string; a null accepts anything; a map accepts a flow map only if it is
 * open (empty). Wrong type: "override actor.ppo_epochs=fast: expected an
 * integer, got 'fast'". The new nodes are located at the override itself:
 * later errors about them read "override actor.ppo_epochs=-1: ...". */
int rl_config_override(rl_config *c, const char *kv);
int rl_config_override_all(rl_config *c, int n, const char *const *kvs);
/* Checks `job` against `defaults`: every key in the job must exist in the
 * defaults (except below open maps and null defaults), and every value must
 * have the default's type (integer where a number is expected is fine).
 * Errors carry the job file's location: "job.yaml:7:3: unknown key
 * 'algorithm.kl_cof'; did you mean 'algorithm.kl_coef'?" or
 * "job.yaml:12:5: actor.optim.lr: expected a number, got 'fast'". */
int rl_config_validate(const rl_config *job, const rl_config *defaults);
/* The driver's sequence: parse `defaults_yaml` (named "<defaults>"), parse
 * `job_path` (NULL: defaults only), validate, merge, apply the overrides. */
rl_config *rl_config_load_job(const char *defaults_yaml, const char *job_path,
                              int n_overrides, const char *const *overrides);

/* ---- declarative reading with ranges ------------------------------------------
 * A role or recipe lists the options it reads as a table of specs;
 * rl_config_read() reads each one into a field of the caller's struct and
 * checks its type and range, so every bad value is a located error:
 *     job.yaml:12:3: data.train_batch_size: must be >= 1, got -16
 *     override data.train_batch_size=0: data.train_batch_size: must be >= 1, got 0
 * Every key must exist: the defaults tree of the job supplies it, so no
 * fallback value lives in code (a missing key is RL_ENOTFOUND). A number is
 * never NaN; it is infinite only when its bound allows it. */
typedef enum rl_config_field {
    RL_CFG_INT = 1,  /* int64_t */
    RL_CFG_NUM = 2,  /* double */
    RL_CFG_BOOL = 3, /* int, 0 or 1 */
    RL_CFG_STR = 4,  /* const char *, borrowed from the tree; NULL for a null value */
    RL_CFG_ENUM = 5, /* int: the index of the text in `choices` ("grpo|rloo|...") */
    /* schema keys only (rl_config_key), read as the borrowed node: */
    RL_CFG_LIST = 6, /* const rl_config_node *: a list */
    RL_CFG_MAP = 7,  /* const rl_config_node *: a map; an empty default ({}) is open:
                      * any keys are accepted below it */
    RL_CFG_ANY = 8   /* const rl_config_node *: any value (the default is ~) */
} rl_config_field;

#define RL_CFG_MIN_OPEN 1u  /* value > min (default: >=) */
#define RL_CFG_MAX_OPEN 2u  /* value < max (default: <=) */
#define RL_CFG_NONEMPTY 4u  /* RL_CFG_STR: null or "" is an error */

typedef struct rl_config_spec {
    const char *path;    /* "rollout.temperature" */
    rl_config_field type;
    size_t offset;       /* offsetof(struct, field) */
    double min, max;     /* RL_CFG_INT / RL_CFG_NUM bounds; unchecked when min > max */
    unsigned flags;
    const char *choices; /* RL_CFG_ENUM: alternatives separated by '|' */
} rl_config_spec;

/* Reads n specs into `out` (a struct the offsets point into). Stops at the
 * first problem: 0 or RL_ENOTFOUND / RL_ECONFIG with a located message. */
int rl_config_read(const rl_config *c, const rl_config_spec *spec, size_t n, void *out);
/* A located error about the value at `path` (a check rl_config_read cannot
 * express, e.g. "must divide data.train_batch_size"): "job.yaml:12:3: path:
 * message", or "path: message" when the node is missing. Returns `code`. */
int rl_config_error_at(const rl_config *c, const char *path, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* 1 when the user wrote the value at `path`: it comes from the job file or
 * an override, not from the defaults ("<defaults>") nor from a value a
 * program set (rl_config_set_yaml, "<set>": a recipe's derived key). */
int rl_config_user_set(const rl_config *c, const char *path);
/* A located error about a check between keys, `paths` NULL-terminated: at
 * the key the user wrote, so the user reads the key they can change (an
 * override before the job file, the job file before the defaults; among
 * equals the first), or at paths[0] when none is the user's. The message
 * names the keys itself: "override rollout.n=1: rollout.n:
 * algorithm.guidance.samples (1) must be below rollout.n (1)". */
int rl_config_error_among(const rl_config *c, const char *const *paths, int code, const char *fmt,
                          ...) __attribute__((format(printf, 4, 5)));
/* One integer / number at `path` with the same checks (lo > hi: unchecked). */
int rl_config_get_int_in(const rl_config *c, const char *path, int64_t lo, int64_t hi,
                         int64_t *out);
int rl_config_get_double_in(const rl_config *c, const char *path, double lo, double hi,
                            unsigned flags, double *out);

/* ---- schemas: one table per config section -----------------------------------
 * Every key a job may set belongs to exactly one section: a table of
 * rl_config_key from which come the typed struct the section is read into,
 * the key's default (a recipe's known keys are the defaults of the sections
 * it names), its type and range, and its line of docs/CONFIG.md. A section's
 * keys are written once, as the lines of a table file (X-macro style):
 *
 *     common/schema/actor.def:
 *         X(NUM, lr, "actor.optim.lr", "1.0e-4", 0, 10, 0, NULL, "AdamW's peak lr")
 *         X(ENUM, schedule, "actor.optim.lr_schedule", "constant", 0, 0, 0,
 *           "constant|linear|cosine", "learning-rate schedule")
 *
 * the header makes the struct from it
 *
 *     typedef struct rl_actor_config {
 *     #define X RL_CFG_FIELD
 *     #include "common/schema/actor.def"
 *     #undef X
 *     } rl_actor_config;
 *
 * and one .c file the table and the section, through
 * common/schema/section.inc (RL_CFG_KEY over the .def, then the section):
 *
 *     #define RL_CFG_DEFINE rl_actor_section, rl_actor_config, "common/schema/actor.def", \
 *         s_check, "actor", "the actor role", "actor ranks; the driver"
 *     #include "common/schema/section.inc"
 *
 * X(TYPE, field, path, default, min, max, flags, choices, help): TYPE is INT,
 * NUM, BOOL, STR, ENUM, LIST, MAP or ANY (the field's C type follows:
 * int64_t, double, int, const char *, int, const rl_config_node *); the
 * default is YAML flow text ("1.0e-4", "constant", "'a: b'", "[1, 2]", "{}",
 * "~"); min/max/flags bound INT and NUM as for rl_config_spec; choices lists
 * an ENUM's values. A struct may carry fields of its own after the keys
 * (derived values its check fills in). */

typedef struct rl_config_key {
    const char *path;       /* "actor.optim.lr" */
    rl_config_field type;
    size_t offset;          /* of the field in the section's struct */
    const char *def;        /* the default, YAML flow text */
    double min, max;        /* INT / NUM bounds; unchecked when min > max */
    unsigned flags;         /* RL_CFG_MIN_OPEN, RL_CFG_MAX_OPEN, RL_CFG_NONEMPTY */
    const char *choices;    /* ENUM: "a|b|c" */
    const char *help;       /* one line: docs/CONFIG.md */
} rl_config_key;

typedef struct rl_config_section {
    const char *name;       /* a title in docs/CONFIG.md: "actor", "data (language model)" */
    const char *summary;    /* one line */
    const char *readers;    /* who reads it: "actor ranks; the driver (batch sizes)" */
    const rl_config_key *keys;
    size_t n_keys;
    size_t size;            /* of the struct */
    /* Checks that involve several keys (or other sections, through
     * rl_config_section_get), and fills the struct's derived fields; errors
     * located with rl_config_key_error. May be NULL. */
    int (*check)(const rl_config *c, void *out);
} rl_config_section;

#define RL_CFG_CTYPE_INT int64_t
#define RL_CFG_CTYPE_NUM double
#define RL_CFG_CTYPE_BOOL int
#define RL_CFG_CTYPE_STR const char *
#define RL_CFG_CTYPE_ENUM int
#define RL_CFG_CTYPE_LIST const rl_config_node *
#define RL_CFG_CTYPE_MAP const rl_config_node *
#define RL_CFG_CTYPE_ANY const rl_config_node *
#define RL_CFG_FIELD(T, field, path, def, lo, hi, fl, choices, help) RL_CFG_CTYPE_##T field;
#define RL_CFG_KEY(T, field, path, def, lo, hi, fl, choices, help) \
    {path, RL_CFG_##T, offsetof(RL_CFG_STRUCT, field), def, lo, hi, fl, choices, help},
#define RL_CFG_SECTION(name, summary, readers, keys, check) \
    {name, summary, readers, keys, sizeof keys / sizeof keys[0], sizeof(RL_CFG_STRUCT), check}

/* Reads every key of the section into `out` (s->size bytes), each checked
 * for type and range with a located error, then runs s->check. */
int rl_config_section_read(const rl_config *c, const rl_config_section *s, void *out);
/* The section read from this tree once and kept with it (until a value of
 * the tree changes, or the tree is freed): the typed view recipes and roles
 * use. NULL with the located error of rl_config_section_read. */
const void *rl_config_section_get(const rl_config *c, const rl_config_section *s);
/* 1 when every key of the section is in the tree (the recipe has the
 * section), else 0. */
int rl_config_has_section(const rl_config *c, const rl_config_section *s);
/* The path of the key whose field is at `offset` (NULL if none). */
const char *rl_config_key_path(const rl_config_section *s, size_t offset);
/* A located error about the key of the field at `offset` (as
 * rl_config_error_at); returns `code`. */
int rl_config_key_error(const rl_config *c, const rl_config_section *s, size_t offset, int code,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Sets the key of the field at `offset` to the YAML value `yaml` (what a
 * recipe completes before the workers start, e.g. model.vocab_size). */
int rl_config_key_set(rl_config *c, const rl_config_section *s, size_t offset, const char *yaml);
/* Sets a derived key (a value the program computes from the user's keys
 * `from`, NULL-terminated; `why` says how, e.g. "trainer.total_steps 10 x
 * 4 updates a step") to `yaml`, and checks it at once against the key's own
 * range: out of range, the error is the user's key's, named by
 * rl_config_error_among over `from` ("override trainer.total_steps=...:
 * trainer.total_steps: actor.optim.total_training_steps = 1e13 (why) must be
 * in [-1, 1000000000000]"), never "<set>: the derived key". */
int rl_config_key_derive(rl_config *c, const rl_config_section *s, size_t offset, const char *yaml,
                         const char *const *from, const char *why);
/* Field-name forms of the three: RL_CFG_PATH(&rl_actor_section, rl_actor_config, lr). */
#define RL_CFG_PATH(sec, type, field) rl_config_key_path(sec, offsetof(type, field))
#define RL_CFG_ERROR(c, sec, type, field, code, ...) \
    rl_config_key_error(c, sec, offsetof(type, field), code, __VA_ARGS__)
#define RL_CFG_SET(c, sec, type, field, yaml) rl_config_key_set(c, sec, offsetof(type, field), yaml)
#define RL_CFG_DERIVE(c, sec, type, field, yaml, from, why) \
    rl_config_key_derive(c, sec, offsetof(type, field), yaml, from, why)
/* rl_config_error_among over two keys of sections, by field offset: a check
 * between them. RL_CFG_ERROR2 names them by field. */
int rl_config_key_error2(const rl_config *c, const rl_config_section *sa, size_t offa,
                         const rl_config_section *sb, size_t offb, int code, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
#define RL_CFG_ERROR2(c, sa, ta, fa, sb, tb, fb, code, ...) \
    rl_config_key_error2(c, sa, offsetof(ta, fa), sb, offsetof(tb, fb), code, __VA_ARGS__)

/* A recipe's change to another section's default: {path, YAML value}. */
typedef struct rl_config_default {
    const char *path, *value;
} rl_config_default;

/* The known-keys tree of sections[0..n) with `changes` applied (named
 * "<defaults>"): RL_EINVAL when two sections declare one path, a path is
 * both a key and a prefix of another, a change names no key, or a default
 * does not parse or does not fit its own type and range. */
rl_config *rl_config_schema_defaults(const rl_config_section *const *sections, size_t n,
                                     const rl_config_default *changes, size_t n_changes);
/* The driver's sequence over a known-keys tree (borrowed): parse job_path
 * (NULL: defaults only), validate, merge, apply the overrides. */
rl_config *rl_config_load_job_tree(const rl_config *defaults, const char *job_path,
                                   int n_overrides, const char *const *overrides);
/* docs/CONFIG.md's part for these sections: a table per section (key, type,
 * default, range, meaning) under its name, summary and readers. malloc'd. */
char *rl_config_sections_markdown(const rl_config_section *const *sections, size_t n);

/* ---- locations across processes ----------------------------------------------------
 * A worker gets the job tree as JSON, which carries no file positions. The
 * driver sends rl_config_locations_json() beside it and the worker applies
 * it with rl_config_apply_locations(), so a worker-side check still says
 * "job.yaml:14:3: rollout.response_length: ...". The text is a JSON object
 * {"files": [names], "nodes": {path: [file index, line, column]}}; unknown
 * paths are ignored (applying is best effort and never changes values). */
char *rl_config_locations_json(const rl_config *c);
int rl_config_apply_locations(rl_config *c, const char *json, size_t len);

/* Levenshtein distance between two strings (used for suggestions). */
size_t rl_edit_distance(const char *a, const char *b);

#ifdef __cplusplus
}
#endif
#endif
