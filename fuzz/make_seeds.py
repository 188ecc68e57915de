#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/): small valid inputs and near-misses
that reach the parsers' branches quickly. Run from anywhere; rerun after changing it and commit the
output. The image target also takes tests/fixtures/images/decode as seeds (scripts/fuzz.sh).

    python3 fuzz/make_seeds.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None, pad=True, data=None):
    """tensors: [(name, dtype, shape, nbytes)] laid out in order."""
    header, offset, blob = {}, 0, b""
    for name, dtype, shape, nbytes in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        blob += bytes((offset + i) % 251 for i in range(nbytes))
        offset += nbytes
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + (blob if data is None else data)


# safetensors: several dtypes and ranks, metadata, an unaligned header, a zero-size tensor, a scalar
write("safetensors", "valid_mixed", safetensors(
    [("a.weight", "F32", [2, 3], 24), ("b.bias", "BF16", [4], 8), ("c", "F16", [1, 1, 2], 4),
     ("d", "I64", [], 8), ("e", "U8", [0, 5], 0), ("f", "BOOL", [3], 3)], metadata={"format": "pt"}))
write("safetensors", "unaligned_header", safetensors([("x", "F32", [3], 12), ("y", "F64", [1], 8)], pad=False))
write("safetensors", "truncated_data", safetensors([("x", "F32", [4], 16)], data=b"\x00" * 7))
write("safetensors", "overlapping", struct.pack("<Q", 88) +
      b'{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}'[:88]
      + b"\x00" * 12)
write("safetensors", "empty_header", struct.pack("<Q", 2) + b"{}")

# checkpoint index: the fuzz target's folder holds a.safetensors ("x") and b.safetensors ("y")
write("checkpoint_index", "valid", json.dumps(
    {"metadata": {"total_size": 16}, "weight_map": {"x": "a.safetensors", "y": "b.safetensors"}}))
write("checkpoint_index", "one_shard", json.dumps({"weight_map": {"x": "a.safetensors"}}))
write("checkpoint_index", "missing_shard", json.dumps({"weight_map": {"x": "c.safetensors"}}))
write("checkpoint_index", "wrong_tensor", json.dumps({"weight_map": {"y": "a.safetensors"}}))
write("checkpoint_index", "path_escape", json.dumps({"weight_map": {"x": "../a.safetensors"}}))

# config: first byte even = config.json, odd = preprocessor_config.json (applied to the bundled config)
for i, path in enumerate(["models/openvla-tiny/config.json", "tests/fixtures/models/openvla-tiny-b/config.json"]):
    with open(os.path.join(ROOT, path), "rb") as f:
        write("config", f"config_{i}", b"\x00" + f.read())
with open(os.path.join(ROOT, "models/openvla-tiny/preprocessor_config.json"), "rb") as f:
    write("config", "preprocessor", b"\x01" + f.read())


# tokenizer: small sentencepiece BPE models in protobuf wire format (ModelProto: 1 pieces,
# 2 trainer_spec, 3 normalizer_spec; SentencePiece: 1 piece, 2 score, 3 type)
def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def field(num, wire, payload):
    tag = varint(num << 3 | wire)
    if wire == 0:
        return tag + varint(payload)
    if wire == 5:
        return tag + struct.pack("<f", payload)
    return tag + varint(len(payload)) + payload


def piece(text, score, kind):
    return field(1, 2, field(1, 2, text.encode()) + field(2, 5, score) + field(3, 0, kind))


def sp_model(pieces, byte_fallback=False):
    body = b"".join(piece(*p) for p in pieces)
    trainer = field(3, 0, 2) + field(35, 0, 1 if byte_fallback else 0) + field(40, 0, 0) + field(41, 0, 1) + \
        field(42, 0, 2) + field(43, 0, 0xFFFFFFFFFFFFFFFF)
    normalizer = field(1, 2, b"identity") + field(3, 0, 1) + field(4, 0, 0) + field(5, 0, 1)
    return body + field(2, 2, trainer) + field(3, 2, normalizer)


UNKNOWN, NORMAL, CONTROL, USER_DEFINED, BYTE = 2, 1, 3, 4, 6
base = [("<unk>", 0.0, UNKNOWN), ("<s>", 0.0, CONTROL), ("</s>", 0.0, CONTROL)]
words = [("\u2581", -1.0, NORMAL)] + [(c, -2.0 - i * 0.01, NORMAL) for i, c in enumerate("abcdefghijklmnopqrstuvwxyz?:.")]
merges = [("\u2581p", -0.5, NORMAL), ("ick", -0.6, NORMAL), ("\u2581the", -0.4, NORMAL), ("bl", -0.7, NORMAL),
          ("ock", -0.8, NORMAL), ("\u2581up", -0.9, NORMAL), ("In", -1.1, NORMAL), ("Out", -1.2, NORMAL)]
write("tokenizer", "bpe_small", sp_model(base + words + merges))
write("tokenizer", "bpe_user_defined", sp_model(base + [("<act>", 0.0, USER_DEFINED)] + words + merges))
write("tokenizer", "bpe_byte_fallback",
      sp_model(base + [(f"<0x{b:02X}>", 0.0, BYTE) for b in range(256)] + words + merges, byte_fallback=True))


# openpi_message: observations as openpi_client's msgpack_numpy packs them (tools/serve/openpi_message.c)
def openpi_seeds():
    try:
        import msgpack
    except ImportError:
        print("make_seeds.py: python3-msgpack missing, openpi_message seeds not written")
        return

    def ndarray(data, dtype, shape, bin_keys=True):
        k = (lambda s: s.encode()) if bin_keys else (lambda s: s)
        return {k("__ndarray__"): True, k("data"): data, k("dtype"): dtype, k("shape"): shape}

    pixels = bytes(i % 256 for i in range(4 * 5 * 3))

    def obs(**kw):
        return msgpack.packb(kw, use_bin_type=True)

    write("openpi_message", "hwc", msgpack.packb(
        {"observation/image": ndarray(pixels, "|u1", [4, 5, 3]), "observation/state": ndarray(b"\0" * 64, "<f8", [8]),
         "prompt": "pick up the red block"}))
    write("openpi_message", "chw_image_key", msgpack.packb({"image": ndarray(pixels, "|u1", [3, 4, 5]), "prompt": "open"}))
    write("openpi_message", "str_keys_npgeneric_prompt", msgpack.packb(
        {"observation/image": ndarray(pixels, "|u1", [4, 5, 3], bin_keys=False),
         "prompt": {b"__npgeneric__": True, b"data": "put the cube", b"dtype": "<U12"}, "unnorm_key": "bridge_orig"}))
    write("openpi_message", "float_image", msgpack.packb(
        {"observation/image": ndarray(b"\0" * 240, "<f4", [4, 5, 3]), "prompt": "x"}))
    write("openpi_message", "shape_mismatch", msgpack.packb(
        {"observation/image": ndarray(pixels, "|u1", [5, 5, 3]), "prompt": "x"}))
    write("openpi_message", "bin_top_keys", msgpack.packb(
        {b"observation/image": ndarray(pixels, "|u1", [4, 5, 3]), b"prompt": "x"}))
    write("openpi_message", "huge_array_header", b"\xdd\x7f\xff\xff\xff")
    write("openpi_message", "deep_nesting", b"\x91" * 40 + b"\xc0")
    write("openpi_message", "truncated", msgpack.packb({"image": ndarray(pixels, "|u1", [4, 5, 3])})[:30])
    write("openpi_message", "ext_and_floats", msgpack.packb(
        {"image": msgpack.ExtType(5, b"abc"), "prompt": 1.5, "x": [None, True, -7, 2 ** 63]}))


openpi_seeds()


# tokenizer.json: small files in the forms of tests/fixtures/tokenizer/tokenizer_json (Llama's Metaspace and
# Prepend/Replace forms with byte fallback, GPT-2's ByteLevel, Qwen2's NFC + Split), merges in both spellings
def hf_json(normalizer, pre_tokenizer, byte_level, merge_strings, post=None, added=None):
    alphabet = [chr(c) for c in range(0x21, 0x7F)] + ["\u0120", "\u010a", "\u2581"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for c in alphabet:
        vocab.setdefault(c, len(vocab))
    if not byte_level:
        for b in range(256):
            vocab["<0x%02X>" % b] = len(vocab)
    pairs = [("\u2581", "p"), ("i", "c"), ("ic", "k"), ("\u0120", "t"), ("h", "e"), ("\u2581p", "ick"), ("\u0120t", "he")]
    for a, b in pairs:
        vocab.setdefault(a + b, len(vocab))
    model = {"type": "BPE", "dropout": None, "unk_token": None if byte_level else "<unk>",
             "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": not byte_level,
             "byte_fallback": not byte_level, "ignore_merges": False, "vocab": vocab,
             "merges": [a + " " + b for a, b in pairs] if merge_strings else [[a, b] for a, b in pairs]}
    tokens = added or [{"id": 0, "content": "<unk>", "special": True}, {"id": 1, "content": "<s>", "special": True},
                       {"id": 2, "content": "</s>", "special": True}]
    for t in tokens:
        t.update({k: False for k in ("single_word", "lstrip", "rstrip", "normalized") if k not in t})
    return json.dumps({"version": "1.0", "truncation": None, "padding": None, "added_tokens": tokens,
                       "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": post,
                       "decoder": None, "model": model}, ensure_ascii=False)


TEMPLATE = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                     {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
         r"\s*[\r\n]+|\s+(?!\S)|\s+")
write("tokenizer_json", "metaspace", hf_json(None, {"type": "Metaspace", "replacement": "\u2581",
                                                    "prepend_scheme": "first", "split": True}, False, False, TEMPLATE))
write("tokenizer_json", "prepend_replace", hf_json(
    {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                         {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    None, False, True, TEMPLATE))
write("tokenizer_json", "gpt2", hf_json(None, {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                                               "use_regex": True}, True, True))
write("tokenizer_json", "qwen2", hf_json(
    {"type": "NFC"},
    {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN2}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
    True, False, {"type": "ByteLevel", "trim_offsets": False},
    [{"id": 0, "content": "<|im_start|>", "special": True}, {"id": 1, "content": "<|im_end|>", "special": True},
     {"id": 2, "content": "<act>", "special": False, "lstrip": True, "rstrip": True, "single_word": True},
     {"id": 3, "content": "ick", "special": False, "normalized": True}]))
