#!/usr/bin/env python3
"""The ctypes mirrors of python/vlahybrid/_structs.py have the C layout of vlahybrid.h: every
field at the offset and with the size the C compiler gives it (struct_layout.c prints them), the
same fields, the same sizeof. And the package fills struct_size as the C *_init functions do.

    test_struct_layout.py STRUCT_LAYOUT_EXE"""
import ctypes
import json
import subprocess
import sys
import unittest

import vh_test  # noqa: F401  (skips without numpy)
from vlahybrid import _library, _structs


class StructLayout(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        out = subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout
        cls.c_layout = json.loads(out)

    def test_every_public_struct_is_mirrored(self):
        self.assertEqual(set(self.c_layout), set(_structs.C_NAMES))

    def test_offsets_sizes_and_fields(self):
        for c_name, mirror in _structs.C_NAMES.items():
            with self.subTest(struct=c_name):
                c = self.c_layout[c_name]
                names = [name for name, _ in mirror._fields_]
                self.assertEqual(names, list(c["fields"]), f"{c_name}: fields or their order differ")
                for name in names:
                    want_offset, want_size = c["fields"][name]
                    got = getattr(mirror, name)
                    self.assertEqual((got.offset, got.size), (want_offset, want_size),
                                     f"{c_name}.{name}: ctypes (offset, size) vs C")
                self.assertEqual(ctypes.sizeof(mirror), c["size"], f"sizeof({c_name})")

    def test_struct_size_as_c_init(self):
        for mirror in (_structs.SessionParams, _structs.Frame, _structs.Action, _structs.SessionInfo,
                       _structs.SessionStats):
            with self.subTest(struct=mirror.__name__):
                value = _library.new(mirror)
                self.assertEqual(value.struct_size, ctypes.sizeof(mirror))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
