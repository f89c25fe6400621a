"""prepare_data.py — a dataset of rlrt's LM recipes from verl's layout, each
prompt rendered through the model's chat template.

  build/venv-data/bin/python examples/prepare_data.py --model DIR IN --out OUT.jsonl \
      [--val-out VAL.jsonl --val-rows N] [--system TEXT] [--no-template]
      [--question-field F --answer-field F [--instruction TEXT]]

(`make venv-data` makes build/venv-data: transformers, jinja2, pyarrow.)

IN is a Parquet file (or JSONL) in verl's layout, what verl's
data_preprocess scripts write: `prompt` a list of chat messages
[{"role": ..., "content": ...}], `reward_model.ground_truth` (or a
top-level `ground_truth`), `data_source` (it picks the verifier:
common/reward/reward.h), optional `extra_info` ({"index", "answer"}). A
string prompt is one user message. With --question-field/--answer-field the
rows are GSM8K-style instead ({"question": ..., "answer": "... #### 72"}):
the prompt is the question (plus --instruction), the ground truth the number
after "####", the answer the worked solution, data_source "openai/gsm8k".

OUT is JSONL as common/data/data.h reads it: `prompt` (the conversation as
the tokenizer's chat_template renders it with the generation prompt: the
text the model continues; tokenizer.apply_chat_template(messages,
tokenize=False, add_generation_prompt=True)), `ground_truth` (a string),
`data_source`, `global_id` (extra_info.index when every row has a distinct
one, else the row number) and, for SFT, `solution` (a top-level `solution`,
else extra_info.answer) with the template's end-of-turn text left to the
stop token rlrt appends. With --val-out the last --val-rows rows (at most a
fifth of them) go there.

Why here and not in C: chat templates are Jinja programs (loops, tests,
filters, tool calls) that differ from model to model; transformers renders
each exactly as the model's authors wrote it, and the rendered text is what
rlrt's tokenizer then encodes (tests/integration/hf_model.py checks that its
ids equal apply_chat_template's). verl renders them the same way, in Python.
"""
import argparse
import json
import os
import re
import sys


def read_rows(path):
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq
        return pq.read_table(path).to_pylist()
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise SystemExit("%s:%d: bad JSON: %s" % (path, n, e))
    return rows


def gsm8k_answer(text):
    """The number after the last '####' (commas and '$' dropped)."""
    m = re.findall(r"####\s*\$?(-?[0-9][0-9,]*(?:\.[0-9]+)?)", text)
    return m[-1].replace(",", "") if m else None


def convert(row, i, args, where):
    if args.question_field:
        q, a = row.get(args.question_field), row.get(args.answer_field)
        if not isinstance(q, str) or not isinstance(a, str):
            raise SystemExit("%s row %d: needs string fields '%s' and '%s'"
                             % (where, i, args.question_field, args.answer_field))
        gt = gsm8k_answer(a)
        if gt is None:
            raise SystemExit("%s row %d: no '#### <number>' in '%s'" % (where, i, args.answer_field))
        content = q + (" " + args.instruction if args.instruction else "")
        return ([{"role": "user", "content": content}], gt, row.get("data_source", "openai/gsm8k"),
                None, a)
    prompt = row.get("prompt")
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    if not isinstance(prompt, list) or not all(isinstance(m, dict) and "role" in m and "content" in m
                                               for m in prompt):
        raise SystemExit("%s row %d: 'prompt' must be a string or a list of {role, content} "
                         "messages" % (where, i))
    rm = row.get("reward_model") or {}
    gt = rm.get("ground_truth") if isinstance(rm, dict) else None
    gt = row.get("ground_truth") if gt is None else gt
    if gt is None:
        raise SystemExit("%s row %d: no reward_model.ground_truth (nor ground_truth)" % (where, i))
    extra = row.get("extra_info") or {}
    sol = row.get("solution", extra.get("answer") if isinstance(extra, dict) else None)
    index = extra.get("index") if isinstance(extra, dict) else None
    return prompt, str(gt), row.get("data_source") or "unknown", index, sol


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input", help="Parquet (verl's layout) or JSONL")
    ap.add_argument("--model", help="the model directory whose tokenizer's chat template renders "
                    "the prompts")
    ap.add_argument("--out", required=True, help="the JSONL to write")
    ap.add_argument("--val-out", help="the last --val-rows rows (at most a fifth) go here")
    ap.add_argument("--val-rows", type=int, default=64)
    ap.add_argument("--system", help="a system message for conversations that have none")
    ap.add_argument("--no-template", action="store_true",
                    help="no chat template: a one-message string prompt stays as it is (base models)")
    ap.add_argument("--question-field", help="GSM8K-style rows: the question's field")
    ap.add_argument("--answer-field", help="GSM8K-style rows: the answer's field ('... #### n')")
    ap.add_argument("--instruction", default="Solve it step by step and write the final answer "
                    "after '####'.", help="appended to each question (GSM8K-style rows)")
    args = ap.parse_args()
    if bool(args.question_field) != bool(args.answer_field):
        raise SystemExit("--question-field and --answer-field go together")
    tok = None
    if not args.no_template:
        if not args.model:
            raise SystemExit("--model DIR is needed for its chat template (or --no-template)")
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(args.model)
        if not tok.chat_template:
            raise SystemExit("%s: the tokenizer has no chat_template (a base model?): use "
                             "--no-template" % args.model)
    rows = read_rows(args.input)
    out = []
    for i, row in enumerate(rows):
        msgs, gt, source, index, sol = convert(row, i, args, args.input)
        if args.system and msgs[0]["role"] != "system":
            msgs = [{"role": "system", "content": args.system}] + msgs
        if tok is not None:
            text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        elif len(msgs) == 1:
            text = msgs[0]["content"]
        else:
            raise SystemExit("%s row %d: a conversation needs the chat template" % (args.input, i))
        r = {"prompt": text, "ground_truth": gt, "data_source": source, "index": index}
        if isinstance(sol, str):
            r["solution"] = sol
        out.append(r)
    indices = [r["index"] for r in out]
    unique = all(isinstance(x, int) for x in indices) and len(set(indices)) == len(indices)
    for i, r in enumerate(out):
        index = r.pop("index")
        r["global_id"] = index if unique else i
    n_val = min(args.val_rows, max(1, len(out) // 5)) if args.val_out else 0
    parts = [(args.out, out[:len(out) - n_val])] + ([(args.val_out, out[len(out) - n_val:])]
                                                    if n_val else [])
    for path, part in parts:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            for r in part:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        os.replace(path + ".tmp", path)
        print("prepare_data: %d rows -> %s" % (len(part), path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
