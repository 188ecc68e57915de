#!/usr/bin/env python3
"""Convert a MindDrive (xiaomi-mlab/MindDrive) checkpoint into vlahybrid's MindDrive format.

Inputs, exactly what a MindDrive user has:
  --checkpoint minddrive_rltrain.pth    PyTorch pickle: {"state_dict": {...}, ...} or the state dict
  --llm-dir llava-qwen2-0.5b/           Qwen2 config.json + tokenizer.json (+ tokenizer_config.json ...)
  --infer-config minddrive_qwen2_05B_infer.py   mmcv-style python config; parsed with `ast`, never run

Output folder (documented field by field in doc/minddrive-converter.md):
  model.safetensors, or model-0000k-of-0000n.safetensors + model.safetensors.index.json
  config.json, tokenizer.json (with MindDrive's 15 added tokens), tokenizer_config.json,
  special_tokens_map.json / vocab.json / merges.txt when present, added_tokens.json

The LLM (Qwen2 with two LoRA experts on q/k/v/o), the two VAE+GRU planners and, when the checkpoint
holds it whole, the camera front end (img_backbone, position_encoder, the shared query_pos /
time_embedding / ego_pose_pe, pts_bbox_head, map_head: each value once, as Orion's converter writes
it, tools/orion/front_end.py) are written; the training-only modules, the agent-forecast modules and
the RL value net are skipped and listed. --front-end no leaves the front end out (the model then
runs from precomputed vision tokens), --front-end yes refuses a checkpoint without a whole one.

Facts about the released code this relies on (github.com/xiaomi-mlab/MindDrive @ 1a4085d):
  - mmcv/utils/misc.py::load_model: LoraConfig(r=16, lora_alpha=16, q/k/v/o_proj), adapter
    "action_expert" by get_peft_model, then add_adapter("decision_expert"); never merged.
  - mmcv/models/detectors/minddrive.py::Minddrive.__init__ (use_meta_action, use_gen_token,
    is_decoupling): add_special_token(13 meta-action tokens), then (<waypoint_ego>), then
    (<path_waypoint_ego>); each is tokenizer.add_tokens(..., special_tokens=True) followed by
    resize_token_embeddings(len(tokenizer)). Speed planner present_distribution / predict_model /
    ego_fut_decoder with 7 modes, path planner pw_* with 6 modes; latent 32, layer_dim 4,
    log-sigma clamp [-5, 5].
  - simple_test_pts: the round holding a meta-action token runs under set_adapter("decision_expert")
    and reads the logits at position -2 over the 7 speed tokens; the round holding the waypoint
    tokens runs under "action_expert"; fut_ts forced to 6, the path planner runs fut_ps (20) steps;
    the path mode is PA_MAPPING[PATH_MAPPING[argmax(ego_fut_cmd)]].
  - the camera front end is Orion's (minddrive.py's extract_img_feat / position_embeding,
    MinddriveHead / MinddriveHeadM: the token path is orion_head.py's), with the heads' out_dims the
    Qwen hidden size: llava_arch.py only reshapes the 529 vision tokens to hidden_size, no
    projector. MinddriveHead adds forecast-only modules (pos_mlp_sa; 0.5B: lane_encoder,
    motion_map_decoder, pos_mlp), not written.
  - mmcv/datasets/pipelines/transforms_3d.py::LoadAnnoatationMixCriticalVQATest and
    data_utils.py::preprocess_qwen2(training_mode=False), conversation.py::conv_llava_qwen_2: the
    two prompts (PROMPT_* below).

Requires Python >= 3.8, torch >= 1.13 (torch.load(weights_only=True)) and numpy (torch's
Tensor.numpy writes the bytes). Shares the mmcv-config reader, the checkpoint loader, the
non-weight buffers, the interpreter report and the planner shapes with tools/orion/convert_orion.py
(imported from the sibling folder).
"""
import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "orion"))
import convert_orion as orion  # noqa: E402  (the Orion converter: same mmcv / peft conventions)
import front_end  # noqa: E402  (tools/orion/front_end.py: the camera front end, the same as Orion's)

ConvertError = orion.ConvertError
log, warn, cfg_get, require, shape_of = orion.log, orion.warn, orion.cfg_get, orion.require, orion.shape_of

FORMAT_VERSION = 1
DEFAULT_MAX_SHARD_BYTES = 5 * 1000 ** 3
LLM_PREFIX = "lm_head.base_model.model."       # Minddrive.lm_head is the peft PeftModelForCausalLM
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
BIASED = ("q_proj", "k_proj", "v_proj")          # Qwen2Attention: bias on q/k/v, not on o
EXPERTS = ("decision_expert", "action_expert")
ORIG_LORA_R, ORIG_LORA_ALPHA = 16, 16            # misc.py::load_model

# constants.py; the order of Minddrive.__init__'s add_special_token calls.
SPEED_TOKENS = ["<maintain_moderate_speed>", "<stop>", "<maintain_slow_speed>", "<speed_up>",
                "<slow_down>", "<maintain_fast_speed>", "<slow_down_rapidly>"]
PATH_TOKENS = ["<lanefollow>", "<straight>", "<turn_left>", "<change_lane_left>", "<turn_right>",
               "<change_lane_right>"]
META_ACTION_TOKENS = SPEED_TOKENS + PATH_TOKENS
WAYPOINT_TOKEN, PATH_WAYPOINT_TOKEN = "<waypoint_ego>", "<path_waypoint_ego>"
ADDED_TOKENS = META_ACTION_TOKENS + [WAYPOINT_TOKEN, PATH_WAYPOINT_TOKEN]

# minddrive.py: PATH_MAPPING (argmax of ego_fut_cmd = RoadOption - 1 -> path token) and
# Minddrive.PA_MAPPING (path token -> path planner mode).
PATH_MAPPING = ["<turn_left>", "<turn_right>", "<straight>", "<lanefollow>", "<change_lane_left>",
                "<change_lane_right>"]
PA_MAPPING = {"<lanefollow>": 0, "<straight>": 1, "<turn_left>": 2, "<change_lane_left>": 3,
              "<turn_right>": 4, "<change_lane_right>": 5}
PATH_MODE_OF_COMMAND = [PA_MAPPING[t] for t in PATH_MAPPING]

# conv_llava_qwen_2 (sep "<|im_start|>", sep2 "<|im_end|>\n", roles "<|im_start|>user\n" /
# "<|im_start|>assistant\n") as preprocess_qwen2(training_mode=False) writes a round: the system
# block, the human turn with "<image>\n" + "You are driving a car." + question, the assistant
# header, then the answer with no closing <|im_end|>. The answer is tokenised on its own there; the
# text before it ends in "\n", where Qwen's pre-tokenizer always splits, so one string gives the
# same ids.
_SYSTEM = ("<|im_start|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant."
           "<|im_end|>\n")


def _round(question, answer):
    return (_SYSTEM + "<|im_start|>user\n<image>\nYou are driving a car." + question + "<|im_end|>\n"
            + "<|im_start|>assistant\n" + answer)


# The decision answer ends in random.choice(SPEED_SPT); written here as the first speed token
# (the logits are read one position before it, so the choice never matters).
PROMPT_DECISION = _round("What actions should the car be taking?", "The car should be " + SPEED_TOKENS[0])
PROMPT_ACTION = _round("Based on the above information, please provide a safe, executable, and "
                       "reasonable planning trajectory for the ego car.",
                       "Here is the planning trajectory %s %s" % (WAYPOINT_TOKEN, PATH_WAYPOINT_TOKEN))

PLANNERS = (  # (name in the output, checkpoint module prefix, feature token, modes, mode source)
    ("speed", "", WAYPOINT_TOKEN, len(SPEED_TOKENS), "decision"),
    ("path", "pw_", PATH_WAYPOINT_TOKEN, len(PATH_MAPPING), "command"),
)
PLANNER_MODULES = ("present_distribution", "predict_model", "ego_fut_decoder")
COPIED_FILES = ("special_tokens_map.json", "vocab.json", "merges.txt")
MERGE_REFUSED = ("--lora merge is not supported for MindDrive: its decision and action experts are two "
                 "LoRA sets on one base model, and vlahybrid runs them unmerged, both in one pass over "
                 "the shared base weights, so it refuses merged experts (lora.merged must be false). "
                 "Convert with --lora keep (the default); nothing was written")
DTYPES = {"fp32": ("F32", 4, "float32"), "bf16": ("BF16", 2, "bfloat16"), "fp16": ("F16", 2, "float16")}


# ---------------------------------------------------------------------------------------------
# Infer config.

def read_infer_config(path):
    """Top-level assignments (Orion's restricted evaluator) and the checks on `model`."""
    env = _assignments(path)
    model = env.get("model")
    if not isinstance(model, dict):
        raise ConvertError("infer config %s: no top-level `model = dict(...)`" % path)
    if model.get("type") != "Minddrive":
        raise ConvertError("infer config %s: model.type is %r, expected 'Minddrive'"
                           % (path, model.get("type")))
    for key in ("use_gen_token", "use_meta_action", "is_decoupling"):
        if cfg_get(model, key, False) is not True:
            raise ConvertError("infer config: model.%s is not True; only the released MindDrive "
                               "(meta actions, <waypoint_ego> + <path_waypoint_ego>, two planners) "
                               "is supported" % key)
    if cfg_get(model, "qa_pretrain", False):
        raise ConvertError("infer config: model.qa_pretrain = True (no planners run)")
    lm_type = cfg_get(model, "lm_model_type")
    if lm_type not in ("qwen2", "qwen25_3B"):
        raise ConvertError("infer config: model.lm_model_type is %r; only the Qwen models "
                           "('qwen2', 'qwen25_3B') are supported" % (lm_type,))
    check_prompt_pipeline(env)
    return env, model


def _assignments(path):
    import ast
    try:
        with open(path, "r", encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except OSError as e:
        raise ConvertError("cannot read infer config %s: %s" % (path, e.strerror or e))
    except SyntaxError as e:
        raise ConvertError("infer config %s is not valid Python (line %s): %s" % (path, e.lineno, e.msg))
    env = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            value = orion._eval(stmt.value, env)
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    env[target.id] = value
    return env


def check_prompt_pipeline(env):
    """The prompts written to config.json are those of LoadAnnoatationMixCriticalVQATest with the
    released arguments; refuse a pipeline that would build other ones."""
    step = None
    for name in ("inference_only_pipeline", "test_pipeline"):
        for s in env.get(name) or []:
            if isinstance(s, dict) and s.get("type") == "LoadAnnoatationMixCriticalVQATest":
                step = (name, s)
                break
        if step:
            break
    if step is None:
        warn("infer config has no LoadAnnoatationMixCriticalVQATest step: the released prompts "
             "are assumed")
        return
    where, s = step
    want = {"conv_template": "llava_qwen2", "use_meta_action": True, "is_decoupling": True,
            "use_gen_token": True, "single": True}
    for key, value in want.items():
        got = cfg_get(s, key, None, where)
        if got != value:
            raise ConvertError("infer config: %s's LoadAnnoatationMixCriticalVQATest has %s=%r; the "
                               "converter writes the prompts of %s=%r" % (where, key, got, key, value))
    for key in ("desc_qa", "planning_qa_command"):
        if cfg_get(s, key, False, where):
            raise ConvertError("infer config: %s's LoadAnnoatationMixCriticalVQATest has %s=True, "
                               "which adds rounds the converter does not write" % (where, key))


# ---------------------------------------------------------------------------------------------
# Tokenizer: the ids the 15 tokens get, replaying transformers' add_tokens bookkeeping.

def read_tokenizer_json(llm_dir):
    p = os.path.join(llm_dir, "tokenizer.json")
    if not os.path.isfile(p):
        raise ConvertError("missing tokenizer.json in %s (the Qwen2 tokenizer)" % llm_dir)
    tok = orion._read_json(p, "tokenizer")
    model = tok.get("model") if isinstance(tok, dict) else None
    if not isinstance(model, dict) or not isinstance(model.get("vocab"), dict) \
            or not isinstance(tok.get("added_tokens", []), list):
        raise ConvertError("%s is not a Hugging Face tokenizer.json (no model.vocab / added_tokens)" % p)
    for t in tok.get("added_tokens", []):
        if not isinstance(t, dict) or not isinstance(t.get("content"), str) \
                or not isinstance(t.get("id"), int):
            raise ConvertError("%s: malformed added_tokens entry %r" % (p, t))
    return tok


def plan_tokenizer(tok, tok_cfg):
    """Returns (base_len, ids {token: id} for the 15, notes).

    Slow tokenizer (transformers 4.45, use_fast=False as Minddrive loads it), per token:
    already an added token -> kept; in the vocabulary -> that id; else len(vocab ∪ added) + k.
    tokenizers (Rust) gives a new token max(added id) + 1 (or the model vocab size): the two
    agree unless the ids have holes, which is refused.
    """
    vocab = tok["model"]["vocab"]
    added = {t["content"]: t["id"] for t in tok.get("added_tokens", [])}
    for sid, entry in ((tok_cfg or {}).get("added_tokens_decoder") or {}).items():
        text = orion._token_text(entry)
        if text is None:
            continue
        if added.get(text, vocab.get(text)) != int(sid):
            raise ConvertError("tokenizer_config.json's added_tokens_decoder has %r as id %s, "
                               "tokenizer.json %s" % (text, sid, "does not list it" if text not in added
                                                      else "has id %d" % added[text]))
    names = set(vocab) | set(added)
    base_len = len(names)
    rust_ids = set(added.values())
    ids, notes, new = {}, [], 0
    for t in ADDED_TOKENS:
        if t in added:
            ids[t] = added[t]
            notes.append("%s is already an added token of tokenizer.json: keeping id %d" % (t, added[t]))
            continue
        if t in vocab:
            ids[t] = vocab[t]
            notes.append("%s is in the BPE vocabulary: keeping id %d" % (t, vocab[t]))
            continue
        slow = base_len + new
        top = max(rust_ids) if rust_ids else -1
        fast = top + 1 if top >= len(vocab) else len(vocab)
        if slow != fast:
            raise ConvertError("tokenizer: %s would get id %d from transformers' slow tokenizer but "
                               "%d from tokenizers (the vocabulary / added token ids have holes)"
                               % (t, slow, fast))
        ids[t] = slow
        rust_ids.add(slow)
        new += 1
    if len(set(ids.values())) != len(ids):
        raise ConvertError("tokenizer: two of MindDrive's tokens share an id: %s" % ids)
    return base_len, ids, notes


def added_token_entry(content, tid):
    # add_tokens(special_tokens=True) in transformers 4.45 (slow: AddedToken(rstrip=False,
    # lstrip=False, normalized=not special, special=True); fast: tokenizers' add_special_tokens).
    return {"id": tid, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def write_tokenizer_files(args, tok, tok_cfg, ids):
    have = {t["content"] for t in tok.get("added_tokens", [])}
    out_tok = dict(tok)
    entries = list(tok.get("added_tokens", []))
    entries += [added_token_entry(t, ids[t]) for t in ADDED_TOKENS if t not in have]
    out_tok["added_tokens"] = sorted(entries, key=lambda e: e["id"])
    with open(os.path.join(args.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(out_tok, f, indent=2, ensure_ascii=False)
        f.write("\n")
    if tok_cfg is not None:
        cfg = dict(tok_cfg)
        dec = dict(cfg.get("added_tokens_decoder") or {})
        for t in ADDED_TOKENS:
            e = added_token_entry(t, ids[t])
            dec.setdefault(str(ids[t]), {k: e[k] for k in ("content", "lstrip", "normalized",
                                                          "rstrip", "single_word", "special")})
        cfg["added_tokens_decoder"] = dict(sorted(dec.items(), key=lambda kv: int(kv[0])))
        with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, indent=2, ensure_ascii=False)
            f.write("\n")
    for name in COPIED_FILES:
        src = os.path.join(args.llm_dir, name)
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(args.out, name))
    with open(os.path.join(args.out, "added_tokens.json"), "w", encoding="utf-8") as f:
        json.dump({t: ids[t] for t in ADDED_TOKENS}, f, indent=2)
        f.write("\n")


# ---------------------------------------------------------------------------------------------
# LLM layout.

def read_text_config(llm_dir):
    p = os.path.join(llm_dir, "config.json")
    if not os.path.isfile(p):
        raise ConvertError("missing config.json in %s" % llm_dir)
    cfg = orion._read_json(p, "LLM config")
    if not isinstance(cfg, dict):
        raise ConvertError("%s: expected a JSON object" % p)
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"):
        if not isinstance(cfg.get(key), int) or isinstance(cfg.get(key), bool) or cfg[key] <= 0:
            raise ConvertError("%s: %s must be a positive integer (got %r)" % (p, key, cfg.get(key)))
    text = dict(cfg)
    # Qwen2Config defaults (transformers 4.45) where the file is silent.
    if text.get("num_key_value_heads") is None:
        text["num_key_value_heads"] = cfg["num_attention_heads"]
    if text.get("head_dim") is None:
        text["head_dim"] = cfg["hidden_size"] // cfg["num_attention_heads"]
    text.setdefault("rope_theta", 10000.0)
    text.setdefault("rms_norm_eps", 1e-6)
    text.setdefault("hidden_act", "silu")
    text.setdefault("max_position_embeddings", 32768)
    text.setdefault("tie_word_embeddings", False)
    if cfg["num_attention_heads"] % text["num_key_value_heads"]:
        raise ConvertError("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d"
                           % (p, cfg["num_attention_heads"], text["num_key_value_heads"]))
    if text["hidden_act"] != "silu":
        raise ConvertError("%s: hidden_act %r (only silu is supported)" % (p, text["hidden_act"]))
    if text["tie_word_embeddings"] is not True:
        raise ConvertError("%s: tie_word_embeddings is not true; the format reads the speed-token "
                           "logits from embed_tokens (both released Qwen models tie them)" % p)
    if text.get("use_sliding_window"):
        raise ConvertError("%s: use_sliding_window = true is not supported" % p)
    if text.get("rope_scaling"):
        warn("%s sets rope_scaling %r: recorded, check the runtime supports it" % (p, text["rope_scaling"]))
    return text


def llm_shapes(text, vocab_rows):
    """{checkpoint-relative name: shape}; q/k/v/o weights are resolved to peft names later."""
    h, i = text["hidden_size"], text["intermediate_size"]
    q_out = text["num_attention_heads"] * text["head_dim"]
    kv_out = text["num_key_value_heads"] * text["head_dim"]
    shapes = {"model.embed_tokens.weight": (vocab_rows, h), "model.norm.weight": (h,)}
    proj = {"q_proj": (q_out, h), "k_proj": (kv_out, h), "v_proj": (kv_out, h), "o_proj": (h, q_out)}
    for n in range(text["num_hidden_layers"]):
        p = "model.layers.%d." % n
        for name, shape in proj.items():
            shapes[p + "self_attn.%s.weight" % name] = shape
            if name in BIASED:
                shapes[p + "self_attn.%s.bias" % name] = shape[:1]
        shapes[p + "mlp.gate_proj.weight"] = (i, h)
        shapes[p + "mlp.up_proj.weight"] = (i, h)
        shapes[p + "mlp.down_proj.weight"] = (h, i)
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
    return shapes


class OutTensor:
    __slots__ = ("name", "dtype", "size", "shape", "make")

    def __init__(self, name, dtype, shape, make):
        self.name, self.shape, self.make = name, tuple(shape), make
        self.dtype, self.size, _ = DTYPES[dtype]

    @property
    def nbytes(self):
        n = self.size
        for d in self.shape:
            n *= d
        return n


def plan_llm(sd, args, text, vocab_rows):
    """Validate every LLM key; returns (OutTensors, lora info, consumed keys)."""
    import torch
    consumed, outs = set(), []

    def f64(key):
        return sd[key].detach().to(torch.float64)

    def plain(src, dst):
        outs.append(OutTensor(dst, args.dtype, shape_of(sd, src), lambda: f64(src)))
        consumed.add(src)

    adapters = sorted({k.split(".lora_A.")[1].rsplit(".", 1)[0] for k in sd
                       if k.startswith(LLM_PREFIX) and ".lora_A." in k})
    if not adapters:
        raise ConvertError("the checkpoint has no LoRA weights (lora_A.*) under %s; MindDrive's "
                           "two experts are missing" % LLM_PREFIX)
    if sorted(adapters) != sorted(EXPERTS):
        odd = [a for a in adapters if a not in EXPERTS]
        example = next((k for k in sorted(sd) if odd and ".lora_A.%s." % odd[0] in k), None)
        raise ConvertError("LoRA adapters in the checkpoint are %s; expected exactly %s%s"
                           % (adapters, list(EXPERTS), " (e.g. %s)" % example if example else ""))
    a0 = LLM_PREFIX + "model.layers.0.self_attn.q_proj.lora_A.%s.weight" % EXPERTS[0]
    if a0 not in sd:
        raise ConvertError("missing LoRA key %s" % a0)
    r = sd[a0].shape[0]
    alpha = args.lora_alpha if args.lora_alpha is not None else ORIG_LORA_ALPHA
    scale = alpha / r

    for name, shape in llm_shapes(text, vocab_rows).items():
        proj = name.rsplit(".", 2)[-2] if name.startswith("model.layers.") else None
        if proj not in LORA_TARGETS:
            key = LLM_PREFIX + name
            require(sd, key, shape, "LLM")
            plain(key, name)
            continue
        mod = LLM_PREFIX + name.rsplit(".", 1)[0]
        kind = name.rsplit(".", 1)[1]                       # weight or bias
        base = mod + ".base_layer." + kind
        require(sd, base, shape, "LLM")
        consumed.add(base)
        if kind == "bias":                                  # peft bias="none": bias unchanged
            plain(base, name)
            continue
        pairs = {}
        for e in EXPERTS:
            ka, kb = mod + ".lora_A.%s.weight" % e, mod + ".lora_B.%s.weight" % e
            require(sd, ka, (r, shape[1]), "LoRA")
            require(sd, kb, (shape[0], r), "LoRA")
            consumed.update((ka, kb))
            pairs[e] = (ka, kb)
        stem = name[:-len(".weight")]
        plain(base, name)
        for e in EXPERTS:
            ka, kb = pairs[e]
            plain(ka, "%s.lora_A.%s.weight" % (stem, e))
            plain(kb, "%s.lora_B.%s.weight" % (stem, e))

    emb = LLM_PREFIX + "model.embed_tokens.weight"
    head = LLM_PREFIX + "lm_head.weight"
    if head in sd:
        if shape_of(sd, head) != shape_of(sd, emb) or not torch.equal(sd[head], sd[emb]):
            raise ConvertError("%s differs from %s, but config.json ties the embeddings" % (head, emb))
        consumed.add(head)
        log("not written: %s (tied to model.embed_tokens.weight)" % head)
    orion.skip_non_weight_buffers(sd, LLM_PREFIX, consumed)
    for k in sorted(sd):
        if k.startswith(LLM_PREFIX) and k not in consumed:
            raise ConvertError("unexpected LLM key %s (not part of a Qwen2 + two-expert LoRA(q,k,v,o) "
                               "model)" % k)
    if r != ORIG_LORA_R:
        warn("LoRA rank %d differs from the released code's r=%d; scale alpha/r = %g/%d"
             % (r, ORIG_LORA_R, alpha, r))
    lora = {"r": r, "alpha": alpha, "scale": scale, "merged": False,
            "experts": list(EXPERTS), "targets": list(LORA_TARGETS),
            "alpha_source": "--lora-alpha" if args.lora_alpha is not None
            else "MindDrive mmcv/utils/misc.py::load_model (lora_alpha=16)"}
    return outs, lora, consumed


# ---------------------------------------------------------------------------------------------
# Planners.

def planner_hyperparameters(sd, model_cfg, hidden, prefix, modes, fut_ts, token, mode_source):
    def need(key):
        if prefix + key not in sd:
            raise ConvertError("missing planner key %s" % (prefix + key))
        return tuple(sd[prefix + key].shape)

    last = need("present_distribution.last_conv.1.weight")
    dec_out = need("ego_fut_decoder.4.weight")
    layers = 0
    while prefix + "predict_model.gru.weight_ih_l%d" % layers in sd:
        layers += 1
    if layers == 0:
        raise ConvertError("missing planner key %spredict_model.gru.weight_ih_l0" % prefix)
    if dec_out[0] != 2 * modes:
        raise ConvertError("planner %sego_fut_decoder.4.weight has %d rows; the released code has %d "
                           "modes (%d rows)" % (prefix, dec_out[0], modes, 2 * modes))
    if hidden % layers:
        raise ConvertError("planner: LLM hidden size %d is not divisible by the %d GRU layers"
                           % (hidden, layers))
    g = hidden // layers
    return {
        "type": "vae_gru", "in_channels": hidden, "out_channels": hidden,
        "compress_dim": hidden // 2, "decoder_in": 2 * hidden,
        "latent_dim": last[0] // 2, "ego_fut_mode": modes, "fut_ts": fut_ts,
        "gru_layers": layers, "gru_hidden": g, "gru_input": last[0] // 2,
        "encoder_widths": [2 * hidden, 2 * hidden, hidden // 2],
        "predict_widths": [2 * g, 4 * g, hidden],
        "decoder_widths": [2 * hidden, 2 * hidden, 2 * modes],
        "min_log_sigma": -5.0, "max_log_sigma": 5.0, "activation": "relu",
        "gru_gate_order": "r,z,n", "waypoint_dim": 2,
        "feature_token": token, "mode_source": mode_source,
        "source_modules": [prefix + m for m in PLANNER_MODULES],
    }


def plan_planners(sd, args, model_cfg, hidden):
    outs, consumed, planners = [], set(), {}
    fut_ts = cfg_get(model_cfg, "fut_ts", 6)
    if fut_ts != 6:
        warn("infer config fut_ts=%r, but Minddrive.simple_test_pts forces fut_ts = 6: using 6" % fut_ts)
    fut_ps = cfg_get(model_cfg, "fut_ps", 20)
    if not isinstance(fut_ps, int) or fut_ps <= 0:
        raise ConvertError("infer config: model.fut_ps must be a positive integer (got %r)" % (fut_ps,))
    for name, prefix, token, modes, source in PLANNERS:
        hp = planner_hyperparameters(sd, model_cfg, hidden, prefix, modes,
                                     6 if name == "speed" else fut_ps, token, source)
        for key, shape in orion.planner_shapes(hp).items():
            src = prefix + key
            require(sd, src, shape, "planner")
            squeeze = len(shape) == 3                       # Conv1d k=1 -> [out, in]
            out_shape = shape[:-1] if squeeze else shape
            outs.append(OutTensor("planner.%s.%s" % (name, key), args.dtype, out_shape,
                                  lambda src=src, squeeze=squeeze: _planner_tensor(sd, src, squeeze)))
            consumed.add(src)
        for k in sorted(sd):
            if k.split(".", 1)[0] in [prefix + m for m in PLANNER_MODULES] and k not in consumed:
                raise ConvertError("unexpected planner key %s" % k)
        planners[name] = hp
    return outs, planners, consumed


def _planner_tensor(sd, src, squeeze):
    import torch
    t = sd[src].detach().to(torch.float64)
    return t.reshape(t.shape[:-1]) if squeeze else t


# ---------------------------------------------------------------------------------------------
# The heads' width and the camera front end.

HEAD_CLASSES = (("pts_bbox_head", "MinddriveHead", 9), ("map_head", "MinddriveHeadM", 6))


def check_out_dims(sd, model_cfg, hidden, llm_dir):
    """Both heads' out_dims (the infer config's, MinddriveHead's default 4096) and the rows of the
    checkpoint's output projections must be the LLM's hidden size: Minddrive hands the heads' 529
    tokens to the Qwen LLM as they are (llava_arch.py reshapes them to hidden_size; no projector)."""
    why = ("MindDrive feeds the heads' vision tokens to the LLM without a projector, so both heads' "
           "out_dims must equal the LLM's hidden size (896 for Qwen2-0.5B, 2048 for Qwen2.5-3B)")
    src = "%s/config.json hidden_size" % os.path.basename(os.path.normpath(llm_dir))
    for head, cls, _ in HEAD_CLASSES:
        cfg = model_cfg.get(head) if isinstance(model_cfg.get(head), dict) else {}
        out_dims = cfg_get(cfg, "out_dims", 4096, head)
        if out_dims != hidden:
            raise ConvertError("infer config: model.%s.out_dims = %r%s, but the LLM's hidden size (%s) is %d: "
                               "%s" % (head, out_dims, "" if "out_dims" in cfg else " (%s's default)" % cls,
                                       src, hidden, why))
    for key in ("pts_bbox_head.output_projection.weight", "pts_bbox_head.can_bus_embed.2.weight",
                "map_head.output_projection.weight"):
        rows = shape_of(sd, key)
        if rows is not None and rows[0] != hidden:
            raise ConvertError("checkpoint: %s has %d rows (its head's out_dims), but the LLM's hidden size "
                               "(%s) is %d: %s" % (key, rows[0], src, hidden, why))


def check_classifiers(sd, model_cfg):
    """The heads score their queries by sigmoid (the released configs' FocalLoss(use_sigmoid=True):
    cls_out_channels = num_classes), as the library does; MinddriveHead(M)'s default loss_cls is
    CrossEntropyLoss(use_sigmoid=False), a softmax over num_classes + 1 with a background class."""
    for head, cls, classes in HEAD_CLASSES:
        cfg = model_cfg.get(head) if isinstance(model_cfg.get(head), dict) else {}
        loss = cfg.get("loss_cls")
        # mmdet's FocalLoss is sigmoid unless told otherwise, CrossEntropyLoss softmax
        sigmoid = cfg_get(loss, "use_sigmoid", loss.get("type") == "FocalLoss", head + ".loss_cls") \
            if isinstance(loss, dict) else False
        if sigmoid is not True:
            raise ConvertError("infer config: model.%s.loss_cls %s: the head's classifier is then a softmax "
                               "over num_classes + 1 with a background class, but the front end scores "
                               "its queries by sigmoid, as the released configs' FocalLoss(use_sigmoid="
                               "True) builds it" % (head, "sets use_sigmoid=%r" % (sigmoid,)
                                                    if isinstance(loss, dict) else
                                                    "is not set (%s's default is CrossEntropyLoss("
                                                    "use_sigmoid=False))" % cls))
        n = cfg_get(cfg, "num_classes", classes, head)
        key = head + ".cls_branches.0.6.weight"
        rows = shape_of(sd, key)
        if rows is not None and rows[0] != n:
            raise ConvertError("infer config and checkpoint disagree: model.%s.num_classes = %r (sigmoid "
                               "scores, one a class) but %s has %d rows" % (head, n, key, rows[0]))


def plan_front_end(sd, args, model_cfg, outs, consumed):
    """Append the camera front end's tensors (tools/orion/front_end.py, as Orion's converter writes
    them: the ViT in --dtype, the rest F32) to outs; its config.json entry, or None."""
    import torch
    chosen = front_end.select(sd, args.front_end, lambda a, b: a.shape == b.shape and torch.equal(a, b),
                              ConvertError, log, warn, detector="Minddrive")
    if chosen is None:
        return None
    check_classifiers(sd, model_cfg)
    written, dropped = chosen
    for src, dst, part in written:
        outs.append(OutTensor(dst, args.dtype if part == "vit" else "fp32", shape_of(sd, src),
                              lambda src=src: sd[src].detach().to(torch.float64)))
        consumed.add(src)
    consumed.update(dropped)
    front_end.report(written, dropped, log)
    return front_end.config(sd, model_cfg, shape_of, cfg_get,
                            lambda k: [float(v) for v in sd[k].detach().to(torch.float64).reshape(-1).tolist()])


# ---------------------------------------------------------------------------------------------
# safetensors writer.

def tensor_bytes(t, out):
    import torch
    t = t.detach().to(torch.float64).contiguous()
    if out.dtype == "F32":
        r = t.to(torch.float32)
        bits = r
    elif out.dtype == "BF16":
        # round the float64 value to float32, then to bf16 (nearest even): what torch does on a
        # float32 tensor, so an fp32 original is rounded once.
        r = t.to(torch.float32).to(torch.bfloat16)
        bits = r.view(torch.int16)
    else:
        r = t.to(torch.float16)
        bits = r.view(torch.int16)
    if not bool(torch.isfinite(r).all()) and bool(torch.isfinite(t).all()):
        raise ConvertError("%s does not fit in %s (values up to %g)" % (out.name, out.dtype,
                                                                        float(t.abs().max())))
    return bits.numpy().tobytes()


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
            data = tensor_bytes(t.make(), t)
            if len(data) != t.nbytes:
                raise ConvertError("internal: %s produced %d bytes, expected %d"
                                   % (t.name, len(data), t.nbytes))
            f.write(data)


def write_weights(out_dir, outs, max_bytes):
    shards = orion.shard(outs, max_bytes)
    total = sum(t.nbytes for t in outs)
    if len(shards) == 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), shards[0])
        log("wrote model.safetensors (%d tensors, %d bytes)" % (len(outs), total))
        return total, 1
    weight_map = {}
    for i, group in enumerate(shards):
        fname = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
        write_safetensors(os.path.join(out_dir, fname), group)
        weight_map.update({t.name: fname for t in group})
        log("wrote %s (%d tensors)" % (fname, len(group)))
    index = {"metadata": {"total_size": total},
             "weight_map": {k: weight_map[k] for k in sorted(weight_map)}}
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    return total, len(shards)


# ---------------------------------------------------------------------------------------------

def convert(args):
    if sys.byteorder != "little":
        raise ConvertError("this converter writes little-endian data and must run on a "
                           "little-endian machine")
    if args.lora == "merge":
        raise ConvertError(MERGE_REFUSED)
    orion.report_interpreter()
    _, model_cfg = read_infer_config(args.infer_config)
    text = read_text_config(args.llm_dir)
    tok = read_tokenizer_json(args.llm_dir)
    tok_cfg = None
    p = os.path.join(args.llm_dir, "tokenizer_config.json")
    if os.path.isfile(p):
        tok_cfg = orion._read_json(p, "tokenizer config")
        if not isinstance(tok_cfg, dict):
            raise ConvertError("%s: expected a JSON object" % p)
    else:
        warn("%s has no tokenizer_config.json; not copied" % args.llm_dir)
    base_len, ids, notes = plan_tokenizer(tok, tok_cfg)
    for n in notes:
        log("note: " + n)
    if cfg_get(model_cfg, "use_lora", False) is not True:
        raise ConvertError("infer config: model.use_lora is not True, but MindDrive's experts are "
                           "LoRA adapters")

    sd = orion.load_state_dict(args.checkpoint)
    emb_key = LLM_PREFIX + "model.embed_tokens.weight"
    emb = shape_of(sd, emb_key)
    if emb is None:
        raise ConvertError("missing LLM key %s" % emb_key)
    vocab_rows = emb[0]
    require(sd, emb_key, (vocab_rows, text["hidden_size"]), "LLM")
    n_tok = max(base_len, max(ids.values()) + 1)
    if vocab_rows != n_tok:
        raise ConvertError("tokenizer and checkpoint disagree: after MindDrive's 15 tokens the "
                           "tokenizer has %d entries (len %d before; %s = %d) but %s has %d rows"
                           % (n_tok, base_len, PATH_WAYPOINT_TOKEN, ids[PATH_WAYPOINT_TOKEN],
                              emb_key, vocab_rows))
    tvs = text.get("tokenizer_vocab_size")
    if tvs is not None and tvs != base_len:
        warn("config.json tokenizer_vocab_size %r differs from len(tokenizer) = %d" % (tvs, base_len))

    hidden = text["hidden_size"]
    check_out_dims(sd, model_cfg, hidden, args.llm_dir)
    groups = orion.vision_token_groups(sd, model_cfg, hidden)
    llm_outs, lora, consumed = plan_llm(sd, args, text, vocab_rows)
    pl_outs, planners, pl_consumed = plan_planners(sd, args, model_cfg, hidden)
    outs = llm_outs + pl_outs
    consumed |= pl_consumed
    front = plan_front_end(sd, args, model_cfg, outs, consumed)
    orion.summarize_skipped(sd, consumed)

    orion.prepare_out_dir(args.out, args.force)
    total, n_shards = write_weights(args.out, outs, args.max_shard_size)
    write_tokenizer_files(args, tok, tok_cfg, ids)

    text_config = dict(text)
    text_config["vocab_size"] = vocab_rows
    text_config["base_vocab_size"] = base_len
    config = {
        "model_type": "minddrive",
        "vlahybrid_format": FORMAT_VERSION,
        "dtype": DTYPES[args.dtype][2],
        "text_config": text_config,
        "lora": lora,
        "planners": planners,
        "vision_tokens": sum(groups),
        "vision_token_groups": groups,
        "prompt": {
            "image_marker": "<image>", "image_token_index": -200, "add_special_tokens": False,
            "decision": {"text": PROMPT_DECISION, "expert": "decision_expert",
                         "last_token_choices": SPEED_TOKENS, "readout": "logits at position -2 "
                         "(the row before the last token) over speed_tokens, log_softmax, argmax"},
            "action": {"text": PROMPT_ACTION, "expert": "action_expert",
                       "readout_tokens": [WAYPOINT_TOKEN, PATH_WAYPOINT_TOKEN]},
        },
        "meta_action_tokens": META_ACTION_TOKENS,
        "speed_tokens": SPEED_TOKENS,
        "path_mode_of_command": PATH_MODE_OF_COMMAND,
        "special_tokens": {t: ids[t] for t in ADDED_TOKENS},
        "source": {"checkpoint": os.path.basename(args.checkpoint),
                   "llm_dir": os.path.basename(os.path.normpath(args.llm_dir)),
                   "infer_config": os.path.basename(args.infer_config),
                   "lm_model_type": cfg_get(model_cfg, "lm_model_type"),
                   "llm_path": cfg_get(model_cfg, "lm_head")},
    }
    if front is not None:                       # a folder without one has no front_end key
        config["front_end"] = front
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    log("wrote %s: %d tensors, %d bytes, %d shard(s)" % (args.out, len(outs), total, n_shards))
    orion.report_numerics("doc/minddrive-converter.md", DTYPES[args.dtype][0],
                          "kept apart (factors in %s)" % DTYPES[args.dtype][0],
                          None if args.dtype == "fp32" else "--dtype fp32 --lora keep")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True, help="minddrive_rltrain.pth")
    p.add_argument("--llm-dir", required=True, help="llava-qwen2-0.5b/ or llava-qwen2.5-3b/ folder")
    p.add_argument("--infer-config", required=True, help="minddrive_qwen2_05B_infer.py")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--lora", choices=("keep", "merge"), default="keep",
                   help="keep (the only one supported; merge is refused, see the docs)")
    p.add_argument("--lora-alpha", type=float, default=None,
                   help="override lora_alpha (default 16, as in MindDrive's misc.py::load_model)")
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
