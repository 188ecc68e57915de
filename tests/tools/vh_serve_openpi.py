#!/usr/bin/python3
"""vh-serve against a real openpi-style client, on loopback, with the bundled tiny model on cpu_generic.

The client speaks what openpi_client sends: python3-websockets with compression off and no size
limit, messages packed by msgpack with numpy arrays as openpi_client/msgpack_numpy.py packs them
(re-implemented below). Every action must equal the float64 reference of
tests/fixtures/reference/openvla-tiny.json (made by OpenVLA's own code, tests/fixtures/README.md) for
the same frame and instruction, as tests/session/test_openvla_fixtures.c holds the library to it.

Checked: the metadata; one client (HWC, CHW, bin keys, a numpy str_ prompt, the "image" key);
16 clients at once; malformed msgpack, a hostile array header, wrong dtype, wrong shape, data that
does not fit its shape, missing keys, a text message, a foreign unnorm_key, a 100 MB message (with
the server's peak memory); a client that disconnects mid-message and one that disconnects with its
frame in flight; a client that stops reading while another is served; then /healthz and a fresh
client. Each fault must give that client a text message and close code 1011, nothing else. A second
server in packed mode answers 16 clients at once the same. SIGTERM must end each server with 0.

usage: vh_serve_openpi.py VH_SERVE    (env: VH_SOURCE_ROOT, VH_BACKEND_PATH; exit 77 without
python3-websockets, python3-msgpack, numpy or PIL)
"""
import asyncio
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request

try:
    import msgpack
    import numpy as np
    import websockets
    from PIL import Image
except ImportError as e:
    print(f"skipped: {e} (needs python3-websockets, python3-msgpack, python3-numpy, python3-pil)")
    sys.exit(77)

ROOT = os.environ.get("VH_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
TIMEOUT = 60  # seconds for any one answer


# --- openpi_client/msgpack_numpy.py, as openpi packs and unpacks -------------------------------------
def pack_array(obj):
    if isinstance(obj, (np.ndarray, np.generic)) and obj.dtype.kind in ("V", "O", "c"):
        raise ValueError(f"Unsupported dtype: {obj.dtype}")
    if isinstance(obj, np.ndarray):
        return {b"__ndarray__": True, b"data": obj.tobytes(), b"dtype": obj.dtype.str, b"shape": obj.shape}
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    return obj


def unpack_array(obj):
    if b"__ndarray__" in obj:
        return np.ndarray(buffer=obj[b"data"], dtype=np.dtype(obj[b"dtype"]), shape=obj[b"shape"])
    if b"__npgeneric__" in obj:
        return np.dtype(obj[b"dtype"]).type(obj[b"data"])
    return obj


def packb(obj):
    return msgpack.packb(obj, default=pack_array)


def unpackb(data):
    return msgpack.unpackb(data, object_hook=unpack_array)


# --- the reference ------------------------------------------------------------------------------------
def load_cases(small=False):
    """Fixture cases whose every token is far from a tie (any float32 order of operations gives the
    same tokens, hence bit-identical float64 actions): on the bundled 640x480 frames, or (small) on
    the 61x47 gray+alpha PNG, whose messages are a few kilobytes."""
    with open(os.path.join(ROOT, "tests", "fixtures", "reference", "openvla-tiny.json")) as f:
        ref = json.load(f)
    cases, images = [], {}
    for c in ref["cases"]:
        wanted = c["image"] == "png_la8_61x47.png" if small else c["image"].startswith("frame_")
        if not wanted or c["min_margin"] < 0.05 or c["eos_generated"]:
            continue
        if c["image"] not in images:
            images[c["image"]] = np.asarray(Image.open(os.path.join(ROOT, c["image_path"])).convert("RGB"))
        cases.append({"image": images[c["image"]], "name": c["image"], "prompt": c["instruction"],
                      "action": np.array(c["action"], dtype=np.float64)})
    assert len(cases) >= (2 if small else 8), f"only {len(cases)} usable reference cases"
    return cases


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def check_action(reply, case, what, dtype=np.float64):
    check(isinstance(reply, bytes), f"{what}: expected a binary answer, got {reply!r:.300}")
    d = unpackb(reply)
    a = d["actions"]
    check(isinstance(a, np.ndarray) and a.dtype == dtype and a.shape == (1, 7),
          f"{what}: actions {type(a)} {getattr(a, 'dtype', '')} {getattr(a, 'shape', '')}")
    check(np.array_equal(a[0], case["action"].astype(dtype)),
          f"{what}: {case['name']} / {case['prompt']!r}: actions {a[0].tolist()} != reference {case['action'].tolist()}")
    check(d["server_timing"]["infer_ms"] > 0 and d["policy_timing"]["infer_ms"] > 0, f"{what}: timings {d}")
    return d


# --- the server ---------------------------------------------------------------------------------------
class Server:
    def __init__(self, vh_serve, *args):
        self.proc = subprocess.Popen([vh_serve, "--host", "127.0.0.1", "--port", "0", "--backend", "cpu_generic",
                                      "--verbose", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on ws://[^:]+:(\d+)", line)
        if not m:
            self.proc.kill()
            raise Failure(f"vh-serve did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(m.group(1))
        self.url = f"ws://127.0.0.1:{self.port}"
        self.log = []  # stderr lines, read as they come so the test can wait for one
        self.reader = threading.Thread(target=lambda: self.log.extend(iter(self.proc.stderr.readline, "")))
        self.reader.start()

    async def wait_for_log(self, pattern, timeout=TIMEOUT):
        """The first stderr line matching `pattern`, waiting up to `timeout` seconds for it."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for line in list(self.log):
                if re.search(pattern, line):
                    return line
            await asyncio.sleep(0.02)
        raise Failure(f"vh-serve never logged {pattern!r}")

    def peak_rss_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1)) / 1024

    def healthz(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=10) as r:
            return r.status, r.read()

    def stop(self):
        """SIGTERM; the exit status and stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Failure("vh-serve did not stop on SIGTERM")
        finally:
            self.reader.join()
        return self.proc.returncode, "".join(self.log)


async def connect(server, **kw):
    ws = await websockets.connect(server.url, compression=None, max_size=None, open_timeout=TIMEOUT, **kw)
    meta = unpackb(await asyncio.wait_for(ws.recv(), TIMEOUT))
    return ws, meta


async def infer(ws, obs):
    await ws.send(obs if isinstance(obs, bytes) else packb(obs))
    return await asyncio.wait_for(ws.recv(), TIMEOUT)


async def expect_error(server, payload, needle, what, text=False):
    """Send one bad message: the client must get a text message containing `needle`, then close 1011."""
    ws, _ = await connect(server)
    try:
        await ws.send(payload)
    except websockets.ConnectionClosed:
        pass  # the server may close while a huge message is still being sent
    try:
        reply = await asyncio.wait_for(ws.recv(), TIMEOUT)
    except websockets.ConnectionClosed:
        raise Failure(f"{what}: closed ({ws.close_code}) without the error message")
    check(isinstance(reply, str), f"{what}: expected a text error, got {reply!r:.200}")
    check(needle in reply, f"{what}: the error {reply!r} does not mention {needle!r}")
    try:
        extra = await asyncio.wait_for(ws.recv(), TIMEOUT)
        raise Failure(f"{what}: a message after the error: {extra!r:.200}")
    except websockets.ConnectionClosed:
        pass
    check(ws.close_code == 1011, f"{what}: close code {ws.close_code}, expected 1011")
    print(f"  {what}: {reply}")


# --- the scenarios ------------------------------------------------------------------------------------
async def one_client(server, cases):
    ws, meta = await connect(server)
    for key, want in [("server", "vh-serve"), ("model", "openvla-tiny"), ("action_dim", 7), ("action_horizon", 1),
                      ("actions_dtype", "float64"), ("backends", "cpu_generic"), ("unnorm_key", "bridge_orig")]:
        check(meta.get(key) == want, f"metadata {key}: {meta.get(key)!r}, expected {want!r}")
    check(meta["observation_keys"]["image"] == "observation/image,image" and
          meta["observation_keys"]["prompt"] == "prompt", f"metadata observation_keys: {meta}")
    c = cases[0]
    # what openpi's LIBERO client sends: more keys than the model reads (ignored)
    first = check_action(await infer(ws, {"observation/image": c["image"], "observation/wrist_image": c["image"],
                                          "observation/state": np.zeros(8), "prompt": c["prompt"]}), c, "HWC")
    check("prev_total_ms" not in first["server_timing"], "prev_total_ms on the first answer")
    second = check_action(await infer(ws, {"observation/image": np.ascontiguousarray(c["image"].transpose(2, 0, 1)),
                                           "prompt": c["prompt"]}), c, "CHW")
    check(second["server_timing"]["prev_total_ms"] >= first["server_timing"]["infer_ms"], f"timings {second}")
    check_action(await infer(ws, {"observation/image": c["image"], "prompt": np.str_(c["prompt"])}), c,
                 "numpy str_ prompt (__npgeneric__)")
    check_action(await infer(ws, msgpack.packb({b"observation/image": pack_array(c["image"]),
                                                b"prompt": c["prompt"]})), c, "bin keys")
    check_action(await infer(ws, {"image": c["image"], "prompt": c["prompt"], "unnorm_key": "bridge_orig"}), c,
                 "'image' key, unnorm_key")
    await ws.close()
    print("  one client: HWC, CHW, numpy str_, bin keys, 'image': equal to the reference")


async def many_clients(server, cases, n_clients, rounds, what, dtype=np.float64):
    async def run(i):
        ws, _ = await connect(server)
        for r in range(rounds):
            c = cases[(i + r) % len(cases)]
            check_action(await infer(ws, {"observation/image": c["image"], "prompt": c["prompt"]}), c,
                         f"{what} client {i} round {r}", dtype)
        await ws.close()
    start = time.monotonic()
    await asyncio.gather(*(run(i) for i in range(n_clients)))
    print(f"  {what}: {n_clients} clients x {rounds} frames, all equal to the reference, "
          f"{time.monotonic() - start:.1f} s")


async def faults(server, cases):
    c = cases[1]
    img, prompt = c["image"], c["prompt"]
    await expect_error(server, b"\xc1\x00\x01", "malformed msgpack", "malformed msgpack")
    await expect_error(server, packb({"observation/image": img, "prompt": prompt})[:5000], "truncated",
                       "truncated msgpack")
    await expect_error(server, b"\xdd\x7f\xff\xff\xff", "declares", "an array header declaring 2^31 elements")
    await expect_error(server, packb([1, 2, 3]), "is a msgpack map", "not a map")
    await expect_error(server, packb({"observation/image": img.astype(np.float32) / 255, "prompt": prompt}),
                       "dtype '<f4'", "wrong dtype (float32 pixels)")
    await expect_error(server, packb({"observation/image": np.zeros((64, 64, 4), np.uint8), "prompt": prompt}),
                       "shape [64, 64, 4]", "wrong shape (RGBA)")
    await expect_error(server, packb({"observation/image": np.zeros((64, 64), np.uint8), "prompt": prompt}),
                       "2 dimensions", "wrong shape (2-D)")
    bad = pack_array(np.zeros((8, 8, 3), np.uint8))
    bad[b"shape"] = (9, 8, 3)
    await expect_error(server, packb({"observation/image": bad, "prompt": prompt}), "data holds 192",
                       "data shorter than its shape")
    await expect_error(server, packb({"prompt": prompt}), "has no image", "missing image")
    await expect_error(server, packb({"observation/image": img}), "has no 'prompt'", "missing prompt")
    await expect_error(server, packb({"observation/image": img, "prompt": 42}), "must be a string", "prompt not a string")
    await expect_error(server, "a text message", "binary msgpack", "text message")
    await expect_error(server, packb({"observation/image": img, "prompt": prompt, "unnorm_key": "fractal20220817_data"}),
                       "is not in norm_stats; choose one of: bridge_orig", "a foreign unnorm_key")
    before = server.peak_rss_mb()
    huge = packb({"observation/image": np.zeros((100 << 20,), np.uint8), "prompt": prompt})
    await expect_error(server, huge, "over the limit", "a 100 MB message")
    del huge
    after = server.peak_rss_mb()
    check(after < before + 40, f"peak RSS grew from {before:.0f} MB to {after:.0f} MB on the 100 MB message")
    print(f"  peak RSS {before:.0f} MB before the 100 MB message, {after:.0f} MB after")


async def disconnects(server, cases):
    c = cases[2]
    msg = packb({"observation/image": c["image"], "prompt": c["prompt"]})
    # mid-message: the first of two fragments, then the connection drops
    sock = socket.create_connection(("127.0.0.1", server.port))
    port = sock.getsockname()[1]
    ws, _ = await connect(server, sock=sock)

    async def fragments():
        yield msg[: len(msg) // 2]
        ws.transport.abort()
        await asyncio.sleep(3600)
    try:
        await asyncio.wait_for(ws.send(fragments()), 5)
    except (websockets.ConnectionClosed, asyncio.TimeoutError, ConnectionError):
        pass
    line = await server.wait_for_log(rf":{port}\) closed")
    check("in flight" not in line, f"a half-sent observation was submitted: {line}")
    # with the frame in flight: sixteen clients' frames queue first, then another sends its own and
    # resets the connection (SO_LINGER 0: a RST, noticed even while the server is not reading it).
    # The reset must come after the server has read the observation and before the frames ahead
    # are done: timing, so it is tried at several delays.
    # (small messages: a large one still arriving would let the victim's overtake it)
    c = load_cases(small=True)[0]
    small = packb({"observation/image": c["image"], "prompt": c["prompt"]})
    for attempt, delay in enumerate([0.02, 0.05, 0.1, 0.15, 0.2], 1):
        busy = [(await connect(server))[0] for _ in range(16)]
        for b in busy:
            await b.send(small)
        await asyncio.sleep(0.05)  # all sixteen read and submitted
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.connect(("127.0.0.1", server.port))
        port = sock.getsockname()[1]
        victim, _ = await connect(server, sock=sock)
        await victim.send(small)
        await asyncio.sleep(delay)
        victim.transport.abort()
        line = await server.wait_for_log(rf":{port}\) closed")
        for b in busy:
            check_action(await asyncio.wait_for(b.recv(), TIMEOUT), c, "a client beside the one that left")
            await b.close()
        if "with a frame in flight" in line:
            print(f"  attempt {attempt}: {line.strip()}")
            break
    else:
        raise Failure("five clients reset their connections with a frame submitted, none was seen in flight")
    print("  disconnects: mid-message, and with its frame in flight behind sixteen others")


async def slow_reader(server, cases):
    """A client that sends observations and never reads: its answers back up (tiny socket buffers on
    both sides), the server stops reading it, and drops it after --write-timeout; meanwhile another
    client is answered as usual."""
    c = cases[3]
    msg = packb({"observation/image": c["image"][:64, :64].copy(), "prompt": c["prompt"]})
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    slow = await websockets.connect(server.url, sock=sock, compression=None, max_size=None, max_queue=1,
                                    read_limit=1024, open_timeout=TIMEOUT, ping_interval=None)
    slow.transport.pause_reading()  # nothing more leaves its kernel buffer: answers back up after a few dozen
    sent = 0

    async def flood():
        nonlocal sent
        # a send blocks while the server, waiting for the previous answer to leave, reads nothing;
        # the drop ends it (after the answers have backed up: a few dozen frames, seconds, or a
        # minute under a sanitizer)
        try:
            while sent < 2000:
                await slow.send(msg)
                sent += 1
        except websockets.ConnectionClosed:
            return "closed"
        return "never dropped"
    flooder = asyncio.create_task(flood())
    ws, _ = await connect(server)
    served = 0
    start = time.monotonic()
    while not flooder.done() and time.monotonic() - start < 240:
        d = cases[served % len(cases)]
        check_action(await infer(ws, {"observation/image": d["image"], "prompt": d["prompt"]}), d,
                     f"client beside a slow reader, frame {served}")
        served += 1
    if flooder.done():
        outcome = flooder.result()
    else:
        outcome = "not dropped within 240 s"
        flooder.cancel()
        try:
            await flooder
        except asyncio.CancelledError:
            pass
    check(outcome == "closed", f"slow reader: {outcome} after {sent} observations")
    check(served >= 1, "no frame of another client was answered while the slow reader backed up")
    await ws.close()
    print(f"  slow reader: dropped after sending {sent} observations and reading nothing; meanwhile "
          f"{served} frames of another client answered correctly")


async def main_async(vh_serve, cases):
    server = Server(vh_serve, "--write-timeout", "2", "--socket-send-buffer", "4096", "--max-clients", "32")
    try:
        await one_client(server, cases)
        await many_clients(server, cases, 16, 3, "serial")
        await faults(server, cases)
        await disconnects(server, cases)
        await slow_reader(server, cases)
        status, body = server.healthz()
        check(status == 200 and body == b"OK\n", f"/healthz after the faults: {status} {body!r}")
        await many_clients(server, cases, 2, 2, "after the faults")
    finally:
        rc, err = server.stop()
        sys.stderr.write(err[-6000:])
    check(rc == 0, f"vh-serve exited with {rc}")
    check("closed with a frame in flight" in err, "no client closed with its frame in flight")
    check(re.search(r"\d+ answers dropped", err), "no answer was dropped for a departed client")

    # packed, float32 actions, a default prompt, at most 16 clients
    c = cases[0]
    packed = Server(vh_serve, "--mode", "packed", "--frames-in-flight", "8", "--actions-dtype", "float32",
                    "--max-clients", "16", "--default-prompt", c["prompt"])
    try:
        await many_clients(packed, cases, 16, 2, "packed, 8 frames in flight, float32", np.float32)
        ws, meta = await connect(packed)
        check(meta["actions_dtype"] == "float32" and meta["execution_mode"] == "packed" and
              meta["observation_keys"]["default_prompt"] == c["prompt"], f"packed metadata: {meta}")
        check_action(await infer(ws, {"observation/image": c["image"]}), c, "the default prompt", np.float32)
        others = [(await connect(packed))[0] for _ in range(15)]
        extra = await websockets.connect(packed.url, compression=None, max_size=None, open_timeout=TIMEOUT)
        refusal = await asyncio.wait_for(extra.recv(), TIMEOUT)  # instead of the metadata
        check(isinstance(refusal, str) and "already has 16 clients" in refusal, f"a 17th client got {refusal!r:.200}")
        await extra.wait_closed()
        check(extra.close_code == 1011, f"a 17th client: close code {extra.close_code}")
        print(f"  a 17th client: {refusal}")
        for o in others + [ws]:
            await o.close()
    finally:
        rc, err = packed.stop()
    check(rc == 0, f"vh-serve (packed) exited with {rc}:\n{err}")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    cases = load_cases()
    try:
        asyncio.run(main_async(sys.argv[1], cases))
    except Failure as e:
        print(f"FAIL: {e}")
        return 1
    print("vh-serve: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
