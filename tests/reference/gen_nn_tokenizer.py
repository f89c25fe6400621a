"""gen_nn_tokenizer.py — reference token ids for the C tokenizer tests.

Trains small byte-level BPE tokenizers with the Hugging Face `tokenizers`
package (the independent implementation) and records, for a fixed list of
test strings, the ids HF produces and the text HF decodes them to:

  tests/golden/nn_tok/gpt2.json          ByteLevel(use_regex) pre-tokenizer,
                                          merges as "a b" strings
  tests/golden/nn_tok/qwen2.json         NFC + Split(Qwen2 regex) +
                                          ByteLevel(use_regex=false), merges
                                          written in the [a, b] list form
  tests/golden/nn_tok/llama3.json        Split(Llama-3 regex, \\p{N}{1,3}) +
                                          ByteLevel, no normalizer, list merges
  tests/golden/nn_tok/gpt2_prefix.json   gpt2.json with add_prefix_space=true
  tests/golden/nn_tok/<name>.safetensors texts, ids and decoded bytes

Invalid UTF-8 cannot be passed to HF (Python str). For those strings the
documented rule of the C side is used: every byte outside a valid UTF-8
sequence is one punctuation-class character. The reference then comes from
HF's own pieces: the string with each bad byte replaced by U+FFFD (also a
punctuation-class character) is normalized and pre-tokenized by HF, the
pieces are mapped back to the original bytes, and HF's BPE model
(`tokenizer.model.tokenize`) encodes each byte-mapped piece.

Needs `tokenizers` from the reference venv (`make venv-ref`). Run by
`make golden` with /usr/bin/python3: without the package it re-executes
itself with $RL_REF_PYTHON or <repo>/build/venv-ref/bin/python, and
otherwise skips (exit 0) leaving the committed files as they are.
"""
import json
import os
import random
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

try:
    import tokenizers  # noqa: F401
except ImportError:
    alt = os.environ.get("RL_REF_PYTHON") or os.path.join(
        os.path.dirname(os.path.dirname(HERE)), "build", "venv-ref", "bin", "python")
    if os.path.exists(alt) and not os.environ.get("RL_GEN_REEXEC"):
        os.environ["RL_GEN_REEXEC"] = "1"
        os.execv(alt, [alt] + sys.argv)
    print("gen_nn_tokenizer: skipped (python package 'tokenizers' not installed; "
          "create the reference venv with `make venv-ref`)")
    sys.exit(0)

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from golden import ROOT, write_golden

OUT = os.path.join(ROOT, "tests", "golden", "nn_tok")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
            r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_RE = QWEN2_RE.replace(r"|\p{N}|", r"|\p{N}{1,3}|")
SPECIALS = ["<|endoftext|>", "<think>", "</think>"]
ADDED = ["\\boxed{"]  # a non-special added token

TEXTS = [
    "",
    "Hello world! This is a simple test of the tokenizer.",
    "The year 2024 had 365 days; pi is 3.14159265358979 and 1234567890123456789.",
    "Wait... what?!?! (really) [yes] {no} <maybe> --- *** ;;; ,,, !!!???",
    "a  b   c    d\n\ne\t\tf \n g\r\n h  ",
    "   leading spaces and trailing   ",
    "\n\n\n",
    " ",
    "It's John's book; they'll go, we've seen, I'm here, you'd know, they're done.",
    "IT'S JOHN'S BOOK; THEY'LL GO; WE'VE SEEN; I'M HERE; YOU'D KNOW; THEY'RE DONE",
    "'s 'S '\u017f ''' ' s 'x 'Re 'LL '\u017fx 'Sx 'tis 'LLama it'\u017fx IT'Sx we'RE it'\u017ftuff \u017ftuff",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 fa\u00e7ade \u00c5ngstr\u00f6m \u00fcber stra\u00dfe",
    "Decomposed: Cafe\u0301 nai\u0308ve A\u030a a\u0301\u0302 \u1100\u1161\u11a8 q\u0307\u0323",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\u4e2d\u6587\u6587\u672c\uff0c"
    "\u8fd8\u6709\ud55c\uad6d\uc5b4\u3002",
    "Emoji: \U0001F600\U0001F389\U0001F44D\U0001F3FD family \U0001F468\u200d\U0001F469\u200d"
    "\U0001F467 flags \U0001F1FA\U0001F1F8 ok",
    "<think>2+3=5</think> The answer is \\boxed{5}.<|endoftext|>",
    "x<|endoftext|><|endoftext|>y<think> </think>\n\\boxed{\\boxed{",
    "Numbers with units: 12kg, 3.5m/s\u00b2, \u00bd cup, \u216b o'clock, "
    "\u0663\u0664\u0665 arabic-indic",
    "def f(x):\n    return x ** 2  # square\n\n\tprint(f(3))\n",
    "mixed\u00a0nbsp\u3000ideographic\u2009thin\u2028line space \u0085nel",
    "what's up?\r\n\r\nnext\n \n  \n\t\n",
    "$$$ 100% @user #tag http://example.com/path?q=1&r=2 a_b-c",
    "Question: 17 * 23 = ? <think>17*20=340, 17*3=51, 340+51=391</think> \\boxed{391}",
    "\u00ff\u0100\u0120 already-mapped chars \u0120the",
    "ctrl\x0b\x0cvt ff \x1c\x1dgs\x1e\x1f us\x00nul\x7f del \x0b\x0b x\x1c\x1c",
    # words whose every adjacent pair merges (the merge heap fills up)
    "Where there is a will, there is a way; therefore they gathered together, whether "
    "or not the other one returned. Instances of classes with attributes and functions.",
    # long words: many merges per pre-token
    "supercalifragilisticexpialidocious" * 6 + " " + "1234567890" * 12 + " " + "_" * 80,
    " " * 70 + "x" + "\t" * 9 + "\n" * 5,
    "thethethethethethethethethethethethethethethethethethethethethethethethethethe"
    "returnreturnreturnreturnreturnreturnreturnreturnreturnreturnreturnreturnreturn",
]


def _random_text(seed=7, pieces=1500):
    """Deterministic mixed text: ASCII words with contractions and assorted
    white space, interleaved with code points drawn from every plane
    (combining marks, Hangul jamo, long s, unassigned ones included)."""
    rng = random.Random(seed)
    words = ["the", "return", "It", "don", "x1", "caf\u00e9", "THEY", "42", "3.14", "<a>"]
    seps = [" ", "  ", "\n", "'s ", "'S ", "'ll ", "\r\n", "\t", "\n\n ", " \n"]
    picks = [0x300, 0x301, 0x308, 0x323, 0x1100, 0x1161, 0x11A8, 0xAC00, 0x17F, 0x27, 0x20,
             0x0A, 0x0D, 0x09, 0xA0, 0x3000, 0x2028, 0x85]
    out = []
    for _ in range(pieces):
        if rng.random() < 0.5:
            out.append(rng.choice(words) + rng.choice(seps))
            continue
        for _ in range(rng.randint(1, 5)):
            r = rng.random()
            if r < 0.3:
                c = rng.randint(0x20, 0x7E)
            elif r < 0.5:
                c = rng.randint(0xA0, 0x2FFF)
            elif r < 0.6:
                c = rng.choice(picks)
            elif r < 0.8:
                c = rng.randint(0x3000, 0xFFFF)
            else:
                c = rng.randint(0x10000, 0x10FFFF)
            out.append(chr(0x41 if 0xD800 <= c < 0xE000 else c))
    return "".join(out)


TEXTS.append(_random_text())

INVALID = [
    b"abc\xff def",
    b"\xe4\xbd trunc",
    b"\xc0\xaf overlong \xed\xa0\x80 surrogate \xf4\x90\x80\x80 big",
    b"\x80\x80!!\xfe",
    b"\xff",
    b"x\xffy \xffabc 12\xff34",
]


def bytes_to_unicode():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()


def corpus():
    """Deterministic training text: stdlib docstrings plus generated lines."""
    import collections, email, http, json as js, logging, string, textwrap, typing  # noqa
    docs = []
    for mod in (collections, email, http, js, logging, string, textwrap,
                unicodedata, random, os):
        docs.append(mod.__doc__ or "")
        for name in sorted(dir(mod))[:200]:
            d = getattr(getattr(mod, name), "__doc__", None)
            if isinstance(d, str):
                docs.append(d)
    rng = random.Random(1234)
    for _ in range(3000):
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        op = rng.choice("+-*")
        r = eval(f"{a}{op}{b}")
        docs.append(f"Question: what is {a} {op} {b}? <think>{a}{op}{b}={r}</think> "
                    f"The answer is \\boxed{{{r}}}.")
    docs += TEXTS * 3
    docs.append("It's they're we'll I'd you've he's THEY'RE WE'LL")
    # long-s words, so that merges cross the (?i:'s) boundary U+017F exercises
    docs += ["\u017ftuff \u017ftill \u017fome \u017ftuff"] * 30
    return docs


def train(pre_tok, normalizer=None):
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tok
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=256 + len(SPECIALS) + 1000, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    tok.add_tokens(ADDED)
    return tok


def reference(tok, raw):
    """(ids, decoded bytes) for raw bytes, per the module docstring."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        ids = tok.encode(text, add_special_tokens=False).ids
        dec = tok.decode(ids, skip_special_tokens=False).encode("utf-8")
        return ids, dec
    sur = raw.decode("utf-8", "surrogateescape")
    pt = json.loads(tok.to_str())["pre_tokenizer"]
    if pt.get("add_prefix_space") and not sur.startswith(" "):
        sur = " " + sur  # what ByteLevel(add_prefix_space) does before splitting
    placeholder = "".join("\ufffd" if 0xDC80 <= ord(c) <= 0xDCFF else c for c in sur)
    norm_ph = tok.normalizer.normalize_str(placeholder) if tok.normalizer else placeholder
    norm_sur = unicodedata.normalize("NFC", sur) if tok.normalizer else sur
    assert len(norm_sur) == len(norm_ph)
    pieces = tok.pre_tokenizer.pre_tokenize_str(norm_ph)
    ids = []
    for _, (s, e) in pieces:
        b = norm_sur[s:e].encode("utf-8", "surrogateescape")
        ids += [t.id for t in tok.model.tokenize("".join(B2U[x] for x in b))]
    return ids, norm_sur.encode("utf-8", "surrogateescape")


def write_case(name, tok, json_path):
    texts = [t.encode("utf-8") for t in TEXTS] + INVALID
    ids_all, dec_all, toff, ioff, doff = [], [], [0], [0], [0]
    for raw in texts:
        ids, dec = reference(tok, raw)
        ids_all += ids
        dec_all.append(dec)
        toff.append(toff[-1] + len(raw))
        ioff.append(ioff[-1] + len(ids))
        doff.append(doff[-1] + len(dec))
    blob = b"".join(texts)
    dblob = b"".join(dec_all)
    write_golden(f"tests/golden/nn_tok/{name}.safetensors", {
        "text": np.frombuffer(blob, dtype=np.uint8) if blob else np.zeros(0, np.uint8),
        "text_offsets": np.array(toff, dtype=np.int64),
        "ids": np.array(ids_all, dtype=np.int32),
        "id_offsets": np.array(ioff, dtype=np.int64),
        "decoded": np.frombuffer(dblob, dtype=np.uint8),
        "decoded_offsets": np.array(doff, dtype=np.int64),
    }, meta={"tokenizer": os.path.relpath(json_path, ROOT),
             "tokenizers_version": tokenizers.__version__,
             "vocab_size": tok.get_vocab_size(with_added_tokens=True),
             "n_texts": len(texts), "n_invalid_utf8": len(INVALID)})
    print(f"  {name}: {len(texts)} texts, {len(ids_all)} ids")


def save(tok, name, edit=None):
    """Writes tokenizer JSON (optionally edited) and returns the HF tokenizer
    loaded back from exactly what was written."""
    d = json.loads(tok.to_str())
    if edit:
        edit(d)
    s = json.dumps(d, ensure_ascii=False, indent=1)
    path = os.path.join(OUT, f"{name}.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(s + "\n")
    return path, d


def main():
    os.makedirs(OUT, exist_ok=True)
    gpt2 = train(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True))
    path, _ = save(gpt2, "gpt2")
    write_case("gpt2", Tokenizer.from_file(path), path)

    def prefix(d):
        d["pre_tokenizer"]["add_prefix_space"] = True
    path, d = save(gpt2, "gpt2_prefix", prefix)
    write_case("gpt2_prefix", Tokenizer.from_str(json.dumps(d)), path)

    qwen = train(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        normalizer=normalizers.NFC())
    d = json.loads(qwen.to_str())
    assert d["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] == QWEN2_RE
    ref = Tokenizer.from_str(qwen.to_str())

    def listform(d):
        d["model"]["merges"] = [m.split(" ") for m in d["model"]["merges"]]
    path, _ = save(qwen, "qwen2", listform)
    write_case("qwen2", ref, path)

    # Llama-3 style: trained with its own regex so that multi-digit merges
    # exist and \p{N}{1,3} shows in the ids; no normalizer.
    llama = train(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]))
    ref = Tokenizer.from_str(llama.to_str())
    path, _ = save(llama, "llama3", listform)
    write_case("llama3", ref, path)


if __name__ == "__main__":
    main()
