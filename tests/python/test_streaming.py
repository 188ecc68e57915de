#!/usr/bin/env python3
"""Streaming through the binding: submit several frames, poll their answers in submission order
with their tags, timestamps and sequences, each action the reference's; then the queue's control
calls (cancel, cancel_pending, reset, poll timeouts, the "reject" policy) answer as the C API
documents, and the statistics count them."""
import sys
import time
import unittest

import vh_test  # first: exits 77 without numpy

import numpy as np
import vlahybrid

INSTRUCTION = "pick up the red block"


def frames_and_cases():
    ref = vh_test.reference("openvla-tiny.json")
    cases = [c for c in vh_test.rgb8_cases(ref) if c["instruction"] == INSTRUCTION]
    return [(vh_test.load_rgb(c["image_path"]), c) for c in cases]


class Streaming(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.frames = frames_and_cases()
        assert len(cls.frames) >= 5

    def test_in_order_with_reference_actions(self):
        with vlahybrid.Session(vh_test.TINY_MODEL, backends=vh_test.BACKEND, queue_policy="block",
                               queue_capacity=2) as s:
            ids = [s.submit(image, INSTRUCTION, tag=100 + i, timestamp_ns=5000 + i, sequence=7 * i)
                   for i, (image, _) in enumerate(self.frames)]
            self.assertEqual(ids, list(range(1, len(self.frames) + 1)))
            for i, (_, case) in enumerate(self.frames):
                a = s.poll(60000)
                self.assertTrue(a.ok, a.message)
                self.assertEqual((a.frame_id, a.tag, a.timestamp_ns, a.sequence), (i + 1, 100 + i, 5000 + i, 7 * i))
                t = a.timings
                self.assertTrue(0 < t["submitted_ns"] <= t["started_ns"] <= t["finished_ns"], t)
                if list(a.token_ids) == case["action_ids"]:
                    np.testing.assert_array_equal(a.values, np.array(case["action"]))
                else:
                    self.assertLess(case["min_margin"], vh_test.MIN_MARGIN, case["image"])
            with self.assertRaises(vlahybrid.TimeoutError) as e:
                s.poll(0)
            self.assertEqual(e.exception.status_name, "TIMEOUT")
            self.assertIsInstance(e.exception, TimeoutError)  # the builtin too
            stats = s.stats()
            self.assertEqual((stats["submitted"], stats["completed"], stats["pending"], stats["unpolled"]),
                             (len(self.frames), len(self.frames), 0, 0))
            self.assertEqual(stats["end_to_end"]["count"], len(self.frames))
            self.assertGreater(stats["end_to_end"]["p50_ns"], 0)

    def test_cancel_reset_and_timeouts(self):
        image = self.frames[0][0]
        with vlahybrid.Session(vh_test.TINY_MODEL, backends=vh_test.BACKEND, queue_policy="block",
                               queue_capacity=8) as s:
            t0 = time.monotonic()
            with self.assertRaises(vlahybrid.TimeoutError):
                s.poll(300)
            self.assertGreaterEqual(time.monotonic() - t0, 0.28)
            ids = [s.submit(image, INSTRUCTION, tag=i) for i in range(6)]
            n = s.cancel_pending()
            answers = [s.poll(60000) for _ in ids]
            self.assertEqual([a.frame_id for a in answers], ids)
            cancelled = [a for a in answers if a.status_name == "CANCELLED"]
            self.assertEqual(len(cancelled), n)
            self.assertGreaterEqual(n, 4)  # at most frames_in_flight (1 serial) + 1 had started
            for a in cancelled:
                self.assertFalse(a.ok)
                self.assertEqual(a.message, vlahybrid.status_string(14))
                with self.assertRaises(vlahybrid.CancelledError):
                    a.raise_for_status()
            # cancelling an answered frame: BUSY; an id the session never gave: INVALID_ARGUMENT
            with self.assertRaises(vlahybrid.BusyError):
                s.cancel(ids[0])
            with self.assertRaises(vlahybrid.InvalidArgumentError) as e:
                s.cancel(10**6)
            self.assertTrue(e.exception.message)
            s.reset(statistics=True)
            stats = s.stats()
            self.assertEqual((stats["episode"], stats["submitted"], stats["completed"]), (1, 0, 0))
            frame_id = s.submit(image, INSTRUCTION)
            a = s.poll(60000)
            self.assertEqual((a.frame_id, a.episode), (frame_id, 1))
            self.assertTrue(a.ok)

    def test_reject_policy_busy(self):
        image = self.frames[0][0]
        with vlahybrid.Session(vh_test.TINY_MODEL, backends=vh_test.BACKEND, queue_policy="reject",
                               queue_capacity=1) as s:
            accepted, busy = 0, 0
            for _ in range(20):
                try:
                    s.submit(image, INSTRUCTION)
                    accepted += 1
                except vlahybrid.BusyError as e:
                    self.assertEqual(e.status, 11)
                    busy += 1
            self.assertGreater(busy, 0)
            answers = [s.poll(60000) for _ in range(accepted)]
            self.assertTrue(all(a.ok for a in answers))
            self.assertEqual(s.stats()["rejected"], busy)

    def test_latest_policy_drops(self):
        image = self.frames[0][0]
        with vlahybrid.Session(vh_test.TINY_MODEL, backends=vh_test.BACKEND, queue_capacity=1) as s:
            ids = [s.submit(image, INSTRUCTION) for _ in range(12)]
            answers = [s.poll(60000) for _ in ids]
            self.assertEqual([a.frame_id for a in answers], ids)
            dropped = [a for a in answers if a.status_name == "DROPPED"]
            self.assertGreater(len(dropped), 0)
            self.assertTrue(answers[-1].ok)  # the newest frame is always computed
            self.assertEqual(s.stats()["dropped"], len(dropped))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
