#!/usr/bin/env python3
"""PyTorch's CPU bf16 time for one Llama-2-7B decoder block (transformers' LlamaDecoderLayer), the peer
of cpu_amx's and cpu_generic's block figures: `rows` new tokens (a prefill of 286, or one decode step
over a 286-token KV cache), median of several runs, torch.set_num_threads(--threads). Also OpenVLA's
two vision towers as timm builds them (DINOv2-L/14 with registers, SigLIP so400m/14 at 224), whole,
on one image: the peer of the CPU backends' vision figure.

  python3 tools/bench_torch_cpu.py [--threads N] [--json OUT]
"""
import argparse
import json
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=0, help="0: torch's default")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from transformers import LlamaConfig
    from transformers.cache_utils import DynamicCache
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    cfg = LlamaConfig(torch_dtype="bfloat16")
    cfg._attn_implementation = "sdpa"
    layer = LlamaDecoderLayer(cfg, layer_idx=0).to(torch.bfloat16).eval()
    rope = LlamaRotaryEmbedding(cfg)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (p.shape[-1] ** -0.5) if p.dim() > 1 else torch.ones(p.shape))

    def run(rows, past):
        x = torch.randn(1, rows, cfg.hidden_size, dtype=torch.bfloat16, generator=g)
        pos = torch.arange(past, past + rows)[None]
        cos, sin = rope(x, pos)
        if past:  # a KV cache of `past` tokens, as a decode step sees it
            k = torch.randn(1, cfg.num_key_value_heads, past, cfg.hidden_size // cfg.num_attention_heads,
                            dtype=torch.bfloat16, generator=g)
        times = []
        with torch.no_grad():
            for i in range(args.iters + 2):
                c = DynamicCache()
                if past:
                    c.update(k, k.clone(), 0)
                t0 = time.perf_counter()
                # no mask: SDPA is causal over a prefill and sees the whole cache for one row
                layer(x, attention_mask=None, position_ids=pos, past_key_values=c, use_cache=True,
                      cache_position=pos[0], position_embeddings=(cos, sin))
                times.append((time.perf_counter() - t0) * 1e3)
        times = sorted(times[2:])
        return times[len(times) // 2]

    res = {"torch": torch.__version__, "threads": torch.get_num_threads(),
           "block_286_rows_ms": run(286, 0), "block_1_row_kv286_ms": run(1, 286)}
    res.update(towers(args.iters))
    print(json.dumps(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f)


def towers(iters):
    """Both towers (timm, random weights, bf16) on one 224x224 image, as OpenVLA runs them (features
    of the second-to-last block), median ms; and per block (the towers' time over their blocks)."""
    try:
        import timm
    except ImportError:
        return {}
    specs = [("vit_large_patch14_reg4_dinov2.lvd142m", 24), ("vit_so400m_patch14_siglip_224", 27)]
    out = {}
    x = torch.randn(1, 3, 224, 224, dtype=torch.bfloat16)
    for name, depth in specs:
        m = timm.create_model(name, pretrained=False, num_classes=0, img_size=224).to(torch.bfloat16).eval()
        times = []
        with torch.no_grad():
            for i in range(iters + 2):
                t0 = time.perf_counter()
                m.get_intermediate_layers(x, n={len(m.blocks) - 2})
                times.append((time.perf_counter() - t0) * 1e3)
        times = sorted(times[2:])
        out[name + "_ms"] = times[len(times) // 2]
        out[name + "_per_block_ms"] = times[len(times) // 2] / (depth - 1)
    return out


if __name__ == "__main__":
    main()
