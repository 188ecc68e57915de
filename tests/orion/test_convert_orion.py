#!/usr/bin/python3
"""Check tools/orion/convert_orion.py on a tiny Orion checkpoint.

    /usr/bin/python3 tests/orion/test_convert_orion.py [-v]

Makes the fixture with tests/orion/make_tiny_orion.py in a temporary folder, runs the converter
(LoRA merge and keep, BF16 and FP32, sharded and not), reads the output with its own safetensors
reader and compares every tensor with an independent computation in numpy float64 from the
Orion.pth tensors:
  - merged q/k/v/o: W + (alpha/r) * B @ A; FP32 output within the float32 rounding bound of the
    float64 value; BF16 output equal to round-to-nearest-even of the FP32 output, and within half a
    BF16 ulp (plus the FP32 bound) of the float64 value;
  - everything else: FP32 bit-exact, BF16 equal to round-to-nearest-even of the FP32 original;
  - names, shapes, dtypes, safetensors layout, shard index, config.json, added_tokens.json.
Then a whole camera front end (written once per value, bit-exact; copies that differ refused), the
weighted_mask buffer (skipped and reported, the output the same as without it), the
interpreter named in the report and in a "module missing" message (torch hidden, and a venv without
Debian's packages), and broken inputs, each of which must exit non-zero with a message naming the
problem.
Prints "ok - name" / "not ok - name" and ends with "N passed, M failed"; exits 1 on any failure.
"""
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CONVERTER = os.environ.get("ORION_CONVERTER") or os.path.join(ROOT, "tools", "orion", "convert_orion.py")
MAKER = os.path.join(HERE, "make_tiny_orion.py")

LLM = "lm_head.base_model.model."
PROJS = ("q_proj", "k_proj", "v_proj", "o_proj")
# The fixture's architecture (make_tiny_orion.py) and the original code's constants.
HIDDEN, LAYERS, HEADS, INTER, ROWS, BASE_VOCAB = 64, 2, 4, 172, 32001, 32000
LORA_R, LORA_ALPHA = 4, 16
LATENT, MODES, GRU_LAYERS = 32, 6, 4
# Spec §4.1, copied by hand (not imported from the converter).
PROMPT = ("A chat between a curious user and an artificial intelligence assistant. The assistant "
          "gives helpful, detailed, and polite answers to the user's questions. USER: <image>\n"
          "You are driving a car.Please provide the planning trajectory for the ego car without "
          "reasons. ASSISTANT: Here is the planning trajectory <waypoint_ego></s>")

VERBOSE = "-v" in sys.argv
results = []


def check(name, cond, detail=""):
    results.append(bool(cond))
    print(("ok - " if cond else "not ok - ") + name)
    if not cond and detail:
        for line in str(detail).rstrip().splitlines()[-12:]:
            print("#   " + line)
    return bool(cond)


# ---------------------------------------------------------------------------------------------
# Independent readers and reference math.

def read_safetensors(path):
    """{name: (dtype, shape, numpy array of the raw elements)}; asserts the layout rules."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    assert n % 8 == 0, "header length %d is not a multiple of 8" % n
    raw = data[8:8 + n]
    assert raw == raw.rstrip(b" ") + b" " * (len(raw) - len(raw.rstrip(b" "))), "bad padding"
    header = json.loads(raw.decode("utf-8"))
    header.pop("__metadata__", None)
    body = data[8 + n:]
    out, end, prev_name = {}, 0, None
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, e = info["data_offsets"]
        assert b == end, "%s: data not contiguous (%d != %d)" % (name, b, end)
        assert prev_name is None or name > prev_name, "tensors not sorted by name at %s" % name
        dt = {"F32": np.float32, "BF16": np.uint16}[info["dtype"]]
        count = int(np.prod(info["shape"], dtype=np.int64))
        assert e - b == count * np.dtype(dt).itemsize, "%s: size does not match shape" % name
        out[name] = (info["dtype"], tuple(info["shape"]),
                     np.frombuffer(body[b:e], dtype=dt).reshape(info["shape"]))
        end, prev_name = e, name
    assert end == len(body), "trailing bytes after the last tensor"
    return out


def read_output(out_dir):
    idx = os.path.join(out_dir, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            index = json.load(f)
        tensors = {}
        for fname in sorted(set(index["weight_map"].values())):
            for k, v in read_safetensors(os.path.join(out_dir, fname)).items():
                tensors[k] = v
        return tensors, index
    return read_safetensors(os.path.join(out_dir, "model.safetensors")), None


def bf16_rne(x32):
    """float32 array -> bf16 bit patterns (uint16), round to nearest, ties to even."""
    u = np.ascontiguousarray(x32, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r[np.isnan(x32)] = 0x7FC0
    return r


def bf16_to_f64(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def load_orion(path):
    obj = torch.load(path, map_location="cpu", weights_only=True)
    sd = obj["state_dict"] if "state_dict" in obj else obj
    return {k: v.detach().numpy().astype(np.float64) for k, v in sd.items()}


def expected_tensors(orig, lora, alpha=LORA_ALPHA, keep_lm_head=False):
    """{output name: (float64 reference, kind)}; kind: 'exact', 'merged' (with |B||A| bound), 'lora'."""
    exp = {"model.embed_tokens.weight": (orig[LLM + "model.embed_tokens.weight"], "exact", None),
           "model.norm.weight": (orig[LLM + "model.norm.weight"], "exact", None)}
    scale = alpha / LORA_R
    for i in range(LAYERS):
        p = "model.layers.%d." % i
        for proj in PROJS:
            src = LLM + p + "self_attn." + proj
            w = orig[src + ".base_layer.weight"]
            a, b = orig[src + ".lora_A.default.weight"], orig[src + ".lora_B.default.weight"]
            name = p + "self_attn.%s.weight" % proj
            if lora == "merge":
                exp[name] = (w + scale * (b @ a), "merged", scale * (np.abs(b) @ np.abs(a)))
            else:
                exp[name] = (w, "exact", None)
                exp[p + "self_attn.%s.lora_A.weight" % proj] = (a, "lora", None)
                exp[p + "self_attn.%s.lora_B.weight" % proj] = (b, "lora", None)
        for n in ("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                  "input_layernorm.weight", "post_attention_layernorm.weight"):
            exp[p + n] = (orig[LLM + p + n], "exact", None)
    if keep_lm_head:
        exp["lm_head.weight"] = (orig[LLM + "lm_head.weight"], "exact", None)
    planner = ["present_distribution.encoder.conv%d.%s" % (k, s) for k in (1, 2, 3)
               for s in ("weight", "bias")]
    planner += ["present_distribution.last_conv.1.weight", "present_distribution.last_conv.1.bias"]
    planner += ["predict_model.gru.%s_l%d" % (s, k) for k in range(GRU_LAYERS)
                for s in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    planner += ["predict_model.linear%d.%s" % (k, s) for k in (1, 2, 3) for s in ("weight", "bias")]
    planner += ["ego_fut_decoder.%d.%s" % (k, s) for k in (0, 2, 4) for s in ("weight", "bias")]
    for n in planner:
        v = orig[n]
        if v.ndim == 3:
            v = v[:, :, 0]                                   # Conv1d k=1 -> [out, in]
        exp["planner." + n] = (v, "exact", None)
    return exp


def compare(out, exp, dtype, fp32_out=None):
    """Returns a list of problems (empty when everything matches)."""
    problems = []
    if set(out) != set(exp):
        problems.append("names: missing %s, unexpected %s"
                        % (sorted(set(exp) - set(out))[:5], sorted(set(out) - set(exp))[:5]))
    for name in sorted(set(out) & set(exp)):
        st_dtype, shape, arr = out[name]
        ref, kind, absprod = exp[name]
        want_dtype = "F32" if (dtype == "fp32" or kind == "lora") else "BF16"
        if st_dtype != want_dtype or shape != ref.shape:
            problems.append("%s: %s %s, expected %s %s" % (name, st_dtype, shape, want_dtype,
                                                          ref.shape))
            continue
        if kind in ("exact", "lora"):
            r32 = ref.astype(np.float32)
            if st_dtype == "F32":
                ok = np.array_equal(arr.view(np.uint32), r32.view(np.uint32))
            else:
                ok = np.array_equal(arr, bf16_rne(r32))
            if not ok:
                problems.append("%s: values differ from the original" % name)
            continue
        # merged: float32 rounding bound for W + s*(B@A) with r-term dot products
        tol32 = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64) \
            + 2 * LORA_R * 2.0 ** -24 * absprod
        if st_dtype == "F32":
            err = np.abs(arr.astype(np.float64) - ref)
            if not np.all(err <= tol32):
                problems.append("%s: merged FP32 off by up to %g (bound there %g)"
                                % (name, err.max(), tol32.flat[err.argmax()]))
        else:
            if fp32_out is not None and not np.array_equal(arr, bf16_rne(fp32_out[name][2])):
                problems.append("%s: BF16 is not the round-to-nearest-even of the FP32 merge" % name)
            half_ulp = np.abs(bf16_to_f64(arr)) * 2.0 ** -8
            err = np.abs(bf16_to_f64(arr) - ref)
            if not np.all(err <= half_ulp + tol32 + 1e-45):
                problems.append("%s: merged BF16 off by up to %g" % (name, err.max()))
    return problems


# ---------------------------------------------------------------------------------------------

def run(args, expect_ok=True):
    p = subprocess.run([sys.executable, CONVERTER] + args, capture_output=True, text=True)
    if VERBOSE:
        sys.stderr.write(p.stderr)
    return p.returncode, p.stdout + p.stderr


def conv_args(fx, out, ckpt=None, llm=None, agent=None):
    return ["--checkpoint", ckpt or os.path.join(fx, "Orion.pth"),
            "--llm-dir", llm or os.path.join(fx, "pretrain_qformer"),
            "--agent-config", agent or os.path.join(fx, "orion_stage3_agent.py"), "--out", out]


def test_conversions(tmp, fx, orig):
    outs = {}
    cases = [("merge", "fp32", []), ("merge", "bf16", []), ("keep", "fp32", []),
             ("keep", "bf16", [])]
    for lora, dtype, extra in cases:
        out = os.path.join(tmp, "out-%s-%s" % (lora, dtype))
        rc, log = run(conv_args(fx, out) + ["--lora", lora, "--dtype", dtype] + extra)
        name = "convert --lora %s --dtype %s" % (lora, dtype)
        if not check(name + " exits 0", rc == 0, log):
            continue
        last = log.rstrip().splitlines()[-1]
        parity = (lora, dtype) == ("keep", "fp32")
        check(name + " ends with the numerics and the options of fp32 parity",
              last.startswith("numerics: %s weights, LoRA %s" % (
                  "F32" if dtype == "fp32" else "BF16", "kept apart" if lora == "keep" else "merged")) and
              (last.endswith("parity with the fp32 agent") if parity else
               "for parity with the fp32 agent convert with --dtype fp32 --lora keep" in last), last)
        try:
            tensors, index = read_output(out)
        except AssertionError as e:
            check(name + " safetensors layout", False, e)
            continue
        check(name + " safetensors layout", True)
        check(name + " single file, no index", index is None and
              os.path.exists(os.path.join(out, "model.safetensors")))
        outs[(lora, dtype)] = (out, tensors)
        fp32 = outs.get((lora, "fp32"), (None, None))[1]
        problems = compare(tensors, expected_tensors(orig, lora), dtype, fp32)
        check(name + " names, shapes and values", not problems, "\n".join(problems))
        with open(os.path.join(out, "config.json")) as f:
            cfg = json.load(f)
        check_config(name, cfg, lora, dtype)
    return outs


def check_config(name, cfg, lora, dtype, alpha=LORA_ALPHA):
    t, pl, lo = cfg.get("text_config", {}), cfg.get("planner", {}), cfg.get("lora") or {}
    want = [
        (cfg.get("model_type"), "orion"), (cfg.get("vlahybrid_format"), 1),
        (cfg.get("dtype"), "float32" if dtype == "fp32" else "bfloat16"),
        (t.get("hidden_size"), HIDDEN), (t.get("intermediate_size"), INTER),
        (t.get("num_hidden_layers"), LAYERS), (t.get("num_attention_heads"), HEADS),
        (t.get("num_key_value_heads"), HEADS), (t.get("rope_theta"), 10000.0),
        (t.get("rms_norm_eps"), 1e-5), (t.get("max_position_embeddings"), 4096),
        (t.get("vocab_size"), ROWS), (t.get("base_vocab_size"), BASE_VOCAB),
        (lo.get("r"), LORA_R), (lo.get("alpha"), alpha), (lo.get("scale"), alpha / LORA_R),
        (lo.get("merged"), lora == "merge"), (lo.get("targets"), list(PROJS)),
        (pl.get("latent_dim"), LATENT), (pl.get("ego_fut_mode"), MODES), (pl.get("fut_ts"), 6),
        (pl.get("gru_layers"), GRU_LAYERS), (pl.get("gru_hidden"), HIDDEN // GRU_LAYERS),
        (pl.get("in_channels"), HIDDEN), (pl.get("compress_dim"), HIDDEN // 2),
        (pl.get("encoder_widths"), [2 * HIDDEN, 2 * HIDDEN, HIDDEN // 2]),
        (pl.get("predict_widths"), [HIDDEN // 2, HIDDEN, HIDDEN]),
        (pl.get("decoder_widths"), [2 * HIDDEN, 2 * HIDDEN, 2 * MODES]),
        (pl.get("min_log_sigma"), -5.0), (pl.get("max_log_sigma"), 5.0),
        (cfg.get("vision_tokens"), 529), (cfg.get("vision_token_groups"), [256, 16, 1, 256]),
        ((cfg.get("prompt") or {}).get("text"), PROMPT),
        ((cfg.get("prompt") or {}).get("image_marker"), "<image>"),
        (cfg.get("special_tokens"), {"<waypoint_ego>": BASE_VOCAB}),
    ]
    bad = ["%r != %r" % (got, exp) for got, exp in want if got != exp]
    check(name + " config.json fields", not bad, "\n".join(bad))


def test_tokenizer_files(out):
    with open(os.path.join(out, "added_tokens.json")) as f:
        added = json.load(f)
    check("added_tokens.json gives <waypoint_ego> id len(base vocab) = 32000",
          added == {"<waypoint_ego>": BASE_VOCAB}, added)
    same = all(open(os.path.join(out, n), "rb").read() ==
               open(os.path.join(FX_LLM, n), "rb").read()
               for n in ("tokenizer.model", "tokenizer_config.json", "special_tokens_map.json"))
    check("tokenizer files copied unchanged", same)


def test_sharded(tmp, fx, orig, single):
    out = os.path.join(tmp, "out-sharded")
    rc, log = run(conv_args(fx, out) + ["--dtype", "fp32", "--max-shard-size", "1000000"])
    if not check("convert with --max-shard-size 1000000 exits 0", rc == 0, log):
        return
    tensors, index = read_output(out)
    files = sorted(f for f in os.listdir(out) if f.endswith(".safetensors"))
    n = len(files)
    problems = []
    if index is None or n < 2:
        problems.append("expected several shards and an index, got %s" % files)
    else:
        if files != ["model-%05d-of-%05d.safetensors" % (i + 1, n) for i in range(n)]:
            problems.append("shard names %s" % files)
        if set(index) != {"metadata", "weight_map"}:
            problems.append("index keys %s" % sorted(index))
        total = sum(a.nbytes for _, _, a in tensors.values())
        if index["metadata"].get("total_size") != total:
            problems.append("total_size %s != %d" % (index["metadata"].get("total_size"), total))
        for fname in files:
            names = set(read_safetensors(os.path.join(out, fname)))
            mapped = {k for k, v in index["weight_map"].items() if v == fname}
            if names != mapped:
                problems.append("%s holds %d tensors, index maps %d to it" % (fname, len(names),
                                                                               len(mapped)))
            size = os.path.getsize(os.path.join(out, fname))
            if len(names) > 1 and size > 1000000 + 16384:
                problems.append("%s is %d bytes with %d tensors" % (fname, size, len(names)))
        if set(index["weight_map"]) != set(tensors):
            problems.append("weight_map does not cover the tensors")
        if os.path.exists(os.path.join(out, "model.safetensors")):
            problems.append("model.safetensors written next to shards")
    check("sharded output: names, index, total_size", not problems, "\n".join(problems))
    same = set(tensors) == set(single) and all(
        np.array_equal(tensors[k][2], single[k][2]) and tensors[k][:2] == single[k][:2]
        for k in tensors)
    check("sharded output holds the same tensors as the single file", same)


def test_options(tmp, fx, orig):
    out = os.path.join(tmp, "out-alpha8-head")
    rc, log = run(conv_args(fx, out) + ["--dtype", "fp32", "--lora-alpha", "8", "--keep-lm-head"])
    if check("convert --lora-alpha 8 --keep-lm-head exits 0", rc == 0, log):
        tensors, _ = read_output(out)
        problems = compare(tensors, expected_tensors(orig, "merge", alpha=8, keep_lm_head=True),
                           "fp32")
        check("--lora-alpha 8 merges with scale 2; lm_head.weight written", not problems,
              "\n".join(problems))
        with open(os.path.join(out, "config.json")) as f:
            cfg = json.load(f)
        check("--lora-alpha recorded in config.json",
              cfg["lora"]["alpha"] == 8 and cfg["lora"]["scale"] == 2 and cfg["lm_head"] is True,
              cfg["lora"])

    # A bare state dict (no {"state_dict": ...} wrapper) converts to the same bytes.
    sd = torch.load(os.path.join(fx, "Orion.pth"), map_location="cpu", weights_only=True)["state_dict"]
    bare = os.path.join(tmp, "bare.pth")
    torch.save(sd, bare)
    out = os.path.join(tmp, "out-bare")
    rc, log = run(conv_args(fx, out, ckpt=bare) + ["--dtype", "fp32"])
    ref = os.path.join(tmp, "out-merge-fp32", "model.safetensors")
    check("bare state dict converts to the same model.safetensors", rc == 0 and
          open(os.path.join(out, "model.safetensors"), "rb").read() == open(ref, "rb").read(), log)

    # <waypoint_ego> already in the tokenizer folder: its id is kept.
    llm = os.path.join(tmp, "llm-has-token")
    shutil.copytree(FX_LLM, llm)
    with open(os.path.join(llm, "added_tokens.json"), "w") as f:
        json.dump({"<waypoint_ego>": BASE_VOCAB}, f)
    out = os.path.join(tmp, "out-has-token")
    rc, log = run(conv_args(fx, out, llm=llm))
    ok = rc == 0 and json.load(open(os.path.join(out, "added_tokens.json"))) == \
        {"<waypoint_ego>": BASE_VOCAB}
    check("existing <waypoint_ego> in added_tokens.json keeps its id", ok, log)

    rc, log = run(conv_args(fx, out))
    check("non-empty --out without --force is refused", rc != 0 and "--force" in log, log)


def expect_failure(name, args, *needles):
    rc, log = run(args)
    ok = rc != 0 and all(n.lower() in log.lower() for n in needles) and "Traceback" not in log
    check("%s: exits non-zero naming %s" % (name, ", ".join(needles)), ok,
          "rc=%d\n%s" % (rc, log))


def test_broken(tmp, fx):
    full = torch.load(os.path.join(fx, "Orion.pth"), map_location="cpu", weights_only=True)

    def variant(tag, edit):
        sd = dict(full["state_dict"])
        edit(sd)
        path = os.path.join(tmp, tag + ".pth")
        torch.save({"meta": full["meta"], "state_dict": sd}, path)
        return path

    def out(tag):
        return os.path.join(tmp, "bad-" + tag)

    key = "predict_model.linear2.bias"
    p = variant("no-planner-key", lambda sd: sd.pop(key))
    expect_failure("missing planner key", conv_args(fx, out("a"), ckpt=p), key)

    key = "ego_fut_decoder.2.weight"
    p = variant("bad-shape", lambda sd: sd.__setitem__(key, torch.zeros(2 * HIDDEN, 2 * HIDDEN + 1)))
    expect_failure("wrong planner shape", conv_args(fx, out("b"), ckpt=p), key, "shape")

    key = LLM + "model.layers.1.self_attn.v_proj.lora_B.default.weight"
    p = variant("no-lora-b", lambda sd: sd.pop(key))
    expect_failure("missing LoRA key", conv_args(fx, out("c"), ckpt=p), key)

    key = LLM + "model.layers.0.mlp.down_proj.weight"
    p = variant("bad-llm-shape", lambda sd: sd.__setitem__(key, torch.zeros(HIDDEN, INTER - 1)))
    expect_failure("wrong LLM shape", conv_args(fx, out("d"), ckpt=p), key, "shape")

    data = open(os.path.join(fx, "Orion.pth"), "rb").read()
    p = os.path.join(tmp, "truncated.pth")
    open(p, "wb").write(data[: len(data) // 2])
    expect_failure("truncated Orion.pth", conv_args(fx, out("e"), ckpt=p), "truncated.pth",
                   "cannot read checkpoint")

    sentinel = os.path.join(tmp, "pickle-ran")

    class Evil:
        def __reduce__(self):
            return (open, (sentinel, "w"))
    p = os.path.join(tmp, "evil.pth")
    torch.save({"meta": Evil(), "state_dict": full["state_dict"]}, p)
    expect_failure("pickle with a non-weight object", conv_args(fx, out("f"), ckpt=p),
                   "objects other than tensors")
    check("the non-weight object was not executed", not os.path.exists(sentinel))

    llm = os.path.join(tmp, "llm-no-spm")
    shutil.copytree(FX_LLM, llm)
    os.remove(os.path.join(llm, "tokenizer.model"))
    expect_failure("missing tokenizer.model", conv_args(fx, out("g"), llm=llm), "tokenizer.model")

    llm = os.path.join(tmp, "llm-bad-spm")
    shutil.copytree(FX_LLM, llm)
    open(os.path.join(llm, "tokenizer.model"), "wb").write(b"\xff" * 64)
    expect_failure("corrupt tokenizer.model", conv_args(fx, out("h"), llm=llm),
                   "not a sentencepiece model")

    llm = os.path.join(tmp, "llm-pad")
    shutil.copytree(FX_LLM, llm)
    with open(os.path.join(llm, "added_tokens.json"), "w") as f:
        json.dump({"<pad>": BASE_VOCAB}, f)
    expect_failure("tokenizer with an extra added token", conv_args(fx, out("i"), llm=llm),
                   "tokenizer and checkpoint disagree", "32002")

    llm = os.path.join(tmp, "llm-hidden")
    shutil.copytree(FX_LLM, llm)
    cfg = json.load(open(os.path.join(llm, "config.json")))
    cfg["hidden_size"] = 2 * HIDDEN
    json.dump(cfg, open(os.path.join(llm, "config.json"), "w"))
    expect_failure("config.json hidden_size disagrees", conv_args(fx, out("j"), llm=llm),
                   "embed_tokens.weight", "shape")

    agent_src = open(os.path.join(fx, "orion_stage3_agent.py")).read()
    for tag, old, new, needle in (
            ("out_dims", "llm_hidden = %d" % HIDDEN, "llm_hidden = 4096", "out_dims"),
            ("ego_fut_mode", "ego_fut_mode=%d" % MODES, "ego_fut_mode=20", "ego_fut_mode"),
            ("use_lora", "use_lora=True", "use_lora=False", "use_lora"),
            ("num_extra", "num_extra=256,\n        pc_range", "num_extra=128,\n        pc_range",
             "num_extra"),
            ("diffusion", "use_diff_decoder = False", "use_diff_decoder = True",
             "use_diff_decoder")):
        assert old in agent_src, old
        p = os.path.join(tmp, "agent-%s.py" % tag)
        open(p, "w").write(agent_src.replace(old, new))
        expect_failure("agent config disagrees (%s)" % tag, conv_args(fx, out("k" + tag), agent=p),
                       needle)
    p = os.path.join(tmp, "agent-syntax.py")
    open(p, "w").write(agent_src + "\nmodel = dict(\n")
    expect_failure("agent config with a syntax error", conv_args(fx, out("l"), agent=p),
                   "not valid Python")


def test_buffers(tmp, fx):
    """weighted_mask, as llava_llama.py registers it, is skipped, reported and changes nothing."""
    full = torch.load(os.path.join(fx, "Orion.pth"), map_location="cpu", weights_only=True)
    key = LLM + "weighted_mask"
    mask = full["state_dict"].get(key)
    # LlavaLlamaForCausalLM(use_gen_token=True): ones(config.vocab_size + 1), config.json's 32000.
    check("fixture holds %s [%d] as the released module tree does" % (key, BASE_VOCAB + 1),
          mask is not None and tuple(mask.shape) == (BASE_VOCAB + 1,))

    def variant(tag, edit):
        sd = dict(full["state_dict"])
        edit(sd)
        path = os.path.join(tmp, tag + ".pth")
        torch.save({"meta": full["meta"], "state_dict": sd}, path)
        return path

    with_mask, without = os.path.join(tmp, "out-mask"), os.path.join(tmp, "out-no-mask")
    rc, log = run(conv_args(fx, with_mask) + ["--dtype", "fp32"])
    check("checkpoint with weighted_mask converts", rc == 0, log)
    check("the report names weighted_mask as a skipped buffer",
          "skipped buffer (not a weight): %s [%d]" % (key, BASE_VOCAB + 1) in log, log)
    # The same file name (config.json records it).
    bare = os.path.join(tmp, "no-mask", "Orion.pth")
    os.makedirs(os.path.dirname(bare))
    os.rename(variant("no-mask", lambda sd: sd.pop(key)), bare)
    rc2, log2 = run(conv_args(fx, without, ckpt=bare) + ["--dtype", "fp32"])
    check("checkpoint without weighted_mask converts", rc2 == 0, log2)
    same = rc == 0 and rc2 == 0 and all(
        open(os.path.join(with_mask, n), "rb").read() == open(os.path.join(without, n), "rb").read()
        for n in ("model.safetensors", "config.json", "added_tokens.json"))
    check("weighted_mask changes nothing in the output", same)

    p = variant("mask-2d", lambda sd: sd.__setitem__(key, torch.ones(2, BASE_VOCAB + 1)))
    expect_failure("a two-dimensional weighted_mask", conv_args(fx, os.path.join(tmp, "bad-mask"), ckpt=p),
                   key, "vector")
    other = LLM + "model.score_mask"
    p = variant("other-buffer", lambda sd: sd.__setitem__(other, torch.ones(BASE_VOCAB + 1)))
    expect_failure("an unknown key next to the buffer", conv_args(fx, os.path.join(tmp, "bad-other"), ckpt=p),
                   "unexpected LLM key", other)


def test_front_end(tmp, fx):
    """A whole camera front end (the tiny EVA and heads of tests/fixtures/tiny_weights.py under the
    released names, with the copies and dead modules a real Orion.pth holds) is written once per
    value, bit-exact, under its names; copies that differ, a missing tensor under --front-end yes and
    --front-end no behave as documented (tools/orion/front_end.py)."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
    import tiny_weights as tw
    full = torch.load(os.path.join(fx, "Orion.pth"), map_location="cpu", weights_only=True)
    base = {k: v for k, v in full["state_dict"].items()
            if not k.startswith(("img_backbone.", "position_encoder.", "query_pos.", "pts_bbox_head.", "map_head."))}
    rng = np.random.default_rng(5005)
    front = {"img_backbone." + k: v for k, v in tw.eva_weights().items()}
    front.update(tw.heads_weights())
    D = tw.HEADS_TINY["embed"]
    for head in ("pts_bbox_head.", "map_head."):
        front[head + "output_projection.weight"] = rng.standard_normal((HIDDEN, D)).astype(np.float32)
        front[head + "output_projection.bias"] = rng.standard_normal(HIDDEN).astype(np.float32)
    front["pts_bbox_head.can_bus_embed.2.weight"] = rng.standard_normal((HIDDEN, 4 * D)).astype(np.float32)
    front["pts_bbox_head.can_bus_embed.2.bias"] = rng.standard_normal(HIDDEN).astype(np.float32)
    for name, shape in (("position_encoder.0.weight", (4 * D, 192)), ("position_encoder.0.bias", (4 * D,)),
                        ("position_encoder.2.weight", (D, 4 * D)), ("position_encoder.2.bias", (D,)),
                        ("coords_d", (64,)), ("position_range", (6,)),
                        ("img_backbone.rope_win.freqs_cos", (16, 16)), ("img_backbone.blocks.0.attn.rope.freqs_sin", (16, 16)),
                        ("pts_bbox_head.motion_decoder._layers.0.transformer_layers.1.weight", (D,)),
                        ("pts_bbox_head.tl_branches.0.0.weight", (D, D))):
        front[name] = rng.standard_normal(shape).astype(np.float32)
    agent = os.path.join(tmp, "front_end_agent.py")
    with open(os.path.join(fx, "orion_stage3_agent.py")) as f:
        text = f.read()
    with open(agent, "w") as f:
        f.write(text.replace("num_extra=%d" % 256, "num_extra=%d" % tw.HEADS_TINY["extra"]))

    def variant(tag, edit=lambda sd: None):
        sd = dict(base)
        sd.update({k: torch.from_numpy(v.copy()) for k, v in front.items()})
        edit(sd)
        path = os.path.join(tmp, tag, "Orion.pth")
        os.makedirs(os.path.dirname(path))
        torch.save({"meta": full["meta"], "state_dict": sd}, path)
        return path

    def dropped(k):
        return (k.startswith(("pts_bbox_head.query_pos.", "pts_bbox_head.time_embedding.", "pts_bbox_head.ego_pose_pe.",
                              "map_head.query_pos.", "map_head.time_embedding.", "map_head.ego_pose_pe.",
                              "pts_bbox_head.motion_decoder.", "pts_bbox_head.tl_branches."))
                or any(".%s.%d." % (b, i) in k for b in ("cls_branches", "reg_branches") for i in range(1, 6))
                or k.endswith((".code_weights", ".match_costs", ".pc_range", "freqs_cos", "freqs_sin"))
                or k in ("coords_d", "position_range"))

    want = {k: v for k, v in front.items() if not dropped(k)}
    whole = variant("front-whole")
    for dtype in ("fp32", "bf16"):
        out = os.path.join(tmp, "out-front-" + dtype)
        rc, log = run(conv_args(fx, out, ckpt=whole, agent=agent) + ["--dtype", dtype, "--front-end", "yes"])
        if not check("a whole front end converts (%s)" % dtype, rc == 0, "\n".join(l for l in log.splitlines() if "error" in l.lower() or "Traceback" in l or "File" in l)):
            continue
        tensors, _ = read_output(out)
        got = {k for k in tensors if k.startswith(("img_backbone.", "position_encoder.", "query_pos.",
                                                   "time_embedding.", "ego_pose_pe.", "pts_bbox_head.", "map_head."))}
        check("front end %s: every value once, under its released name" % dtype, got == set(want),
              sorted(got ^ set(want))[:6])
        bad = []
        for k in sorted(got & set(want)):
            dt, shape, a = tensors[k]
            vit = k.startswith("img_backbone.")
            if dt != ("BF16" if vit and dtype == "bf16" else "F32") or shape != want[k].shape:
                bad.append("%s: %s %s" % (k, dt, shape))
            elif dt == "F32" and not np.array_equal(a, want[k]):
                bad.append(k + ": values")
            elif dt == "BF16" and not np.array_equal(a, bf16_rne(want[k])):
                bad.append(k + ": bf16 values")
        check("front end %s: dtypes (ViT as --dtype, the rest F32) and values bit-exact" % dtype, not bad, bad[:6])
        with open(os.path.join(out, "config.json")) as f:
            fe = json.load(f).get("front_end") or {}
        bb = fe.get("backbone", {})
        check("front end %s: config.json's backbone and ranges" % dtype,
              (bb.get("depth"), bb.get("embed_dim"), bb.get("patch_size"), bb.get("mlp_hidden"),
               bb.get("window_block_indexes")) == (3, 32, 16, 85, [0, 1, 3, 4]) and
              fe.get("pc_range") == [-51.2, -51.2, -5.0, 51.2, 51.2, 3.0] and fe.get("depth_num") == 64, fe)
        # the agent config's head arguments (the tiny agent gives the det head's; the map head's and the
        # det head's scene memory and can-bus length are the classes' defaults)
        check("front end %s: config.json's heads" % dtype, fe.get("heads") == {
            "det": {"num_heads": 8, "memory_len": 600, "topk_proposals": 300, "num_propagated": 300,
                    "scene_memory_len": 256, "can_bus_len": 2},
            "map": {"num_heads": 8, "memory_len": 1000, "topk_proposals": 500, "num_lanes_one2one": 0}},
              fe.get("heads"))

    def tweak(key):
        return lambda sd: sd.__setitem__(key, sd[key] + 1.0)
    expect_failure("a head's copy of query_pos that differs",
                   conv_args(fx, os.path.join(tmp, "out-f1"), ckpt=variant("front-copy", tweak("map_head.query_pos.0.bias")),
                             agent=agent), "map_head.query_pos.0.bias", "differs")
    expect_failure("a branch copy that differs",
                   conv_args(fx, os.path.join(tmp, "out-f2"),
                             ckpt=variant("front-branch", tweak("pts_bbox_head.cls_branches.3.6.bias")), agent=agent),
                   "pts_bbox_head.cls_branches.3.6.bias", "six branches")
    lacking = variant("front-lacking", lambda sd: sd.pop("img_backbone.blocks.1.mlp.w3.bias"))
    expect_failure("--front-end yes without a whole front end",
                   conv_args(fx, os.path.join(tmp, "out-f3"), ckpt=lacking, agent=agent) + ["--front-end", "yes"],
                   "incomplete camera front end", "img_backbone.blocks.1.mlp.w3.bias")
    out = os.path.join(tmp, "out-f4")
    rc, log = run(conv_args(fx, out, ckpt=lacking, agent=agent))
    check("--front-end auto without a whole front end converts the rest and says so",
          rc == 0 and "not written: the model runs from precomputed vision tokens" in log and
          not any(k.startswith("img_backbone.") for k in read_output(out)[0]), log)
    out = os.path.join(tmp, "out-f5")
    rc, log = run(conv_args(fx, out, ckpt=whole, agent=agent) + ["--front-end", "no"])
    check("--front-end no leaves a whole front end out", rc == 0 and "--front-end no" in log and
          not any(k.startswith(("img_backbone.", "map_head.")) for k in read_output(out)[0]), log)


# Runs the converter with `import torch` failing, as under an interpreter without it.
HIDE_TORCH = ("import runpy, sys; sys.modules['torch'] = None; sys.argv = sys.argv[1:]; "
              "runpy.run_path(sys.argv[0], run_name='__main__')")
DEBIAN_TORCH = os.path.isdir("/usr/lib/python3/dist-packages/torch") and os.path.exists("/usr/bin/python3")


def test_interpreter(tmp, fx):
    here = "%s (Python %s)" % (sys.executable, platform.python_version())
    rc, log = run(conv_args(fx, os.path.join(tmp, "out-interp")))
    check("the report names the interpreter and torch", rc == 0 and
          "running under %s, torch %s" % (here, torch.__version__) in log, log)

    args = conv_args(fx, os.path.join(tmp, "out-hidden"))
    p = subprocess.run([sys.executable, "-c", HIDE_TORCH, CONVERTER] + args, capture_output=True, text=True)
    log = p.stdout + p.stderr
    check("without torch: exits 1 naming this interpreter, its version and torch",
          p.returncode == 1 and "module torch, which %s cannot import" % here in log
          and "Traceback" not in log, log)
    check("without torch: nothing written", not os.path.exists(os.path.join(tmp, "out-hidden")))
    if os.path.abspath(sys.executable) == "/usr/bin/python3":
        check("without torch under Debian's python3: suggests pip / apt-get, not itself",
              "pip install torch" in log and "run\n  /usr/bin/python3" not in log, log)

    # A venv without Debian's packages: another interpreter, as a pyenv python3 on PATH is.
    venv = os.path.join(tmp, "venv")
    made = subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], capture_output=True, text=True)
    py = os.path.join(venv, "bin", "python3")
    if made.returncode != 0 or subprocess.run([py, "-c", "import torch"], capture_output=True).returncode == 0:
        print("# skipped the venv check: %s" % (made.stderr.strip() or "the venv has torch"))
        return
    p = subprocess.run([py, CONVERTER] + args, capture_output=True, text=True)
    log = p.stdout + p.stderr
    version = subprocess.run([py, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True).stdout.strip()
    check("under a venv without torch: exits 1 naming %s" % py, p.returncode == 1 and
          "which %s (Python %s) cannot import" % (py, version) in log and "Traceback" not in log, log)
    if DEBIAN_TORCH:
        check("under a venv without torch: suggests Debian's python3 with the same arguments",
              "Debian's python3-torch is installed for /usr/bin/python3: run\n  /usr/bin/python3 %s %s"
              % (CONVERTER, " ".join(args)) in log, log)


def guarded(section, fn, *args):
    """Run one group of checks; an exception inside it counts as one failure, not a crash."""
    try:
        return fn(*args)
    except Exception:
        import traceback
        check("%s: no unexpected exception" % section, False, traceback.format_exc())
        return None


def main():
    global FX_LLM
    tmp = tempfile.mkdtemp(prefix="orion-conv-test-")
    try:
        fx = os.path.join(tmp, "fixture")
        p = subprocess.run([sys.executable, MAKER, "--out", fx], capture_output=True, text=True)
        if not check("make_tiny_orion.py", p.returncode == 0, p.stdout + p.stderr):
            return finish()
        FX_LLM = os.path.join(fx, "pretrain_qformer")
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(fx) for f in fs)
        check("fixture is under 12 MB (%d bytes)" % size, size < 12 * 1000 ** 2)
        fx2 = os.path.join(tmp, "fixture2")
        subprocess.run([sys.executable, MAKER, "--out", fx2], check=True)
        check("fixture is byte-identical across runs",
              open(os.path.join(fx, "Orion.pth"), "rb").read() ==
              open(os.path.join(fx2, "Orion.pth"), "rb").read())
        orig = load_orion(os.path.join(fx, "Orion.pth"))
        nz = all(np.any(v != 0) for k, v in orig.items() if ".lora_B." in k)
        check("fixture lora_B tensors are nonzero", nz)

        outs = guarded("conversions", test_conversions, tmp, fx, orig) or {}
        if ("merge", "fp32") in outs:
            guarded("tokenizer files", test_tokenizer_files, outs[("merge", "fp32")][0])
            guarded("sharding", test_sharded, tmp, fx, orig, outs[("merge", "fp32")][1])
        guarded("options", test_options, tmp, fx, orig)
        guarded("buffers", test_buffers, tmp, fx)
        guarded("front end", test_front_end, tmp, fx)
        guarded("interpreter", test_interpreter, tmp, fx)
        guarded("broken inputs", test_broken, tmp, fx)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


def finish():
    passed = sum(results)
    failed = len(results) - passed
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


FX_LLM = None

if __name__ == "__main__":
    sys.exit(main())
