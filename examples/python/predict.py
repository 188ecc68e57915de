#!/usr/bin/env python3
"""vlahybrid from Python: one action for an image, then a stream of frames.

    predict.py [MODEL_DIR] [IMAGE]

Defaults: the bundled tiny model and a synthetic scene (an IMAGE file needs PIL). From a build
tree, without installing, at the source root (`meson devenv` starts in the build folder unless -w
says where, and its `python3` is the interpreter meson was configured with):

    meson devenv -C build -w . python3 examples/python/predict.py
"""
import os
import sys

try:
    import vlahybrid  # first: without numpy it says which interpreter lacks it and what to do
except ImportError as e:
    sys.exit(f"predict.py: {e}")
import numpy as np

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
model = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "models", "openvla-tiny")
if len(sys.argv) > 2:
    from PIL import Image
    image = Image.open(sys.argv[2])           # converted to RGB by the binding
else:
    image = np.full((240, 320, 3), 120, np.uint8)
    image[120:160, 100:140] = (200, 30, 30)   # a red block on a grey table

print("vlahybrid", vlahybrid.version(), "from", vlahybrid.library_path())
print("Python", sys.version.split()[0], "from", sys.executable)
try:
    session = vlahybrid.Session(model, backends="cpu_generic")
except vlahybrid.Error as e:                  # e.g. BadModelError, BackendNotFoundError
    sys.exit(f"cannot load {model}: {e}")
with session:
    action = session.predict(image, "pick up the red block")   # numpy float64 [7]
    print("action:", np.array2string(action, precision=4))

    # streaming: submit from a camera loop, poll from a control loop (here one after the other)
    ids = [session.submit(image, "pick up the red block", tag=i) for i in range(3)]
    for _ in ids:
        a = session.poll(timeout_ms=10000)
        print(f"frame {a.frame_id} tag {a.tag}: {a.status_name}",
              a.values.round(4) if a.ok else a.message,
              f"{(a.timings['finished_ns'] - a.timings['submitted_ns']) / 1e6:.1f} ms")
    print("completed:", session.stats()["completed"])
