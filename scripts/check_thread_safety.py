#!/usr/bin/env python3
"""Compiles the sources that use annotated locks with clang's thread-safety analysis.

Usage: check_thread_safety.py BUILD_DIR [--clang CLANG++] [FILE...]
       check_thread_safety.py --selftest [--clang CLANG++]

common/mutex.h gives gpufleet::Mutex, MutexLock and CondVar with clang's capability
annotations (GF_GUARDED_BY, GF_REQUIRES, GF_EXCLUDES). The project builds with GCC, which ignores
them; this check re-runs the compile commands of BUILD_DIR/compile_commands.json with clang++
-fsyntax-only -Wthread-safety -Werror=thread-safety for every source under src/ that includes
common/mutex.h (or includes a header that does), or only for the FILEs given. A member read
without its lock, a GF_REQUIRES function called without the lock, or a lock left held is then an
error with file:line:col.

--selftest compiles a small class that reads a guarded member without its lock and passes only
when clang rejects it at that line.

Exits 0 when clean, 1 on an analysis error (printed), 2 on bad usage (no build dir, no clang++).
Python 3 standard library only.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
ANALYSIS = ["-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety", "-Wno-unknown-warning-option"]

# A member read without its lock: the analysis must reject it, or the check proves nothing.
SELFTEST = """#include "common/mutex.h"
class Counter {
 public:
  int Racy() { return n_; }
  int Safe() { gpufleet::MutexLock lock(mu_); return n_; }
 private:
  gpufleet::Mutex mu_;
  int n_ GF_GUARDED_BY(mu_) = 0;
};
int main() { Counter c; return c.Racy() + c.Safe(); }
"""


def usage(msg):
    print(f"check_thread_safety: {msg}", file=sys.stderr)
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    sys.exit(2)


def find_clang(explicit):
    if explicit:
        return explicit if shutil.which(explicit) else None
    for name in ("clang++", "clang++-16", "clang++-15", "clang++-14"):
        if shutil.which(name):
            return name
    return None


def annotated_sources(src_root, commands):
    """Sources in the build whose includes (followed within src/) reach common/mutex.h."""
    cache = {}

    def reaches(path, seen):
        if path in cache:
            return cache[path]
        if path in seen:
            return False
        seen.add(path)
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            cache[path] = False
            return False
        found = False
        for inc in INCLUDE_RE.findall(text):
            if inc == "common/mutex.h":
                found = True
                break
            candidate = os.path.join(src_root, inc)
            if os.path.isfile(candidate) and reaches(candidate, seen):
                found = True
                break
        cache[path] = found
        return found

    out = []
    for entry in commands:
        f = entry["file"]
        if f.startswith(src_root + os.sep) and reaches(f, set()):
            out.append(entry)
    return out


def clang_command(entry, clang):
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    kept = []
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a == "-c" or a.startswith("-W") or a.startswith("-fdiagnostics"):
            continue
        kept.append(a)
    return [clang] + ANALYSIS + kept


def selftest(clang, src_root):
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "racy.cc")
        with open(path, "w") as f:
            f.write(SELFTEST)
        p = subprocess.run([clang, "-std=c++20", "-I", src_root] + ANALYSIS + [path],
                           capture_output=True, text=True)
    want = "racy.cc:4:"
    if p.returncode != 0 and want in p.stderr and "requires holding mutex 'mu_'" in p.stderr:
        print("selftest: clang rejects a guarded member read without its lock (racy.cc:4)")
        return 0
    print("selftest FAILED: the analysis did not reject the racy read; clang said:")
    print(p.stderr.rstrip() or "(nothing)")
    return 1


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        usage("the build directory is required")
    build = argv[1]
    rest = argv[2:]
    clang = None
    if len(rest) >= 2 and rest[0] == "--clang":
        clang = rest[1]
        rest = rest[2:]
    clang = find_clang(clang)
    if not clang:
        usage("clang++ not found (Debian package clang; scripts/setup.sh installs it)")
    src_root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    if build == "--selftest":
        return selftest(clang, src_root)
    db = os.path.join(build, "compile_commands.json")
    if not os.path.isfile(db):
        usage(f"{db} not found: configure the build with CMAKE_EXPORT_COMPILE_COMMANDS=ON")
    commands = json.load(open(db))
    if rest:
        wanted = {os.path.abspath(f) for f in rest}
        entries = [e for e in commands if os.path.abspath(e["file"]) in wanted]
        missing = wanted - {os.path.abspath(e["file"]) for e in entries}
        if missing:
            usage("not in the build: " + ", ".join(sorted(missing)))
    else:
        entries = annotated_sources(src_root, commands)
    if not entries:
        usage("no source includes common/mutex.h")

    def run(entry):
        cmd = clang_command(entry, clang)
        p = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
        return entry["file"], p.returncode, p.stderr

    failed = 0
    jobs = int(os.environ.get("JOBS", os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for f, rc, err in pool.map(run, entries):
            rel = os.path.relpath(f, os.path.dirname(src_root))
            if rc != 0:
                failed += 1
                print(f"FAIL {rel}")
                print(err.rstrip())
            else:
                print(f"ok   {rel}")
    print(f"{len(entries) - failed}/{len(entries)} sources pass clang's thread-safety analysis")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
