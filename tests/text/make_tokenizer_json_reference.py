#!/usr/bin/env python3
"""Make the tokenizer.json fixtures: Hugging Face `tokenizers` files as users have them, and the ids
the `tokenizers` library itself gives for every test text. Run on a machine with `tokenizers`,
`transformers`, `sentencepiece` and `protobuf` (the GPU machine), from the repository root:

    python3 tests/text/make_tokenizer_json_reference.py OUT_DIR

It writes into OUT_DIR (then copied to tests/fixtures/tokenizer/ by hand):

  llama2-legacy.tokenizer.json     llama2-tokenizer.model converted by transformers'
                                   LlamaTokenizerFast (legacy=True: how OpenVLA-7B's tokenizer.json was
                                   saved: a Prepend/Replace normalizer, BPE with byte fallback)
  llama2-metaspace.tokenizer.json  the same with legacy=False (a Metaspace pre-tokenizer, prepend "first")
  llama2-hf4.tokenizer.json        the legacy file in the form transformers 4.x saved it, as OpenVLA-7B's
                                   tokenizer.json on the Hub is: a Sequence[Prepend "▁", Replace " "]
                                   normalizer, no pre-tokenizer, and OpenVLA's added <PAD> (id 32000)
  gpt2-style.tokenizer.json        a byte-level BPE trained here (ByteLevel pre-tokenizer with GPT-2's
                                   regex, ByteLevel decoder) with special and added tokens
  qwen2-style.tokenizer.json       a byte-level BPE trained here the way Qwen2's is built: NFC normalizer,
                                   a Split pre-tokenizer with Qwen2's regex then ByteLevel without its own
                                   regex, special and added tokens
  tokenizer_json_reference.json    {"tokenizers": version, "files": {name: [{"text": hex of the UTF-8
                                   text, "ids": [...], "ids_special": [...]}]}}: encode(text,
                                   add_special_tokens=False) and =True, for every text of strings.json plus
                                   texts that use the added tokens
"""
import json
import os
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED = ["<action>", "</action>", "<waypoint>"]  # added tokens that are not special


def llama(out, legacy):
    """tokenizer.json as transformers makes it from llama2-tokenizer.model: from_pretrained on a folder
    holding only the sentencepiece model and a tokenizer_config.json (the v5 way), else v4's
    LlamaTokenizerFast(vocab_file=..., from_slow=True); a result without Llama's 32000 pieces is refused."""
    import shutil
    from transformers import AutoTokenizer
    d = os.path.join(out, "tmp-llama-src-%d" % legacy)
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(FIX, "llama2-tokenizer.model"), os.path.join(d, "tokenizer.model"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "LlamaTokenizer", "legacy": legacy, "add_bos_token": True,
                   "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, f)
    attempts = [lambda: AutoTokenizer.from_pretrained(d, legacy=legacy),
                lambda: __import__("transformers").LlamaTokenizerFast(vocab_file=os.path.join(d, "tokenizer.model"),
                                                                      legacy=legacy, from_slow=True)]
    for i, make in enumerate(attempts):
        try:
            t = make()
            n = len(t.get_vocab())
            if n < 32000:
                print("llama attempt %d: only %d pieces" % (i, n))
                continue
            o = os.path.join(out, "tmp-llama-%d-%d" % (legacy, i))
            t.save_pretrained(o)
            path = os.path.join(o, "tokenizer.json")
            if Tokenizer.from_file(path).get_vocab_size() >= 32000:
                print("llama legacy=%s: attempt %d (%s)" % (legacy, i, type(t).__name__))
                return path
            print("llama attempt %d: the saved file is short" % i)
        except Exception as e:
            print("llama attempt %d: %r" % (i, e))
    raise RuntimeError("no tokenizer.json with 32000 pieces")


def corpus(texts):
    # the test texts and a pseudo-text of Llama's vocabulary: many scripts, digits, punctuation
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(FIX, "llama2-tokenizer.model"))
    pieces = [sp.id_to_piece(i).replace("\u2581", " ") for i in range(3, sp.get_piece_size())]
    lines = ["".join(pieces[i:i + 40]) for i in range(0, len(pieces), 40)]
    return texts * 3 + lines


def byte_level(texts, qwen2):
    tok = Tokenizer(models.BPE())
    if qwen2:
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=4000, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(texts), trainer)
    tok.add_tokens([AddedToken(a, special=False, normalized=False) for a in ADDED])
    return tok


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    texts = json.load(open(os.path.join(FIX, "strings.json")))
    texts += ["<|im_start|>user\npick up the red block<|im_end|>\n<|im_start|>assistant\n",
              "go <action>left</action> then<waypoint>3", "<|endoftext|><|endoftext|>", "a<|im_end|>b",
              "<s>In: pick</s> <unk>", " <s> x", "<PAD><PAD> a<PAD>", "\u00e9\u0301 e\u0301 \uff21\uff22 \u00bd"]
    files = {}
    import shutil
    for legacy, name in ((True, "llama2-legacy"), (False, "llama2-metaspace")):
        try:
            shutil.copy(llama(out, legacy), os.path.join(out, name + ".tokenizer.json"))
            files[name] = os.path.join(out, name + ".tokenizer.json")
        except Exception as e:  # say what is missing and go on with the rest
            print("%s: not made: %r" % (name, e))
    if "llama2-legacy" in files:  # transformers 4.x's form of the legacy file (OpenVLA-7B's)
        j = json.load(open(files["llama2-legacy"]))
        j["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                           {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
        j["pre_tokenizer"] = None
        j["model"]["unk_token"] = "<unk>"
        j["added_tokens"].append({"id": 32000, "content": "<PAD>", "single_word": False, "lstrip": False,
                                  "rstrip": False, "normalized": False, "special": True})
        path = os.path.join(out, "llama2-hf4.tokenizer.json")
        with open(path, "w") as f:
            json.dump(j, f, ensure_ascii=False, indent=2)
        files["llama2-hf4"] = path
    for qwen2, name in ((False, "gpt2-style"), (True, "qwen2-style")):
        path = os.path.join(out, name + ".tokenizer.json")
        byte_level(texts, qwen2).save(path)
        files[name] = path
    ref = {"tokenizers": tokenizers.__version__, "files": {}}
    for name, path in files.items():
        tok = Tokenizer.from_file(path)
        rows = []
        for t in texts:
            rows.append({"text": t.encode("utf-8").hex(), "ids": tok.encode(t, add_special_tokens=False).ids,
                         "ids_special": tok.encode(t, add_special_tokens=True).ids})
        ref["files"][name] = rows
        print(name, len(rows), "texts, vocab", tok.get_vocab_size())
    with open(os.path.join(out, "tokenizer_json_reference.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
    for d in os.listdir(out):
        if d.startswith("tmp-"):
            shutil.rmtree(os.path.join(out, d))


if __name__ == "__main__":
    main()
