#!/usr/bin/env python3
"""The commands doc/python.md and examples/python/predict.py give for a build tree work as
written: `meson devenv -C BUILD -w SOURCE python3 examples/python/predict.py`, and the README's
snippet (a model path relative to the source root) under the same devenv, even when the first
python3 on PATH cannot import numpy (a pyenv build without Debian's packages: devenv's python3 is
the configured interpreter). Under such an interpreter itself, importing the package says which
interpreter lacks numpy and how to fix it."""
import os
import subprocess
import sys
import tempfile
import unittest

import vh_test  # first: exits 77 without numpy

MESON = os.environ.get("VH_MESON")
BUILD_DIR = os.environ.get("VLAHYBRID_BUILD_DIR")
SNIPPET = """
import numpy as np, vlahybrid
with vlahybrid.Session("models/openvla-tiny", backends="cpu_generic") as s:
    image = np.zeros((224, 224, 3), np.uint8)
    print(s.predict(image, "pick up the red block"))
    frame_id = s.submit(image, "open the drawer", tag=1)
    print(s.poll(timeout_ms=60000))
"""


def python_without_numpy(folder):
    """A `python3` in `folder` that runs this interpreter without its site packages (so without
    numpy, as a pyenv python3 without Debian's packages)."""
    path = os.path.join(folder, "python3")
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    os.chmod(path, 0o755)
    probe = subprocess.run([path, "-c", "import numpy"], capture_output=True)
    return path if probe.returncode != 0 else None


@unittest.skipUnless(MESON and BUILD_DIR, "VH_MESON and VLAHYBRID_BUILD_DIR are set by meson test")
class DocumentedCommands(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.bare_python = python_without_numpy(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def devenv(self, *command, path_first=None):
        env = dict(os.environ)
        for name in ("PYTHONPATH", "VLAHYBRID_BUILD_DIR", "VH_BACKEND_PATH"):  # devenv sets them itself
            env.pop(name, None)
        if path_first:
            env["PATH"] = path_first + os.pathsep + env["PATH"]
        proc = subprocess.run([MESON, "devenv", "-C", BUILD_DIR, "-w", vh_test.SOURCE_ROOT, *command],
                              capture_output=True, text=True, env=env)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return proc.stdout

    def check_predict(self, out):
        self.assertIn("action: [", out)
        self.assertRegex(out, r"\ncompleted: [1-4]\n")  # the stream's frames may be dropped for newer ones
        # it says which interpreter ran it: the configured one, which runs this test too
        self.assertIn(f"from {sys.executable}", out)

    def test_predict_example(self):
        self.check_predict(self.devenv("python3", "examples/python/predict.py"))

    def test_readme_snippet(self):
        out = self.devenv("python3", "-c", SNIPPET)
        self.assertIn("Action(frame_id=2", out)

    def test_python3_on_path_without_numpy(self):
        if self.bare_python is None:
            self.skipTest("this interpreter imports numpy even without its site packages")
        self.check_predict(self.devenv("python3", "examples/python/predict.py", path_first=self.tmp.name))

    def test_import_without_numpy_names_the_interpreter(self):
        if self.bare_python is None:
            self.skipTest("this interpreter imports numpy even without its site packages")
        proc = subprocess.run([self.bare_python, "-c", "import vlahybrid"], capture_output=True, text=True)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("ImportError: vlahybrid needs numpy", proc.stderr)
        self.assertIn(sys.executable, proc.stderr)
        self.assertIn("pip install numpy", proc.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
