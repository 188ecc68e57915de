#!/usr/bin/python3
"""Write a tiny MindDrive-architecture checkpoint in exactly the layout a MindDrive user has.

    /usr/bin/python3 tests/minddrive/make_tiny_minddrive.py --out DIR [--front-end]

DIR/minddrive_rltrain.pth      torch.save({"meta": {...}, "state_dict": {...}}) as mmcv's
                               save_checkpoint writes it (fp32, the detector's key names):
                               lm_head.base_model.model.*   the peft-wrapped LlavaQwen2ForCausalLM with
                                 two LoRA adapters (lora_A/lora_B.{action_expert,decision_expert}),
                                 q/k/v biases, the tied lm_head.weight (same storage as embed_tokens)
                                 and the weighted_mask buffer;
                               present_distribution / predict_model / ego_fut_decoder (speed planner),
                               pw_present_distribution / pw_predict_model / pw_ego_fut_decoder (path),
                               future_distribution / pw_future_distribution (training only),
                               value_net* (RL training only) and a few camera front-end tensors
DIR/llava-qwen2-0.5b/          config.json (LlavaQwen2 / Qwen2Config fields), tokenizer.json (a copy
                               of tests/fixtures/tokenizer/tokenizer_json/qwen2-style.tokenizer.json, a
                               byte-level BPE made with HF tokenizers 0.23.2), vocab.json + merges.txt
                               (the same BPE as the slow Qwen2Tokenizer reads it), tokenizer_config.json
DIR/minddrive_qwen2_05B_infer.py   a small mmcv-style config in the style of the released one

Shapes follow the released code (MindDrive @ 1a4085d: mmcv/models/detectors/minddrive.py
Minddrive.__init__, use_gen_token + use_meta_action + is_decoupling; mmcv/utils/misc.py::load_model;
mmcv/utils/llava_qwen.py) with the LLM hidden size H = 64 in place of 896:
  LLM       hidden 64, 2 layers, 4 heads / 2 KV heads (head_dim 16), intermediate 172, q/k/v bias,
            tied embeddings; embedding rows = len(tokenizer) + 15, as the released add_special_token
            calls resize them (4003 + 15 = 4018); LoRA r=4 (released: 16), alpha 16, on q/k/v/o,
            two adapters with NONZERO, different lora_B
  planners  speed: DistributionModule(H, 32), PredictModel(32, H, H/4, 4), decoder 2H->2H->2H->2*7
            path:  the same with pw_ names and 2*6 outputs
            future_distribution (in H+12) and pw_future_distribution (in H+40): training only

--front-end (state_dict(..., front_end=True)) makes the camera front end whole instead: the tiny
EVA-02 and heads of tests/fixtures/tiny_weights.py (EVA_TINY: 3 blocks of 32 on 160 x 160 images;
HEADS_FRONT: the heads at the real 256 width, out_dims 64 = H, 256 + 16 + 1 + 256 tokens; the
position encoder of tests/fixtures/orion/model-front) under the released names, with what a real
minddrive_rltrain.pth holds beside them: the heads' copies of the shared modules, the six branch
copies, the loss constants, coords_d / position_range, RoPE tables, and MinddriveHead's
forecast-only modules (motion_decoder, motion_mode_query [1, 256], traj(_cls)_branches,
tl_branches, pos_mlp_sa, and the 0.5B model's lane_encoder, motion_map_decoder, pos_mlp); the
infer config then gives the heads' and the backbone's arguments to match. Everything else (the
LLM, the planners, the value net) is the default checkpoint's, value for value.

Deterministic: numpy's PCG64 with fixed seeds, a fixed key order, and torch.save of plain dicts
produce the same bytes on every run (same torch version).
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
import tiny_weights as tw  # noqa: E402  (the seeded stream and the planner, shared with Orion's)
TOKENIZER_SRC = os.environ.get("MINDDRIVE_TOKENIZER_JSON", os.path.join(
    ROOT, "tests", "fixtures", "tokenizer", "tokenizer_json", "qwen2-style.tokenizer.json"))

HIDDEN = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = HIDDEN // HEADS
INTERMEDIATE = 172
PADDED_VOCAB = 4096       # config.json vocab_size, padded above len(tokenizer) as Qwen's 151936 is
N_ADDED = 15              # 13 meta-action tokens, <waypoint_ego>, <path_waypoint_ego>
LORA_R = 4
EXPERTS = ("action_expert", "decision_expert")   # peft registers them in this order (load_model)
LATENT = 32
SPEED_MODES = 7
PATH_MODES = 6
GRU_LAYERS = 4
HEAD_DIMS = 8             # the camera heads' embed_dims (256 in the original), kept tiny
NUM_EXTRA = 256
NUM_MEMORY = 16

LLM = "lm_head.base_model.model."


def tokenizer_length(tok):
    """len(tokenizer): the base vocabulary and the added tokens, counted once each."""
    names = set(tok["model"]["vocab"])
    names.update(t["content"] for t in tok["added_tokens"])
    return len(names)


def llm_weights(m, rows, base_len):
    h = HIDDEN
    q_out, kv_out = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    embed = m.wrap(m.rng.standard_normal((rows, h), dtype=np.float32) * np.float32(0.05))
    m.sd[LLM + "model.embed_tokens.weight"] = embed
    for i in range(LAYERS):
        p = LLM + "model.layers.%d." % i
        for proj, out_f, bias in (("q_proj", q_out, True), ("k_proj", kv_out, True),
                                  ("v_proj", kv_out, True), ("o_proj", h, False)):
            in_f = h if proj != "o_proj" else q_out
            m.add(p + "self_attn.%s.base_layer.weight" % proj, (out_f, in_f), 1.0 / np.sqrt(in_f))
            if bias:
                m.add(p + "self_attn.%s.base_layer.bias" % proj, (out_f,), 0.1)
            for e in EXPERTS:
                m.add(p + "self_attn.%s.lora_A.%s.weight" % (proj, e), (LORA_R, in_f), 0.1)
            for e in EXPERTS:
                m.add(p + "self_attn.%s.lora_B.%s.weight" % (proj, e), (out_f, LORA_R), 0.05)
        m.add(p + "mlp.gate_proj.weight", (INTERMEDIATE, h), 1.0 / np.sqrt(h))
        m.add(p + "mlp.up_proj.weight", (INTERMEDIATE, h), 1.0 / np.sqrt(h))
        m.add(p + "mlp.down_proj.weight", (h, INTERMEDIATE), 1.0 / np.sqrt(INTERMEDIATE))
        m.add(p + "input_layernorm.weight", (h,), 0.1, 1.0)
        m.add(p + "post_attention_layernorm.weight", (h,), 0.1, 1.0)
    m.add(LLM + "model.norm.weight", (h,), 0.1, 1.0)
    m.sd[LLM + "lm_head.weight"] = embed                 # tie_word_embeddings: one tensor
    # llava_qwen.py: register_buffer("weighted_mask", ones(tokenizer_vocab_size + 14))
    m.sd[LLM + "weighted_mask"] = m.wrap(np.ones(base_len + 14, dtype=np.float32))


def front_end_weights(m):
    """A few camera front-end keys (the converter skips them; some are cross-checked)."""
    d = HEAD_DIMS
    m.add("img_backbone.patch_embed.proj.weight", (d, 3, 2, 2))
    m.add("img_backbone.patch_embed.proj.bias", (d,))
    m.add("img_backbone.blocks.0.norm1.weight", (d,), 0.1, 1.0)
    m.add("pts_bbox_head.query_embedding.weight", (NUM_EXTRA, d))
    m.add("pts_bbox_head.memory_query.weight", (NUM_MEMORY, d))
    m.linear("pts_bbox_head.output_projection", HIDDEN, d)
    m.linear("pts_bbox_head.can_bus_embed.2", HIDDEN, 4 * d)
    m.add("query_pos.0.weight", (d, 396))
    m.add("map_head.query_embedding.weight", (NUM_EXTRA, d))
    m.linear("map_head.output_projection", HIDDEN, d)
    m.sd["position_range"] = m.wrap(np.array([-61.2, -61.2, -10.0, 61.2, 61.2, 10.0], dtype=np.float32))
    m.add("position_encoder.0.weight", (4 * d, 192))


FRONT_SEED = 7007        # the front end's extra tensors (name_stream), besides tiny_weights' own seeds


def whole_front_end():
    """{name: float32 array}: a whole camera front end as minddrive_rltrain.pth holds it (see the
    module docstring); values a pure function of the name."""
    c = tw.HEADS_FRONT
    D, F = c["embed"], c["memory_ffn"]
    front = {"img_backbone." + k: v for k, v in tw.eva_weights().items()}
    front.update(tw.heads_weights(c))
    front.update(tw.front_position_encoder(c))
    # Minddrive.__init__'s LID depths (depth_start 1, position_range[3] 61.2, depth_num 64) and range
    i = np.arange(64, dtype=np.float64)
    front["coords_d"] = (1 + (61.2 - 1) / (64 * (1 + 64)) * i * (i + 1)).astype(np.float32)
    front["position_range"] = np.array([-61.2, -61.2, -10.0, 61.2, 61.2, 10.0], dtype=np.float32)
    shapes = {"img_backbone.rope_win.freqs_cos": (16, 16), "img_backbone.rope_glb.freqs_sin": (100, 16),
              "pts_bbox_head.motion_mode_query.weight": (1, D),
              "pts_bbox_head.pos_mlp_sa.weight": (D, 2), "pts_bbox_head.pos_mlp_sa.bias": (D,),
              "pts_bbox_head.pos_mlp.weight": (D, 2), "pts_bbox_head.pos_mlp.bias": (D,)}
    for k in range(3):                                   # LaneNet(256, 256, 3): Linear + LayerNorm each
        p = "pts_bbox_head.lane_encoder.layer_seq.lmlp_%d.mlp." % k
        shapes.update({p + "0.weight": (D, D), p + "0.bias": (D,), p + "1.weight": (D,), p + "1.bias": (D,)})
    for dec in ("motion_decoder", "motion_map_decoder"):  # DREAM decoders of one layer, no attention biases
        p = "pts_bbox_head.%s._layers.0.transformer_layers." % dec
        shapes.update({p + "0.attn.in_proj_weight": (3 * D, D), p + "0.attn.out_proj.weight": (D, D),
                       p + "1.weight": (D,), p + "1.bias": (D,), p + "2._layers.0.weight": (F, D),
                       p + "2._layers.0.bias": (F,), p + "2._layers.3.weight": (D, F), p + "2._layers.3.bias": (D,),
                       p + "3.weight": (D,), p + "3.bias": (D,)})
    for b in range(6):
        shapes.update({"pts_bbox_head.traj_branches.%d.0.weight" % b: (D, D),
                       "pts_bbox_head.traj_branches.%d.4.weight" % b: (12, D),
                       "pts_bbox_head.traj_cls_branches.%d.6.weight" % b: (1, D),
                       "pts_bbox_head.tl_branches.%d.0.weight" % b: (D, D)})
    for name, shape in shapes.items():
        front[name] = tw.name_stream(FRONT_SEED, name).normal(0.0, 0.1, shape).astype(np.float32)
    return front


def value_net_weights(m):
    """RL training keeps a value LLM (adapter "default") and its projection; inference does not."""
    m.add("value_net.base_model.model.model.norm.weight", (HIDDEN,), 0.1, 1.0)
    m.add("value_net.base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight",
          (LORA_R, HIDDEN), 0.1)
    m.linear("value_net_pro", 1, HIDDEN)


def qwen_config(base_len, bos_eos):
    return {
        "_name_or_path": "llava-qwen2-0.5b",
        "architectures": ["LlavaQwen2ForCausalLM"],
        "attention_dropout": 0.0,
        "bos_token_id": bos_eos,
        "eos_token_id": bos_eos,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": INTERMEDIATE,
        "max_position_embeddings": 32768,
        "max_window_layers": LAYERS,
        "model_type": "llava_qwen2",
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": KV_HEADS,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": 32768,
        "tie_word_embeddings": True,
        "tokenizer_vocab_size": base_len,
        "torch_dtype": "float32",
        "transformers_version": "4.45.2",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": PADDED_VOCAB,
    }


def tokenizer_config(tok):
    dec = {}
    for t in tok["added_tokens"]:
        dec[str(t["id"])] = {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                               "single_word", "special")}
    return {
        "add_prefix_space": False,
        "added_tokens_decoder": dec,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' "
                         "+ message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
                         "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "errors": "replace",
        "model_max_length": 32768,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


# The infer config's backbone and heads for the whole front end (replacing INFER_CONFIG's from
# "    img_backbone=dict(" to the end of `model`): EVA_TINY's and HEADS_FRONT's arguments, in the
# released config's style (FocalLoss with sigmoid: num_classes scores a head, as the library runs).
FRONT_END_MODEL = '''\
    img_backbone=dict(
        type='EVAViT',
        img_size=160,
        patch_size=16,
        window_size=4,
        in_chans=3,
        embed_dim=32,
        depth=3,
        num_heads=2,
        mlp_ratio=4*2/3,
        window_block_indexes = (
        list(range(0, 1)) + list(range(2, 3))
        ),
        qkv_bias=True),
    map_head=dict(
        type='MinddriveHeadM',
        num_classes=6,
        in_channels=32,
        out_dims=llm_hidden,
        memory_len=20,
        with_mask=True,
        topk_proposals=10,
        num_lane=30,
        num_lanes_one2one=10,
        k_one2many=2,
        num_extra=256,
        n_control=11,
        pc_range=point_cloud_range,
        transformer=dict(
            type='PETRTemporalTransformer',
                 num_layers=2,
                 embed_dims=256,
                 num_heads=8,
                 feedforward_dims=64,
                 dropout=0.1),
        loss_cls=dict(
            type='FocalLoss',
            use_sigmoid=True,
            gamma=2.0,
            alpha=0.25,
            loss_weight=1.5)),
    pts_bbox_head=dict(
        type='MinddriveHead',
        num_classes=9,
        in_channels=32,
        out_dims=llm_hidden,
        num_query=256,
        with_mask=True,
        memory_len=20,
        topk_proposals=10,
        num_propagated=10,
        num_extra=256,
        scence_memory_len=32,
        n_control=11,
        use_memory = True,
        use_col_loss = use_col_loss,
        motion_map_decoder=dict(
            type='DREAMTransformerDecoder',
            num_layers=1,
            embed_dims=256,
            num_heads=8,
            dropout=0.0,
            feedforward_dims=64),
        transformer=dict(
            type='PETRTemporalTransformer',
                 num_layers=2,
                 embed_dims=256,
                 num_heads=8,
                 feedforward_dims=64,
                 dropout=0.1),
        bbox_coder=dict(
            type='CustomNMSFreeCoder',
            post_center_range=[-61.2, -61.2, -10.0, 61.2, 61.2, 10.0],
            pc_range=point_cloud_range,
            max_num=300,
            num_classes=9),
        loss_cls=dict(
            type='FocalLoss',
            use_sigmoid=True,
            gamma=2.0,
            alpha=0.25,
            loss_weight=2.0)),
)
'''


INFER_CONFIG = '''\
# Tiny config in the style of adzoo/minddrive/configs/minddrive_qwen2_05B_infer.py (test fixture).
_base_ = ["../_base_/datasets/nus-3d.py",
          "../_base_/default_runtime.py"]
point_cloud_range = [-51.2, -51.2, -5.0, 51.2, 51.2, 3.0]
map_classes = ['Broken','Solid','SolidSolid','Center','TrafficLight','StopSign']
map_num_classes = len(map_classes)
_dim_ = {head_dims}
_ffn_dim_ = _dim_*2
llm_hidden = {hidden}
num_gpus = 32
batch_size = 32
num_iters_per_epoch = 234769 // (num_gpus * batch_size)
llm_path = './Bench2DriveZoo/ckpts/llava-qwen2-0.5b'

use_gen_token = True
collect_keys = ['lidar2img', 'cam_intrinsic', 'timestamp', 'ego_pose', 'ego_pose_inv', 'command']
is_decoupling = True
use_col_loss = True
use_meta_action = True
rl_training = False
fp32_infer=True

model = dict(
    type='Minddrive',
    save_path='./results_planning_only/',  #save path for vlm models.
    use_grid_mask=True,
    frozen=False,
    use_lora=True,
    open_loop_infer= True,
    is_decoupling = is_decoupling,
    full_train = False,
    lm_model_type = 'qwen2',
    fp32_infer=fp32_infer,
    tokenizer=llm_path,
    lm_head=llm_path, # set to None if don't use llm head
    use_gen_token = use_gen_token,
    rl_training = rl_training,
    use_col_loss = use_col_loss,
    use_meta_action = use_meta_action,
    img_backbone=dict(
        type='EVAViT',
        embed_dim=_dim_,
        window_block_indexes = (
        list(range(0, 2)) + list(range(3, 5))
        ),
        qkv_bias=True),
    map_head=dict(
        type='MinddriveHeadM',
        num_classes=6,
        in_channels=_dim_,
        out_dims=llm_hidden,
        num_extra={num_extra},
        pc_range=point_cloud_range),
    pts_bbox_head=dict(
        type='MinddriveHead',
        num_classes=9,
        in_channels=_dim_,
        out_dims=llm_hidden,
        num_query=600,
        num_extra={num_extra},
        use_memory = True,
        use_col_loss = use_col_loss),
)

inference_only_pipeline = [
    dict(type='ResizeCropFlipRotImage', data_aug_conf = dict(final_dim=(320, 640)), training=False),
    dict(type='LoadAnnoatationMixCriticalVQATest',
         load_type=["planning"],
         tokenizer=llm_path,
         desc_qa=False,
         use_gen_token=use_gen_token,
         conv_template="llava_qwen2",
         is_decoupling=is_decoupling,
         use_meta_action=use_meta_action,
         single=True,
         max_length=2048,),
]

data = dict(samples_per_gpu=batch_size, workers_per_gpu=4)
load_from = None
'''


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def state_dict(seed, tok, wrap=lambda a: a, front_end=False):
    """The checkpoint's state dict for the tokenizer.json `tok`, float32 numpy arrays (or what
    `wrap` makes of them); with `front_end`, the camera front end whole (whole_front_end(): the
    few front-end tensors of the default replaced, the rest added after them; every other value
    the default's)."""
    base_len = tokenizer_length(tok)
    m = tw.SequentialMaker(seed, wrap)
    front_end_weights(m)
    llm_weights(m, base_len + N_ADDED, base_len)
    value_net_weights(m)
    tw.vae_gru_planner(m, "", HIDDEN, SPEED_MODES, 12, LATENT, GRU_LAYERS)
    tw.vae_gru_planner(m, "pw_", HIDDEN, PATH_MODES, 40, LATENT, GRU_LAYERS)
    # mmcv save_checkpoint: the speed planner's modules come before the path planner's.
    order = [k for k in m.sd if not k.startswith("pw_")] + [k for k in m.sd if k.startswith("pw_")]
    sd = {k: m.sd[k] for k in order}
    if front_end:
        sd.update({k: wrap(v) for k, v in whole_front_end().items()})
    return sd


def infer_config(front_end=False):
    """The infer config's text; with `front_end`, FRONT_END_MODEL's backbone and heads."""
    text = INFER_CONFIG.format(head_dims=HEAD_DIMS, hidden=HIDDEN, num_extra=NUM_EXTRA)
    if front_end:
        start, end = text.index("    img_backbone=dict(\n"), text.index("\n)\n\ninference_only_pipeline") + 3
        text = text[:start] + FRONT_END_MODEL + text[end:]
    return text


def make(out, seed=20250301, front_end=False):
    import torch
    with open(TOKENIZER_SRC, encoding="utf-8") as f:
        tok = json.load(f)
    base_len = tokenizer_length(tok)
    eos = next(t["id"] for t in tok["added_tokens"] if t["content"] == "<|endoftext|>")

    os.makedirs(out, exist_ok=True)
    ckpt = {"meta": {"mmcv_version": "1.7.0", "time": "Thu Jan  1 00:00:00 2026", "epoch": 1,
                     "iter": 6000}, "state_dict": state_dict(seed, tok, torch.from_numpy, front_end)}
    torch.save(ckpt, os.path.join(out, "minddrive_rltrain.pth"))

    llm_dir = os.path.join(out, "llava-qwen2-0.5b")
    os.makedirs(llm_dir, exist_ok=True)
    shutil.copyfile(TOKENIZER_SRC, os.path.join(llm_dir, "tokenizer.json"))
    write_json(os.path.join(llm_dir, "config.json"), qwen_config(base_len, eos))
    write_json(os.path.join(llm_dir, "tokenizer_config.json"), tokenizer_config(tok))
    write_json(os.path.join(llm_dir, "vocab.json"), tok["model"]["vocab"])
    with open(os.path.join(llm_dir, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for pair in tok["model"]["merges"]:
            f.write((pair if isinstance(pair, str) else " ".join(pair)) + "\n")
    with open(os.path.join(out, "minddrive_qwen2_05B_infer.py"), "w") as f:
        f.write(infer_config(front_end))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=20250301)
    p.add_argument("--front-end", action="store_true",
                   help="the camera front end whole (tiny EVA-02 and heads), the infer config to match")
    args = p.parse_args()
    if not os.path.isfile(TOKENIZER_SRC):
        print("error: %s not found" % TOKENIZER_SRC, file=sys.stderr)
        return 1
    make(args.out, args.seed, args.front_end)
    return 0


if __name__ == "__main__":
    sys.exit(main())
