#!/usr/bin/env python3
"""Session.prompt_ids for every family, against the released code's ids in the fixtures: Orion's
one round (tests/fixtures/orion/cases.json, -200 where the image goes), MindDrive's decision and
action rounds (tests/fixtures/minddrive/cases.json; the decision's final speed token is never run),
OpenVLA's (tests/fixtures/reference/openvla-tiny.json, the image after BOS); bad commands, and
MindDrive's two rounds refused by the one-list form."""
import json
import os
import sys
import unittest

import vh_test  # first: exits 77 without numpy

import numpy as np
import vlahybrid


def fixture(*parts):
    with open(os.path.join(vh_test.TEST_DATA, *parts)) as f:
        return json.load(f)


def session(model):
    return vlahybrid.Session(model, backends=vh_test.BACKEND, n_threads=1, warmup_frames=0)


class PromptRounds(unittest.TestCase):
    def against(self, r, want, dropped_tail=0):
        image = want.index(-200)
        self.assertIsInstance(r["ids"], np.ndarray)
        self.assertEqual(r["ids"].dtype, np.int32)
        self.assertEqual(r["ids"].tolist(), want[:image] + want[image + 1:len(want) - dropped_tail])
        self.assertEqual(r["image_position"], image)

    def test_orion(self):
        ref = fixture("orion", "cases.json")
        with session(os.path.join(vh_test.TEST_DATA, "orion", "model")) as s:
            for command in (None, 0, 2, 5):
                (r,) = s.prompt_ids(command=command)
                self.assertEqual((r["name"], r["n_image_rows"]), ("prompt", ref["n_vision_tokens"]))
                self.against(r, ref["prompt_ids"])
                self.assertEqual(len(r["ids"]) + r["n_image_rows"], ref["sequence_length"])
            self.assertEqual(s.prompt_ids("ignored"), r["ids"].tolist())  # one round: the flat list
            for bad in (6, -2):
                with self.assertRaises(vlahybrid.InvalidArgumentError) as e:
                    s.prompt_ids(command=bad)
                self.assertIn("command", e.exception.message)
            with self.assertRaises(TypeError):
                s.prompt_ids(command="left")

    def test_minddrive(self):
        ref = fixture("minddrive", "cases.json")
        case = ref["cases"][0]
        with session(os.path.join(vh_test.TEST_DATA, "minddrive", "model")) as s:
            decision, action = s.prompt_ids(command=case["command"])
            self.assertEqual((decision["name"], action["name"]), ("decision", "action"))
            self.assertEqual(case["decision_prompt_ids"][-1], ref["special_tokens"]["<maintain_moderate_speed>"])
            self.against(decision, case["decision_prompt_ids"], dropped_tail=1)
            self.against(action, case["action_prompt_ids"])
            self.assertEqual(decision["image_position"], case["decision_image_index"])
            self.assertEqual(action["image_position"], case["action_image_index"])
            self.assertEqual(decision["n_image_rows"], ref["n_vision_tokens"])
            self.assertEqual([r["ids"].tolist() for r in s.prompt_ids()],
                             [decision["ids"].tolist(), action["ids"].tolist()])
            with self.assertRaises(vlahybrid.UnsupportedError) as e:
                s.prompt_ids("x")
            self.assertIn("vh_session_prompt_rounds", e.exception.message)
            with self.assertRaises(vlahybrid.InvalidArgumentError):
                s.prompt_ids(command=6)

    def test_openvla(self):
        ref = vh_test.reference("openvla-tiny.json")
        with session(vh_test.TINY_MODEL) as s:
            info = s.info()
            for c in ref["cases"][:3]:
                (r,) = s.prompt_ids(c["instruction"], command=3)  # the command: ignored by OpenVLA
                self.assertEqual(r["name"], "prompt")
                self.assertEqual(r["ids"].tolist(), c["prompt_ids"])
                self.assertEqual(s.prompt_ids(c["instruction"]), c["prompt_ids"])
                self.assertEqual((r["image_position"], r["n_image_rows"]), (1, info["n_prompt_image_tokens"]))
            with self.assertRaises(vlahybrid.InvalidArgumentError) as e:
                s.prompt_ids()
            self.assertIn("instruction", e.exception.message)
            long = "pick up " * 200  # more ids than the first buffer holds: asked again with room
            (r,) = s.prompt_ids(long, command=0)
            self.assertGreater(len(r["ids"]), 256)
            self.assertEqual(r["ids"].tolist(), s.prompt_ids(long))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
