#!/usr/bin/env python3
"""Threads and the GIL: the library's calls release the GIL (another Python thread runs while
one thread is inside vh_poll_action), a poll waiting in one thread gets the frame another submits,
close() from another thread ends a waiting poll, and predicts from several threads on one session
each get their own frame's action."""
import ctypes
import sys
import threading
import time
import unittest

import vh_test  # first: exits 77 without numpy

import numpy as np
import vlahybrid
from vlahybrid import _library, _structs

INSTRUCTION = "pick up the red block"


class Spinner(threading.Thread):
    """Counts as fast as Python lets it, noting when it ran."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = False
        self.times = []

    def run(self):
        n = 0
        while not self.stop:
            n += 1
            if n % 1000 == 0:
                self.times.append(time.monotonic())


class Threads(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        ref = vh_test.reference("openvla-tiny.json")
        cls.cases = [c for c in vh_test.rgb8_cases(ref) if c["instruction"] == INSTRUCTION]
        cls.images = [vh_test.load_rgb(c["image_path"]) for c in cls.cases]

    def test_gil_released_inside_the_library(self):
        """One call of vh_poll_action that waits 1 s (no frames): a Python thread must run in the
        middle of that second. Were the GIL held, it could not run at all until the call returned."""
        with vlahybrid.Session(vh_test.TINY_MODEL, backends="cpu_generic") as s:
            a = _library.new(_structs.Action)
            spinner = Spinner()
            spinner.start()
            time.sleep(0.05)
            start = time.monotonic()
            status = _library.lib.vh_poll_action(s._handle, ctypes.byref(a), 1000)
            end = time.monotonic()
            spinner.stop = True
            spinner.join()
            self.assertEqual(status, _structs.ERR_TIMEOUT)
            self.assertGreaterEqual(end - start, 0.95)
            inside = [t for t in spinner.times if start + 0.2 < t < end - 0.2]
            self.assertGreater(len(inside), 10, "no Python thread ran while vh_poll_action waited")

    def test_gil_released_during_create(self):
        """Session(...) with 64 warm-up frames is one long foreign call (vh_session_create runs
        them): a Python thread must run in its middle."""
        spinner = Spinner()
        spinner.start()
        time.sleep(0.05)
        start = time.monotonic()
        s = vlahybrid.Session(vh_test.TINY_MODEL, backends="cpu_generic", n_threads=1, warmup_frames=64)
        end = time.monotonic()
        spinner.stop = True
        spinner.join()
        s.close()
        self.assertGreater(end - start, 0.5)
        inside = [t for t in spinner.times if start + 0.2 < t < end - 0.2]
        self.assertGreater(len(inside), 10, "no Python thread ran while vh_session_create worked")

    def test_predict_leaves_time_to_other_threads(self):
        """While predicts run back to back, the other thread keeps running (a sanity check: the
        gaps between the foreign calls alone would also let it run; the two tests above show the
        calls themselves release the GIL)."""
        with vlahybrid.Session(vh_test.TINY_MODEL, backends="cpu_generic", n_threads=1) as s:
            spinner = Spinner()
            spinner.start()
            windows = []
            for image in self.images:
                t0 = time.monotonic()
                s.predict(image, INSTRUCTION)
                windows.append((t0, time.monotonic()))
            spinner.stop = True
            spinner.join()
        ran = sum(1 for t in spinner.times for t0, t1 in windows if t0 < t < t1)
        self.assertGreater(ran, 0)

    def test_poll_in_one_thread_submit_in_another(self):
        with vlahybrid.Session(vh_test.TINY_MODEL, backends="cpu_generic", queue_policy="block") as s:
            got = []
            poller = threading.Thread(target=lambda: got.extend(s.poll(-1) for _ in self.images))
            poller.start()
            time.sleep(0.2)  # the poller waits in poll(-1)
            ids = [s.submit(image, INSTRUCTION, tag=i) for i, image in enumerate(self.images)]
            poller.join(60)
            self.assertFalse(poller.is_alive())
            self.assertEqual([a.frame_id for a in got], ids)
            for a, c in zip(got, self.cases):
                self.assertTrue(a.ok)
                if list(a.token_ids) == c["action_ids"]:
                    np.testing.assert_array_equal(a.values, np.array(c["action"]))

    def test_close_ends_a_waiting_poll(self):
        s = vlahybrid.Session(vh_test.TINY_MODEL, backends="cpu_generic")
        raised = []

        def wait():
            try:
                s.poll(-1)
            except vlahybrid.SessionClosedError as e:
                raised.append(e)
        poller = threading.Thread(target=wait)
        poller.start()
        time.sleep(0.3)
        s.close()
        poller.join()  # a poll that close did not end hangs here, and the test's timeout fails it
        self.assertEqual(len(raised), 1)

    def test_concurrent_predicts(self):
        results = {}
        with vlahybrid.Session(vh_test.TINY_MODEL, backends="cpu_generic") as s:
            def work(k):
                results[k] = [s.predict(self.images[i], INSTRUCTION) for i in range(len(self.images))]
            threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
        self.assertEqual(len(results), 3)
        for k in range(3):
            for i, c in enumerate(self.cases):
                np.testing.assert_array_equal(results[k][i], results[0][i])
                if c["min_margin"] >= vh_test.MIN_MARGIN:
                    np.testing.assert_array_equal(results[k][i], np.array(c["action"]))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
