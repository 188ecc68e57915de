"""Summarise tools/kernel-profile.sh's Nsight Compute CSV: per phase of the frame (vision: before
the first embedding gather; prefill: up to the first argmax; decode: the rest), the kernel time and
each kernel's share (cuBLASLt's kernels summed as one). ncu serialises kernels and locks clocks, so
absolute times are above a normal run's; the shares are what it is for."""
import collections
import csv
import sys

rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head, rows = rows[0], rows[1:]
ki, vi, ui = head.index("Kernel Name"), head.index("Metric Value"), head.index("Metric Unit")
to_us = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
seq = [(r[ki].split("(")[0], float(r[vi].replace(",", "")) * to_us[r[ui]]) for r in rows]
names = [n for n, _ in seq]
llm = next((i for i, n in enumerate(names) if n.startswith("k_embed_rows")), len(seq))
head_end = next((i for i, n in enumerate(names) if n.startswith("k_argmax")), len(seq) - 1) + 1
for phase, part in (("vision", seq[:llm]), ("prefill", seq[llm:head_end]), ("decode", seq[head_end:])):
    if not part:
        continue
    total = sum(t for _, t in part)
    print(f"{phase}: {len(part)} launches, {total / 1000:.2f} ms of kernel time")
    agg = collections.defaultdict(float)
    for n, t in part:
        agg["cuBLASLt GEMMs" if ("nvjet" in n or "cublas" in n or "cutlass" in n) else n] += t
    for n, t in sorted(agg.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {100 * t / total:5.1f}%  {n}")
