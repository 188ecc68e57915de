#!/usr/bin/env python3
"""A trajectory model through the binding: the tiny converted Orion (tests/fixtures/orion/model),
frames of vision tokens + command + noise. predict returns the (6, 2) trajectory, poll's Action
carries it with the extras; all within 1e-4 relative of cases.json (transformers + peft + the
original planner, float64; the tolerance of tests/tools/vh_run_orion.sh). Frames without noise
draw it from the session's seed and the frame's sequence: the same seed repeats, another differs."""
import json
import os
import sys
import unittest

import vh_test  # first: exits 77 without numpy

import numpy as np
import vlahybrid

ORION = os.path.join(vh_test.TEST_DATA, "orion")


def close(test, name, got, want, tol=1e-4):
    got, want = np.asarray(got, np.float64).ravel(), np.asarray(want, np.float64).ravel()
    test.assertEqual(got.shape, want.shape, name)
    err = np.max(np.abs(got - want)) / np.max(np.abs(want))
    test.assertLessEqual(err, tol, f"{name}: off by {err:.3g} relative")


class Orion(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(ORION, "cases.json")) as f:
            cls.ref = json.load(f)
        width = cls.ref["hidden"]
        cls.tokens = {k: np.fromfile(os.path.join(ORION, f"tokens_{k}.f32"), dtype="<f4").reshape(-1, width)
                      for k in {c["token_set"] for c in cls.ref["cases"]}}

    def test_cases(self):
        with vlahybrid.Session(os.path.join(ORION, "model"), backends="cpu_generic") as s:
            self.assertEqual(s.info()["action_dim"], 0)
            for c in self.ref["cases"]:
                with self.subTest(case=c["name"]):
                    tokens = self.tokens[c["token_set"]]
                    trajectory = s.predict(None, None, vision_tokens=tokens, command=c["command"], noise=c["eps"])
                    self.assertEqual(trajectory.shape, (6, 2))
                    close(self, "trajectory", trajectory, c["trajectory"])
                    s.submit(None, None, vision_tokens=tokens, command=c["command"], noise=c["eps"], tag=3)
                    a = s.poll(60000)
                    self.assertEqual((a.kind, a.tag, len(a.values)), ("trajectory", 3, 0))
                    np.testing.assert_array_equal(a.trajectory, trajectory)
                    modes = np.cumsum(np.array(c["preds"]).reshape(6, 6, 2), axis=1)
                    close(self, "mode_trajectories", a.extras["mode_trajectories"], modes)
                    close(self, "mu", a.extras["mu"], c["mu"])
                    close(self, "log_sigma", a.extras["log_sigma"], c["log_sigma"])

    def test_seeded_noise_repeats(self):
        tokens = self.tokens[0]

        def run(seed):
            with vlahybrid.Session(os.path.join(ORION, "model"), backends="cpu_generic", seed=seed) as s:
                return s.predict(None, None, vision_tokens=tokens, command=2, sequence=5)
        a, b, c = run(11), run(11), run(12)
        np.testing.assert_array_equal(a, b)
        self.assertFalse(np.array_equal(a, c))

    def test_refused_frames(self):
        with vlahybrid.Session(os.path.join(ORION, "model"), backends="cpu_generic") as s:
            with self.assertRaises(vlahybrid.BadFrameError) as e:
                s.predict(None, None, command=2)
            self.assertIn("529", e.exception.message)
            with self.assertRaises(vlahybrid.BadFrameError):
                s.predict(None, None, vision_tokens=self.tokens[0][:100], command=2)
            with self.assertRaises(vlahybrid.BadFrameError):
                s.predict(None, None, vision_tokens=self.tokens[0], command=7)
            with self.assertRaises(ValueError):  # not 2-D: refused by the binding
                s.predict(None, None, vision_tokens=self.tokens[0].ravel(), command=2)


def rig(t):
    """Six cameras around the ego (yaw 60 degrees apart; K of the 1600 x 900 rig) of numpy RGB8 images,
    an ego driving forward, the agent's 18 can-bus floats: a camera frame's fields."""
    r = np.random.default_rng(100 + t)
    cams, l2i = [], []
    for c in range(6):
        yaw = c * np.pi / 3
        l2c = np.array([[np.sin(yaw), -np.cos(yaw), 0, 0], [0, 0, -1, 1.5], [np.cos(yaw), np.sin(yaw), 0, 0.2],
                        [0, 0, 0, 1]])
        K = np.array([[1266.0, 0, 800, 0], [0, 1266.0, 450, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
        l2i.append(K @ l2c)
        cams.append((f"CAM_{c}", r.integers(0, 256, (225, 400, 3), dtype=np.uint8)))
    pose = np.eye(4)
    pose[0, 3] = 3.0 * t
    return dict(cameras=cams, lidar2img=np.array(l2i, np.float32), ego_pose=pose.astype(np.float32),
                can_bus=np.linspace(0, 1.7, 18, dtype=np.float32), timestamp_ns=10**9 + t * 5 * 10**8)


class OrionCameras(unittest.TestCase):
    """The front-end checkpoint (tests/fixtures/orion/model-front) from numpy camera frames: each answered
    with a trajectory; the second frame's answer depends on the first (the heads' memory), a new session
    repeats the first's; a frame without its ego pose is refused; two streams in one session keep their own."""

    def test_camera_frames(self):
        model = os.path.join(ORION, "model-front")
        eps = np.zeros(32, np.float32)
        with vlahybrid.Session(model, backends="cpu_generic") as s:
            a = s.predict(None, None, command=2, noise=eps, **rig(0))
            b = s.predict(None, None, command=2, noise=eps, **rig(1))
            self.assertEqual(a.shape, (6, 2))
            self.assertTrue(np.all(np.isfinite(a)) and np.all(np.isfinite(b)))
            with self.assertRaises(vlahybrid.BadFrameError) as e:
                frame = rig(2)
                del frame["ego_pose"]
                s.predict(None, None, command=2, noise=eps, **frame)
            self.assertIn("ego_pose", e.exception.message)
        with vlahybrid.Session(model, backends="cpu_generic") as s:
            np.testing.assert_array_equal(s.predict(None, None, command=2, noise=eps, **rig(0)), a)
            fresh = s.predict(None, None, command=2, noise=eps, **rig(1))
        np.testing.assert_array_equal(fresh, b)
        with vlahybrid.Session(model, backends="cpu_generic") as s:  # frame 1 without frame 0 before it
            fresh_1 = s.predict(None, None, command=2, noise=eps, **rig(1))
            self.assertFalse(np.array_equal(fresh_1, b))
        got = []
        with vlahybrid.Session(model, backends="cpu_generic", vision_tokens_fn=lambda i, t: got.append((i, t))) as s:
            s.predict(None, None, command=2, noise=eps, **rig(0))  # the front end's tokens of frame 1
            replay = s.predict(None, None, command=2, noise=eps, vision_tokens=got[0][1])
        self.assertEqual([i for i, _ in got], [1])
        self.assertEqual(got[0][1].shape, (529, 64))
        np.testing.assert_array_equal(replay, a)  # the same tokens given back: the camera frame's answer
        with vlahybrid.Session(model, backends="cpu_generic") as s:  # two vehicles: each its own memory
            np.testing.assert_array_equal(s.predict(None, None, command=2, noise=eps, stream=5, **rig(0)), a)
            np.testing.assert_array_equal(s.predict(None, None, command=2, noise=eps, stream=9, **rig(1)), fresh_1)
            np.testing.assert_array_equal(s.predict(None, None, command=2, noise=eps, stream=5, **rig(1)), b)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
