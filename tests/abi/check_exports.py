#!/usr/bin/env python3
"""libvlahybrid.so exports exactly the public API: the VH_API functions of vlahybrid.h, each
versioned with the node of the release that added it (VLAHYBRID_0 for 0.1, VLAHYBRID_0.2 for 0.2;
the version script lib/vlahybrid.map lists them), and no other symbol (nm -D --defined-only).

    check_exports.py LIBRARY HEADER"""
import re
import subprocess
import sys

library, header = sys.argv[1], sys.argv[2]
with open(header) as f:
    declared = set(re.findall(r"^VH_API\b[^(]*?\b(vh_\w+)\s*\(", f.read(), re.M))
out = subprocess.run(["nm", "-D", "--defined-only", "--with-symbol-versions", library], check=True,
                     capture_output=True, text=True).stdout
exported, unversioned = set(), []
for line in out.splitlines():
    parts = line.split()
    if len(parts) < 3:
        continue
    name = parts[2]
    if parts[1] == "A":  # the version node itself (VLAHYBRID_0)
        continue
    base, _, version = name.partition("@@")
    if not version:
        base, _, version = name.partition("@")
    exported.add(base)
    if not re.fullmatch(r"VLAHYBRID_0(\.[0-9]+)?", version):
        unversioned.append(name)
problems = []
if not declared:
    problems.append(f"no VH_API functions found in {header}")
if exported - declared:
    problems.append("exported but not public API: " + ", ".join(sorted(exported - declared)))
if declared - exported:
    problems.append("public API but not exported: " + ", ".join(sorted(declared - exported)))
if unversioned:
    problems.append("not versioned VLAHYBRID_0*: " + ", ".join(sorted(unversioned)))
if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"{len(exported)} exported symbols, exactly the public API, all versioned VLAHYBRID_0*")
