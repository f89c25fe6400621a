/* common/tools/tools.h — tools a language model calls during a multi-turn rollout
 * (verl's agent loop), as a small C interface, and a runner that keeps every
 * call bounded.
 *
 * Purpose: a tool is {name, call, state}. The model writes a call as
 *     <call>NAME ARGS</call>
 * (rl_tool_parse_call splits "NAME ARGS"), the runner executes it and the
 * output is appended to the context as <result>OUTPUT</result>; generation
 * then continues. Users add a tool by writing one call function.
 *
 * Bounded outcomes: whatever a tool does, rl_tool_runner_call returns within
 * timeout_ms with one outcome per call:
 *   RL_TOOL_OK       the tool's output (checked: at most max_output bytes and
 *                    shorter than the caller's buffer, never cut; every byte
 *                    printable ASCII and in `charset` if given)
 *   RL_TOOL_ERROR    the tool returned an error: output "error: <message>"
 *                    (cut to fit); also when the call's thread cannot start
 *                    ("error: cannot start a thread")
 *   RL_TOOL_GARBAGE  the output failed the checks: output "error: bad output"
 *   RL_TOOL_TIMEOUT  no answer within timeout_ms: output "error: timeout";
 *                    the call's thread is abandoned (it owns copies of its
 *                    inputs and frees them when it ends); after max_stuck
 *                    abandoned calls still running, every call of the runner
 *                    times out at once, so a looping tool costs at most
 *                    max_stuck threads
 *   RL_TOOL_UNKNOWN  no tool of that name: output "error: unknown tool NAME"
 * The caller logs the outcome and counts it (per-turn metrics); nothing here
 * prints.
 *
 * rl_tool_calculator(): integer arithmetic over + - * and parentheses with
 * the usual precedence, at most 64 characters, every intermediate value in
 * int64 (overflow is an error), e.g. "47*6+35" → "317".
 *
 * Ownership: the runner copies the tool table; tool states are borrowed and
 * must outlive it. Outputs are written to caller buffers.
 */
#ifndef RLRT_TOOLS_H
#define RLRT_TOOLS_H

#include <stddef.h>
#include <stdint.h>

#include "common/schema/rollout.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RL_TOOL_MAX_NAME 32
#define RL_TOOL_MAX_ARGS 256
/* The largest tool output a job may allow: rollout.multi_turn.max_tool_output
 * is in [1, RL_TOOL_MAX_OUTPUT] (rl_agent_open), and rl_agent_generate()
 * passes the runner an output buffer of RL_TOOL_MAX_OUTPUT + 2 bytes. */
#define RL_TOOL_MAX_OUTPUT RL_MULTI_TURN_MAX_TOOL_OUTPUT

typedef struct rl_tool {
    const char *name; /* [a-z][a-z0-9_]*, at most RL_TOOL_MAX_NAME - 1 characters */
    /* args: NUL-terminated; out: cap bytes (cap >= 2). 0, or a negative
     * rl_status with the message set. May run on another thread. */
    int (*call)(void *state, const char *args, char *out, size_t cap);
    void *state;
} rl_tool;

typedef enum rl_tool_outcome {
    RL_TOOL_OK = 0,
    RL_TOOL_ERROR = 1,
    RL_TOOL_GARBAGE = 2,
    RL_TOOL_TIMEOUT = 3,
    RL_TOOL_UNKNOWN = 4,
    RL_TOOL_NOUTCOMES = 5
} rl_tool_outcome;

/* "ok", "error", "garbage", "timeout", "unknown". */
const char *rl_tool_outcome_name(rl_tool_outcome o);

/* The calculator tool ("calc"). */
rl_tool rl_tool_calculator(void);
/* Evaluates `expr` (the calculator's call): 0 and *value, or RL_EINVAL /
 * RL_ERANGE naming the position. */
int rl_calc_eval(const char *expr, int64_t *value);

/* The built-in tool called `name` (the names rollout.multi_turn.tools
 * accepts): "calc" today. Adding a tool = one call function and one row of
 * the table in common/tools/tools.c. RL_ENOTFOUND listing the known names. */
int rl_tool_builtin(const char *name, rl_tool *out);

typedef struct rl_tool_runner rl_tool_runner;

/* tools[0..n) (copied; names must be unique), timeout_ms >= 1,
 * max_output >= 1, max_stuck >= 1; charset NULL = any printable ASCII.
 * NULL + message on a bad argument. */
rl_tool_runner *rl_tool_runner_new(const rl_tool *tools, int n, int timeout_ms,
                                   size_t max_output, int max_stuck, const char *charset);
void rl_tool_runner_free(rl_tool_runner *r);
/* Runs `name` on `args`; out (cap >= 32 bytes) receives the output or the
 * error text of the outcome (an output of cap bytes or more is
 * RL_TOOL_GARBAGE). Returns 0 whatever the outcome (it is *outcome);
 * RL_EINVAL for bad arguments of this function itself, RL_ENOMEM when the
 * call's state cannot be allocated. */
int rl_tool_runner_call(rl_tool_runner *r, const char *name, const char *args, char *out,
                        size_t cap, rl_tool_outcome *outcome);
/* Calls abandoned after a timeout that are still running. */
int rl_tool_runner_stuck(const rl_tool_runner *r);

/* Splits the text inside <call>…</call> into NAME (up to the first space)
 * and ARGS (the rest, spaces trimmed). RL_EINVAL when NAME is empty or not
 * [a-z][a-z0-9_]*, or either part is too long. */
int rl_tool_parse_call(const char *text, size_t len, char name[RL_TOOL_MAX_NAME],
                       char args[RL_TOOL_MAX_ARGS]);

#ifdef __cplusplus
}
#endif
#endif
