#!/usr/bin/env python3
"""Mean / p50 / count of a Chrome trace's spans (vh trace_path output), grouped by name with digits
folded where they number frames and passes ("pass 12: 2 prefill + 12 steps" -> "pass #: 2 prefill +
12 steps", "prefill f12" -> "prefill f#"):
    python3 tools/trace_spans.py TRACE.json"""
import json
import re
import statistics
import sys

events = json.load(open(sys.argv[1]))
events = events.get("traceEvents", events) if isinstance(events, dict) else events
groups = {}
for ev in events:
    if ev.get("ph") != "X":
        continue
    name = ev.get("name", "")
    key = re.sub(r"\bf\d+\b", "f#", re.sub(r"^pass \d+:", "pass #:", name))
    groups.setdefault((ev.get("tid"), key), []).append(ev.get("dur", 0) / 1000.0)
for (tid, key), durs in sorted(groups.items(), key=lambda kv: -sum(kv[1])):
    print(f"track {tid}  {key:<32} n={len(durs):5d}  mean {statistics.mean(durs):8.3f} ms  "
          f"p50 {statistics.median(durs):8.3f} ms  total {sum(durs):9.1f} ms")
