"""hf_model.py — bring your own Hugging Face model, end to end (issue 45).

transformers (build/venv-data, made by `make venv-data`, which `make test`
runs) makes two small random checkpoints as a user would have them: a Qwen2
saved in bf16 with tied embeddings (its model vocabulary padded past the
tokenizer's) and a Llama saved as f32 shards (model.safetensors.index.json),
each with a byte-level BPE tokenizer trained here by `tokenizers`,
tokenizer_config.json (special tokens, a chat template written here in the
ChatML / Llama-3 header styles) and generation_config.json. Then:

1. chat templates: for a set of conversations rlrt's tokenizer
   (common/text, through ctypes) encodes the text
   apply_chat_template(tokenize=False) renders into exactly the ids of
   apply_chat_template(tokenize=True), and examples/prepare_data.py turns a
   Parquet file in verl's layout into JSONL prompts equal to that text;
2. rl-driver runs SFT and GRPO steps from each directory with nothing of
   the model restated (examples/hf_sft.yaml, hf_grpo.yaml, model.path);
   the Qwen2 GRPO starts from the SFT's final/, which must carry its
   tokenizer;
3. every directory (the two inputs, each final/ and a checkpoint) loads in
   transformers (from_pretrained of model and tokenizer, no missing or
   unexpected weights) and its logits equal rlrt's (rl_model_load_dir +
   the transformer's forward, through ctypes) on the same tokens; the
   trained ones differ from where they started; final/ is bf16 when
   trainer.save_dtype says so;
4. before any worker starts, rl-driver refuses with a clear message: a
   model.* key that disagrees with config.json, a config.json of another
   family, RoPE scaling, a directory without a tokenizer, a sharded
   checkpoint with a shard missing, model.path and model.init_from naming
   two directories.
"""
import ctypes as C
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
VENV = os.path.join(ROOT, "build", "venv-data", "bin", "python")
try:
    import pyarrow  # noqa: F401
    import transformers  # noqa: F401
    import jinja2  # noqa: F401
except ImportError:
    if os.path.exists(VENV) and not os.environ.get("RL_HF_REEXEC"):
        os.environ["RL_HF_REEXEC"] = "1"
        os.execv(VENV, [VENV] + sys.argv)
    print("skipped: transformers, jinja2 and pyarrow are in neither this Python nor %s; "
          "make it with `make venv-data` (make test does)" % VENV)
    sys.exit(77)

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import torch  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM,  # noqa: E402
                          PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM)

BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
DRIVER = os.path.join(BUILD, "bin", "rl-driver")
SO = os.path.join(BUILD, "lib", "librlrt.so")
if os.path.exists(SO):  # a sanitizer build: the ASan runtime first (re-runs this script)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
    import asan_preload  # noqa: E402
    asan_preload.reexec_if_needed(SO)

# the pre-tokenizer patterns of tests/reference/gen_nn_tokenizer.py
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
            r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_RE = QWEN2_RE.replace(r"|\p{N}|", r"|\p{N}{1,3}|")
# chat templates in the two styles (written here: ChatML with a default
# system turn; Llama-3's headers with the BOS token first)
CHATML = ("{% for m in messages %}{% if loop.first and m['role'] != 'system' %}"
          "{{ '<|im_start|>system\\nYou are a careful assistant.<|im_end|>\\n' }}{% endif %}"
          "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
LLAMA3 = ("{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + "
          "'<|end_header_id|>\\n\\n' + m['content'] | trim + '<|eot_id|>' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
          "{% endif %}")
CORPUS = ["Q: What is %d plus %d? Think step by step. The answer is %d. #### %d" % (a, b, a + b, a + b)
          for a in range(3, 40, 7) for b in range(2, 30, 5)] + [
    "You are a careful assistant. Solve the problem and write the final answer after ####.",
    "Ann has 17 cups and buys 3 bags of 6 cups. How many cups now? 17 + 18 = 35 #### 35",
    "Grüße aus Köln: naïve café, 東京, emoji 🙂 and tabs\tand\nnewlines.",
]
CONVERSATIONS = [
    [{"role": "user", "content": "What is 2 plus 3?"}],
    [{"role": "system", "content": "Answer with a number."}, {"role": "user", "content": "7 + 8?"}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
     {"role": "user", "content": "Add 12 and 30, then write #### and the sum."}],
    [{"role": "user", "content": "  leading and trailing spaces  \n"}],
    [{"role": "user", "content": "Grüße, 東京 🙂\n\nTwo blank lines\n\n\nand a tab\t."}],
    [{"role": "user", "content": "It's <|im_end|> inside? and <|eot_id|> too"}],
    [{"role": "system", "content": ""}, {"role": "user", "content": ""}],
    [{"role": "user", "content": "Q: 47+85=?"}, {"role": "assistant", "content": "132"},
     {"role": "user", "content": "And 132*2?"}, {"role": "assistant", "content": "264 #### 264"},
     {"role": "user", "content": "Thanks!"}],
]


def fail(msg):
    raise SystemExit("FAIL: " + msg)


def make_tokenizer(family, d):
    if family == "qwen2":
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        norm, pat = normalizers.NFC(), QWEN2_RE
    else:
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                    "<|end_header_id|>", "<|eot_id|>"]
        norm, pat = None, LLAMA3_RE
    tk = Tokenizer(models.BPE())
    if norm:
        tk.normalizer = norm
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pat), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(CORPUS * 3, trainers.BpeTrainer(
        vocab_size=420, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    if family == "qwen2":
        fast = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|im_end|>",
                                       pad_token="<|endoftext|>", chat_template=CHATML)
    else:
        fast = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|begin_of_text|>",
                                       eos_token="<|eot_id|>", chat_template=LLAMA3)
    fast.save_pretrained(d)
    return fast


def make_model(family, d):
    torch.manual_seed(3 if family == "qwen2" else 4)
    tok = make_tokenizer(family, d)
    if family == "qwen2":
        cfg = Qwen2Config(vocab_size=448, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                          rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
                          eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
                          bos_token_id=None, pad_token_id=tok.pad_token_id)
        m = Qwen2ForCausalLM(cfg)
        m.to(torch.bfloat16).save_pretrained(d, safe_serialization=True)
    else:
        cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=48,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                          max_position_embeddings=256, rope_theta=500000.0, rms_norm_eps=1e-5,
                          tie_word_embeddings=False, bos_token_id=tok.bos_token_id,
                          eos_token_id=tok.eos_token_id)
        m = LlamaForCausalLM(cfg)
        m.save_pretrained(d, safe_serialization=True, max_shard_size="40KB")
    return tok


class Rlrt:
    """librlrt.so through ctypes: the tokenizer and the model of a directory."""

    def __init__(self):
        lib = C.CDLL(SO)
        lib.rl_error_message.restype = C.c_char_p
        lib.rl_task_tokenizer_open.restype = C.c_void_p
        lib.rl_task_tokenizer_open.argtypes = [C.c_char_p]
        lib.rl_tokenizer_encode.argtypes = [C.c_void_p, C.c_char_p, C.c_size_t,
                                            C.POINTER(C.POINTER(C.c_int32)), C.POINTER(C.c_int64)]
        lib.rl_tokenizer_free.argtypes = [C.c_void_p]
        lib.rl_tokenizer_special_id.argtypes = [C.c_void_p, C.c_int]
        lib.rl_model_load_dir.restype = C.c_void_p
        lib.rl_model_load_dir.argtypes = [C.c_char_p]
        lib.rl_model_free.argtypes = [C.c_void_p]
        lib.rl_lm_model_network.restype = C.c_void_p
        lib.rl_lm_model_network.argtypes = [C.c_void_p]
        lib.rl_lm_get_config.restype = C.POINTER(C.c_int)
        lib.rl_lm_get_config.argtypes = [C.c_void_p]
        lib.rl_lm_forward.argtypes = [C.c_void_p, C.c_int, C.c_int, C.POINTER(C.c_int32),
                                      C.POINTER(C.c_uint8), C.c_float, C.c_void_p, C.c_void_p,
                                      C.c_void_p]
        lib.rl_lm_logits.restype = C.POINTER(C.c_float)
        lib.rl_lm_logits.argtypes = [C.c_void_p]
        self.libc = C.CDLL(None)
        self.libc.free.argtypes = [C.c_void_p]
        self.lib = lib

    def err(self):
        return self.lib.rl_error_message().decode()

    def encode(self, tok_path, text):
        t = self.lib.rl_task_tokenizer_open(tok_path.encode())
        if not t:
            fail("rlrt tokenizer %s: %s" % (tok_path, self.err()))
        ids, n = C.POINTER(C.c_int32)(), C.c_int64()
        b = text.encode()
        if self.lib.rl_tokenizer_encode(t, b, len(b), C.byref(ids), C.byref(n)):
            fail("rlrt encode: " + self.err())
        out = [ids[i] for i in range(n.value)]
        specials = [self.lib.rl_tokenizer_special_id(t, k) for k in range(3)]  # pad, bos, eos
        self.libc.free(ids)
        self.lib.rl_tokenizer_free(t)
        return out, specials

    def logits(self, d, tokens):
        m = self.lib.rl_model_load_dir(d.encode())
        if not m:
            fail("rl_model_load_dir(%s): %s" % (d, self.err()))
        net = self.lib.rl_lm_model_network(m)
        V = self.lib.rl_lm_get_config(net)[0]
        B, T = tokens.shape
        tok = np.ascontiguousarray(tokens, dtype=np.int32)
        mask = np.ones((B, T), dtype=np.uint8)
        rc = self.lib.rl_lm_forward(net, B, T, tok.ctypes.data_as(C.POINTER(C.c_int32)),
                                    mask.ctypes.data_as(C.POINTER(C.c_uint8)), 1.0, None, None, None)
        if rc:
            fail("rl_lm_forward(%s): %s" % (d, self.err()))
        out = np.ctypeslib.as_array(self.lib.rl_lm_logits(net), shape=(B * T * V,)).copy()
        self.lib.rl_model_free(m)
        return out.reshape(B, T, V)


def check_templates(rl, d, tok, family):
    """rlrt's ids of the rendered text are apply_chat_template's ids."""
    n = 0
    for conv in CONVERSATIONS:
        for gen in (True, False):
            text = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=gen)
            want = tok.apply_chat_template(conv, tokenize=True, add_generation_prompt=gen)
            got, _ = rl.encode(os.path.join(d, "tokenizer.json"), text)
            if got != want:
                fail("%s: rlrt's ids of %r differ from apply_chat_template's:\n%s\n%s"
                     % (family, text, got, want))
            n += 1
    _, (pad, bos, eos) = rl.encode(os.path.join(d, "tokenizer.json"), "x")
    if (eos, pad) != (tok.eos_token_id, tok.pad_token_id if tok.pad_token_id is not None else eos):
        fail("%s: rlrt's eos/pad %d/%d, tokenizer_config.json's %s/%s"
             % (family, eos, pad, tok.eos_token_id, tok.pad_token_id))
    print("ok: %s: %d renderings of the chat template encode to apply_chat_template's ids; "
          "eos %d, pad %d from tokenizer_config.json" % (family, n, eos, pad))


def write_dataset(work, name, n):
    rows = []
    for i in range(n):
        a, b = 3 + (7 * i) % 40, 2 + (5 * i) % 30
        rows.append({"data_source": "openai/gsm8k",
                     "prompt": [{"role": "user", "content": "Q: What is %d plus %d?" % (a, b)}],
                     "ability": "math",
                     "reward_model": {"style": "rule", "ground_truth": str(a + b)},
                     "extra_info": {"index": 100 + i, "answer": "%d + %d = %d #### %d" % (a, b, a + b, a + b)}})
    path = os.path.join(work, name + ".parquet")
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path, rows


def prepare(work, model_dir, tok, family):
    src, rows = write_dataset(work, "gsm_" + family, 24)
    out, val = os.path.join(work, family + "_train.jsonl"), os.path.join(work, family + "_val.jsonl")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "prepare_data.py"), "--model",
                        model_dir, src, "--out", out, "--val-out", val, "--val-rows", "4"],
                       capture_output=True, text=True)
    if p.returncode:
        fail("prepare_data.py: " + p.stdout + p.stderr)
    got = [json.loads(line) for f in (out, val) for line in open(f)]
    if len(got) != len(rows):
        fail("prepare_data.py wrote %d rows of %d" % (len(got), len(rows)))
    for r, g in zip(rows, got):
        text = tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True)
        want = {"prompt": text, "ground_truth": r["reward_model"]["ground_truth"],
                "data_source": "openai/gsm8k", "global_id": r["extra_info"]["index"],
                "solution": r["extra_info"]["answer"]}
        if g != want:
            fail("prepare_data.py: %r, expected %r" % (g, want))
    print("ok: %s: prepare_data.py rendered %d Parquet rows (verl's layout) through the chat "
          "template" % (family, len(rows)))
    return out, val


def cluster(path):
    with open(path, "w") as f:
        f.write("driver: {bind: 127.0.0.1, port: 5555}\n"
                "nodes: [{name: local, address: 127.0.0.1, launch: local}]\n"
                "roles:\n"
                "  rollout: {count: 1, node: local}\n"
                "  actor: {count: 2, node: local}\n"
                "  reward: {count: 1, node: local}\n")


def driver(work, config, overrides, expect_ok=True):
    cmd = [DRIVER, "--cluster", os.path.join(work, "cluster.yaml"), "--config",
           os.path.join(ROOT, "examples", config), "--bind", "tcp://127.0.0.1:*",
           "--log-level", "info"] + overrides
    p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    if expect_ok and p.returncode != 0:
        print(out[-4000:])
        fail("rl-driver %s %s exited %d" % (config, " ".join(overrides), p.returncode))
    return p.returncode, out


SMALL = ["data.max_prompt_length=64", "rollout.response_length=24", "data.train_batch_size=4",
         "actor.optim.lr=0.003", "trainer.val_every=2", "actor.ppo_micro_batch_size=2"]


def train(work, family, src, data):
    train_f, val_f = data
    files = ["data.train_files=" + train_f, "data.val_files=" + val_f]
    outs = {}
    _, log = driver(work, "hf_sft.yaml", ["model.path=" + src, "trainer.total_steps=2",
                                          "trainer.output_dir=runs/%s_sft" % family] + files + SMALL)
    outs["sft"] = os.path.join(work, "runs/%s_sft/final" % family)
    start = outs["sft"] if family == "qwen2" else src
    # a random model is never right: the entropy bonus moves the weights
    driver(work, "hf_grpo.yaml", ["model.path=" + start, "trainer.total_steps=2", "trainer.save_every=2",
                                  "rollout.n=2", "actor.ppo_mini_batch_size=2", "actor.entropy_coeff=0.1",
                                  "trainer.output_dir=runs/%s_grpo" % family] + files + SMALL)
    outs["grpo_ckpt"] = os.path.join(work, "runs/%s_grpo/checkpoints/step_2" % family)
    outs["grpo"] = os.path.join(work, "runs/%s_grpo/final" % family)
    for k, d in outs.items():
        for f in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
            if not os.path.exists(os.path.join(d, f)):
                fail("%s %s: no %s in %s" % (family, k, f, d))
    print("ok: %s: SFT and GRPO ran from %s with nothing of the model restated" % (family, src))
    # each directory and the one its run started from
    return [("input", src, None), ("sft", outs["sft"], "input"),
            ("grpo_ckpt", outs["grpo_ckpt"], "sft" if family == "qwen2" else "input"),
            ("grpo", outs["grpo"], "sft" if family == "qwen2" else "input")]


def st_header(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n))


def compare(rl, family, dirs, tok):
    texts = ["Q: What is 17 plus 25? The answer is", "Grüße 🙂 #### 35"]
    ids = [tok.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True)
           for t in texts]
    T = min(len(x) for x in ids)
    tokens = np.array([x[:T] for x in ids], dtype=np.int64)
    seen = {}
    for name, d, start in dirs:
        model, info = AutoModelForCausalLM.from_pretrained(d, output_loading_info=True)
        bad = {k: v for k, v in info.items() if v}
        if bad:
            fail("%s %s: transformers loaded it with %s" % (family, name, bad))
        AutoTokenizer.from_pretrained(d)  # the tokenizer files travel with the model
        with torch.no_grad():
            hf = model(torch.from_numpy(tokens)).logits.float().numpy()
        ours = rl.logits(d, tokens)
        diff = float(np.abs(hf - ours).max())
        if not diff < 2e-4 * max(1.0, float(np.abs(hf).max())):
            fail("%s %s: rlrt's logits differ from transformers' by %g" % (family, name, diff))
        seen[name] = hf
        moved = float(np.abs(hf - seen[start]).max()) if start else 0.0
        if start and not moved > 0.01:  # more than bf16's rounding of final/
            fail("%s %s: training left the logits where %s had them (%g)" % (family, name, start, moved))
        print("ok: %s %-9s loads in transformers; |rlrt - transformers| logits %.2e (%.3f from %s)"
              % (family, name, diff, moved, start))


def expect_refusal(work, what, overrides, needle):
    rc, log = driver(work, "hf_grpo.yaml", overrides + ["trainer.total_steps=1"] + SMALL,
                     expect_ok=False)
    if rc == 0 or needle not in log:
        print(log[-3000:])
        fail("%s: expected a refusal with %r" % (what, needle))
    if "started " in log:
        fail("%s: a worker was started before the refusal" % what)
    line = next(line for line in log.splitlines() if needle in line)
    print("ok: refused before any worker started: %s" % line.strip()[:200])


def main():
    for p in (DRIVER, SO):
        if not os.path.exists(p):
            fail("%s not built" % p)
    rl = Rlrt()
    work = tempfile.mkdtemp(prefix="rlrt-hf-")
    try:
        cluster(os.path.join(work, "cluster.yaml"))
        for family in ("qwen2", "llama"):
            src = os.path.join(work, family)
            tok = make_model(family, src)
            if family == "qwen2":
                if st_header(os.path.join(src, "model.safetensors"))["model.norm.weight"]["dtype"] != "BF16":
                    fail("the Qwen2 input is not bf16")
            elif not os.path.exists(os.path.join(src, "model.safetensors.index.json")):
                fail("the Llama input is not sharded")
            check_templates(rl, src, tok, family)
            data = prepare(work, src, tok, family)
            outs = train(work, family, src, data)
            final = outs[-1][1]
            h = st_header(os.path.join(final, "model.safetensors"))
            if h.get("__metadata__", {}).get("format") != "pt" or h["model.norm.weight"]["dtype"] != "BF16" \
                    or json.load(open(os.path.join(final, "config.json")))["torch_dtype"] != "bfloat16":
                fail("%s: final/ is not bf16 with metadata format pt: %s" % (family, h.get("__metadata__")))
            compare(rl, family, outs, tok)
        # refusals, before any worker starts
        qwen, llama = os.path.join(work, "qwen2"), os.path.join(work, "llama")
        data = ["data.train_files=qwen2_train.jsonl", "data.val_files=qwen2_val.jsonl"]
        expect_refusal(work, "a disagreeing key", ["model.path=" + qwen, "model.hidden_size=48"] + data,
                       "model.hidden_size: 48 in the job, but %s/config.json has hidden_size = 32" % qwen)

        def variant(name, src, edit=None, drop=()):
            d = os.path.join(work, name)
            shutil.copytree(src, d)
            for f in drop:
                os.remove(os.path.join(d, f))
            if edit:
                with open(os.path.join(d, "config.json")) as f:
                    cfg = json.load(f)
                cfg.update(edit)
                with open(os.path.join(d, "config.json"), "w") as f:
                    json.dump(cfg, f)
            return d

        d = variant("mistral", qwen, {"model_type": "mistral"})
        expect_refusal(work, "another family", ["model.path=" + d] + data,
                       "key 'model_type' = 'mistral' is not supported (expected 'qwen2' or 'llama')")
        d = variant("scaled", llama, {"rope_scaling": {"type": "linear", "factor": 2.0}})
        expect_refusal(work, "RoPE scaling", ["model.path=" + d] + data,
                       "key 'rope_scaling' is set (type 'linear'): RoPE scaling is not supported")
        d = variant("notok", qwen, drop=("tokenizer.json",))
        expect_refusal(work, "no tokenizer", ["model.path=" + d] + data,
                       "%s has no tokenizer.json" % d)
        with open(os.path.join(llama, "model.safetensors.index.json")) as f:
            shard = sorted(set(json.load(f)["weight_map"].values()))[-1]
        d = variant("noshard", llama, drop=(shard,))
        expect_refusal(work, "a missing shard", ["model.path=" + d] + data,
                       "model.safetensors.index.json: shard '%s' is missing" % shard)
        expect_refusal(work, "two directories", ["model.path=" + qwen, "model.init_from=" + llama] + data,
                       "model.path: '%s', but model.init_from is '%s'" % (qwen, llama))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("hf_model: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
