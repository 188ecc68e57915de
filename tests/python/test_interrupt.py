#!/usr/bin/env python3
"""Ctrl-C during Session(...): a SIGINT while the model loads cancels the load and raises
KeyboardInterrupt from Session(...), with progress_fn and without, and nothing is left behind
("Exception ignored on calling ctypes callback" was printed and the load went on, or without
progress_fn the interrupt came only after the whole load).

Each case runs in a child interpreter (this file with the case's name), which installs a SIGINT
handler that notes the signal's arrival in the main thread and then raises KeyboardInterrupt as
Python's own does. The child's library callbacks wait for that note, so the order of events is
fixed whatever the scheduling: the test counts callback calls and log lines, never time."""
import os
import signal
import subprocess
import sys
import threading
import unittest

import vh_test  # first: exits 77 without numpy

import vlahybrid

READY = "session ready"  # the library's info line after a load that was not cancelled


def child_setup():
    """The event the SIGINT handler sets (in the main thread) before it raises, and a wait for it
    that a callback running on the main thread itself skips (the binding before the fix called
    the library there: waiting would hang)."""
    arrived = threading.Event()

    def on_sigint(signum, frame):
        arrived.set()
        raise KeyboardInterrupt
    signal.signal(signal.SIGINT, on_sigint)

    def wait():
        if threading.current_thread() is not threading.main_thread():
            arrived.wait()
    return wait


def load(**params):
    lines = []
    params.setdefault("log_fn", lambda _user, _level, message: lines.append(message))
    try:
        vlahybrid.Session(vh_test.TINY_MODEL, backends=vh_test.BACKEND, n_threads=1, warmup_frames=2,
                          **params).close()
    except KeyboardInterrupt:
        return "interrupted", lines
    return "loaded", lines


def child_progress_fn(**params):
    """progress_fn sends SIGINT at its first call and waits for the main thread to take it."""
    wait_for_sigint = child_setup()
    calls = []

    def progress(_user, stage, fraction):
        calls.append(stage)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)
            wait_for_sigint()
        return False
    outcome, lines = load(progress_fn=progress, **params)
    # after an interrupted load, a new one works: nothing was left in a broken state
    again, again_lines = load()
    print(f"outcome={outcome} progress_calls={len(calls)} ready_lines={sum(READY in m for m in lines)} "
          f"again={again} again_ready_lines={sum(READY in m for m in again_lines)}")


def child_no_progress_fn():
    """No progress_fn: a timer thread raises SIGINT once the library has started loading (its
    first log line, whose log_fn then waits for the main thread to take the signal)."""
    wait_for_sigint = child_setup()
    started = threading.Event()
    lines = []

    def log(_user, _level, message):
        lines.append(message)
        if not started.is_set():
            started.set()
            wait_for_sigint()

    def timer():
        started.wait()
        os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=timer, daemon=True).start()
    outcome, _ = load(log_fn=log, log_level="debug")
    print(f"outcome={outcome} log_lines={len(lines)} ready_lines={sum(READY in m for m in lines)}")


class Interrupt(unittest.TestCase):
    def run_child(self, case):
        proc = subprocess.run([sys.executable, __file__, case], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertNotIn("Exception ignored", proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        return dict(item.split("=") for item in proc.stdout.split())

    def test_sigint_with_progress_fn(self):
        got = self.run_child("progress_fn")
        self.assertEqual(got["outcome"], "interrupted")
        # the stop reached the library at the next report: progress_fn was not called again and
        # the load never finished
        self.assertEqual(got["progress_calls"], "1")
        self.assertEqual(got["ready_lines"], "0")
        self.assertEqual(got["again"], "loaded")
        self.assertEqual(got["again_ready_lines"], "1")

    def test_sigint_with_cpu_affinity(self):
        """cpu_affinity: the library runs the create on a thread of its own, pinned."""
        got = self.run_child("progress_fn_cpu_affinity")
        self.assertEqual(got["outcome"], "interrupted")
        self.assertEqual(got["progress_calls"], "1")
        self.assertEqual(got["ready_lines"], "0")
        self.assertEqual(got["again"], "loaded")

    def test_sigint_without_progress_fn(self):
        got = self.run_child("no_progress_fn")
        self.assertEqual(got["outcome"], "interrupted")
        self.assertGreater(int(got["log_lines"]), 0)
        self.assertEqual(got["ready_lines"], "0")  # cancelled, not interrupted after a full load


if __name__ == "__main__":
    if sys.argv[1:] == ["progress_fn"]:
        child_progress_fn()
    elif sys.argv[1:] == ["progress_fn_cpu_affinity"]:
        child_progress_fn(cpu_affinity="0")
    elif sys.argv[1:] == ["no_progress_fn"]:
        child_no_progress_fn()
    else:
        unittest.main()
