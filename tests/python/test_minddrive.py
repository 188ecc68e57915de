#!/usr/bin/env python3
"""MindDrive through the binding: the tiny converted model (tests/fixtures/minddrive/model), frames
of vision tokens + command + the two planners' noise. predict returns the (20, 2) path; poll's
Action carries the speed decision in values, the speed trajectory, the log-probabilities and both
planners' modes and latents as extras; all within 1e-4 relative of cases.json (transformers + peft +
the released prompt pipeline and planners, float64)."""
import json
import os
import sys
import unittest

import vh_test  # first: exits 77 without numpy

import numpy as np
import vlahybrid

MINDDRIVE = os.path.join(vh_test.TEST_DATA, "minddrive")


def close(test, name, got, want, tol=1e-4):
    got, want = np.asarray(got, np.float64).ravel(), np.asarray(want, np.float64).ravel()
    test.assertEqual(got.shape, want.shape, name)
    err = np.max(np.abs(got - want)) / np.max(np.abs(want))
    test.assertLessEqual(err, tol, f"{name}: off by {err:.3g} relative")


class MindDrive(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(MINDDRIVE, "cases.json")) as f:
            cls.ref = json.load(f)
        width = cls.ref["hidden"]
        cls.tokens = {k: np.fromfile(os.path.join(MINDDRIVE, f"tokens_{k}.f32"), dtype="<f4").reshape(-1, width)
                      for k in {c["token_set"] for c in cls.ref["cases"]}}

    def test_cases(self):
        with vlahybrid.Session(os.path.join(MINDDRIVE, "model"), backends="cpu_generic") as s:
            self.assertEqual(s.info()["action_dim"], 1)
            for c in self.ref["cases"]:
                with self.subTest(case=c["name"]):
                    tokens = self.tokens[c["token_set"]]
                    noise = list(c["eps_speed"]) + list(c["eps_path"])
                    path = s.predict(None, None, vision_tokens=tokens, command=c["command"], noise=noise)
                    self.assertEqual(path.shape, (20, 2))
                    close(self, "path", path, c["path"]["trajectory"])
                    s.submit(None, None, vision_tokens=tokens, command=c["command"], noise=noise, tag=5)
                    a = s.poll(60000)
                    self.assertEqual((a.kind, a.tag, len(a.values)), ("trajectory", 5, 1))
                    np.testing.assert_array_equal(a.trajectory, path)
                    self.assertEqual(int(a.values[0]), c["decision"])  # every fixture margin is >= 0.07
                    close(self, "speed_log_probs", a.extras["speed_log_probs"], c["speed_log_probs"])
                    close(self, "speed_trajectory", a.extras["speed_trajectory"], c["speed"]["trajectory"])
                    speed_modes = np.cumsum(np.array(c["speed"]["preds"]).reshape(7, 6, 2), axis=1)
                    close(self, "speed_modes", a.extras["speed_modes"], speed_modes)
                    path_modes = np.cumsum(np.array(c["path"]["preds"]).reshape(6, 20, 2), axis=1)
                    close(self, "path_modes", a.extras["path_modes"], path_modes)
                    for p in ("speed", "path"):
                        close(self, f"{p}_mu", a.extras[f"{p}_mu"], c[p]["mu"])
                        close(self, f"{p}_log_sigma", a.extras[f"{p}_log_sigma"], c[p]["log_sigma"])

    def test_bad_noise_refused(self):
        with vlahybrid.Session(os.path.join(MINDDRIVE, "model"), backends="cpu_generic") as s:
            with self.assertRaises(vlahybrid.BadFrameError) as e:
                s.submit(None, None, vision_tokens=self.tokens[0], command=1, noise=[0.0] * 32)
            self.assertIn("the two planners take 64", e.exception.message)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
