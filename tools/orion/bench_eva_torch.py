#!/usr/bin/env python3
"""The peer of bench/bench_eva: Orion's camera ViT as the released code runs it, in PyTorch, on the
same GPU in the same device call.

  python3 tools/orion/bench_eva_torch.py --orion-repo PATH [--images 6] [--iters 20] [--json OUT]

PATH: a checkout of the released Orion code holding mmcv/models/backbones/eva_vit.py (loaded unchanged
through tests/fixtures/eva/make_eva_fixtures.py's loader and stand-ins). The module: EVAViT as the
agent config builds it (640 x 640, patch 16, embed 1024, 24 blocks, 16 heads, SwiGLU 2730, windows of
16 in every block but 2, 5, ..., 23), random weights (the cost does not depend on them), --images
images a frame, the module's forward (patch embedding, position table, blocks). Its attention is
flash_attn=True as the agent sets it; the flash-attn package is a compiled op this machine lacks, so
its FlashAttention module is stood in for by torch's scaled_dot_product_attention with the same math
(softmax(q k^T / sqrt(hd)) v, no mask, no dropout). Timed with CUDA events after warm-up, medians:
  - agent: fp32 weights under torch.autocast(float16), as the agent runs the ViT;
  - bf16: the module in bfloat16, no autocast (PyTorch eager bf16).
Peak GPU memory of each.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures", "eva"))
from bench_transformers import cuda_time_ms  # noqa: E402  (the project's peer timing)
import make_eva_fixtures  # noqa: E402

WINDOW_BLOCKS = [0, 1, 3, 4, 6, 7, 9, 10, 12, 13, 15, 16, 18, 19, 21, 22]


class FlashAttentionStandIn(torch.nn.Module):
    """flash_attn's FlashAttention(q, kv): q [B, N, H, C], kv [B, N, 2, H, C] -> ([B, N, H, C], None)."""

    def __init__(self, attention_dropout=0.0, device=None, dtype=None):
        super().__init__()

    def forward(self, q, kv, key_padding_mask=None, causal=False):
        k, v = kv.unbind(2)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return out.transpose(1, 2), None


def build(eva, depth):
    model = eva.EVAViT(img_size=640, patch_size=16, window_size=16, in_chans=3, embed_dim=1024, depth=depth,
                       num_heads=16, mlp_ratio=4 * 2 / 3, window_block_indexes=[i for i in WINDOW_BLOCKS if i < depth],
                       qkv_bias=True, drop_path_rate=0.0, flash_attn=True, with_cp=False)
    return model.cuda().eval()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--orion-repo", required=True)
    p.add_argument("--images", type=int, default=6)
    p.add_argument("--depth", type=int, default=24)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--json")
    args = p.parse_args()
    eva = make_eva_fixtures.load_eva_module(args.orion_repo)
    eva.FlashAttention = FlashAttentionStandIn  # the name eva_vit.py imported (the loader's stub: object)
    torch.manual_seed(0)
    x = torch.randn(args.images, 3, 640, 640, device="cuda")
    out = {"images": args.images, "depth": args.depth, "device": torch.cuda.get_device_name(), "torch": torch.__version__}
    with torch.no_grad():
        model = build(eva, args.depth)
        torch.cuda.reset_peak_memory_stats()
        with torch.autocast("cuda", dtype=torch.float16):
            out["agent_fp16_autocast_ms"] = cuda_time_ms(lambda: model(x), args.iters)
        out["agent_peak_GB"] = torch.cuda.max_memory_allocated() / 1e9
        model = model.to(torch.bfloat16)
        xb = x.to(torch.bfloat16)
        torch.cuda.reset_peak_memory_stats()
        out["bf16_ms"] = cuda_time_ms(lambda: model(xb), args.iters)
        out["bf16_peak_GB"] = torch.cuda.max_memory_allocated() / 1e9
    print("bench_eva_torch: %s, EVAViT %d blocks, %d images of 640 x 640: agent (fp16 autocast) %.2f ms, "
          "bf16 %.2f ms; peak %.2f / %.2f GB" % (out["device"], args.depth, args.images, out["agent_fp16_autocast_ms"],
                                                 out["bf16_ms"], out["agent_peak_GB"], out["bf16_peak_GB"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
