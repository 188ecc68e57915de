"""The tools' JSON numbers are the shortest that read back (issue 25): every real in the files'
JSON lines (numbers outside strings, with a '.' or an exponent) must read back as a double whose
shortest round-trip form, Python's repr (David Gay's algorithm, an independent implementation), has
as many significant digits as the text: 41.430175, not 41.430174999999998.
usage: json_numbers.py FILE..."""
import json
import re
import sys

NUMBER = re.compile(r'"(?:[^"\\]|\\.)*"|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)')


def digits(text):
    mantissa = re.split(r"[eE]", text)[0].lstrip("-").replace(".", "")
    return len(mantissa.strip("0")) or 1


reals = 0
for path in sys.argv[1:]:
    for number, line in enumerate(open(path), 1):
        if not line.strip():
            continue
        json.loads(line)  # a JSON value a line
        for m in NUMBER.finditer(line):
            t = m.group(1)
            if not t or not re.search(r"[.eE]", t):
                continue
            reals += 1
            shortest = repr(float(t))
            assert digits(t) == digits(shortest), "%s:%d: %s, the shortest form is %s" % (path, number, t, shortest)
assert reals > 0, "no reals in %s" % sys.argv[1:]
print("%d reals, each in its shortest form" % reals)
