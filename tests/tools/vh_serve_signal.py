#!/usr/bin/python3
"""vh-serve stopped by a signal while it loads the model: it prints the load's progress on stderr (a
line per phase or 10%, not a flood), and SIGTERM (then SIGINT) sent when the first progress line
shows cancels the create: it exits with 128 + the signal and a message, within the timeout (no
hang), without listening, and frees everything (the sanitizer build runs this test: LSan reports a
leak at exit). A load left alone shows every phase, the warm-up among them, and ends at 100%.

usage: vh_serve_signal.py VH_SERVE    (env: VH_BACKEND_PATH)
"""
import signal
import subprocess
import sys

TIMEOUT = 120  # seconds for a stop; far beyond the tiny model's whole load


def serve(vh_serve, sig):
    p = subprocess.Popen([vh_serve, "--port", "0", "--backend", "cpu_generic"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    first = p.stderr.readline()
    assert first.startswith("vh-serve: loading: "), f"first stderr line: {first!r}"
    if sig:
        p.send_signal(sig)
    else:  # left alone: stopped once it listens
        listening = p.stdout.readline()
        assert listening.startswith("vh-serve: listening on "), listening
        p.send_signal(signal.SIGTERM)
    try:
        out, err = p.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise AssertionError(f"vh-serve still runs {TIMEOUT} s after the signal")
    return p.returncode, out, first + err


def main():
    vh_serve = sys.argv[1]
    rc, out, err = serve(vh_serve, None)
    assert rc == 0, (rc, err)
    lines = [l for l in err.splitlines() if l.startswith("vh-serve: loading: ")]
    phases = [l.split(": ", 2)[2].rsplit(" ", 1)[0] for l in lines]
    for phase in ("loading weights", "backend cpu_generic", "warm-up", "ready"):
        assert phase in phases, (phase, lines)
    assert lines[-1] == "vh-serve: loading: ready 100%", lines
    assert len(lines) <= 2 * 10 + 8, f"a flood of progress lines: {len(lines)}"
    for sig in (signal.SIGTERM, signal.SIGINT):
        rc, out, err = serve(vh_serve, sig)
        assert rc == 128 + sig, (sig, rc, err)
        assert "during the load: stopped before serving (vh_session_create cancelled" in err, err
        assert "listening" not in out, out
        assert "ERROR" not in err and "LeakSanitizer" not in err, err
        print(f"{signal.Signals(sig).name} during the load: exit {rc}; {err.splitlines()[-1]}")
    print("ok")


if __name__ == "__main__":
    main()
