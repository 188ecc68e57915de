#!/usr/bin/env python3
"""OpenVLA through the Python binding on cpu_generic, against the reference outputs of
tests/fixtures/make_openvla_fixtures.py (float64 transformers/timm, tests/fixtures/reference): the
action tokens of every RGB8 case, and then the actions exactly, as tests/session/
test_openvla_fixtures.c holds the C API to them (a step whose reference margin is below 2e-3 may
flip at fp32). Both decode-position conventions, both tiny models, and every way of passing an
image (numpy, strided view, flipped view, channels first, PIL) gives the same action; a session
without unnorm_key on the model of two datasets takes each frame's."""
import sys
import unittest

import vh_test  # first: exits 77 without numpy

import numpy as np
import vlahybrid

FIXTURES = (("openvla-tiny.json", vh_test.TINY_MODEL), ("openvla-tiny-b.json", vh_test.TINY_B_MODEL))


class OpenVLAFixtures(unittest.TestCase):
    def check_against(self, expect, case, action, label):
        """The action against one case's expectations (`expect`: the case or its
        text_only_positions); returns whether the tokens matched."""
        want_ids = expect["action_ids"]
        self.assertEqual(action.status, 0, label)
        self.assertEqual(action.kind, "values")
        self.assertEqual(action.values.dtype, np.float64)
        self.assertEqual(len(action.token_ids), len(want_ids), label)
        if list(action.token_ids) != want_ids:
            self.assertLess(case["min_margin"], vh_test.MIN_MARGIN,
                            f"{label}: tokens {list(action.token_ids)}, reference {want_ids}")
            return False
        np.testing.assert_array_equal(action.values, np.array(expect["action"]), err_msg=label)
        return True

    def run_fixture(self, ref_name, model, decode_positions):
        ref = vh_test.reference(ref_name)
        cases = vh_test.rgb8_cases(ref)
        self.assertGreater(len(cases), 10)
        matched = 0
        for dataset in sorted({c["dataset"] for c in cases}):
            with vlahybrid.Session(model, backends=vh_test.BACKEND, unnorm_key=dataset,
                                   decode_positions=decode_positions) as s:
                self.assertEqual(s.info()["unnorm_key"], dataset)
                for c in (c for c in cases if c["dataset"] == dataset):
                    label = f"{ref_name} {c['image']} / {c['instruction']} ({decode_positions})"
                    expect = c["text_only_positions"] if decode_positions == "openvla_hf440" else c
                    image = vh_test.load_rgb(c["image_path"])
                    frame_id = s.submit(image, c["instruction"])
                    action = s.poll(60000)
                    self.assertEqual(action.frame_id, frame_id)
                    matched += self.check_against(expect, c, action, label)
                    values = s.predict(image, c["instruction"])
                    np.testing.assert_array_equal(values, action.values, err_msg=label + ": predict vs poll")
                    if decode_positions == "contiguous":
                        self.assertEqual(s.prompt_ids(c["instruction"]), c["prompt_ids"], label)
        # nearly every case must be held to the exact reference, not excused by a low margin
        self.assertGreaterEqual(matched, len(cases) - 2, f"{ref_name}: {matched} of {len(cases)} matched")

    def test_tiny_contiguous(self):
        self.run_fixture(*FIXTURES[0], "contiguous")

    def test_tiny_openvla_hf440(self):
        self.run_fixture(*FIXTURES[0], "openvla_hf440")

    def test_tiny_b(self):
        self.run_fixture(*FIXTURES[1], "contiguous")

    def test_tiny_b_unnorm_key_per_frame(self):
        """No session key on a model of two datasets: each frame names its own, and gets the
        reference action of that dataset; a frame naming none is refused at submit."""
        ref = vh_test.reference("openvla-tiny-b.json")
        cases = vh_test.rgb8_cases(ref)
        self.assertGreater(len({c["dataset"] for c in cases}), 1)
        matched = 0
        with vlahybrid.Session(vh_test.TINY_B_MODEL, backends=vh_test.BACKEND) as s:
            self.assertEqual(s.info()["unnorm_key"], "")
            image = vh_test.load_rgb(cases[0]["image_path"])
            with self.assertRaises(vlahybrid.UnnormKeyError) as e:
                s.submit(image, cases[0]["instruction"])
            for dataset in {c["dataset"] for c in cases}:
                self.assertIn(dataset, e.exception.message)
            for c in cases:
                label = f"{c['image']} / {c['instruction']} / {c['dataset']}"
                image = vh_test.load_rgb(c["image_path"])
                s.submit(image, c["instruction"], unnorm_key=c["dataset"])
                matched += self.check_against(c, c, s.poll(60000), label)
        self.assertGreaterEqual(matched, len(cases) - 2, f"{matched} of {len(cases)} matched")

    def test_image_layouts(self):
        """A strided view (rows padded), a view with negative strides (copied by the binding) and
        a PIL image give the action of the packed array."""
        image = vh_test.load_rgb("tests/fixtures/images/frames/frame_2.png")
        h, w, _ = image.shape
        padded = np.zeros((h, w + 7, 3), dtype=np.uint8)
        padded[:, :w] = image
        view = padded[:, :w]
        self.assertFalse(view.flags.c_contiguous)
        upside_down = image[::-1].copy()[::-1]  # the image, as a view with a negative row stride
        self.assertLess(upside_down.strides[0], 0)
        inputs = {"strided view": view, "negative strides": upside_down,
                  "read-only": np.frombuffer(image.tobytes(), np.uint8).reshape(h, w, 3),
                  # channels first, as torchvision's tensors: a transposed view and a packed copy
                  "CHW view": image.transpose(2, 0, 1),
                  "CHW packed": np.ascontiguousarray(image.transpose(2, 0, 1))}
        try:
            from PIL import Image
            inputs["PIL RGB"] = Image.fromarray(image)
            inputs["PIL RGBA"] = Image.fromarray(np.dstack([image, np.full((h, w), 255, np.uint8)]))
        except ImportError:
            pass
        instruction = "open the drawer"
        with vlahybrid.Session(vh_test.TINY_MODEL, backends=vh_test.BACKEND) as s:
            want = s.predict(image, instruction)
            for name, value in inputs.items():
                with self.subTest(input=name):
                    np.testing.assert_array_equal(s.predict(value, instruction), want)
            stats = s.stats()
        self.assertEqual(stats["completed"], 1 + len(inputs))
        ref = vh_test.reference("openvla-tiny.json")
        case = [c for c in ref["cases"] if c["image"] == "frame_2.png" and c["instruction"] == instruction][0]
        np.testing.assert_array_equal(want, np.array(case["action"]))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
