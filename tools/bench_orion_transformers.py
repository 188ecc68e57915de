#!/usr/bin/env python3
"""The peer that vh-bench's Orion figures are compared with, measured on the same GPU in the same run:
Orion's decision half as the released agent runs it, in PyTorch.

  python3 tools/bench_orion_transformers.py [--json OUT.json] [--iters N] [--layers 32]

One decision = transformers' LlamaModel with Vicuna-7B shapes (hidden 4096, 32 layers, 11008, vocab
32001 rows; random weights, LoRA merged: the same cost) over the agent's 599 rows given as
inputs_embeds (35 text + 529 vision tokens + 35 text), the final-normed hidden state at row 597,
then the planner with Orion's shapes built from torch modules of the same kinds as the original
(Conv1d k=1 encoder, GRU(32, 1024, 4 layers), Linear MLP and decoder; mmcv/models/utils/
distributions.py and orion.py), the latent sampled as the agent does. Measured with CUDA events after
warm-up, medians, in the agent's precision (fp32 LLM and planner, eager attention, as
transformers 4.31) and in bf16 (the LLM; SDPA and eager). Peak GPU memory of each configuration.
"""
import argparse
import json

import torch
import torch.nn as nn

from bench_transformers import cuda_time_ms  # the same timing as the OpenVLA peer (tools/)

ROWS, READOUT, H, LATENT, MODES, STEPS = 599, 597, 4096, 32, 6, 6


class Planner(nn.Module):
    """Orion's VAE + GRU planner at hidden size H (the shapes of its checkpoint)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv1d(H, 2 * H, 1), nn.Conv1d(2 * H, 2 * H, 1)
        self.conv3, self.last = nn.Conv1d(2 * H, H // 2, 1), nn.Conv1d(H // 2, 2 * LATENT, 1)
        self.gru = nn.GRU(LATENT, H // 4, num_layers=4)
        self.l1, self.l2, self.l3 = nn.Linear(H // 4, H // 2), nn.Linear(H // 2, H), nn.Linear(H, H)
        self.dec = nn.Sequential(nn.Linear(2 * H, 2 * H), nn.ReLU(), nn.Linear(2 * H, 2 * H), nn.ReLU(),
                                 nn.Linear(2 * H, 2 * MODES))

    def forward(self, f, command):
        e = torch.relu(self.conv2(torch.relu(self.conv1(f[:, :, None]))))
        m = self.last(self.conv3(e)).permute(0, 2, 1)
        mu, ls = m[..., :LATENT], torch.clamp(m[..., LATENT:], -5, 5)
        z = mu + torch.exp(ls) * torch.randn_like(mu)
        y, _ = self.gru(z.expand(STEPS, 1, LATENT).contiguous(), f.reshape(4, 1, H // 4))
        g = self.l3(torch.relu(self.l2(torch.relu(self.l1(y)))))
        s = torch.cat([f[None].expand(STEPS, 1, H), g], dim=-1)
        preds = torch.stack([self.dec(s[t]).reshape(1, MODES, 2) for t in range(STEPS)], dim=2)
        return preds[0, command].cumsum(dim=-2)


def decision(args, dtype, attn):
    from transformers import LlamaConfig, LlamaModel
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    cfg = LlamaConfig(vocab_size=32001, hidden_size=H, intermediate_size=11008, num_hidden_layers=args.layers,
                      num_attention_heads=32, rms_norm_eps=1e-5, max_position_embeddings=4096)
    cfg._attn_implementation = attn
    with torch.device("meta"):
        llm = LlamaModel(cfg)
    llm = llm.to_empty(device="cuda").to(dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    with torch.no_grad():
        for p in llm.parameters():
            if p.dim() == 1:
                p.fill_(1.0)
            else:
                p.normal_(0.0, p.shape[-1] ** -0.5, generator=gen)
    planner = Planner().to("cuda").eval()  # fp32, as the agent
    llm.eval()
    embeds = torch.randn(1, ROWS, H, dtype=dtype, device="cuda", generator=gen)

    def llm_only():
        return llm(inputs_embeds=embeds, use_cache=True).last_hidden_state[:, READOUT]

    def whole():
        return planner(llm_only().float(), 3)
    with torch.no_grad():
        prefill = cuda_time_ms(llm_only, args.iters)
        total = cuda_time_ms(whole, args.iters)
        f = torch.randn(1, H, device="cuda")
        plan = cuda_time_ms(lambda: planner(f, 3), args.iters)
    peak = torch.cuda.max_memory_allocated()
    del llm, planner
    torch.cuda.empty_cache()
    return {"prefill_ms": prefill, "planner_ms": plan, "decision_ms": total, "decisions_per_s": 1e3 / total,
            "peak_gpu_bytes": peak}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--json")
    args = ap.parse_args()
    import transformers
    results = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "transformers": transformers.__version__, "rows": ROWS}
    for name, dtype, attn in (("fp32_eager", torch.float32, "eager"), ("bf16_eager", torch.bfloat16, "eager"),
                              ("bf16_sdpa", torch.bfloat16, "sdpa")):
        results[name] = decision(args, dtype, attn)
        r = results[name]
        print(f"transformers {name:10s}: prefill {ROWS} rows {r['prefill_ms']:.2f} ms, planner {r['planner_ms']:.2f} ms, "
              f"decision {r['decision_ms']:.2f} ms ({r['decisions_per_s']:.2f}/s), peak {r['peak_gpu_bytes'] / 1e9:.2f} GB",
              flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
