/* common/runtime/value.h — rl.Value (proto/rl.proto) <-> jansson, for the small
 * typed arguments control messages carry (CONFIGURE.extra, CALL.args).
 * Ownership: rl_value_from_json() returns a tree freed with rl_value_free()
 * (NULL for a NULL input or when memory runs out); rl_value_to_json() returns
 * a new reference, or NULL with a message set in every case: RL_EPROTO for
 * nesting past 64 levels, a NaN/Inf double, a string or map key that is not
 * valid UTF-8 or holds a NUL byte, a duplicate key (the message names
 * the value's path, e.g. "value.k[2]: expected a finite double, got nan"),
 * RL_ENOMEM when memory runs out. */
#ifndef RLRT_RUNTIME_VALUE_H
#define RLRT_RUNTIME_VALUE_H

#include <jansson.h>

#include "rl.pb-c.h"

Rl__Value *rl_value_from_json(const json_t *j);
void rl_value_free(Rl__Value *v);
json_t *rl_value_to_json(const Rl__Value *v, int depth);

#endif
