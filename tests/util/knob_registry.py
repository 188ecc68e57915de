"""knob_registry: every VH_* environment variable is read in one documented place (doc/knobs.md).
usage: knob_registry.py SOURCE_ROOT

Scans the sources for reads of VH_* variables (C: getenv / secure_getenv; Python: os.environ,
os.getenv; shell: $VH_X) and fails, one line per finding (file:line: knob: why), when
  (a) lib/ reads a knob outside lib/util/knobs.c (or its header),
  (b) backends/ reads one outside backends/common/backend_knobs.c (or its header),
  (c) a knob read anywhere is missing from doc/knobs.md,
  (d) doc/knobs.md lists a knob that nothing reads,
  (e) a section named as explaining a knob (doc/knobs.md's last column, lib/util/knobs.c's table)
      does not mention it.
In the knob files every "VH_..." string is a knob read (they may read from a table). Elsewhere
a C file that calls getenv with a computed name reads each "VH_..." string it passes to a call;
in lib/ and backends/ such a call is itself a finding, since its names cannot be checked."""
import os
import re
import sys

# The one file of each part that may read its VH_* knobs (and its header, which may hold the table).
KNOB_FILES = {
    "lib": ("lib/util/knobs.c", "lib/util/knobs.h"),
    "backends": ("backends/common/backend_knobs.c", "backends/common/backend_knobs.h"),
}
# Where knobs are looked for, relative to the source root.
SCANNED = ["lib", "backends", "tools", "bench", "examples", "fuzz", "python", "scripts", "tests", ".ci"]
DOC = "doc/knobs.md"
CORE_TABLE = KNOB_FILES["lib"][0]

C_EXTENSIONS = (".c", ".h", ".cu", ".cuh", ".cc", ".cpp", ".hpp")
STRING = r'"(?:[^"\\\n]|\\.)*"'
ENV_CALLS = ("getenv", "secure_getenv", "setenv", "unsetenv", "putenv")


def strip_c_comments(text):
    """The text with comments blanked (newlines kept, so line numbers hold)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def c_reads(rel, text):
    """(line, knob) read by one C file, and the lines of getenv calls with a computed name."""
    code = strip_c_comments(text)
    reads = [(line_of(code, m.start()), m.group(1))
             for m in re.finditer(r'\b(?:secure_)?getenv\s*\(\s*"(VH_\w+)"', code)]
    computed = [line_of(code, m.start()) for m in re.finditer(r'\b(?:secure_)?getenv\s*\(\s*(?!")', code)]
    if any(rel in files for files in KNOB_FILES.values()):
        reads += [(line_of(code, m.start()), m.group(1)) for m in re.finditer(r'"(VH_[A-Z0-9_]+)', code)]
    elif computed:
        reads += [(line_of(code, m.start()), m.group(2))
                  for m in re.finditer(r'\b(\w+)\s*\(\s*"(VH_\w+)"', code) if m.group(1) not in ENV_CALLS]
    return sorted(reads), computed


PY_READS = [r'\benviron\.get\(\s*["\'](VH_\w+)', r'\bgetenv\(\s*["\'](VH_\w+)',
            r'\benviron\[\s*["\'](VH_\w+)["\']\s*\](?!\s*=[^=])', r'["\'](VH_\w+)["\']\s+in\s+os\.environ']


def py_reads(text):
    code = "\n".join(re.sub(r"#.*", "", line) for line in text.split("\n"))
    return sorted((line_of(code, m.start()), m.group(1)) for pattern in PY_READS for m in re.finditer(pattern, code))


def sh_reads(text):
    return [(i + 1, m.group(1)) for i, line in enumerate(text.split("\n")) if not line.lstrip().startswith("#")
            for m in re.finditer(r"\$\{?(VH_\w+)", line)]


def is_shell(path, text):
    return path.endswith(".sh") or text.startswith("#!/bin/sh") or text.startswith("#!/bin/bash")


def scan(root):
    """(file, line, knob) of every read, and findings (a) and (b)."""
    reads, findings = [], []
    for top in SCANNED:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") or top == ".ci")
            for name in sorted(files):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, root)
                try:
                    with open(path, encoding="utf-8") as f:
                        text = f.read()
                except (UnicodeDecodeError, OSError):
                    continue
                if name.endswith(C_EXTENSIONS):
                    found, computed = c_reads(rel, text)
                elif name.endswith(".py"):
                    found, computed = py_reads(text), []
                elif is_shell(name, text):
                    found, computed = sh_reads(text), []
                else:
                    continue
                reads += [(rel, line, knob) for line, knob in found]
                part = rel.split(os.sep)[0]
                if part in KNOB_FILES and rel not in KNOB_FILES[part]:
                    rule, allowed = "(a)" if part == "lib" else "(b)", KNOB_FILES[part][0]
                    findings += ["%s:%d: %s: %s read outside %s" % (rel, line, knob, rule, allowed)
                                 for line, knob in found]
                    findings += ["%s:%d: -: %s getenv with a computed name outside %s" % (rel, line, rule, allowed)
                                 for line in computed]
    return reads, findings


def split_row(line):
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def documented(root):
    """knob -> (line, explained-in cell) of doc/knobs.md's rows."""
    rows = {}
    with open(os.path.join(root, DOC), encoding="utf-8") as f:
        for i, line in enumerate(f):
            m = re.match(r"\|\s*`(VH_\w+)`\s*\|", line)
            if m:
                rows[m.group(1)] = (i + 1, split_row(line)[-1])
    return rows


def core_table(root):
    """(line, knob, doc) of lib/util/knobs.c's table rows: {"NAME", "effect", "FILE: HEADING"}."""
    with open(os.path.join(root, CORE_TABLE), encoding="utf-8") as f:
        code = strip_c_comments(f.read())
    rows = []
    for m in re.finditer(r"\]\s*=\s*\{((?:\s*%s\s*,?)+)\}" % STRING, code):
        fields = [re.findall(STRING, field) for field in re.split(r"(?<=\")\s*,", m.group(1))]
        texts = ["".join(bytes(s[1:-1], "utf-8").decode("unicode_escape") for s in field) for field in fields]
        if len(texts) == 3:
            rows.append((line_of(code, m.start()), texts[0], texts[2]))
    return rows


def section_mentions(root, ref, knob):
    """None when ref ("FILE" or "FILE: HEADING") mentions knob (in that heading's section), else why not."""
    path, _, heading = ref.partition(": ")
    try:
        with open(os.path.join(root, path.strip()), encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError:
        return "no file %s" % path
    if heading:
        start = next((i for i, l in enumerate(lines) if re.match(r"#+ ", l)
                      and l.lstrip("#").strip().strip("`").startswith(heading.strip())), None)
        if start is None:
            return "%s has no heading starting %r" % (path, heading)
        level = len(lines[start]) - len(lines[start].lstrip("#"))
        end = next((i for i in range(start + 1, len(lines)) if re.match(r"#{1,%d} " % level, lines[i])), len(lines))
        lines = lines[start:end]
    return None if any(re.search(r"\b%s\b" % knob, l) for l in lines) else "%s does not mention it" % ref


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    reads, findings = scan(root)
    rows = documented(root)
    read_knobs = {}
    for rel, line, knob in reads:
        read_knobs.setdefault(knob, (rel, line))
    for knob, (rel, line) in sorted(read_knobs.items()):
        if knob not in rows:
            findings.append("%s:%d: %s: (c) read but not listed in %s" % (rel, line, knob, DOC))
    for knob, (line, explained) in sorted(rows.items()):
        if knob not in read_knobs:
            findings.append("%s:%d: %s: (d) listed but read nowhere" % (DOC, line, knob))
        for ref in explained.split(";"):
            why = section_mentions(root, ref.strip(), knob)
            if why:
                findings.append("%s:%d: %s: (e) explained in %r, but %s" % (DOC, line, knob, ref.strip(), why))
    for line, knob, ref in core_table(root):
        why = section_mentions(root, ref, knob)
        if why:
            findings.append("%s:%d: %s: (e) explained in %r, but %s" % (CORE_TABLE, line, knob, ref, why))
    for finding in findings:
        print(finding)
    if findings:
        print("knob_registry: %d finding(s); doc/knobs.md says where knobs are read and listed" % len(findings))
        return 1
    print("knob_registry: %d knobs read in %d files, each read where allowed and documented"
          % (len(read_knobs), len({rel for rel, _, _ in reads})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
