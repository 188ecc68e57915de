#!/usr/bin/env python3
"""The peer of the C library's PETR heads: Orion's two released heads (OrionHead, the detection head,
and OrionHeadM, the map head) as the agent runs them for one frame, in PyTorch, at the agent's geometry.

  python3 tools/orion/bench_heads_torch.py --orion-repo PATH [--device cuda] [--iters 20] [--warmup 5]
      [--modes agent,bf16] [--variants released,plan] [--attn auto] [--json OUT]

PATH: a checkout of the released Orion code (YinXuan1223/Ourion at b08a9ec). The modules come from its
mmcv/ unchanged, through tests/fixtures/driving/make_head_fixtures.py's loader and stand-ins (below).
The heads' arguments come from PATH/adzoo/orion/configs/orion_stage3_agent.py (model.pts_bbox_head,
model.map_head) when that file is there, else from the copy of them below (AGENT_DET, AGENT_MAP); the
modules Orion.__init__ makes and hands both heads (query_pos, time_embedding, ego_pose_pe) are made by
its own statements. The geometry: embed 256, 8 heads, 6 decoder layers, FFN 2048 (memory decoders: 1
layer, FFN 512); det: 256 scene + 600 object + 300 propagated = 1156 queries, self-attention over them
and the other 300 of a 600-entry memory, 16 history tokens over 256 scene entries; map: 256 + 300
one-to-one lanes (+ 1500 one-to-many) over a 600-entry memory; both cross-attend 9600 image rows
(6 cameras x 40 x 40) of the ViT's 1024 channels, projected to 256, with a 9600 x 256 position
embedding; tokens out (1, 273, 4096) and (1, 256, 4096). Random weights (torch.manual_seed, the heads'
own init_weights), random image features and position embedding, a moving ego at the agent's 20 Hz
(timestamps 1 + step / 20 s, one scene token). Frames run as Orion.simple_test_pts runs them: the det
head, then the map head, the memory banks carried across frames; --warmup frames first (frame 0 takes
the first-frame branch; from frame 1 on every bank is at its steady size, so every frame costs the
same: the object and lane banks hold only real entries from frame 2, the 256-entry scene FIFO from
frame 16), then --iters timed frames, each on its own ego pose. The decode after each head
(get_motion_bboxes / get_bboxes and their NMS: output only) is not run.

Variants (the same released modules, two configurations):
  - released: the agent config as is: use_col_loss and pred_traffic_light_state on (the motion decoder:
    900 x 6 motion queries attending to each other, and the traffic-light branch, run every frame though
    the tokens and banks do not read them), num_lane 1800 (the map head runs its 1500 one-to-many lanes
    at test time too);
  - plan: what the tokens and the banks need, the graph the C library runs (lib/family/driving/
    petr_heads.h, doc/orion-converter.md: no motion decoder, no traffic-light branch): use_col_loss and
    pred_traffic_light_state off, num_lane = num_lanes_one2one = 300 (the one-to-many lanes are blocked
    from the rest by the masks, so dropping them changes neither the tokens nor the banks: spec §3.4).
Modes (precision), each timed with CUDA events (time.perf_counter on the CPU), medians over --iters:
  - agent: the released precision: the heads in float32 (the agent resets fp16_enabled on both heads),
    except the cross-attention core, which the released FlashAttention runs in fp16 (its auto_fp16 casts
    q and kv to half, the output back to float32): done so here on CUDA; on the CPU the core stays fp32;
  - fp32: everything float32, the core too (make_head_fixtures.py's reference numerics);
  - bf16: PyTorch eager bf16: the modules, image features and position embedding in bfloat16, the core
    in bf16. The frame's poses, can bus and command stay as the agent gives them (float32, timestamps
    float64). The released code is not written for a bf16 module (it feeds .float() encodings and the
    float32 can-bus vector to its Linear layers, and multiplies float32 poses with bank points), so in
    this mode only: the inputs of query_pos, time_embedding, ego_pose_pe, can_bus_embed and
    scene_time_embedding are cast to bf16 (forward pre-hooks), and transform_reference_points(_lane)
    casts the bank's points to the pose's dtype (the bank geometry stays float32).
Peak GPU memory (torch.cuda.max_memory_allocated, from before the warm-up: weights, inputs, banks and
activations) of each.

Stand-ins: make_head_fixtures.load_released's (the mmcv registries and builders, the loss, assigner,
sampler, coder and NMS imports, AnchorFreeHead as a bare nn.Module, auto_fp16 / force_fp32 as the
identity, einops.rearrange for attention.py's reshapes, llava_llama / peft / torchvision as empty
modules); train_cfg=None for both heads (the assigner is training-only); mmcv's xavier_init, which
OrionHeadM.init_weights calls, taken from the released mmcv/models/utils/weight_init.py; and
FlashAttention.forward (flash-attn's CUDA kernel, not installed) replaced by the same math, no mask,
non-causal, scale 1/sqrt(head dim): --attn sdpa: torch.nn.functional.scaled_dot_product_attention
(PyTorch 2.x; on CUDA in fp16 / bf16 that is a flash kernel), --attn math: make_head_fixtures's
softmax(q k^T / sqrt(d)) v in einsums; auto: sdpa where torch has it. The self-attention blocks are the
released nn.MultiheadAttention (with its bool mask) in every mode. Needs torch and numpy only, and the
released checkout; runs on the CPU too (--device cpu, slowly: --small for a quick check).
"""
import argparse
import copy
import importlib.util
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def load_path(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


mhf = load_path("make_head_fixtures", os.path.join(ROOT, "tests", "fixtures", "driving", "make_head_fixtures.py"))
tw = mhf.tw   # tests/fixtures/tiny_weights.py, as make_head_fixtures imported it
mpf = sys.modules["make_position_fixtures"]   # and make_position_fixtures.py (function_source, init_statements)

AGENT_CONFIG = os.path.join("adzoo", "orion", "configs", "orion_stage3_agent.py")
PC_RANGE = [-51.2, -51.2, -5.0, 51.2, 51.2, 3.0]
# model.pts_bbox_head and model.map_head of orion_stage3_agent.py (b08a9ec), used where the checkout
# has no adzoo/ (and checked against it where it has)
_PETR = dict(type="PETRTemporalTransformer", input_dimension=256, output_dimension=256, num_layers=6, embed_dims=256,
             num_heads=8, feedforward_dims=2048, dropout=0.1, with_cp=True, flash_attn=True)
_ORION_DEC = dict(type="OrionTransformerDecoder", num_layers=1, embed_dims=256, num_heads=8, dropout=0.0,
                  feedforward_dims=512, with_cp=True, flash_attn=True, return_intermediate=False)
AGENT_DET = dict(
    type="OrionHead", num_classes=9, in_channels=1024, out_dims=4096, num_query=600, with_mask=True, memory_len=600,
    topk_proposals=300, num_propagated=300, num_extra=256, n_control=11, match_with_velo=False,
    pred_traffic_light_state=True, use_col_loss=True, use_memory=True, scalar=10, noise_scale=1.0, dn_weight=1.0,
    split=0.75, use_pe=False, motion_transformer_decoder=dict(_ORION_DEC),
    code_weights=[2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], score_threshold=0.2,
    class_agnostic_nms=dict(classes=[0, 1, 2, 3, 4, 5, 6, 7, 8], compensate=[0, 0, 0.3, 0, 0, 0, 0, 0.3, 0],
                            pre_max_size=1000, post_max_size=300, nms_thr=0.1),
    memory_decoder_transformer=dict(_ORION_DEC), transformer=dict(_PETR),
    bbox_coder=dict(type="CustomNMSFreeCoder", post_center_range=[-61.2, -61.2, -10.0, 61.2, 61.2, 10.0],
                    pc_range=PC_RANGE, max_num=300, voxel_size=[0.2, 0.2, 8], num_classes=9))
AGENT_MAP = dict(
    type="OrionHeadM", num_classes=6, in_channels=1024, out_dims=4096, memory_len=600, with_mask=True,
    topk_proposals=300, num_lane=1800, num_lanes_one2one=300, k_one2many=5, lambda_one2many=1.0, num_extra=256,
    n_control=11, pc_range=PC_RANGE, code_weights=[1.0, 1.0], score_threshold=0.2, transformer=dict(_PETR))
CAMS, FEAT_H, FEAT_W = 6, 40, 40    # six cameras, 640 x 640 / patch 16
FPS = 20.0                          # the agent's timestamp = step / 20
SMALL = dict(layers=1, feat=10)     # --small: one decoder layer, 10 x 10 grids (600 image rows)

ATTN = {"impl": "math", "fp16_core": False}   # the core stand-in's switches, set per mode


def flash_attention_core(self, q, kv, causal=False, key_padding_mask=None):
    """FlashAttention.forward: (B, T, H, D) from q (B, T, H, D) and kv (B, S, 2, H, D), no mask,
    non-causal, scale 1/sqrt(D). With fp16_core (the agent mode on CUDA) q and kv go to half and the
    output back to float32, as the released auto_fp16(apply_to=('q', 'kv'), out_fp32=True) does."""
    assert key_padding_mask is None and not causal and self.softmax_scale is None
    out_dtype = q.dtype
    if ATTN["fp16_core"] and q.dtype == torch.float32:
        q, kv = q.half(), kv.half()
    if ATTN["impl"] == "sdpa":
        k, v = kv.unbind(2)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    else:
        out, _ = mhf.flash_attention_math(self, q, kv)
    return out.to(out_dtype), None


def points_in_pose_dtype(fn):
    """transform_reference_points(_lane) with the points in the pose's dtype (a no-op unless bf16)."""
    def wrapped(points, egopose, *args, **kwargs):
        return fn(points.to(egopose.dtype) if points.dtype != egopose.dtype else points, egopose, *args, **kwargs)
    return wrapped


def load_modules(repo):
    mods = mhf.load_released(repo)
    mods.attention.FlashAttention.forward = flash_attention_core
    mods.det.transform_reference_points = points_in_pose_dtype(mods.det.transform_reference_points)
    mods.map.transform_reference_points_lane = points_in_pose_dtype(mods.map.transform_reference_points_lane)
    # OrionHeadM.init_weights calls mmcv's xavier_init (the loader stubs it): the released function
    src, _ = mpf.function_source(os.path.join(repo, "mmcv", "models", "utils", "weight_init.py"), "xavier_init")
    scope = {"nn": nn}
    exec(src, scope)
    mods.map.xavier_init = mods.det.xavier_init = scope["xavier_init"]
    return mods


def head_configs(repo):
    """(det kwargs, map kwargs, where they came from): the agent config's, else the copy above."""
    path = os.path.join(repo, AGENT_CONFIG)
    det, mapm, source = copy.deepcopy(AGENT_DET), copy.deepcopy(AGENT_MAP), "embedded copy of " + AGENT_CONFIG
    if os.path.exists(path):
        scope = {}
        exec(compile(open(path).read(), path, "exec"), scope)
        det, mapm, source = (copy.deepcopy(scope["model"]["pts_bbox_head"]), copy.deepcopy(scope["model"]["map_head"]),
                             path)
        for name, mine, theirs in (("pts_bbox_head", AGENT_DET, det), ("map_head", AGENT_MAP, mapm)):
            if mine != theirs:
                print("bench_heads_torch: note: %s of %s differs from the embedded copy; using the file" % (name, path))
    for cfg in (det, mapm):
        assert cfg.pop("type") in ("OrionHead", "OrionHeadM")
    return det, mapm, source


def variant_configs(det, mapm, variant, small):
    det, mapm = copy.deepcopy(det), copy.deepcopy(mapm)
    if variant == "plan":
        det.update(use_col_loss=False, pred_traffic_light_state=False)
        mapm.update(num_lane=mapm["num_lanes_one2one"])
    if small:
        for cfg in (det["transformer"], mapm["transformer"]):
            cfg["num_layers"] = SMALL["layers"]
    return det, mapm


def build_heads(mods, repo, det_cfg, map_cfg, seed):
    torch.manual_seed(seed)
    det = mods.det.OrionHead(train_cfg=None, **det_cfg)
    mapm = mods.map.OrionHeadM(train_cfg=None, **map_cfg)
    det.init_weights()
    mapm.init_weights()
    # What Orion.__init__ makes and hands both heads, by its own statements (as make_head_fixtures.make_heads)
    src = os.path.join(repo, "mmcv", "models", "detectors", "orion.py")
    shared = type("Shared", (), {})()
    scope = {"nn": nn, "MLN": mods.misc.MLN, "self": shared, "embed_dims": det.embed_dims}
    for stmt in mhf.init_statements(src, ("self.query_pos", "self.time_embedding", "self.ego_pose_pe")):
        if not stmt.startswith("if "):
            exec(stmt, scope)
    for head in (det, mapm):
        head.query_pos, head.time_embedding = shared.query_pos, shared.time_embedding
        head.ego_pose_pe = shared.ego_pose_pe
    return det, mapm


def geometry(det, mapm, feat):
    """The sizes the frame runs at, read off the built heads."""
    det_q = det.num_extra + det.num_query + det.num_propagated
    g = dict(embed=det.embed_dims, heads=det.transformer.query_decoder._num_heads,
             layers=det.transformer.query_decoder._num_layers, ffn=det.transformer.query_decoder._feedforward_dims,
             memory_ffn=det.memory_decoder_cq._feedforward_dims, in_channels=det.in_channels, out_dims=det.output_dims,
             image_rows=CAMS * feat * feat, det_queries=det_q,
             det_self_keys=det_q + det.memory_len - det.num_propagated,
             det_memory=det.memory_len, det_topk=det.topk_proposals, history_tokens=det.num_memory,
             scene_memory=det.scence_memory_len, map_queries=mapm.num_extra + mapm.num_lane,
             map_self_keys=mapm.num_extra + mapm.num_lane + mapm.memory_len, map_lanes_one2one=mapm.num_lanes_one2one,
             map_memory=mapm.memory_len, motion_queries=det.num_query + det.num_propagated if det.use_col_loss else 0,
             traffic_light_branch=bool(det.pred_traffic_light_state))
    g["motion_queries"] *= det.fut_mode
    return g


def check_real(g):
    """The agent's geometry is the one tests/fixtures/tiny_weights.HEADS_REAL gives the fixtures' query counts."""
    r = tw.HEADS_REAL
    want = dict(embed=256, heads=8, layers=6, ffn=2048, memory_ffn=512, in_channels=1024, out_dims=4096,
                image_rows=r["cams"] * r["feat_h"] * r["feat_w"], det_queries=r["extra"] + r["det_queries"] + r["topk"],
                det_memory=r["memory_len"], det_topk=r["topk"], history_tokens=r["num_memory"],
                scene_memory=r["scene_len"], map_lanes_one2one=r["lanes"], map_memory=r["memory_len"])
    bad = {k: (g[k], v) for k, v in want.items() if g[k] != v}
    assert not bad, ("not the agent's geometry (got, want)", bad)
    assert g["map_queries"] in (r["extra"] + r["lanes"], r["extra"] + r["lanes"] + r["lanes_many"]), g["map_queries"]


def rz(yaw):
    m = np.eye(4)
    m[:2, :2] = [[math.cos(yaw), -math.sin(yaw)], [math.sin(yaw), math.cos(yaw)]]
    return m


def make_frames(n, device, feat_dtype, feat, in_channels, embed, seed):
    """n frames of one stream at 20 Hz: an ego on a curve (tiny_weights.heads_frames' yaw 0.3 + 0.2 t,
    position (2 + 4 t, 1 + 0.8 t^2)), ego_pose = ego2world @ lidar2ego and its rigid inverse, the agent's
    can-bus layout, a command; image features and position embedding from a pool of two random sets."""
    lidar2ego = np.array([[0, 1, 0, -0.39], [-1, 0, 0, 0], [0, 0, 1, 1.84], [0, 0, 0, 1]], dtype=np.float64)
    g = torch.Generator().manual_seed(seed)
    pool = [(torch.randn(1, CAMS, in_channels, feat, feat, generator=g).to(device, feat_dtype),
             torch.randn(1, CAMS * feat * feat, embed, generator=g).to(device, feat_dtype)) for _ in range(2)]
    frames = []
    for k in range(n):
        t = 1.0 + k / FPS
        yaw, x, y = 0.3 + 0.2 * t, 2.0 + 4.0 * t, 1.0 + 0.8 * t * t
        e2w = rz(yaw)
        e2w[:2, 3] = [x, y]
        pose = (e2w @ lidar2ego).astype(np.float32).astype(np.float64)
        inv = np.eye(4)
        inv[:3, :3] = pose[:3, :3].T
        inv[:3, 3] = -pose[:3, :3].T @ pose[:3, 3]
        can = [x, y, 0.0, math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2), math.hypot(4.0, 1.6 * t), 0.0, 0.0,
               0.1 * t, -0.3, 9.81, -0.0, -0.0, -0.2, yaw, math.degrees(yaw)]
        feats, pos = pool[k % 2]
        frames.append((dict(img_feats=feats,
                            timestamp=torch.tensor([t], dtype=torch.float64, device=device),
                            ego_pose=torch.tensor(pose[None], dtype=torch.float32, device=device),
                            ego_pose_inv=torch.tensor(inv[None], dtype=torch.float32, device=device),
                            can_bus=torch.tensor([can], dtype=torch.float32, device=device),
                            command=torch.tensor([float(3 - (k // 40) % 2)], dtype=torch.float32, device=device)),
                       pos))
    return frames


def cast_inputs_to(dtype):
    def hook(module, args):
        return tuple(a.to(dtype) if torch.is_tensor(a) and a.is_floating_point() and a.dtype != dtype else a
                     for a in args)
    return hook


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def run(mods, repo, det_cfg, map_cfg, mode, args, feat):
    """One (mode, variant): build, warm up, time. {det_ms, map_ms, frame_ms, frame_wall_ms, peak_GB, ...}"""
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    det, mapm = build_heads(mods, repo, det_cfg, map_cfg, args.seed)
    dtype = torch.bfloat16 if mode == "bf16" else torch.float32
    det, mapm = det.to(dev, dtype).eval(), mapm.to(dev, dtype).eval()
    hooks = []
    if mode == "bf16":   # the released code's .float() / float32 inputs into bf16 layers (docstring)
        for m in (det.query_pos, det.time_embedding, det.ego_pose_pe, det.can_bus_embed, det.scene_time_embedding):
            hooks.append(m.register_forward_pre_hook(cast_inputs_to(dtype)))
    ATTN["fp16_core"] = mode == "agent" and cuda
    g = geometry(det, mapm, feat)
    frames = make_frames(args.warmup + args.iters, dev, dtype, feat, det.in_channels, det.embed_dims, args.seed + 1)
    metas = [{"scene_token": " "}]
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    det_ms, map_ms, frame_ms, wall_ms = [], [], [], []
    with torch.no_grad():
        for k, (data, pos) in enumerate(frames):
            timed = k >= args.warmup
            if cuda:
                ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
                torch.cuda.synchronize()
                ev[0].record()
            t0 = time.perf_counter()
            _, det_tokens = det(metas, pos, **data)
            if cuda:
                ev[1].record()
            t1 = time.perf_counter()
            _, map_tokens = mapm(metas, pos, **data)
            if cuda:
                ev[2].record()
                torch.cuda.synchronize()
            t2 = time.perf_counter()
            if k == 0:
                tokens = dict(det=list(det_tokens.shape), map=list(map_tokens.shape))
                assert tokens["det"] == [1, det.num_extra + det.num_memory + 1, det.output_dims], tokens
                assert tokens["map"] == [1, mapm.num_extra, mapm.output_dims], tokens
                assert torch.isfinite(det_tokens).all() and torch.isfinite(map_tokens).all()
            if not timed:
                continue
            wall_ms.append((t2 - t0) * 1e3)
            if cuda:
                det_ms.append(ev[0].elapsed_time(ev[1]))
                map_ms.append(ev[1].elapsed_time(ev[2]))
                frame_ms.append(ev[0].elapsed_time(ev[2]))
            else:
                det_ms.append((t1 - t0) * 1e3)
                map_ms.append((t2 - t1) * 1e3)
                frame_ms.append((t2 - t0) * 1e3)
    # the banks are at the agent's sizes (the det bank truncated to 600 at the next pre-update)
    assert det.memory_embedding.shape[1] == det.memory_len + det.topk_proposals
    assert mapm.memory_embedding.shape[1] == mapm.memory_len + mapm.topk_proposals
    assert det.memory_scene_query.shape[1] == det.scence_memory_len + det.num_memory
    out = dict(det_ms=median(det_ms), map_ms=median(map_ms), frame_ms=median(frame_ms), frame_wall_ms=median(wall_ms),
               geometry=g, tokens=tokens)
    if cuda:
        out["peak_GB"] = torch.cuda.max_memory_allocated() / 1e9
    for h in hooks:
        h.remove()
    del det, mapm, frames
    return out


MODE_TEXT = {"agent": "agent: fp32, cross-attention core %s", "fp32": "fp32", "bf16": "eager bf16"}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--orion-repo", required=True, help="a checkout of the released Orion code (mmcv/, adzoo/)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--iters", type=int, default=20, help="timed frames (medians)")
    p.add_argument("--warmup", type=int, default=5, help="untimed frames first (at least 1: frame 0 fills the banks)")
    p.add_argument("--modes", "--dtype", dest="modes", default="agent,bf16",
                   help="comma list of agent (fp32, fp16 core on CUDA), fp32, bf16")
    p.add_argument("--variants", default="released,plan", help="comma list of released, plan")
    p.add_argument("--attn", choices=("auto", "sdpa", "math"), default="auto",
                   help="the flash-attn stand-in: torch SDPA or make_head_fixtures' einsum math; "
                        "auto: sdpa if torch has it")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--small", action="store_true",
                   help="a quick check: %d decoder layer(s), %d x %d grids (not the agent's geometry)"
                        % (SMALL["layers"], SMALL["feat"], SMALL["feat"]))
    p.add_argument("--json")
    args = p.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    variants = [v for v in args.variants.split(",") if v]
    assert all(m in MODE_TEXT for m in modes), modes
    assert all(v in ("released", "plan") for v in variants), variants
    assert args.iters >= 1 and args.warmup >= 1
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("bench_heads_torch: no CUDA device here (use --device cpu)")
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    if args.attn == "sdpa" and not has_sdpa:
        sys.exit("bench_heads_torch: torch %s has no scaled_dot_product_attention (use --attn math)"
                 % torch.__version__)
    ATTN["impl"] = "sdpa" if args.attn == "sdpa" or (args.attn == "auto" and has_sdpa) else "math"
    torch.set_grad_enabled(False)
    mods = load_modules(args.orion_repo)
    det_cfg, map_cfg, source = head_configs(args.orion_repo)
    feat = SMALL["feat"] if args.small else FEAT_H
    assert FEAT_H == FEAT_W
    cuda = args.device.startswith("cuda")
    out = {"device": torch.cuda.get_device_name(torch.device(args.device)) if cuda else "cpu (%d threads)"
           % torch.get_num_threads(), "torch": torch.__version__, "attn_core": ATTN["impl"], "config": source,
           "iters": args.iters, "warmup": args.warmup, "small": args.small, "fps": FPS}
    if cuda:
        out["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
    for variant in variants:
        dc, mc = variant_configs(det_cfg, map_cfg, variant, args.small)
        for mode in modes:
            r = run(mods, args.orion_repo, dc, mc, mode, args, feat)
            if not args.small:
                check_real(r["geometry"])
            out.setdefault("geometry", {})[variant] = r["geometry"]
            out.setdefault("tokens", r["tokens"])
            key = "%s_%s_" % (mode, variant)
            for k in ("det_ms", "map_ms", "frame_ms", "frame_wall_ms", "peak_GB"):
                if k in r:
                    out[key + k] = r[k]
            g = r["geometry"]
            text = MODE_TEXT[mode] % ("fp16" if cuda else "fp32 (cpu)") if mode == "agent" else MODE_TEXT[mode]
            print("bench_heads_torch: %s, %s, %s heads (det %d queries, map %d, %d image rows, %d layers%s), "
                  "core %s: det %.2f ms, map %.2f ms, frame %.2f ms (wall %.2f)%s"
                  % (out["device"], text, variant, g["det_queries"], g["map_queries"], g["image_rows"], g["layers"],
                     ", %d motion queries" % g["motion_queries"] if g["motion_queries"] else "", ATTN["impl"],
                     r["det_ms"], r["map_ms"], r["frame_ms"], r["frame_wall_ms"],
                     "; peak %.2f GB" % r["peak_GB"] if "peak_GB" in r else ""), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
