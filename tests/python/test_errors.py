#!/usr/bin/env python3
"""Failures through the binding: each library status raises its exception with the library's
message (statuses as tests/session/test_bad_models.c and test_api_misuse.c expect of the C API),
bad Python input is refused with ValueError / TypeError before the library sees it, and a closed
session says so."""
import os
import pathlib
import shutil
import sys
import tempfile
import unittest

import vh_test  # first: exits 77 without numpy

import numpy as np
import vlahybrid


def model_copy(tmp, edit=None):
    """A copy of the tiny model (weights linked) with `edit(folder)` applied."""
    folder = os.path.join(tmp, "model")
    os.mkdir(folder)
    for name in os.listdir(vh_test.TINY_MODEL):
        src = os.path.join(vh_test.TINY_MODEL, name)
        if name.endswith(".safetensors"):
            os.symlink(src, os.path.join(folder, name))
        else:
            shutil.copy(src, folder)
    if edit:
        edit(folder)
    return folder


class CreateErrors(unittest.TestCase):
    def create_fails(self, exc, status_name, needle, **params):
        with self.assertRaises(exc) as e:
            vlahybrid.Session(**params)
        err = e.exception
        self.assertIsInstance(err, vlahybrid.Error)
        self.assertEqual(err.status_name, status_name)
        self.assertEqual(err.description, vlahybrid.status_string(err.status))
        self.assertIn(needle, err.message)
        self.assertIn(status_name, str(err))
        return err

    def test_missing_config_is_io(self):
        with tempfile.TemporaryDirectory() as tmp:
            folder = model_copy(tmp, lambda d: os.remove(os.path.join(d, "config.json")))
            self.create_fails(vlahybrid.FileError, "IO", "config.json", model_path=folder, backends="cpu_generic")

    def test_config_not_json_is_bad_model(self):
        def garble(d):
            with open(os.path.join(d, "config.json"), "w") as f:
                f.write("{ this is not json")
        with tempfile.TemporaryDirectory() as tmp:
            folder = model_copy(tmp, garble)
            self.create_fails(vlahybrid.BadModelError, "BAD_MODEL", "JSON", model_path=pathlib.Path(folder),
                              backends="cpu_generic")

    def test_no_such_folder(self):
        err = self.create_fails(vlahybrid.Error, "IO", "", model_path="/nonexistent/model", backends="cpu_generic")
        self.assertIsInstance(err, vlahybrid.FileError)

    def test_unknown_backend(self):
        self.create_fails(vlahybrid.BackendNotFoundError, "BACKEND_NOT_FOUND", "nosuchbackend",
                          model_path=vh_test.TINY_MODEL, backends="nosuchbackend")

    def test_unnorm_key_unknown(self):
        self.create_fails(vlahybrid.UnnormKeyError, "UNNORM_KEY", "no_such_dataset",
                          model_path=vh_test.TINY_B_MODEL, backends="cpu_generic", unnorm_key="no_such_dataset")

    def test_parameters_checked_in_python(self):
        m = vh_test.TINY_MODEL
        with self.assertRaises(TypeError):
            vlahybrid.Session(m, no_such_param=1)
        with self.assertRaises(ValueError):
            vlahybrid.Session(m, execution_mode="sideways")
        with self.assertRaises(ValueError):
            vlahybrid.Session(m, queue_policy=7)
        with self.assertRaises(ValueError):
            vlahybrid.Session(m, queue_capacity=-1)  # ctypes would wrap it to 4294967295
        with self.assertRaises(ValueError):
            vlahybrid.Session(m, n_threads=2**31)
        with self.assertRaises(TypeError):
            vlahybrid.Session(m, n_threads=1.5)
        with self.assertRaises(TypeError):
            vlahybrid.Session(m, backends=3)
        with self.assertRaises(ValueError):
            vlahybrid.Session(m, backends="cpu_generic\0cuda")
        with self.assertRaises(TypeError):
            vlahybrid.Session(m, log_fn="not callable")

    def test_library_checks_parameters_too(self):
        with self.assertRaises(vlahybrid.InvalidArgumentError) as e:
            vlahybrid.Session(vh_test.TINY_MODEL, backends="cpu_generic", queue_capacity=0)
        self.assertTrue(e.exception.message)


class FrameErrors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.messages = []
        cls.s = vlahybrid.Session(vh_test.TINY_MODEL, backends="cpu_generic", log_level="debug",
                                  log_fn=lambda user, level, msg: user.append((level, msg)), log_user=cls.messages)
        cls.image = vh_test.load_rgb("tests/fixtures/images/frames/frame_0.png")

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def test_log_callback_called(self):
        self.assertTrue(self.messages)
        self.assertTrue(all(0 <= level <= 3 and isinstance(msg, str) for level, msg in self.messages))

    def test_bad_images_refused_before_the_library(self):
        before = self.s.stats()["submitted"]
        bad = {
            "float image": self.image.astype(np.float32),
            "grey (H x W)": self.image[:, :, 0].copy(),
            "RGBA": np.zeros((4, 4, 4), np.uint8),
            "1-D": np.zeros(12, np.uint8),
            "empty": np.zeros((0, 4, 3), np.uint8),
            "too wide": np.zeros((1, 16385, 3), np.uint8),
        }
        for name, image in bad.items():
            with self.subTest(image=name), self.assertRaises(ValueError):
                self.s.submit(image, "pick up the red block")
            with self.subTest(image=name), self.assertRaises(ValueError):
                self.s.predict(image, "pick up the red block")
        with self.assertRaises(TypeError):
            self.s.submit([[1, 2, 3]], "pick up the red block")
        with self.assertRaises(TypeError):
            self.s.submit(self.image, b"bytes, not str")
        with self.assertRaises(TypeError):
            self.s.submit(self.image, "x", no_such_field=1)
        with self.assertRaises(TypeError):
            self.s.submit(self.image, "x", unnorm_key=b"bridge_orig")
        with self.assertRaises(ValueError):
            self.s.submit(self.image, "x", tag=-1)
        self.assertEqual(self.s.stats()["submitted"], before)

    def test_library_refuses_frames(self):
        with self.assertRaises(vlahybrid.BadFrameError) as e:
            self.s.predict(self.image, "x" * 9000)
        self.assertIn("8192", e.exception.message)
        with self.assertRaises(vlahybrid.Error) as e:
            self.s.predict(None, "pick up the red block")  # an OpenVLA frame needs an image
        self.assertIn(e.exception.status_name, ("INVALID_ARGUMENT", "BAD_FRAME"))
        self.assertTrue(e.exception.message)
        # the session goes on
        self.assertEqual(len(self.s.predict(self.image, "pick up the red block")), 7)

    def test_frame_unnorm_key(self):
        """The frame field reaches the library: the model's dataset is accepted, another refused
        at submit with the keys the model has."""
        self.assertEqual(len(self.s.predict(self.image, "pick up the red block", unnorm_key="bridge_orig")), 7)
        with self.assertRaises(vlahybrid.UnnormKeyError) as e:
            self.s.submit(self.image, "pick up the red block", unnorm_key="no_such_dataset")
        self.assertIn("bridge_orig", e.exception.message)

    def test_timeout_message_is_the_polls_own(self):
        """A failing call leaves its message behind in vh_last_error; a later poll that times out
        must say so itself, not repeat the earlier failure."""
        with self.assertRaises(vlahybrid.BadFrameError) as e:
            self.s.submit(self.image, "x" * 9000)
        self.assertIn("instruction", e.exception.message)
        with self.assertRaises(vlahybrid.TimeoutError) as e:
            self.s.poll(timeout_ms=50)
        self.assertNotIn("instruction", e.exception.message)
        self.assertIn("50 ms", e.exception.message)
        self.assertEqual(e.exception.status_name, "TIMEOUT")


class Closed(unittest.TestCase):
    def test_calls_after_close(self):
        s = vlahybrid.Session(vh_test.TINY_MODEL, backends="cpu_generic")
        image = vh_test.load_rgb("tests/fixtures/images/frames/frame_0.png")
        s.submit(image, "pick up the red block")  # unpolled: discarded by close
        s.close()
        s.close()  # idempotent
        self.assertTrue(s.closed)
        for call in (lambda: s.predict(image, "x"), lambda: s.submit(image, "x"), lambda: s.poll(0),
                     s.stats, s.info, s.cancel_pending, s.reset, lambda: s.prompt_ids("x")):
            with self.assertRaises(vlahybrid.SessionClosedError) as e:
                call()
            self.assertIn("closed", str(e.exception))

    def test_calls_after_shutdown(self):
        with vlahybrid.Session(vh_test.TINY_MODEL, backends="cpu_generic") as s:
            s.shutdown()
            image = vh_test.load_rgb("tests/fixtures/images/frames/frame_0.png")
            with self.assertRaises(vlahybrid.ShutdownError) as e:
                s.submit(image, "pick up the red block")
            self.assertEqual(e.exception.status_name, "SHUTDOWN")
            self.assertEqual(e.exception.status, 19)
            s.stats()  # still answered

    def test_forked_child_gets_forked_error(self):
        """A session's worker threads stay in the parent: in a child of fork() every call raises
        ForkedError at once (the child would otherwise wait forever for an answer)."""
        with vlahybrid.Session(vh_test.TINY_MODEL, backends="cpu_generic") as s:
            image = vh_test.load_rgb("tests/fixtures/images/frames/frame_0.png")
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: report what submit raised, then leave without cleanup
                os.close(read)
                try:
                    s.submit(image, "pick up the red block")
                    result = "no error"
                except vlahybrid.Error as e:
                    result = f"{type(e).__name__} {e.status_name} {e.status}"
                except BaseException as e:  # noqa: BLE001 (anything else is the finding)
                    result = f"{type(e).__name__}"
                os.write(write, result.encode())
                os._exit(0)
            os.close(write)
            got = os.read(read, 200).decode()
            os.close(read)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0)
            self.assertEqual(got, "ForkedError FORKED 20")
            self.assertEqual(s.predict(image, "pick up the red block").shape, (7,))  # the parent's goes on

    def test_context_manager_closes(self):
        with vlahybrid.Session(vh_test.TINY_MODEL, backends="cpu_generic") as s:
            self.assertFalse(s.closed)
        self.assertTrue(s.closed)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
