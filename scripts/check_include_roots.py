#!/usr/bin/env python3
"""Proves that the build itself refuses a wrong dependency arrow.

Usage: check_include_roots.py BUILD_DIR

Each folder of src/ is a library with its own include root (gpufleet_library in CMakeLists.txt):
a library sees the headers of the libraries it links and no others. For every module, this takes
the compile command of one of its library sources from BUILD_DIR/compile_commands.json and
preprocesses a one-line file that includes a header of each other module, with that command's
flags (a folder with several libraries, testing/, sees what any of them sees). A module named in ALLOWED[module] of scripts/check_layering.py must be found; any other
must fail with "No such file". So `#include "store/state_store.h"` in src/sched/ is a build error,
and the table in check_layering.py cannot drift from the CMake DEPS.

Prints one line per module and every mismatch; exits 0 when all agree, 1 on a mismatch, 2 on
bad usage. Python 3 standard library only.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_layering  # noqa: E402  (ALLOWED, the one table of arrows)


def usage(msg):
    print(f"check_include_roots: {msg}", file=sys.stderr)
    print("usage: check_include_roots.py BUILD_DIR", file=sys.stderr)
    sys.exit(2)


def library_commands(entries, src_root, module):
    """One compile command per library of `module` (src/MODULE/*.cc that are not tests): a folder
    may hold several libraries (testing/), and what the folder may see is what any of them sees."""
    by_target = {}
    for e in sorted(entries, key=lambda e: e["file"]):
        rel = os.path.relpath(e["file"], src_root)
        if rel.split(os.sep)[0] != module or rel.endswith("_test.cc") or not rel.endswith(".cc"):
            continue
        command = e.get("command", " ".join(e.get("arguments", [])))
        m = re.search(r"CMakeFiles/([^/ ]+)\.dir/", command)
        if m and m.group(1).startswith("gpufleet_") and m.group(1) not in by_target:
            by_target[m.group(1)] = e
    return list(by_target.values())


def preprocess_flags(entry):
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out, skip = [args[0]], False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c"):
            skip = a == "-o"
            continue
        if a == entry["file"] or a.startswith("-W"):
            continue
        out.append(a)
    return out


def a_header(src_root, module):
    """The smallest header of the module (quick to preprocess)."""
    folder = os.path.join(src_root, module)
    headers = [f for f in os.listdir(folder) if f.endswith(".h") and not f.endswith("_test.h")]
    if not headers:
        return None
    headers.sort(key=lambda f: (os.path.getsize(os.path.join(folder, f)), f))
    return f"{module}/{headers[0]}"


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        usage("the build directory is required")
    db = os.path.join(argv[1], "compile_commands.json")
    if not os.path.isfile(db):
        usage(f"{db} not found: configure the build with CMAKE_EXPORT_COMPILE_COMMANDS=ON")
    entries = json.load(open(db))
    src_root = os.path.join(os.path.dirname(HERE), "src")
    modules = sorted(m for m in check_layering.ALLOWED if os.path.isdir(os.path.join(src_root, m)))
    headers = {m: a_header(src_root, m) for m in modules}
    mismatches = 0
    with tempfile.TemporaryDirectory() as tmp:
        for module in modules:
            libraries = library_commands(entries, src_root, module)
            if not libraries:
                print(f"{module}: no library source in the build")
                mismatches += 1
                continue
            seen, refused = [], []
            for other in modules:
                if other == module or headers[other] is None:
                    continue
                probe = os.path.join(tmp, f"{module}_includes_{other}.cc")
                with open(probe, "w") as f:
                    f.write(f'#include "{headers[other]}"\n')
                found, stderr = False, ""
                for entry in libraries:
                    p = subprocess.run(preprocess_flags(entry) + ["-E", "-o", os.devnull, probe],
                                       cwd=entry["directory"], capture_output=True, text=True)
                    if p.returncode == 0:
                        found = True
                        break
                    stderr = p.stderr
                allowed = other in check_layering.ALLOWED[module]
                if found and not allowed:
                    print(f"FAIL {module}: includes {headers[other]}, but check_layering.py does not allow "
                          f"{module} -> {other}: the CMake DEPS of {module} reach {other}")
                    mismatches += 1
                elif not found and allowed:
                    why = "No such file" if "No such file" in stderr else stderr.strip()[:300]
                    print(f"FAIL {module}: cannot include {headers[other]} ({why}), but check_layering.py "
                          f"allows {module} -> {other}: add it to the DEPS of {module} or drop the rule")
                    mismatches += 1
                (seen if found else refused).append(other)
            print(f"{module}: sees {', '.join(seen) or 'nothing else'}; refused {', '.join(refused) or 'nothing'}")
    if mismatches:
        print(f"{mismatches} mismatch(es) between the include roots and scripts/check_layering.py")
        return 1
    print("the include roots match the layering table: a wrong arrow fails to compile")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
