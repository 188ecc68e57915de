#!/usr/bin/python3
"""Write a tiny Orion-architecture checkpoint in exactly the layout an Orion user has.

    /usr/bin/python3 tests/orion/make_tiny_orion.py --out DIR

DIR/Orion.pth                   torch.save({"meta": {...}, "state_dict": {...}}), fp32, original
                                key names (peft 0.12 LoRA names under lm_head.base_model.model.,
                                and the weighted_mask buffer llava_llama.py registers there),
                                plus a few camera front-end / training-only keys to be skipped
DIR/pretrain_qformer/           config.json (LlamaConfig), tokenizer.model (the Llama-2
                                sentencepiece model from /work/shared/data), tokenizer_config.json,
                                special_tokens_map.json
DIR/orion_stage3_agent.py       a small mmcv-style agent config in the style of the original

Shapes follow the original with the LLM hidden size H = 64 in place of 4096
(mmcv/models/detectors/orion.py::Orion.__init__, VAE branch; mmcv/models/utils/distributions.py):
  LLM       hidden 64, 2 layers, 4 heads (MHA), intermediate 172, 32001 embedding rows
            (32000 sentencepiece pieces + <waypoint_ego>); LoRA r=4 on q/k/v/o with NONZERO lora_B
  planner   present_distribution: conv1 H->2H, conv2 2H->2H, conv3 2H->H/2, last_conv.1 H/2->2*32
            predict_model: GRU(32, H/4, 4 layers), linear1 H/4->H/2, linear2 H/2->H, linear3 H->H
            ego_fut_decoder: 2H->2H, 2H->2H, 2H->2*6
            future_distribution (training only): the same with in = H + 12
The lm_head table shares one storage with embed_tokens at an offset of one row (lm_head row i =
embed row i+1), which keeps the file under 12 MB while the two tables still differ.

Deterministic: numpy's PCG64 with fixed seeds, a fixed key order, and torch.save of plain dicts
produce the same bytes on every run (same torch version).
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures"))
import tiny_weights as tw  # noqa: E402  (the seeded stream and the planner, shared with MindDrive's)

# The Llama-2 sentencepiece model (md5 eeec4125e9c7560836b4873b6f8e3025, 32000 pieces).
TOKENIZER_SRC = os.environ.get("ORION_TOKENIZER_MODEL", os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests", "fixtures", "tokenizer",
    "llama2-tokenizer.model"))

HIDDEN = 64
LAYERS = 2
HEADS = 4
INTERMEDIATE = 172
BASE_VOCAB = 32000
VOCAB_ROWS = BASE_VOCAB + 1
LORA_R = 4
LATENT = 32
EGO_FUT_MODE = 6
GRU_LAYERS = 4
HEAD_DIMS = 8            # the heads' embed_dims (256 in the original), kept tiny
NUM_EXTRA = 256
NUM_MEMORY = 16

LLM = "lm_head.base_model.model."


def llm_weights(m):
    h, q = HIDDEN, HIDDEN
    # embed_tokens and lm_head: one storage, lm_head starts one row later.
    storage = m.wrap(m.rng.standard_normal((VOCAB_ROWS + 1) * h, dtype=np.float32) * np.float32(0.02))
    m.sd[LLM + "model.embed_tokens.weight"] = storage[: VOCAB_ROWS * h].reshape(VOCAB_ROWS, h)
    for i in range(LAYERS):
        p = LLM + "model.layers.%d." % i
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            m.add(p + "self_attn.%s.base_layer.weight" % proj, (q, h), 1.0 / np.sqrt(h))
            m.add(p + "self_attn.%s.lora_A.default.weight" % proj, (LORA_R, h), 0.1)
            m.add(p + "self_attn.%s.lora_B.default.weight" % proj, (q, LORA_R), 0.05)
        m.add(p + "mlp.gate_proj.weight", (INTERMEDIATE, h), 1.0 / np.sqrt(h))
        m.add(p + "mlp.up_proj.weight", (INTERMEDIATE, h), 1.0 / np.sqrt(h))
        m.add(p + "mlp.down_proj.weight", (h, INTERMEDIATE), 1.0 / np.sqrt(INTERMEDIATE))
        m.add(p + "input_layernorm.weight", (h,), 0.1, 1.0)
        m.add(p + "post_attention_layernorm.weight", (h,), 0.1, 1.0)
    m.add(LLM + "model.norm.weight", (h,), 0.1, 1.0)
    m.sd[LLM + "lm_head.weight"] = storage[h: (VOCAB_ROWS + 1) * h].reshape(VOCAB_ROWS, h)
    # llava_llama.py: LlavaLlamaForCausalLM(use_gen_token=True) registers the training loss's
    # register_buffer("weighted_mask", ones(config.vocab_size + 1)) (its number tokens set to 1.0),
    # so the peft-wrapped model's state dict holds it: a buffer, no weight.
    m.sd[LLM + "weighted_mask"] = m.wrap(np.ones(BASE_VOCAB + 1, dtype=np.float32))


def front_end_weights(m):
    """A few camera front-end keys (the converter skips them; some are cross-checked)."""
    d = HEAD_DIMS
    m.add("img_backbone.patch_embed.proj.weight", (d, 3, 2, 2))
    m.add("img_backbone.patch_embed.proj.bias", (d,))
    m.add("img_backbone.blocks.0.norm1.weight", (d,), 0.1, 1.0)
    m.add("img_backbone.blocks.0.attn.q_proj.weight", (d, d))
    m.add("position_encoder.0.weight", (4 * d, 192))
    m.add("query_pos.0.weight", (d, 396))
    m.add("pts_bbox_head.query_embedding.weight", (NUM_EXTRA, d))
    m.add("pts_bbox_head.memory_query.weight", (NUM_MEMORY, d))
    m.linear("pts_bbox_head.output_projection", HIDDEN, d)
    m.linear("pts_bbox_head.can_bus_embed.2", HIDDEN, 4 * d)
    m.add("pts_bbox_head.reference_points.weight", (600, 3))
    m.add("map_head.query_embedding.weight", (NUM_EXTRA, d))
    m.linear("map_head.output_projection", HIDDEN, d)
    m.add("map_head.points_embedding_lane.weight", (11, d))


LLAMA_CONFIG = {
    "_name_or_path": "pretrain_qformer",
    "architectures": ["LlavaLlamaForCausalLM"],
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": HIDDEN,
    "initializer_range": 0.02,
    "intermediate_size": INTERMEDIATE,
    "max_position_embeddings": 4096,
    "model_type": "llava_llama",
    "num_attention_heads": HEADS,
    "num_hidden_layers": LAYERS,
    "pad_token_id": 0,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
    "transformers_version": "4.31.0",
    "use_cache": True,
    "vocab_size": BASE_VOCAB,
    # num_key_value_heads and rope_theta left out on purpose: the converter must default them.
}

TOKENIZER_CONFIG = {
    "add_bos_token": True,
    "add_eos_token": False,
    "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": False, "normalized": False,
                  "rstrip": False, "single_word": False},
    "clean_up_tokenization_spaces": False,
    "eos_token": {"__type": "AddedToken", "content": "</s>", "lstrip": False, "normalized": False,
                  "rstrip": False, "single_word": False},
    "legacy": False,
    "model_max_length": 2048,
    "pad_token": None,
    "padding_side": "right",
    "sp_model_kwargs": {},
    "tokenizer_class": "LlamaTokenizer",
    "unk_token": {"__type": "AddedToken", "content": "<unk>", "lstrip": False, "normalized": False,
                  "rstrip": False, "single_word": False},
}

SPECIAL_TOKENS_MAP = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<unk>",
                      "unk_token": "<unk>"}

AGENT_CONFIG = '''\
# Tiny agent config in the style of adzoo/orion/configs/orion_stage3_agent.py (test fixture).
_base_ = ["../_base_/datasets/nus-3d.py",
          "../_base_/default_runtime.py"]
point_cloud_range = [-51.2, -51.2, -5.0, 51.2, 51.2, 3.0]
map_classes = ['Broken','Solid','SolidSolid','Center','TrafficLight','StopSign']
map_num_classes = len(map_classes)
_dim_ = {head_dims}
_ffn_dim_ = _dim_*2
llm_hidden = {hidden}
use_memory = True
fp32_infer = True
num_gpus = 32
batch_size = 4
num_iters_per_epoch = 234769 // (num_gpus * batch_size)
llm_path = 'ckpts/pretrain_qformer/'
use_gen_token = True
use_col_loss = True
collect_keys = ['lidar2img', 'cam_intrinsic', 'timestamp', 'ego_pose', 'ego_pose_inv', 'command']
ann_file_test = "data/infos" + f"/b2d_infos_val.pkl"

model = dict(
    type='Orion',
    fp32_infer=fp32_infer,
    frozen=False,
    use_lora=True,
    tokenizer=llm_path,
    lm_head=llm_path,
    use_gen_token = use_gen_token,
    use_diff_decoder = False,
    fut_ts=6,
    ego_fut_mode={ego_fut_mode},
    img_backbone=dict(
        type='EVAViT',
        embed_dim=_dim_,
        window_block_indexes = (
            list(range(0, 2)) + list(range(3, 5))
        ),
        qkv_bias=True),
    map_head=dict(
        type='OrionHeadM',
        num_classes=map_num_classes,
        in_channels=_dim_,
        out_dims=llm_hidden,
        num_extra={num_extra},
        pc_range=point_cloud_range),
    pts_bbox_head=dict(
        type='OrionHead',
        num_classes=9,
        in_channels=_dim_,
        out_dims=llm_hidden,
        num_query=600,
        memory_len=600,
        topk_proposals=300,
        num_propagated=300,
        num_extra={num_extra},
        transformer=dict(type='PETRTemporalTransformer', num_layers=6, embed_dims=256, num_heads=8),
        use_col_loss = use_col_loss,
        use_memory = use_memory),
)

data = dict(samples_per_gpu=batch_size, workers_per_gpu=4)
'''


def state_dict(seed, wrap=lambda a: a):
    """The checkpoint's state dict, float32 numpy arrays (or what `wrap` makes of them)."""
    m = tw.SequentialMaker(seed, wrap)
    llm_weights(m)
    tw.vae_gru_planner(m, "", HIDDEN, EGO_FUT_MODE, 12, LATENT, GRU_LAYERS)  # future_distribution: in H + 12
    front_end_weights(m)
    return m.sd


def make(out, seed=20250101):
    import torch
    os.makedirs(out, exist_ok=True)
    ckpt = {"meta": {"mmcv_version": "1.7.0", "epoch": 6, "iter": 0}, "state_dict": state_dict(seed, torch.from_numpy)}
    torch.save(ckpt, os.path.join(out, "Orion.pth"))

    llm_dir = os.path.join(out, "pretrain_qformer")
    os.makedirs(llm_dir, exist_ok=True)
    shutil.copyfile(TOKENIZER_SRC, os.path.join(llm_dir, "tokenizer.model"))
    for name, obj in (("config.json", LLAMA_CONFIG), ("tokenizer_config.json", TOKENIZER_CONFIG),
                      ("special_tokens_map.json", SPECIAL_TOKENS_MAP)):
        with open(os.path.join(llm_dir, name), "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
    with open(os.path.join(out, "orion_stage3_agent.py"), "w") as f:
        f.write(AGENT_CONFIG.format(head_dims=HEAD_DIMS, hidden=HIDDEN, ego_fut_mode=EGO_FUT_MODE,
                                    num_extra=NUM_EXTRA))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=20250101)
    args = p.parse_args()
    if not os.path.isfile(TOKENIZER_SRC):
        print("error: %s not found" % TOKENIZER_SRC, file=sys.stderr)
        return 1
    make(args.out, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
