#!/usr/bin/env python3
"""The peer and the physical floors that vh-bench's OpenVLA-7B figures are compared with, measured on
the same GPU in the same run.

  python3 tools/bench_transformers.py [--json OUT.json] [--iters N] [--prompt 280] [--layers 32]

Measures, with CUDA events after warm-up, medians:
  - the floors: device-to-device copy bandwidth (bytes read + written) and the bf16 GEMM rate of
    cuBLAS(Lt) through torch.matmul (8192^3, and the Llama-2-7B MLP shape at 280 rows);
  - transformers' LlamaForCausalLM with Llama-2-7B shapes (vocab 32064 as OpenVLA) in bf16, random
    weights: a prefill of --prompt rows given as inputs_embeds (the image patches + text), and
    generate() of 7 new tokens (one OpenVLA action), with eager attention and with SDPA;
  - timm's two OpenVLA vision towers (DINOv2 ViT-L/14-reg4 and SigLIP so400m/14 at 224 px) in bf16,
    run to their second-to-last block as OpenVLA does.
Needs torch, transformers and timm (the GPU machine has them). Prints a table and writes JSON.
"""
import argparse
import json
import time

import torch


def cuda_time_ms(fn, iters, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def floors(iters):
    n = 1 << 30  # 2 GiB of bf16 each way
    src = torch.randn(n, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    ms = cuda_time_ms(lambda: dst.copy_(src), iters)
    copy_gbs = 2 * n * 2 / (ms / 1e3) / 1e9
    out = {"copy_GBps": copy_gbs}
    for name, (m, k, n_) in {"gemm_8192": (8192, 8192, 8192), "gemm_280x4096x11008": (280, 4096, 11008)}.items():
        a = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
        b = torch.randn(k, n_, dtype=torch.bfloat16, device="cuda")
        ms = cuda_time_ms(lambda: a @ b, iters)
        out[name + "_TFLOPs"] = 2 * m * k * n_ / (ms / 1e3) / 1e12
    del src, dst
    return out


def llama(args, attn):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=32064, num_hidden_layers=args.layers, torch_dtype="bfloat16")
    cfg._attn_implementation = attn
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    model = model.to_empty(device="cuda").to(torch.bfloat16)
    gen = torch.Generator(device="cuda").manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.fill_(1.0)
            else:
                p.normal_(0.0, p.shape[-1] ** -0.5, generator=gen)
    model.eval()
    model.generation_config.eos_token_id = None  # always 7 new tokens, like an action
    model.generation_config.pad_token_id = 0
    embeds = torch.randn(1, args.prompt, cfg.hidden_size, dtype=torch.bfloat16, device="cuda", generator=gen)
    mask = torch.ones(1, args.prompt, dtype=torch.long, device="cuda")
    with torch.no_grad():
        prefill = cuda_time_ms(lambda: model(inputs_embeds=embeds, attention_mask=mask, use_cache=True), args.iters)
        action = cuda_time_ms(lambda: model.generate(inputs_embeds=embeds, attention_mask=mask, max_new_tokens=7,
                                                     min_new_tokens=7, do_sample=False, num_beams=1), args.iters)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    del model
    torch.cuda.empty_cache()
    return {"prefill_ms": prefill, "action_ms": action, "actions_per_s": 1e3 / action, "weight_bytes": weight_bytes}


def vision(args):
    import timm
    towers = [timm.create_model("vit_large_patch14_reg4_dinov2.lvd142m", pretrained=False, num_classes=0, img_size=224),
              timm.create_model("vit_so400m_patch14_siglip_224", pretrained=False, num_classes=0, img_size=224)]
    towers = [t.to("cuda", torch.bfloat16).eval() for t in towers]
    x = torch.randn(1, 3, 224, 224, dtype=torch.bfloat16, device="cuda")

    def run():
        for t in towers:
            t.get_intermediate_layers(x, n={len(t.blocks) - 2})
    with torch.no_grad():
        ms = cuda_time_ms(run, args.iters)
    return {"vision_ms": ms}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--prompt", type=int, default=280, help="prefill rows: 1 BOS + 256 patches + text")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    import transformers
    results = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "transformers": transformers.__version__, "prompt_rows": args.prompt}
    results["floors"] = floors(args.iters)
    for attn in ("eager", "sdpa"):
        results["llama_" + attn] = llama(args, attn)
    try:
        results["timm_towers"] = vision(args)
    except Exception as exc:  # timm missing: the rest still stands
        results["timm_towers"] = {"error": repr(exc)}
    f = results["floors"]
    w = results["llama_sdpa"]["weight_bytes"]
    # a decode step reads every weight once; the copy's total traffic rate is the memory's rate
    results["floor_decode_step_ms"] = w / (f["copy_GBps"] * 1e9) * 1e3
    print(json.dumps(results, indent=1))
    print(f"\n{results['gpu']}: copy {f['copy_GBps']:.0f} GB/s (r+w), bf16 GEMM {f['gemm_8192_TFLOPs']:.0f} TFLOP/s"
          f" (280x4096x11008: {f['gemm_280x4096x11008_TFLOPs']:.0f})")
    for attn in ("eager", "sdpa"):
        r = results["llama_" + attn]
        print(f"transformers {attn:5s}: prefill {args.prompt} rows {r['prefill_ms']:.2f} ms, "
              f"generate 7 tokens {r['action_ms']:.2f} ms ({r['actions_per_s']:.2f} actions/s)")
    print(f"timm towers: {results['timm_towers']}")
    print(f"decode-step floor ({w / 1e9:.2f} GB of weights at the copy rate): {results['floor_decode_step_ms']:.2f} ms")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
