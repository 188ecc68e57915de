#!/usr/bin/python3
"""Make the tokenizer fixtures: token ids that sentencepiece itself gives for many texts.

Run from the repository root with Debian's Python (python3-sentencepiece):

    /usr/bin/python3 tests/text/make_tokenizer_reference.py

It writes, under tests/fixtures/tokenizer/:

  strings.json                       the valid UTF-8 test texts, a JSON list of strings, so that
                                     they can be re-encoded with another sentencepiece version
  llama2_reference_ids.tsv           ids from llama2-tokenizer.model for every text
  variant_<name>.model               small BPE models trained here with sentencepiece, some with
                                     their options then changed (see VARIANTS), covering what
                                     Llama-2's model does not use: no byte fallback, user-defined
                                     pieces, remove_extra_whitespaces, no dummy prefix,
                                     treat_whitespace_as_suffix, unescaped spaces, UNUSED pieces
  variant_<name>_reference_ids.tsv   ids from that model

A .tsv file starts with '#' comment lines (the sentencepiece version, the model), then one line per
text: the text's bytes in lowercase hex (empty for the empty text), a tab, the ids separated by
single spaces (nothing after the tab when there are none). Hex keeps texts that are not valid
UTF-8, or that hold NUL, tabs or newlines, on one line.
"""

import json
import os
import random
import struct
import sys
import tempfile

import sentencepiece as spm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
LLAMA_MODEL = os.path.join(OUT, "llama2-tokenizer.model")
SEED = 20241130

# ---------------------------------------------------------------------------------------------
# Test texts

PROMPTS = [
    "In: What action should the robot take to pick up the red block?\nOut:",
    "In: What action should the robot take to put the spoon on the towel?\nOut:",
    "In: What action should the robot take to open the top drawer?\nOut: ",
    "pick up the red block",
    "Pick up the RED block, then place it in the bowl.",
]

HANDWRITTEN = [
    "", " ", "  ", "   ", "\t", "\n", "\r\n", " \t \n ", "a", "A", "?", ".",
    "12345", "3.14159", "2024-11-30", "-0.5e-10", "1,000,000", "007", "0", "9" * 40,
    "   leading spaces", "trailing spaces   ", "  both  ", "a  b   c    d", "a\tb", "a\t\tb",
    "line one\nline two\n", "\n\nparagraph\n\n", "tab\tand\nnewline", "windows\r\nline",
    "é", "café", "über", "niño", "Ångström", "e\u0301", "naïve façade", "Crème brûlée",
    "ÀÉÎÕÜ àéîõü ß ø æ œ", "Ḁḁ ẞ", "Дом робота", "Ρομπότ",
    "机器人抓起红色方块", "拿起红色的积木", "ロボットが赤いブロックを拾う", "로봇이 빨간 블록을 집는다",
    "🤖", "👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷🇯🇵", "🤷🏽‍♀️", "❤️", "🧑‍🚀 to the 🌕",
    "الروبوت يلتقط الكتلة الحمراء", "रोबोट लाल ब्लॉक उठाता है", "שלום", "ภาษาไทย", "ქართული",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𓀀𓀁", "\U0010ffff", "\ue000", "\uffff", "\ufffd", "\ufeffBOM", "\u200b", "\u00a0",
    "\x00", "a\x00b", "\x01\x02\x7f", "\u0085", "\u2028",
    "<s>", "</s>", "<s>hello</s>", "<unk>", "<pad>", "<0x41>", "<0x0A>", "<<s>>", "< s >",
    "▁", "▁▁", "▁hello", "hello▁world", "▁ ▁", " ▁ ", "__init__", "____",
    "<image>", "[ACT]", "ab", " x", "y  ", "<image><image>", "x[ACT]y", " xy  x", "aab abab",
    "<ctrl>", "a<ctrl>b",
    "The quick brown fox jumps over the lazy dog.",
    "def f(x):\n    return x ** 2  # square\n",
    '{"action": [0.1, -0.2, 0.3], "gripper": 1}',
    "https://example.com/path?query=1&b=2#frag",
    "ALL CAPS TEXT", "MiXeD cAsE", "hyphen-ated words", "don't won't can't", "e.g. i.e. etc.",
    "antidisestablishmentarianism", "pneumonoultramicroscopicsilicovolcanoconiosis",
]

# Texts whose bytes are not valid UTF-8 (kept out of strings.json).
INVALID_UTF8 = [
    b"\xff", b"\xfe\xff", b"\x80", b"\x80\x80abc", b"\xc0\xaf", b"\xc1\xbf", b"\xe2\x96",
    b"abc\xe2\x96", b"\xe2\x96abc", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80",
    b"\xf8\x88\x80\x80\x80", b"\xe0\x80\xaf", b"\xf0\x80\x80\xaf", b"\xf0\x9f\xa4",
    b"\xf0\x9f\xa4x", b" \xff ", b"caf\xe9", b"\xc3", b"\xc3\x28", b"a\xffb\xfec",
    b"\xef\xbf\xbd\xff", b"\xe2\x96\x81\xe2\x96", b"<s>\xff</s>",
]

ATOMS = [
    "the", "robot", "should", "pick", "up", "red", "blue", "block", "cup", "drawer", "towel",
    "What", "action", "take", "In:", "Out:", "move", "left", "right", "gripper", "open", "close",
    "a", "b", "x", "y", "ab", "ing", "tion", "er",
    " ", " ", " ", "  ", "   ", "\t", "\n", "\r",
    "0", "1", "2", "7", "42", "3.5", "-1", "2024", "100%",
    ".", ",", ":", ";", "!", "?", "-", "'", '"', "(", ")", "[", "]", "{", "}", "<", ">", "/",
    "\\", "_", "#", "@", "&", "*", "+", "=", "|", "~", "^", "`", "$",
    "é", "ü", "ñ", "Å", "ç", "ø", "ß", "e\u0301", "\u0301", "café", "über",
    "机", "器", "人", "方块", "ロボット", "로봇", "中文",
    "🤖", "👍", "🏽", "\u200d", "\ufe0f", "👩‍🔬", "🏳️‍🌈", "🇺🇸",
    "الروبوت", "ي", "रोबोट", "ल", "Ж", "Ω",
    "𝔘", "𓀀", "\U0010ffff", "\ue000", "\ufffd", "\x00", "\x7f",
    "▁", "▁▁", "<s>", "</s>", "<unk>", "<0x41>", "<image>", "[ACT]", " x", "y  ", "<ctrl>",
]

INVALID_ATOMS = [b"\xff", b"\x80", b"\xc3", b"\xe2\x96", b"\xed\xa0\x80", b"\xf0\x9f"]


def random_texts(rng, count, max_atoms):
    """Random mixtures of ATOMS; some with bytes that are not UTF-8."""
    texts = []
    for i in range(count):
        n = rng.randint(1, max_atoms)
        parts = [rng.choice(ATOMS).encode("utf-8") for _ in range(n)]
        if i % 8 == 7:
            for _ in range(rng.randint(1, 3)):
                parts.insert(rng.randint(0, len(parts)), rng.choice(INVALID_ATOMS))
        texts.append(b"".join(parts))
    return texts


def long_texts(rng):
    """Texts of about 10,000 characters."""
    mixed = "".join(rng.choice(ATOMS) for _ in range(4000))[:10000]
    prose = " ".join(rng.choice(ATOMS[:30]) for _ in range(3000))[:10000]
    return [
        ("a" * 10000).encode(), (" " * 10000).encode(), ("ab" * 5000).encode(),
        ("🤖" * 10000).encode(), ("机器人" * 3334)[:10000].encode(),
        mixed.encode(), prose.encode(), ("1234567890" * 1000).encode(),
    ]


def all_texts():
    rng = random.Random(SEED)
    texts = [t.encode("utf-8") for t in PROMPTS + HANDWRITTEN]
    texts += INVALID_UTF8
    texts += long_texts(rng)
    texts += random_texts(rng, 400, 30)
    texts += random_texts(rng, 40, 300)
    seen, unique = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            unique.append(t)
    return unique


# ---------------------------------------------------------------------------------------------
# A minimal protobuf reader/writer, to change options of trained models (no protobuf module here)

def read_varint(b, i):
    value, shift = 0, 0
    while True:
        c = b[i]
        i += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return value, i


def write_varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        c = v & 0x7F
        v >>= 7
        if v:
            out.append(c | 0x80)
        else:
            out.append(c)
            return bytes(out)


def fields(b):
    """(field, wire, raw value bytes or int) for each field of a message (no groups)."""
    i, out = 0, []
    while i < len(b):
        key, i = read_varint(b, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = read_varint(b, i)
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        elif wire == 5:
            v, i = b[i:i + 4], i + 4
        elif wire == 2:
            n, i = read_varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise ValueError("unexpected wire type %d" % wire)
        out.append((field, wire, v))
    return out


def encode_fields(fs):
    out = bytearray()
    for field, wire, v in fs:
        out += write_varint(field << 3 | wire)
        if wire == 0:
            out += write_varint(v)
        elif wire == 2:
            out += write_varint(len(v)) + v
        else:
            out += v
    return bytes(out)


def set_varint_fields(message, values):
    """message with each field in `values` (field -> int) replaced by that varint."""
    fs = [f for f in fields(message) if f[0] not in values]
    fs += [(k, 0, v) for k, v in sorted(values.items())]
    return encode_fields(fs)


def edit_model(model, trainer=None, normalizer=None, piece_type=None):
    """Change TrainerSpec/NormalizerSpec varint fields, and piece types (id -> new type or None)."""
    out, piece_id = [], 0
    for field, wire, v in fields(model):
        if field == 1 and piece_type:
            new_type = piece_type(piece_id, v)
            if new_type is not None:
                v = set_varint_fields(v, {3: new_type})
            piece_id += 1
        elif field == 2 and trainer:
            v = set_varint_fields(v, trainer)
        elif field == 3 and normalizer:
            v = set_varint_fields(v, normalizer)
        out.append((field, wire, v))
    return encode_fields(out)


def piece_text_and_type(piece):
    text, typ = b"", 1
    for field, _, v in fields(piece):
        if field == 1:
            text = v
        elif field == 3:
            typ = v
    return text, typ


# ---------------------------------------------------------------------------------------------
# Variant models

USER_DEFINED = ["<image>", "[ACT]", "ab", " x", "y  ", "▁▁"]
CONTROL = ["<ctrl>"]


CORPUS_WORDS = ATOMS[:30] + ["é", "ü", "café", "über", "机", "器", "人", "方块", "ロボット", "로봇",
                             "42", "3.5", "2024", ".", ",", "?", "<image>", "[ACT]"]


def training_corpus(rng):
    lines = []
    for _ in range(3000):
        n = rng.randint(3, 20)
        lines.append(" ".join(rng.choice(CORPUS_WORDS) for _ in range(n)))
    return "\n".join(lines) + "\n"


def train(workdir, name, byte_fallback):
    """Train on workdir/corpus.txt (relative paths, so the model records no temporary path)."""
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        spm.SentencePieceTrainer.train(
            input="corpus.txt", model_prefix=name, model_type="bpe", vocab_size=700,
            hard_vocab_limit=False, normalization_rule_name="identity", byte_fallback=byte_fallback,
            remove_extra_whitespaces=False, user_defined_symbols=USER_DEFINED,
            control_symbols=CONTROL, character_coverage=1.0, num_threads=1, minloglevel=2)
    finally:
        os.chdir(cwd)
    with open(os.path.join(workdir, name + ".model"), "rb") as f:
        return f.read()


def mark_unused(model):
    """Every third piece of several characters that is NORMAL becomes UNUSED."""
    def new_type(piece_id, piece):
        text, typ = piece_text_and_type(piece)
        if typ == 1 and len(text.decode("utf-8")) > 1 and piece_id % 3 == 0:
            return 5
        return None
    return edit_model(model, piece_type=new_type)


def tiny_unused_model(rng):
    """A hand-made model over the letters a-c: every string of 1-4 letters is a piece with a
    random score, a third of the longer ones UNUSED, so that the same UNUSED piece is sometimes
    proposed as different pairs (sentencepiece resegments with the last one proposed)."""
    def piece(text, score, typ):
        fs = [(1, 2, text.encode()), (2, 5, struct.pack("<f", score))]
        if typ != 1:
            fs.append((3, 0, typ))
        return (1, 2, encode_fields(fs))

    out = [piece("<unk>", 0.0, 2), piece("<s>", 0.0, 3), piece("</s>", 0.0, 3)]
    texts = [""]
    for _ in range(4):
        texts = [t + x for t in texts for x in "abc"] + [t for t in texts if t]
    for t in sorted(set(texts), key=lambda t: (len(t), t)):
        typ = 5 if len(t) > 1 and rng.random() < 1 / 3 else 1
        out.append(piece(t, -rng.random() * 10, typ))
    out.append((2, 2, encode_fields([(3, 0, 2)])))                    # BPE
    out.append((3, 2, encode_fields([(1, 2, b"identity"), (3, 0, 0), (4, 0, 0)])))
    return encode_fields(out)


def tiny_texts(rng):
    return ["".join(rng.choice("abc ") for _ in range(rng.randint(1, 40))).encode()
            for _ in range(1000)]


def variants(workdir):
    rng = random.Random(SEED + 1)
    corpus = os.path.join(workdir, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write(training_corpus(rng))
    with_bytes = train(workdir, "with_bytes", True)
    without_bytes = train(workdir, "without_bytes", False)
    # NormalizerSpec: 3 add_dummy_prefix, 4 remove_extra_whitespaces, 5 escape_whitespaces;
    # TrainerSpec: 24 treat_whitespace_as_suffix.
    return {
        "byte_fallback": with_bytes,
        "no_byte_fallback": without_bytes,
        "remove_ws": edit_model(with_bytes, normalizer={4: 1}),
        "remove_ws_no_byte_fallback": edit_model(without_bytes, normalizer={4: 1}),
        "no_dummy_prefix": edit_model(with_bytes, normalizer={3: 0, 4: 1}),
        "suffix_no_escape": edit_model(with_bytes, trainer={24: 1}, normalizer={5: 0}),
        "suffix_remove_ws": edit_model(without_bytes, trainer={24: 1}, normalizer={4: 1, 5: 0}),
        "unused": mark_unused(with_bytes),
        "unused_no_byte_fallback": mark_unused(without_bytes),
    }


# ---------------------------------------------------------------------------------------------

def write_reference(path, model_name, model_bytes, texts):
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(model_bytes)
    with open(path, "w", encoding="ascii", newline="\n") as f:
        f.write("# ids from sentencepiece %s (python module), encode(text), no BOS/EOS\n"
                % spm.__version__)
        f.write("# model: %s; made by tests/text/make_tokenizer_reference.py\n" % model_name)
        f.write("# text bytes in hex <TAB> ids\n")
        for t in texts:
            ids = sp.encode(t)
            f.write("%s\t%s\n" % (t.hex(), " ".join(str(i) for i in ids)))


def main():
    texts = all_texts()
    valid = []
    for t in texts:
        try:
            valid.append(t.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    with open(os.path.join(OUT, "strings.json"), "w", encoding="utf-8") as f:
        json.dump(valid, f, ensure_ascii=True, indent=0)
        f.write("\n")

    with open(LLAMA_MODEL, "rb") as f:
        llama = f.read()
    write_reference(os.path.join(OUT, "llama2_reference_ids.tsv"), "llama2-tokenizer.model",
                    llama, texts)

    # The small models get the shorter texts, to keep their fixtures small; the tiny model
    # gets texts over its own letters.
    short = [t for t in texts if len(t) <= 500]
    rng = random.Random(SEED + 2)
    with tempfile.TemporaryDirectory() as workdir:
        models = [(name, model, short) for name, model in variants(workdir).items()]
    models.append(("tiny_unused", tiny_unused_model(rng), tiny_texts(rng)))
    for name, model, model_texts in models:
        model_name = "variant_%s.model" % name
        with open(os.path.join(OUT, model_name), "wb") as f:
            f.write(model)
        write_reference(os.path.join(OUT, "variant_%s_reference_ids.tsv" % name), model_name,
                        model, model_texts)
    print("%d texts (%d valid UTF-8), sentencepiece %s" % (len(texts), len(valid), spm.__version__))


if __name__ == "__main__":
    sys.exit(main())
