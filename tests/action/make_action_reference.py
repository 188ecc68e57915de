#!/usr/bin/env python3
"""Reference for OpenVLA's action de-tokenisation, computed with numpy exactly as
OpenVLAForActionPrediction.predict_action does (prismatic/extern/hf/modeling_prismatic.py):

    bins = np.linspace(-1, 1, n_action_bins); bin_centers = (bins[:-1] + bins[1:]) / 2.0
    vocab_size = text_config.vocab_size - pad_to_multiple_of
    discretized = np.clip(vocab_size - token_ids - 1, 0, bin_centers.shape[0] - 1)
    normalized = bin_centers[discretized]
    actions = np.where(mask, 0.5 * (normalized + 1) * (q99 - q01) + q01, normalized)

Writes tests/fixtures/action/reference.json. Run with a Python that has numpy:
    python3 tests/action/make_action_reference.py
"""
import json
import os

import numpy as np

rng = np.random.default_rng(20261130)
cases = []
for n_bins in (256, 64):
    vocab = 32000
    bins = np.linspace(-1, 1, n_bins)
    centers = (bins[:-1] + bins[1:]) / 2.0
    for dim in (7, 3):
        q01 = rng.normal(-0.05, 0.1, dim)
        q99 = q01 + np.abs(rng.normal(0.2, 0.1, dim))
        mask = rng.random(dim) > 0.3
        # tokens across the action range, its edges, the padded vocabulary and ordinary words
        tokens = [vocab - 1, vocab - n_bins, vocab - n_bins - 1, vocab, vocab + 63, 0, 29871, vocab - 2]
        tokens += list(rng.integers(vocab - n_bins - 3, vocab + 3, 24))
        rows = []
        for start in range(0, len(tokens) - dim + 1, dim):
            ids = np.array(tokens[start:start + dim], dtype=np.int64)
            discretized = np.clip(vocab - ids - 1, a_min=0, a_max=centers.shape[0] - 1)
            normalized = centers[discretized]
            actions = np.where(mask, 0.5 * (normalized + 1) * (q99 - q01) + q01, normalized)
            rows.append({"token_ids": [int(t) for t in ids], "action": [float(a) for a in actions]})
        cases.append({"vocab_unpadded": vocab, "n_action_bins": n_bins, "q01": [float(x) for x in q01],
                      "q99": [float(x) for x in q99], "mask": [bool(m) for m in mask],
                      "bin_centers": [float(c) for c in centers], "rows": rows})

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "action", "reference.json")
with open(out, "w") as f:
    # repr-exact floats: json writes the shortest string that round-trips to the same double
    json.dump({"generator": "tests/action/make_action_reference.py", "numpy": np.__version__, "cases": cases}, f)
print("wrote", os.path.normpath(out))
