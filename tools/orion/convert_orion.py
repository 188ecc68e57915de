#!/usr/bin/env python3
"""Convert an Orion (xiaomi-mlab/Orion) checkpoint into vlahybrid's Orion format.

Inputs, exactly what an Orion user has:
  --checkpoint Orion.pth        PyTorch pickle: {"state_dict": {...}, ...} or the state dict itself
  --llm-dir pretrain_qformer/   transformers LlamaConfig config.json + sentencepiece tokenizer files
  --agent-config orion_stage3_agent.py   mmcv-style python config; parsed with `ast`, never executed

Output folder (documented field by field in doc/orion-converter.md):
  model.safetensors, or model-0000k-of-0000n.safetensors + model.safetensors.index.json
  config.json, tokenizer.model, tokenizer_config.json, special_tokens_map.json, added_tokens.json

The LLM (LLaMA + LoRA on q/k/v/o), the VAE+GRU planner and, when the checkpoint holds it whole, the
camera front end (img_backbone, position_encoder, the shared query_pos / time_embedding / ego_pose_pe,
pts_bbox_head, map_head: each value once, tools/orion/front_end.py) are written; training-only modules
are skipped and listed. --front-end no leaves the front end out (the model then runs from precomputed
vision tokens), --front-end yes refuses a checkpoint without a whole one.

Facts about the original code this relies on (YinXuan1223/Ourion @ b08a9ec, the official history):
  - mmcv/utils/misc.py::load_model: LoraConfig(r=16, lora_alpha=16, q/k/v/o_proj), never merged;
    peft scales the LoRA path by lora_alpha / r.
  - mmcv/utils/llava_llama.py::add_special_token: tokenizer.add_tokens([...], special_tokens=True)
    then resize_token_embeddings(len(tokenizer)); the new token gets id len(tokenizer).
  - mmcv/models/detectors/orion.py::Orion.__init__ (use_gen_token, VAE branch): latent_dim 32,
    layer_dim 4, ego_fut_mode 6 and log-sigma clamp [-5, 5] are hard-coded; the planner input is
    the 4096-wide LLM feature; the decoder is Linear(8192,8192) ReLU Linear(8192,8192) ReLU
    Linear(8192, 2*modes); simple_test_pts forces fut_ts = 6.
  - mmcv/models/utils/distributions.py: DistributionModule (compress_dim = in // 2,
    DistributionEncoder1DV2 conv1/conv2/conv3, last_conv = [AdaptiveAvgPool1d, Conv1d]) and
    PredictModel (gru, linear1, linear2, linear3).

Requires Python >= 3.8, torch >= 1.13 (for torch.load(weights_only=True)) and numpy (torch's
Tensor.numpy writes the bytes; Debian's python3-torch depends on it).
"""
import argparse
import ast
import json
import os
import platform
import re
import shlex
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import front_end  # noqa: E402

FORMAT_VERSION = 1
DEFAULT_MAX_SHARD_BYTES = 5 * 1000 ** 3          # "5GB" as transformers counts it
WAYPOINT_TOKEN = "<waypoint_ego>"
LLM_PREFIX = "lm_head.base_model.model."      # Orion.lm_head is the peft PeftModelForCausalLM
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
ORIG_LORA_R, ORIG_LORA_ALPHA = 16, 16          # misc.py::load_model
PLANNER_MODULES = ("present_distribution", "predict_model", "ego_fut_decoder")

# §4.1 of the spec (transforms_3d.py::LoadAnnoatationCriticalVQATest, desc_qa=False,
# use_gen_token=True; conversation.py::conv_vicuna_v1). No space in "car.Please".
PROMPT_TEXT = ("A chat between a curious user and an artificial intelligence assistant. "
               "The assistant gives helpful, detailed, and polite answers to the user's questions. "
               "USER: <image>\nYou are driving a car.Please provide the planning trajectory for "
               "the ego car without reasons. ASSISTANT: Here is the planning trajectory "
               "<waypoint_ego></s>")

TOKENIZER_FILES = ("tokenizer.model", "tokenizer_config.json", "special_tokens_map.json")

# Persistent buffers the released modules register next to their weights, so a state dict holds
# them, though they are no weight of the model: (name under the LLM prefix, why it is not written).
NON_WEIGHT_BUFFERS = (
    (re.compile(r"weighted_mask"), "the training loss's per-token weights, llava_llama.py / "
     "llava_qwen.py register_buffer(\"weighted_mask\")"),
    (re.compile(r"model\.(layers\.\d+\.self_attn\.)?rotary_emb\.inv_freq"),
     "RoPE frequencies, recomputed from rope_theta"),
)

# Debian's interpreter and where its python3-* packages put their modules.
DEBIAN_PYTHON = "/usr/bin/python3"
DEBIAN_DIST_PACKAGES = "/usr/lib/python3/dist-packages"
DEBIAN_PACKAGE_OF = {"torch": "python3-torch", "numpy": "python3-numpy"}


class ConvertError(Exception):
    """A problem with the inputs; main() prints it and exits with status 1."""


def log(msg):
    print(msg, file=sys.stderr)


def warn(msg):
    print("warning: " + msg, file=sys.stderr)


def interpreter():
    """The interpreter this runs under, as the report and the "module missing" messages name it."""
    return "%s (Python %s)" % (sys.executable or "an unknown interpreter", platform.python_version())


def missing_module(module, purpose):
    """The ConvertError for a module this interpreter cannot import. A user often runs another
    python3 (pyenv, a venv) than Debian's, which has the module: then say how to run that one."""
    msg = "%s needs the Python module %s, which %s cannot import" % (purpose, module, interpreter())
    package = DEBIAN_PACKAGE_OF.get(module)
    if package and os.path.isdir(os.path.join(DEBIAN_DIST_PACKAGES, module)) \
            and os.access(DEBIAN_PYTHON, os.X_OK) and os.path.abspath(sys.executable or "") != DEBIAN_PYTHON:
        return ConvertError("%s. Debian's %s is installed for %s: run\n  %s %s"
                            % (msg, package, DEBIAN_PYTHON, DEBIAN_PYTHON, shlex.join(sys.argv)))
    hint = "pip install %s for this interpreter" % module
    if package:
        hint += ", or apt-get install %s and run the converter with %s" % (package, DEBIAN_PYTHON)
    return ConvertError("%s (%s)" % (msg, hint))


def import_torch(purpose):
    """torch, with numpy (Tensor.numpy writes the output bytes), or a ConvertError naming the
    interpreter."""
    try:
        import torch
    except ImportError:
        raise missing_module("torch", purpose)
    try:
        __import__("numpy")
    except ImportError:
        raise missing_module("numpy", purpose)
    return torch


def report_interpreter():
    torch = import_torch("converting a checkpoint")
    log("running under %s, torch %s" % (interpreter(), torch.__version__))


def report_numerics(doc, weights, lora, parity_options):
    """The report's last line: the numerics written and, unless they are already those of the fp32
    agent, the options that give them."""
    if parity_options is None:
        log("numerics: %s weights, LoRA %s: parity with the fp32 agent" % (weights, lora))
    else:
        log("numerics: %s weights, LoRA %s; for parity with the fp32 agent convert with %s (%s, "
            "\"Precision\")" % (weights, lora, parity_options, doc))


def skip_non_weight_buffers(sd, prefix, consumed):
    """Mark the known non-weight buffers under `prefix` consumed and report each; any other
    unconsumed key stays for the caller to refuse."""
    skipped = []
    for k in sorted(sd):
        if not k.startswith(prefix) or k in consumed:
            continue
        for pattern, why in NON_WEIGHT_BUFFERS:
            if pattern.fullmatch(k[len(prefix):]):
                if sd[k].dim() != 1:
                    raise ConvertError("%s has shape %s; the buffer of that name is a vector"
                                       % (k, list(sd[k].shape)))
                consumed.add(k)
                skipped.append(k)
                log("skipped buffer (not a weight): %s %s, %s" % (k, list(sd[k].shape), why))
                break
    return skipped


# ---------------------------------------------------------------------------------------------
# Agent config: a restricted literal evaluator over the module's top-level assignments.

class Unresolved:
    """A value the restricted evaluator does not compute (calls, f-strings, comprehensions...)."""

    def __init__(self, what):
        self.what = what

    def __repr__(self):
        return "<unresolved %s>" % self.what


def _eval(node, env):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id, Unresolved("name " + node.id))
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_eval(e, env) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:                                   # {**other}
                other = _eval(v, env)
                if isinstance(other, dict):
                    out.update(other)
                continue
            key = _eval(k, env)
            if isinstance(key, (str, int, float, bool)):
                out[key] = _eval(v, env)
        return out
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" \
            and not node.args:
        out = {}
        for kw in node.keywords:
            if kw.arg is None:                              # dict(**other)
                other = _eval(kw.value, env)
                if isinstance(other, dict):
                    out.update(other)
            else:
                out[kw.arg] = _eval(kw.value, env)
        return out
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "range") \
            and not node.keywords:                          # list(range(a, b)): the agent's window indexes
        args = [_eval(a, env) for a in node.args]
        if node.func.id == "range" and 1 <= len(args) <= 3 and all(isinstance(a, int) and not isinstance(a, bool)
                                                                  for a in args):
            r = range(*args)
            return list(r) if len(r) <= 4096 else Unresolved("range over 4096")
        if node.func.id == "list" and len(args) == 1 and isinstance(args[0], (list, tuple)):
            return list(args[0])
        return Unresolved("call of " + node.func.id)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        if isinstance(node.op, ast.USub) and _is_number(v):
            return -v
        if isinstance(node.op, ast.UAdd) and _is_number(v):
            return v
        if isinstance(node.op, ast.Not) and not isinstance(v, Unresolved):
            return not v
        return Unresolved("unary op")
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, env), _eval(node.right, env)
        if _is_number(a) and _is_number(b):
            ops = {ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y,
                   ast.Mult: lambda x, y: x * y, ast.Div: lambda x, y: x / y,
                   ast.FloorDiv: lambda x, y: x // y, ast.Mod: lambda x, y: x % y}
            op = ops.get(type(node.op))
            if op is not None:
                try:
                    return op(a, b)
                except ZeroDivisionError:
                    return Unresolved("division by zero")
        if isinstance(node.op, ast.Add) and type(a) is type(b) and isinstance(a, (str, list, tuple)):
            return a + b
        return Unresolved("expression")
    return Unresolved(type(node).__name__)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def read_agent_config(path):
    """Top-level `name = expr` assignments of an mmcv config, evaluated without running code."""
    try:
        with open(path, "r", encoding="utf-8") as f:
            source = f.read()
    except OSError as e:
        raise ConvertError("cannot read agent config %s: %s" % (path, e.strerror or e))
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as e:
        raise ConvertError("agent config %s is not valid Python (line %s): %s"
                           % (path, e.lineno, e.msg))
    env = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            value = _eval(stmt.value, env)
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    env[target.id] = value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
            env[stmt.target.id] = _eval(stmt.value, env)
    model = env.get("model")
    if not isinstance(model, dict):
        raise ConvertError("agent config %s: no top-level `model = dict(...)`" % path)
    if model.get("type") != "Orion":
        raise ConvertError("agent config %s: model.type is %r, expected 'Orion'"
                           % (path, model.get("type")))
    return env, model


def cfg_get(d, key, default=None, where="model"):
    """d[key] if present and resolved; default if absent; error if present but not literal."""
    if not isinstance(d, dict) or key not in d:
        return default
    v = d[key]
    if isinstance(v, Unresolved):
        raise ConvertError("agent config: %s.%s is not a literal (%r)" % (where, key, v))
    return v


# ---------------------------------------------------------------------------------------------
# Sentencepiece model: count the pieces with a minimal protobuf reader (no sentencepiece needed).

def _varint(buf, pos):
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _proto_fields(buf):
    """Yield (field_number, wire_type, value) of one protobuf message."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        field, wt = key >> 3, key & 7
        if wt == 0:
            value, pos = _varint(buf, pos)
        elif wt == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wt == 2:
            n, pos = _varint(buf, pos)
            if pos + n > len(buf):
                raise ValueError("truncated field")
            value, pos = buf[pos:pos + n], pos + n
        elif wt == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError("unsupported wire type %d" % wt)
        if pos > len(buf):
            raise ValueError("truncated field")
        yield field, wt, value


def sentencepiece_pieces(path):
    """The piece strings of a sentencepiece ModelProto (field 1: repeated SentencePiece{1: piece})."""
    try:
        with open(path, "rb") as f:
            buf = f.read()
    except OSError as e:
        raise ConvertError("cannot read %s: %s" % (path, e.strerror or e))
    pieces = []
    try:
        for field, wt, value in _proto_fields(buf):
            if field == 1 and wt == 2:
                piece = None
                for f2, wt2, v2 in _proto_fields(value):
                    if f2 == 1 and wt2 == 2:
                        piece = bytes(v2).decode("utf-8")
                if piece is None:
                    raise ValueError("a piece without text")
                pieces.append(piece)
    except (ValueError, UnicodeDecodeError) as e:
        raise ConvertError("%s is not a sentencepiece model: %s" % (path, e))
    if not pieces:
        raise ConvertError("%s is not a sentencepiece model: no pieces" % path)
    return pieces


# ---------------------------------------------------------------------------------------------
# Tokenizer: the id <waypoint_ego> gets, replaying transformers' slow-tokenizer bookkeeping.

def _token_text(v):
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get("content"), str):
        return v["content"]
    return None


def _read_json(path, what):
    try:
        with open(path, "r", encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise ConvertError("cannot read %s %s: %s" % (what, path, e.strerror or e))
    except json.JSONDecodeError as e:
        raise ConvertError("%s %s is not valid JSON: %s" % (what, path, e))


def plan_tokenizer(llm_dir):
    """Returns (base_vocab, added: {token: id} including <waypoint_ego>, notes)."""
    sp_path = os.path.join(llm_dir, "tokenizer.model")
    if not os.path.isfile(sp_path):
        raise ConvertError("missing tokenizer.model in %s (the slow Llama tokenizer Orion uses)"
                           % llm_dir)
    pieces = sentencepiece_pieces(sp_path)
    vocab = {p: i for i, p in enumerate(pieces)}
    base_vocab = len(pieces)

    added = {}
    p = os.path.join(llm_dir, "added_tokens.json")
    if os.path.isfile(p):
        data = _read_json(p, "added tokens file")
        if not isinstance(data, dict):
            raise ConvertError("%s: expected a JSON object {token: id}" % p)
        added.update({str(k): int(v) for k, v in data.items()})
    tok_cfg = {}
    p = os.path.join(llm_dir, "tokenizer_config.json")
    if os.path.isfile(p):
        tok_cfg = _read_json(p, "tokenizer config")
        for sid, entry in (tok_cfg.get("added_tokens_decoder") or {}).items():
            text = _token_text(entry)
            if text is not None and text not in vocab:
                added.setdefault(text, int(sid))
    for tok, tid in added.items():
        if tid < base_vocab and vocab.get(tok) != tid:
            raise ConvertError("tokenizer: added token %r has id %d inside the base vocabulary "
                               "of %d pieces" % (tok, tid, base_vocab))
    added = {t: i for t, i in added.items() if not (i < base_vocab and vocab.get(t) == i)}

    # transformers (4.31, slow tokenizer) also adds every special token that is not in the
    # vocabulary (sanitize_special_tokens): bos, eos, unk, sep, pad, cls, mask, additional.
    special_map = {}
    p = os.path.join(llm_dir, "special_tokens_map.json")
    if os.path.isfile(p):
        special_map = _read_json(p, "special tokens map")
    specials = []
    for key in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                "mask_token"):
        text = _token_text(special_map.get(key, tok_cfg.get(key)))
        if text is not None:
            specials.append(text)
    for v in special_map.get("additional_special_tokens", tok_cfg.get("additional_special_tokens")) or []:
        text = _token_text(v)
        if text is not None:
            specials.append(text)
    notes = []
    next_id = base_vocab + len(added)
    for text in specials:
        if text not in vocab and text not in added:
            added[text] = next_id
            notes.append("special token %r is not in the vocabulary: transformers adds it as id %d"
                         % (text, next_id))
            next_id += 1
    ids = sorted(added.values())
    if ids != list(range(base_vocab, base_vocab + len(ids))):
        raise ConvertError("tokenizer: added token ids %s are not consecutive from %d"
                           % (ids, base_vocab))
    if WAYPOINT_TOKEN in vocab:
        raise ConvertError("tokenizer: %s is a sentencepiece piece; Orion expects it to be added"
                           % WAYPOINT_TOKEN)
    if WAYPOINT_TOKEN not in added:
        added[WAYPOINT_TOKEN] = base_vocab + len(added)      # = len(tokenizer), as add_tokens does
    else:
        notes.append("%s is already in the tokenizer folder: keeping id %d"
                     % (WAYPOINT_TOKEN, added[WAYPOINT_TOKEN]))
    return base_vocab, added, notes


# ---------------------------------------------------------------------------------------------
# Checkpoint loading.

def load_state_dict(path):
    torch = import_torch("reading %s" % path)
    if not os.path.isfile(path):
        raise ConvertError("checkpoint %s does not exist" % path)
    import pickle
    kwargs = dict(map_location="cpu", weights_only=True)
    try:
        try:
            obj = torch.load(path, mmap=True, **kwargs)      # torch >= 2.1: no 38 GB in RAM
        except TypeError as e:
            if "mmap" not in str(e):
                raise
            obj = torch.load(path, **kwargs)
    except TypeError as e:
        if "weights_only" in str(e):
            raise ConvertError("torch %s is too old: torch.load(weights_only=True) needs torch >= "
                               "1.13; refusing to unpickle %s without it" % (torch.__version__, path))
        raise ConvertError("cannot read checkpoint %s: %s" % (path, e))
    except pickle.UnpicklingError as e:
        raise ConvertError("checkpoint %s holds objects other than tensors and plain containers "
                           "(torch.load weights_only refused them): %s" % (path, e))
    except Exception as e:                                  # zip/EOF/storage errors
        raise ConvertError("cannot read checkpoint %s (truncated or not a PyTorch file?): %s: %s"
                           % (path, type(e).__name__, e))
    sd = obj
    if isinstance(obj, dict) and isinstance(obj.get("state_dict"), dict):
        sd = obj["state_dict"]
    if not isinstance(sd, dict):
        raise ConvertError("checkpoint %s: expected a dict (state dict, or a dict with key "
                           "'state_dict'), got %s" % (path, type(sd).__name__))
    tensors = {k: v for k, v in sd.items() if isinstance(k, str) and isinstance(v, torch.Tensor)}
    if not tensors:
        raise ConvertError("checkpoint %s: no tensors in the state dict" % path)
    if all(k.startswith("module.") for k in tensors):      # saved from a DataParallel wrapper
        tensors = {k[len("module."):]: v for k, v in tensors.items()}
    return tensors


# ---------------------------------------------------------------------------------------------
# Expected layout.

def read_text_config(llm_dir):
    p = os.path.join(llm_dir, "config.json")
    if not os.path.isfile(p):
        raise ConvertError("missing config.json in %s" % llm_dir)
    cfg = _read_json(p, "LLM config")
    if not isinstance(cfg, dict):
        raise ConvertError("%s: expected a JSON object" % p)
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"):
        if not isinstance(cfg.get(key), int) or cfg[key] <= 0:
            raise ConvertError("%s: %s must be a positive integer (got %r)" % (p, key, cfg.get(key)))
    text = dict(cfg)
    text.setdefault("num_key_value_heads", cfg["num_attention_heads"])
    text.setdefault("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    text.setdefault("rope_theta", 10000.0)
    text.setdefault("hidden_act", "silu")
    text.setdefault("max_position_embeddings", 2048)
    if "rms_norm_eps" not in cfg:
        warn("%s has no rms_norm_eps: using LlamaConfig's default 1e-6" % p)
        text["rms_norm_eps"] = 1e-6
    if text["num_key_value_heads"] is None:
        text["num_key_value_heads"] = cfg["num_attention_heads"]
    if cfg["num_attention_heads"] % text["num_key_value_heads"]:
        raise ConvertError("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d"
                           % (p, cfg["num_attention_heads"], text["num_key_value_heads"]))
    if text["hidden_act"] != "silu":
        raise ConvertError("%s: hidden_act %r (only silu is supported)" % (p, text["hidden_act"]))
    if text.get("rope_scaling"):
        warn("%s sets rope_scaling %r: recorded, check the runtime supports it"
             % (p, text["rope_scaling"]))
    if text.get("pretraining_tp", 1) != 1:
        warn("%s: pretraining_tp=%r only changes the summation order in transformers"
             % (p, text["pretraining_tp"]))
    if text.get("attention_bias") or text.get("mlp_bias"):
        raise ConvertError("%s: attention/mlp biases are not part of the Orion LLM" % p)
    return text


def llm_shapes(text, vocab_rows):
    """{checkpoint-relative name: shape} for the LLaMA weights (peft base names resolved later)."""
    h, i = text["hidden_size"], text["intermediate_size"]
    q_out = text["num_attention_heads"] * text["head_dim"]
    kv_out = text["num_key_value_heads"] * text["head_dim"]
    shapes = {"model.embed_tokens.weight": (vocab_rows, h), "model.norm.weight": (h,)}
    proj = {"q_proj": (q_out, h), "k_proj": (kv_out, h), "v_proj": (kv_out, h), "o_proj": (h, q_out)}
    for n in range(text["num_hidden_layers"]):
        p = "model.layers.%d." % n
        for name, shape in proj.items():
            shapes[p + "self_attn.%s.weight" % name] = shape
        shapes[p + "mlp.gate_proj.weight"] = (i, h)
        shapes[p + "mlp.up_proj.weight"] = (i, h)
        shapes[p + "mlp.down_proj.weight"] = (h, i)
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
    return shapes


def planner_shapes(hp):
    """{original name: shape} of the planner from its hyperparameters (see orion.py / distributions.py)."""
    c, lat, L, g, m = hp["in_channels"], hp["latent_dim"], hp["gru_layers"], hp["gru_hidden"], \
        hp["ego_fut_mode"]
    comp = hp["compress_dim"]
    s = {}
    enc = "present_distribution.encoder."
    for name, (o, i) in (("conv1", (2 * c, c)), ("conv2", (2 * c, 2 * c)), ("conv3", (comp, 2 * c))):
        s[enc + name + ".weight"], s[enc + name + ".bias"] = (o, i, 1), (o,)
    s["present_distribution.last_conv.1.weight"] = (2 * lat, comp, 1)
    s["present_distribution.last_conv.1.bias"] = (2 * lat,)
    for k in range(L):
        s["predict_model.gru.weight_ih_l%d" % k] = (3 * g, lat if k == 0 else g)
        s["predict_model.gru.weight_hh_l%d" % k] = (3 * g, g)
        s["predict_model.gru.bias_ih_l%d" % k] = (3 * g,)
        s["predict_model.gru.bias_hh_l%d" % k] = (3 * g,)
    for name, (o, i) in (("linear1", (2 * g, g)), ("linear2", (4 * g, 2 * g)),
                         ("linear3", (hp["out_channels"], 4 * g))):
        s["predict_model.%s.weight" % name], s["predict_model.%s.bias" % name] = (o, i), (o,)
    d = hp["decoder_in"]
    for idx, (o, i) in ((0, (d, d)), (2, (d, d)), (4, (2 * m, d))):
        s["ego_fut_decoder.%d.weight" % idx], s["ego_fut_decoder.%d.bias" % idx] = (o, i), (o,)
    return s


def shape_of(sd, key):
    t = sd.get(key)
    return None if t is None else tuple(t.shape)


def require(sd, key, shape, what):
    got = shape_of(sd, key)
    if got is None:
        raise ConvertError("missing %s key %s (expected shape %s)" % (what, key, list(shape)))
    if got != tuple(shape):
        raise ConvertError("wrong shape for %s: got %s, expected %s" % (key, list(got), list(shape)))


def planner_hyperparameters(sd, model_cfg, hidden):
    """Planner hyperparameters: agent config where it has them, checkpoint shapes otherwise."""
    def need(key):
        if key not in sd:
            raise ConvertError("missing planner key %s" % key)
        return tuple(sd[key].shape)

    last = need("present_distribution.last_conv.1.weight")
    dec_out = need("ego_fut_decoder.4.weight")
    layers = 0
    while "predict_model.gru.weight_ih_l%d" % layers in sd:
        layers += 1
    if layers == 0:
        raise ConvertError("missing planner key predict_model.gru.weight_ih_l0")

    ck = {"latent_dim": last[0] // 2, "ego_fut_mode": dec_out[0] // 2}
    hp = {"type": "vae_gru", "in_channels": hidden, "out_channels": hidden,
          "compress_dim": hidden // 2, "decoder_in": 2 * hidden}
    # Hard-coded in the original VAE branch; the agent config may still name them.
    for key, cfg_key in (("latent_dim", "latent_dim"), ("ego_fut_mode", "ego_fut_mode")):
        v = cfg_get(model_cfg, cfg_key)
        if v is not None and v != ck[key]:
            raise ConvertError("agent config and checkpoint disagree: model.%s = %r but the "
                               "checkpoint's planner has %s = %d" % (cfg_key, v, key, ck[key]))
        hp[key] = ck[key]
    hp["gru_layers"] = layers
    if hidden % layers:
        raise ConvertError("planner: LLM hidden size %d is not divisible by the %d GRU layers "
                           "(h0 = feature.reshape(layers, hidden/layers))" % (hidden, layers))
    hp["gru_hidden"] = hidden // layers
    hp["gru_input"] = hp["latent_dim"]
    fut_ts = cfg_get(model_cfg, "fut_ts", 6)
    if fut_ts != 6:
        warn("agent config fut_ts=%r, but Orion.simple_test_pts forces fut_ts = 6: using 6" % fut_ts)
    hp["fut_ts"] = 6
    hp.update({
        "encoder_widths": [2 * hidden, 2 * hidden, hidden // 2],
        "predict_widths": [2 * hp["gru_hidden"], 4 * hp["gru_hidden"], hidden],
        "decoder_widths": [2 * hidden, 2 * hidden, 2 * hp["ego_fut_mode"]],
        "min_log_sigma": -5.0, "max_log_sigma": 5.0,
        "activation": "relu",
        "gru_gate_order": "r,z,n",
        "waypoint_dim": 2,
    })
    return hp


def vision_token_groups(sd, model_cfg, hidden):
    """[det scene tokens, history tokens, can-bus token, map scene tokens], cross-checked."""
    det = model_cfg.get("pts_bbox_head") if isinstance(model_cfg.get("pts_bbox_head"), dict) else {}
    mp = model_cfg.get("map_head") if isinstance(model_cfg.get("map_head"), dict) else {}
    for where, head, prefix in (("pts_bbox_head", det, "pts_bbox_head."), ("map_head", mp, "map_head.")):
        out_dims = cfg_get(head, "out_dims", 4096, where)
        if out_dims != hidden:
            raise ConvertError("agent config and checkpoint disagree: model.%s.out_dims = %r but the "
                               "LLM hidden size is %d" % (where, out_dims, hidden))
        rows = shape_of(sd, prefix + "output_projection.weight")
        if rows is not None and rows[0] != hidden:
            raise ConvertError("checkpoint %soutput_projection.weight has %d rows, LLM hidden size "
                               "is %d" % (prefix, rows[0], hidden))

    def count(head, where, cfg_key, key, default):
        cfg_v = cfg_get(head, cfg_key, None, where)
        ck = shape_of(sd, key)
        ck_v = ck[0] if ck else None
        if cfg_v is not None and ck_v is not None and cfg_v != ck_v:
            raise ConvertError("agent config and checkpoint disagree: model.%s.%s = %r but %s has "
                               "%d rows" % (where, cfg_key, cfg_v, key, ck_v))
        return ck_v if ck_v is not None else (cfg_v if cfg_v is not None else default)

    return [count(det, "pts_bbox_head", "num_extra", "pts_bbox_head.query_embedding.weight", 256),
            count(det, "pts_bbox_head", "num_memory", "pts_bbox_head.memory_query.weight", 16),
            1,
            count(mp, "map_head", "num_extra", "map_head.query_embedding.weight", 256)]


# ---------------------------------------------------------------------------------------------
# Building the output tensor list.

class OutTensor:
    __slots__ = ("name", "dtype", "shape", "make")

    def __init__(self, name, dtype, shape, make):
        self.name, self.dtype, self.shape, self.make = name, dtype, tuple(shape), make

    @property
    def nbytes(self):
        n = 2 if self.dtype == "BF16" else 4
        for d in self.shape:
            n *= d
        return n


def plan_outputs(sd, args, text, hp, vocab_rows):
    """Validate every expected key and return (list of OutTensor, lora info, consumed keys)."""
    import torch
    out_dt = "BF16" if args.dtype == "bf16" else "F32"
    consumed = set()
    outs = []

    def plain(src, dst, squeeze=False):
        def make():
            t = sd[src].detach().to(torch.float32)
            return t.reshape(t.shape[:-1]) if squeeze else t
        shape = shape_of(sd, src)
        outs.append(OutTensor(dst, out_dt, shape[:-1] if squeeze else shape, make))
        consumed.add(src)

    shapes = llm_shapes(text, vocab_rows)
    lora_keys = [k for k in sd if k.startswith(LLM_PREFIX) and ".lora_" in k]
    has_lora = bool(lora_keys)
    use_lora_cfg = cfg_get(args.model_cfg, "use_lora", False)
    if bool(use_lora_cfg) != has_lora:
        raise ConvertError("agent config and checkpoint disagree: model.use_lora = %r but the "
                           "checkpoint %s LoRA weights" % (use_lora_cfg,
                                                          "has" if has_lora else "has no"))
    r = None
    if has_lora:
        a0 = LLM_PREFIX + "model.layers.0.self_attn.q_proj.lora_A.default.weight"
        if a0 not in sd:
            raise ConvertError("missing LoRA key %s" % a0)
        r = sd[a0].shape[0]
    alpha = args.lora_alpha if args.lora_alpha is not None else ORIG_LORA_ALPHA
    scale = alpha / r if has_lora else None

    for name, shape in shapes.items():
        parts = name.rsplit(".", 2)
        proj = parts[-2] if name.startswith("model.layers.") else None
        if proj in LORA_TARGETS:
            mod = LLM_PREFIX + name[:-len(".weight")]
            base = mod + ".base_layer.weight"
            if base not in sd and mod + ".weight" in sd:
                base = mod + ".weight"                      # peft < 0.7 kept the plain name
            require(sd, base, shape, "LLM")
            consumed.add(base)
            if not has_lora:
                plain(base, name)
                continue
            ka, kb = mod + ".lora_A.default.weight", mod + ".lora_B.default.weight"
            require(sd, ka, (r, shape[1]), "LoRA")
            require(sd, kb, (shape[0], r), "LoRA")
            consumed.update((ka, kb))
            if args.lora == "merge":
                def make(base=base, ka=ka, kb=kb):
                    w = sd[base].detach().to(torch.float32)
                    a = sd[ka].detach().to(torch.float32)
                    b = sd[kb].detach().to(torch.float32)
                    return w + torch.matmul(b, a) * scale
                outs.append(OutTensor(name, out_dt, shape, make))
            else:
                plain(base, name)
                stem = name[:-len(".weight")]
                for src, suffix, shp in ((ka, "lora_A", (r, shape[1])), (kb, "lora_B", (shape[0], r))):
                    outs.append(OutTensor("%s.%s.weight" % (stem, suffix), "F32", shp,
                                          lambda src=src: sd[src].detach().to(torch.float32)))
        else:
            key = LLM_PREFIX + name
            require(sd, key, shape, "LLM")
            plain(key, name)

    head_key = LLM_PREFIX + "lm_head.weight"
    if args.keep_lm_head:
        require(sd, head_key, (vocab_rows, text["hidden_size"]), "LLM")
        plain(head_key, "lm_head.weight")
    elif head_key in sd:
        consumed.add(head_key)
        log("not written: %s (the vocabulary projection is never evaluated; --keep-lm-head "
            "writes it)" % head_key)

    # Anything else under the LLM prefix is a format we do not understand (DoRA, biases, ...).
    skip_non_weight_buffers(sd, LLM_PREFIX, consumed)
    for k in sorted(sd):
        if k.startswith(LLM_PREFIX) and k not in consumed:
            raise ConvertError("unexpected LLM key %s (not part of a LLaMA + LoRA(q,k,v,o) model)" % k)

    for name, shape in planner_shapes(hp).items():
        require(sd, name, shape, "planner")
        plain(name, "planner." + name, squeeze=len(shape) == 3)
    for k in sorted(sd):
        if k.split(".", 1)[0] in PLANNER_MODULES and k not in consumed:
            raise ConvertError("unexpected planner key %s" % k)

    lora = None
    if has_lora:
        lora = {"r": r, "alpha": alpha, "scale": scale, "merged": args.lora == "merge",
                "targets": list(LORA_TARGETS),
                "alpha_source": "--lora-alpha" if args.lora_alpha is not None
                else "Orion mmcv/utils/misc.py::load_model (lora_alpha=16)"}
        if r != ORIG_LORA_R:
            warn("LoRA rank %d differs from the original code's r=%d; scale alpha/r = %g/%d"
                 % (r, ORIG_LORA_R, alpha, r))
    return outs, lora, consumed


def plan_front_end(sd, args, outs, consumed):
    """Append the camera front end's tensors (front_end.py) to outs; its config.json entry or None."""
    import torch
    chosen = front_end.select(sd, args.front_end, lambda a, b: a.shape == b.shape and torch.equal(a, b),
                              ConvertError, log, warn)
    if chosen is None:
        return None
    written, dropped = chosen
    out_dt = "BF16" if args.dtype == "bf16" else "F32"
    for src, dst, part in written:
        outs.append(OutTensor(dst, out_dt if part == "vit" else "F32", shape_of(sd, src),
                              lambda src=src: sd[src].detach().to(torch.float32)))
        consumed.add(src)
    consumed.update(dropped)
    front_end.report(written, dropped, log)
    return front_end.config(sd, args.model_cfg, shape_of, cfg_get,
                            lambda k: [float(v) for v in sd[k].detach().to(torch.float64).reshape(-1).tolist()])


# ---------------------------------------------------------------------------------------------
# safetensors writer.

def tensor_bytes(t, dtype):
    import torch
    t = t.detach().to(torch.float32).contiguous()
    if dtype == "BF16":
        return t.to(torch.bfloat16).view(torch.int16).numpy().tobytes()   # round to nearest even
    return t.numpy().tobytes()


def write_safetensors(path, tensors):
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for t in tensors:
        header[t.name] = {"dtype": t.dtype, "shape": list(t.shape),
                          "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-(len(raw) + 8) % 8)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        for t in tensors:
            data = tensor_bytes(t.make(), t.dtype)
            if len(data) != t.nbytes:
                raise ConvertError("internal: %s produced %d bytes, expected %d"
                                   % (t.name, len(data), t.nbytes))
            f.write(data)


def shard(tensors, max_bytes):
    shards, cur, cur_bytes = [], [], 0
    for t in sorted(tensors, key=lambda t: t.name):
        if cur and cur_bytes + t.nbytes > max_bytes:
            shards.append(cur)
            cur, cur_bytes = [], 0
        cur.append(t)
        cur_bytes += t.nbytes
    if cur:
        shards.append(cur)
    return shards


# ---------------------------------------------------------------------------------------------

def summarize_skipped(sd, consumed):
    groups = {}
    for k, t in sd.items():
        if k in consumed:
            continue
        head = k.split(".", 1)[0]
        n, c = groups.get(head, (0, 0))
        groups[head] = (n + 1, c + t.numel())
    if groups:
        log("skipped (not part of the model as written), by prefix:")
        for head in sorted(groups):
            n, c = groups[head]
            log("  %-28s %6d tensors %14d params" % (head + ".*", n, c))


def prepare_out_dir(out, force):
    if os.path.exists(out) and not os.path.isdir(out):
        raise ConvertError("--out %s exists and is not a directory" % out)
    if os.path.isdir(out) and os.listdir(out):
        if not force:
            raise ConvertError("--out %s is not empty (use --force to overwrite)" % out)
        for name in os.listdir(out):
            if name.startswith("model") and (name.endswith(".safetensors")
                                             or name.endswith(".safetensors.index.json")):
                os.remove(os.path.join(out, name))
    os.makedirs(out, exist_ok=True)


def convert(args):
    if sys.byteorder != "little":
        raise ConvertError("this converter writes little-endian data and must run on a "
                           "little-endian machine")
    report_interpreter()
    _, model_cfg = read_agent_config(args.agent_config)
    args.model_cfg = model_cfg
    if cfg_get(model_cfg, "use_gen_token", False) is not True:
        raise ConvertError("agent config: model.use_gen_token is not True; only the <waypoint_ego> "
                           "+ VAE planner variant of Orion is supported")
    for key in ("use_diff_decoder", "use_mlp_decoder"):
        if cfg_get(model_cfg, key, False):
            raise ConvertError("agent config: model.%s = True; only the VAE planner is supported" % key)
    if args.lora == "keep" and args.dtype != "fp32":
        warn("--lora keep: lora_A/lora_B are written as F32, the base weights as BF16")

    text = read_text_config(args.llm_dir)
    base_vocab, added, notes = plan_tokenizer(args.llm_dir)
    for n in notes:
        log("note: " + n)
    sd = load_state_dict(args.checkpoint)

    emb_key = LLM_PREFIX + "model.embed_tokens.weight"
    emb = shape_of(sd, emb_key)
    if emb is None:
        raise ConvertError("missing LLM key %s" % emb_key)
    vocab_rows = emb[0]
    require(sd, emb_key, (vocab_rows, text["hidden_size"]), "LLM")
    n_tok = base_vocab + len(added)
    if vocab_rows != n_tok:
        raise ConvertError("tokenizer and checkpoint disagree: the tokenizer has %d tokens "
                           "(%d pieces + %d added, %s = %d) but %s has %d rows"
                           % (n_tok, base_vocab, len(added), WAYPOINT_TOKEN,
                              added[WAYPOINT_TOKEN], emb_key, vocab_rows))
    if text.get("vocab_size") not in (None, base_vocab, vocab_rows):
        warn("config.json vocab_size %r is neither the sentencepiece size %d nor the embedding "
             "rows %d" % (text.get("vocab_size"), base_vocab, vocab_rows))

    hidden = text["hidden_size"]
    hp = planner_hyperparameters(sd, model_cfg, hidden)
    groups = vision_token_groups(sd, model_cfg, hidden)
    outs, lora, consumed = plan_outputs(sd, args, text, hp, vocab_rows)
    front = plan_front_end(sd, args, outs, consumed)
    summarize_skipped(sd, consumed)

    prepare_out_dir(args.out, args.force)
    shards = shard(outs, args.max_shard_size)
    total = sum(t.nbytes for t in outs)
    if len(shards) == 1:
        write_safetensors(os.path.join(args.out, "model.safetensors"), shards[0])
        log("wrote model.safetensors (%d tensors, %d bytes)" % (len(outs), total))
    else:
        weight_map = {}
        for i, group in enumerate(shards):
            fname = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
            write_safetensors(os.path.join(args.out, fname), group)
            weight_map.update({t.name: fname for t in group})
            log("wrote %s (%d tensors)" % (fname, len(group)))
        index = {"metadata": {"total_size": total},
                 "weight_map": {k: weight_map[k] for k in sorted(weight_map)}}
        with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=2)
            f.write("\n")

    for name in TOKENIZER_FILES:
        src = os.path.join(args.llm_dir, name)
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(args.out, name))
        elif name != "tokenizer.model":
            warn("%s has no %s; not copied" % (args.llm_dir, name))
    if os.path.isfile(os.path.join(args.llm_dir, "tokenizer.json")):
        warn("tokenizer.json (fast tokenizer) not copied: Orion uses the slow sentencepiece "
             "tokenizer and tokenizer.json would lack %s" % WAYPOINT_TOKEN)
    with open(os.path.join(args.out, "added_tokens.json"), "w") as f:
        json.dump(dict(sorted(added.items(), key=lambda kv: kv[1])), f, indent=2)
        f.write("\n")

    text_config = dict(text)
    text_config["vocab_size"] = vocab_rows
    text_config["base_vocab_size"] = base_vocab
    config = {
        "model_type": "orion",
        "vlahybrid_format": FORMAT_VERSION,
        "dtype": "bfloat16" if args.dtype == "bf16" else "float32",
        "text_config": text_config,
        "lora": lora,
        "planner": hp,
        "vision_tokens": sum(groups),
        "vision_token_groups": groups,
        "front_end": front,
        "prompt": {"text": PROMPT_TEXT, "image_marker": "<image>", "image_token_index": -200,
                   "add_bos": True, "readout_token": WAYPOINT_TOKEN},
        "special_tokens": {WAYPOINT_TOKEN: added[WAYPOINT_TOKEN]},
        "lm_head": bool(args.keep_lm_head),
        "source": {"checkpoint": os.path.basename(args.checkpoint),
                   "llm_dir": os.path.basename(os.path.normpath(args.llm_dir)),
                   "agent_config": os.path.basename(args.agent_config),
                   "llm_path": cfg_get(model_cfg, "lm_head")},
    }
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    log("wrote %s: %d tensors, %d bytes, %d shard(s)" % (args.out, len(outs), total, len(shards)))
    weights = "BF16" if args.dtype == "bf16" else "F32"
    if lora is None:
        lora_text = "none"
    elif args.lora == "merge":
        lora_text = "merged into q/k/v/o (rounded to %s)" % weights
    else:
        lora_text = "kept apart (F32 factors)"
    at_parity = args.dtype == "fp32" and (lora is None or args.lora == "keep")
    report_numerics("doc/orion-converter.md", weights, lora_text,
                    None if at_parity else "--dtype fp32" + (" --lora keep" if lora else ""))

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True, help="Orion.pth")
    p.add_argument("--llm-dir", required=True, help="pretrain_qformer/ folder")
    p.add_argument("--agent-config", required=True, help="orion_stage3_agent.py")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    p.add_argument("--lora", choices=("merge", "keep"), default="merge")
    p.add_argument("--lora-alpha", type=float, default=None,
                   help="override lora_alpha (default 16, as in Orion's misc.py::load_model)")
    p.add_argument("--keep-lm-head", action="store_true", help="also write lm_head.weight")
    p.add_argument("--front-end", choices=("auto", "yes", "no"), default="auto",
                   help="the camera front end: written when whole (auto), required (yes), left out (no)")
    p.add_argument("--max-shard-size", type=int, default=DEFAULT_MAX_SHARD_BYTES,
                   help="bytes per shard (default 5e9)")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out")
    args = p.parse_args(argv)
    if args.max_shard_size <= 0:
        p.error("--max-shard-size must be positive")
    if args.lora_alpha is not None and args.lora_alpha <= 0:
        p.error("--lora-alpha must be positive")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        convert(args)
    except ConvertError as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
