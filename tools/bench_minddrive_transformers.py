#!/usr/bin/env python3
"""The peer that vh-bench's MindDrive figures are compared with, measured on the same GPU in the same run:
MindDrive's decision half as the released code runs it (github.com/xiaomi-mlab/MindDrive @ 1a4085d;
spec ../shared/specs/orion-minddrive.md section 7), in PyTorch on CUDA, random weights at the real shapes.

  python3 tools/bench_minddrive_transformers.py --size 0.5b|3b [--json OUT.json] [--iters N]
      [--configs NAME,...] [--layers N] [--decision-ids N] [--action-ids N] [--image-at N] [--dry-run]

One frame, as simple_test_pts runs it:
  1. set_adapter("decision_expert"); the decision prefill: the round's text ids embedded by
     embed_tokens around the 529 vision rows (inputs_embeds, as prepare_inputs_labels_for_multimodal
     builds them); the logits of position -2 over the 7 speed tokens' rows, log_softmax, argmax
     (inference_action_distribution);
  2. set_adapter("action_expert"); the action prefill; the final-normed hidden rows at <waypoint_ego>
     (-3) and <path_waypoint_ego> (-1) (inference_waypoints);
  3. the speed planner (7 modes x 6 steps, the decided mode) and the path planner (6 x 20, the
     command's mode), torch modules of the released kinds (mmcv/models/utils/distributions.py), fp32.
The LLM is transformers' Qwen2ForCausalLM (Qwen2-0.5B: hidden 896, 24 layers, 14 / 2 heads of 64,
intermediate 4864; Qwen2.5-3B: 2048, 36, 16 / 2 of 128, 11008; q/k/v biases, rope_theta 1e6, tied
embeddings, 151661 / 151680 rows) with peft's LoraConfig(r=16, lora_alpha=16, lora_dropout=0.05,
q/k/v/o_proj, bias="none"): get_peft_model(adapter_name="action_expert"), then
add_adapter("decision_expert"), unmerged, as misc.py::load_model does. LoRA B is random (not peft's
zeros), so the experts differ.

Prompt lengths: the released prompts tokenised by the Qwen2 tokenizer are not known offline
(doc/minddrive-converter.md does not give them; the spec estimates 40-50 text tokens). The defaults
are the lengths the tiny Qwen2-style tokenizer of the converter's fixture gives (vlahybrid's own
tokeniser on tests/fixtures/tokenizer/tokenizer_json/qwen2-style.tokenizer.json): decision 71 ids
(the final speed token included; 600 rows with the vision tokens), action 108 ids (637 rows), the
image after 38 ids in both. A smaller BPE splits into more pieces, so these are upper estimates;
--decision-ids / --action-ids / --image-at set others.

Configurations (--configs, default all):
  released      fp32, SDPA (transformers 4.45's default), peft unmerged, the full logits of every
                position as Qwen2ForCausalLM's forward computes them (the released read-out)
  fp32_rows     the same, but the decision reads only the speed rows at -2 (hidden @ embed[speed].T)
  bf16_sdpa     bf16 LLM (adapters bf16 too), SDPA, peft unmerged, speed rows only
  bf16_merged   bf16, SDPA, each expert merged: peft cannot merge two adapters of one base into one
                set of weights, so this emulates it with two copies of every attention module (W +
                scale B A per expert) sharing the embedding, norms and MLPs; no LoRA at run time
The planners stay fp32 in every configuration (the released code runs them fp32).

Per configuration, CUDA events after warm-up, medians: decision_ms, action_ms, planners_ms (both),
frame_ms (the three in sequence, adapter switches included) and frames/s, and the peak GPU memory
(torch.cuda.max_memory_allocated from the model's load on: weights + activations). A configuration
that fails (out of memory, an API that moved) is recorded with its error and the others still run.
Needs torch with CUDA, transformers and peft (if peft is missing, a small hand-written unmerged
LoRA of the same math is used and the JSON says so).
"""
import argparse
import json
import sys

SIZES = {
    "0.5b": dict(hidden=896, intermediate=4864, layers=24, heads=14, kv_heads=2, vocab=151661),
    "3b": dict(hidden=2048, intermediate=11008, layers=36, heads=16, kv_heads=2, vocab=151680),
}
CONFIGS = {  # name: (dtype, attention, lora, decision read-out)
    "released": ("float32", "sdpa", "unmerged", "full_logits"),
    "fp32_rows": ("float32", "sdpa", "unmerged", "speed_rows"),
    "bf16_sdpa": ("bfloat16", "sdpa", "unmerged", "speed_rows"),
    "bf16_merged": ("bfloat16", "sdpa", "merged_copies", "speed_rows"),
}
VISION_ROWS, LATENT, LORA_R, LORA_ALPHA = 529, 32, 16, 16
SPEED_MODES, SPEED_STEPS, PATH_MODES, PATH_STEPS = 7, 6, 6, 20
COMMAND = 3                     # lane follow: path mode PA_MAPPING[PATH_MAPPING[3]] = 0
PATH_MODE_OF_COMMAND = [2, 4, 1, 0, 3, 5]
EXPERTS = ("action_expert", "decision_expert")  # peft's registration order (load_model)
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]


def make_planner_class(torch, nn):
    class Planner(nn.Module):
        """A VAE + GRU planner of the released structure at width H (bench_orion_transformers.py's,
        with the modes and steps as parameters): Conv1d k=1 encoder, GRU(32, H/4, 4 layers), MLP,
        decoder 2H -> 2H -> 2H -> 2 modes."""

        def __init__(self, H, modes, steps):
            super().__init__()
            self.H, self.modes, self.steps = H, modes, steps
            self.conv1, self.conv2 = nn.Conv1d(H, 2 * H, 1), nn.Conv1d(2 * H, 2 * H, 1)
            self.conv3, self.last = nn.Conv1d(2 * H, H // 2, 1), nn.Conv1d(H // 2, 2 * LATENT, 1)
            self.gru = nn.GRU(LATENT, H // 4, num_layers=4)
            self.l1, self.l2, self.l3 = nn.Linear(H // 4, H // 2), nn.Linear(H // 2, H), nn.Linear(H, H)
            self.dec = nn.Sequential(nn.Linear(2 * H, 2 * H), nn.ReLU(), nn.Linear(2 * H, 2 * H), nn.ReLU(),
                                     nn.Linear(2 * H, 2 * modes))

        def forward(self, f, mode):
            H, T = self.H, self.steps
            e = torch.relu(self.conv2(torch.relu(self.conv1(f[:, :, None]))))
            m = self.last(self.conv3(e)).permute(0, 2, 1)
            mu, ls = m[..., :LATENT], torch.clamp(m[..., LATENT:], -5, 5)
            z = mu + torch.exp(ls) * torch.randn_like(mu)
            y, _ = self.gru(z.expand(T, 1, LATENT).contiguous(), f.reshape(4, 1, H // 4))
            g = self.l3(torch.relu(self.l2(torch.relu(self.l1(y)))))
            s = torch.cat([f[None].expand(T, 1, H), g], dim=-1)
            preds = torch.stack([self.dec(s[t]).reshape(1, self.modes, 2) for t in range(T)], dim=2)
            return preds[0, mode].cumsum(dim=-2)
    return Planner


def fill_(torch, module, gen, lora_b_std):
    """Weights as vh-synth-checkpoint draws them: matrices N(0, 1/in), biases N(0, 0.02^2), norms 1,
    LoRA B N(0, lora_b_std^2)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, lora_b_std, generator=gen)
            elif p.dim() == 1:
                p.fill_(1.0) if "norm" in name else p.normal_(0.0, 0.02, generator=gen)
            else:
                p.normal_(0.0, p.shape[-1] ** -0.5, generator=gen)


def build_llm(torch, args, size, dtype, attn):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    kw = dict(vocab_size=size["vocab"], hidden_size=size["hidden"], intermediate_size=size["intermediate"],
              num_hidden_layers=args.layers or size["layers"], num_attention_heads=size["heads"],
              num_key_value_heads=size["kv_heads"], max_position_embeddings=32768, rms_norm_eps=1e-6,
              tie_word_embeddings=True, use_sliding_window=False)
    try:
        cfg = Qwen2Config(rope_theta=1e6, **kw)
    except TypeError:  # a transformers where RoPE settings moved
        cfg = Qwen2Config(**kw)
    cfg._attn_implementation = attn
    with torch.device("cuda"):  # built in fp32, then cast (the peak is measured from after the load)
        model = Qwen2ForCausalLM(cfg)
    model = model.to(dtype)
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    if model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
        model.lm_head.weight = model.model.embed_tokens.weight
    return model.eval()


class ManualLora:
    """peft's unmerged LoRA (W x + b + scale B(A x); dropout is the identity in eval) on q/k/v/o, for a
    machine without peft. Same adapter names and set_adapter."""

    def __init__(self, torch, model, dtype):
        import torch.nn as nn
        self.active = [EXPERTS[0]]
        lora = self

        class Wrapped(nn.Module):
            def __init__(self, base):
                super().__init__()
                self.base_layer = base
                self.lora_A = nn.ModuleDict({e: nn.Linear(base.in_features, LORA_R, bias=False) for e in EXPERTS})
                self.lora_B = nn.ModuleDict({e: nn.Linear(LORA_R, base.out_features, bias=False) for e in EXPERTS})

            def forward(self, x):
                e = lora.active[0]
                return self.base_layer(x) + self.lora_B[e](self.lora_A[e](x)) * (LORA_ALPHA / LORA_R)

        for layer in model.model.layers:
            for t in TARGETS:
                base = getattr(layer.self_attn, t)
                w = Wrapped(base).to(device=base.weight.device, dtype=dtype)
                setattr(layer.self_attn, t, w)
        self.model = model

    def set_adapter(self, name):
        self.active[0] = name


def add_experts(torch, model, dtype):
    """get_peft_model(action_expert) + add_adapter(decision_expert), as misc.py::load_model.
    Returns (an object with set_adapter, the Qwen2ForCausalLM with the LoRA layers in it, 'peft ...')."""
    try:
        import peft
        from peft import LoraConfig, get_peft_model
    except ImportError:
        m = ManualLora(torch, model, dtype)
        return m, model, "manual (peft not installed)"
    cfg = LoraConfig(r=LORA_R, lora_alpha=LORA_ALPHA, lora_dropout=0.05, target_modules=list(TARGETS), bias="none")
    try:
        pm = get_peft_model(model, cfg, adapter_name=EXPERTS[0], autocast_adapter_dtype=False)
    except TypeError:  # an older peft
        pm = get_peft_model(model, cfg, adapter_name=EXPERTS[0])
    pm.add_adapter(EXPERTS[1], LoraConfig(r=LORA_R, lora_alpha=LORA_ALPHA, lora_dropout=0.05,
                                          target_modules=list(TARGETS), bias="none"))
    with torch.no_grad():  # the adapters in the model's dtype (peft may keep them fp32)
        for name, p in pm.named_parameters():
            if "lora_" in name and p.dtype != dtype:
                p.data = p.data.to(dtype)
    pm.eval()
    return pm, pm.base_model.model, "peft %s" % peft.__version__


def merged_copies(torch, model, gen, lora_b_std):
    """Two Qwen2ForCausalLMs sharing everything but the attention projections, each with one expert
    merged: W + (alpha/r) B A, for random A, B drawn as for the unmerged LoRA."""
    import copy
    shared = {}
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        if ".self_attn." not in name:
            shared[id(t)] = t
    other = copy.deepcopy(model, shared)
    experts = {}
    with torch.no_grad():
        for name, m in zip(EXPERTS, (model, other)):
            for layer in m.model.layers:
                for t in TARGETS:
                    lin = getattr(layer.self_attn, t)
                    out_f, in_f = lin.weight.shape
                    a = torch.empty(LORA_R, in_f, device="cuda").normal_(0.0, in_f ** -0.5, generator=gen)
                    b = torch.empty(out_f, LORA_R, device="cuda").normal_(0.0, lora_b_std, generator=gen)
                    lin.weight.copy_((lin.weight.float() + (b @ a) * (LORA_ALPHA / LORA_R)).to(lin.weight.dtype))
            experts[name] = m
    return experts


def run_config(torch, args, name, size):
    from bench_transformers import cuda_time_ms  # the same timing as the other peers (tools/)
    import torch.nn as nn
    dtype_name, attn, lora, readout = CONFIGS[name]
    dtype = getattr(torch, dtype_name)
    torch.cuda.empty_cache()
    gen = torch.Generator(device="cuda").manual_seed(0)
    lora_b_std = 0.1 / LORA_R ** 0.5
    model = build_llm(torch, args, size, dtype, attn)
    fill_(torch, model, gen, lora_b_std)
    if lora == "unmerged":
        switch, lm, lora_impl = add_experts(torch, model, dtype)
        fill_(torch, lm, gen, lora_b_std)  # the LoRA factors too (B nonzero)
        by_expert = {e: lm for e in EXPERTS}
    else:
        by_expert = merged_copies(torch, model, gen, lora_b_std)
        switch, lm, lora_impl = None, model, "merged copies of the attention"
    Planner = make_planner_class(torch, nn)
    H = size["hidden"]
    speed_planner = Planner(H, SPEED_MODES, SPEED_STEPS).to("cuda").eval()  # fp32, as released
    path_planner = Planner(H, PATH_MODES, PATH_STEPS).to("cuda").eval()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()

    embed = lm.model.embed_tokens
    V = size["vocab"]
    speed_ids = torch.arange(V - 15, V - 15 + SPEED_MODES, device="cuda")  # the first 7 of the 15 added
    vision = torch.randn(1, VISION_ROWS, H, dtype=dtype, device="cuda", generator=gen)

    def round_ids(n):  # text ids around the image; the last ones are the round's added tokens
        ids = torch.randint(0, V - 15, (n,), device="cuda", generator=gen)
        return ids[:args.image_at], ids[args.image_at:]
    dec_before, dec_after = round_ids(args.decision_ids)
    dec_after[-1] = speed_ids[0]
    act_before, act_after = round_ids(args.action_ids)
    act_after[-3], act_after[-1] = V - 2, V - 1  # <waypoint_ego>, <path_waypoint_ego>

    def embeds(before, after):
        return torch.cat([embed(before)[None], vision, embed(after)[None]], dim=1)

    def use(expert):
        if switch is not None:
            switch.set_adapter(expert)
        return by_expert[expert]

    def decision():
        m = use("decision_expert")
        x = embeds(dec_before, dec_after)
        if readout == "full_logits":
            logits = m(inputs_embeds=x, use_cache=True).logits[0, -2, speed_ids]
        else:
            h = m.model(inputs_embeds=x, use_cache=True).last_hidden_state[0, -2]
            logits = h @ embed.weight[speed_ids].T
        return torch.log_softmax(logits.float(), dim=-1).argmax()

    def action():
        m = use("action_expert")
        h = m.model(inputs_embeds=embeds(act_before, act_after), use_cache=True).last_hidden_state[0]
        return h[[-3, -1]].float()

    def planners(speed_mode, features):
        return (speed_planner(features[0:1], speed_mode),
                path_planner(features[1:2], PATH_MODE_OF_COMMAND[COMMAND]))

    def frame():
        mode = decision()
        return planners(mode, action())

    features = torch.randn(2, H, device="cuda", generator=gen)
    mode0 = torch.tensor(0, device="cuda")
    with torch.no_grad():
        out = {"decision_ms": cuda_time_ms(decision, args.iters, args.warmup),
               "action_ms": cuda_time_ms(action, args.iters, args.warmup),
               "planners_ms": cuda_time_ms(lambda: planners(mode0, features), args.iters, args.warmup),
               "frame_ms": cuda_time_ms(frame, args.iters, args.warmup)}
        speed, path = frame()
        out["finite"] = bool(torch.isfinite(speed).all() and torch.isfinite(path).all())
    out["frames_per_s"] = 1e3 / out["frame_ms"]
    out["peak_gpu_bytes"] = torch.cuda.max_memory_allocated()
    out["llm_weight_bytes"] = sum(p.numel() * p.element_size() for p in
                                  {id(p): p for m in by_expert.values() for p in m.parameters()}.values())
    out.update(dtype=dtype_name, attention=attn, lora=lora_impl, decision_readout=readout)
    del model, lm, by_expert, switch, speed_planner, path_planner
    torch.cuda.empty_cache()
    return out


def describe(args, size):
    layers = args.layers or size["layers"]
    lines = ["MindDrive %s: Qwen2 hidden %d, %d layers, %d / %d heads, intermediate %d, %d embedding rows; "
             "LoRA r %d alpha %d on q/k/v/o, two experts; speed planner %d x %d, path planner %d x %d"
             % (args.size, size["hidden"], layers, size["heads"], size["kv_heads"], size["intermediate"],
                size["vocab"], LORA_R, LORA_ALPHA, SPEED_MODES, SPEED_STEPS, PATH_MODES, PATH_STEPS),
             "decision round %d rows (%d text ids + %d vision, logits at -2); action round %d rows (%d + %d, "
             "hidden rows -3 and -1); image after %d ids"
             % (args.decision_ids + VISION_ROWS, args.decision_ids, VISION_ROWS, args.action_ids + VISION_ROWS,
                args.action_ids, VISION_ROWS, args.image_at),
             "iterations %d after %d warm-up, medians" % (args.iters, args.warmup)]
    for name in args.configs:
        d, a, lora, r = CONFIGS[name]
        lines.append("  %-12s %-9s %-5s LoRA %-14s decision read-out %s" % (name, d, a, lora, r))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(SIZES), default="0.5b")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--layers", type=int, default=0, help="LLM layers (default: the size's)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated, of: " + ", ".join(CONFIGS))
    ap.add_argument("--decision-ids", type=int, default=71, help="the decision round's text ids (default 71)")
    ap.add_argument("--action-ids", type=int, default=108, help="the action round's text ids (default 108)")
    ap.add_argument("--image-at", type=int, default=38, help="text ids before the image (default 38)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--dry-run", action="store_true", help="print the configurations and exit (no torch needed)")
    args = ap.parse_args()
    args.configs = [c for c in args.configs.split(",") if c]
    bad = [c for c in args.configs if c not in CONFIGS]
    if bad or not args.configs:
        ap.error("unknown configuration(s) %s; choose from %s" % (bad, ", ".join(CONFIGS)))
    if args.iters < 1 or args.warmup < 0 or args.layers < 0:
        ap.error("--iters must be >= 1, --warmup and --layers >= 0")
    if not (0 <= args.image_at < args.decision_ids - 2 and args.image_at < args.action_ids - 3):
        ap.error("--image-at must leave the decision round 2 and the action round 3 ids after the image")
    size = SIZES[args.size]
    print(describe(args, size), flush=True)
    if args.dry_run:
        return 0
    try:
        import torch
        import transformers
    except ImportError as exc:
        print("error: %s (this peer needs torch with CUDA and transformers: run it on the GPU machine)" % exc,
              file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("error: no CUDA device (this peer measures on the GPU)", file=sys.stderr)
        return 1
    results = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "transformers": transformers.__version__, "size": args.size,
               "layers": args.layers or size["layers"], "decision_rows": args.decision_ids + VISION_ROWS,
               "action_rows": args.action_ids + VISION_ROWS, "iters": args.iters, "configs": {}}
    for name in args.configs:
        try:
            r = run_config(torch, args, name, size)
        except Exception as exc:  # out of memory, an API that moved: recorded, the others still run
            r = {"error": "%s: %s" % (type(exc).__name__, exc)}
            torch.cuda.empty_cache()
        results["configs"][name] = r
        if "error" in r:
            print("%-12s failed: %s" % (name, r["error"]), flush=True)
        else:
            print("%-12s decision %.2f ms, action %.2f ms, planners %.2f ms, frame %.2f ms (%.2f frames/s), "
                  "peak %.2f GB, %s%s" % (name, r["decision_ms"], r["action_ms"], r["planners_ms"], r["frame_ms"],
                                          r["frames_per_s"], r["peak_gpu_bytes"] / 1e9, r["lora"],
                                          "" if r["finite"] else ", NOT FINITE"), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0 if all("error" not in r for r in results["configs"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
