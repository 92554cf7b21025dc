#!/usr/bin/env python3
"""Checks that src/ keeps the dependency direction of docs/STYLE.md.

Usage: check_layering.py SRC_DIR

Dependencies point inward: common <- model <- sched <- sim <- cli, with the shared fakes in
testing/ beside sched. CMake states the rule with target_link_libraries; this script states it for
#include lines, which the linker only catches when a symbol is actually used. It also keeps the
scheduler core off the OS clock: sched/ gets its time from the Clock it is given, never from
std::chrono's clocks or time(), so that the simulator and the tests can drive it.

Rules, by the first folder under src/ (src/sched/policy/ belongs to sched):
  - a file may include headers of the modules in ALLOWED[module];
  - tests (*_test.cc) may also include testing/ (the fakes every test shares);
  - src/main.cc may include cli/ only;
  - the database clients' headers (libpq-fe.h, sqlite3.h) belong to store/ (EXTERNAL_OWNERS);
  - a folder with no rule is itself a violation: add its rule here when you add the folder.

Prints each violation as FILE:LINE: message and exits 1 when there is any; exits 0 when clean and
2 on bad usage. Python 3 standard library only.
"""

import os
import re
import sys

# Module -> the modules its #includes may name. Keep in step with the DEPS of each folder's
# gpufleet_library() call in src/*/CMakeLists.txt.
ALLOWED = {
    "common": {"common"},
    "model": {"common", "model"},
    "sched": {"common", "model", "sched"},
    "testing": {"common", "model", "sched", "api", "store", "provider", "testing"},
    "sim": {"common", "model", "sched", "sim"},
    "api": {"common", "model", "api"},
    "store": {"common", "model", "api", "store"},
    "cost": {"common", "model", "cost"},
    "obs": {"common", "obs"},
    "node": {"common", "model", "node"},
    "plan": {"common", "model", "sched", "sim", "cost", "plan"},
    "agent": {"common", "model", "api", "obs", "node", "agent"},
    "provider": {"common", "model", "provider"},
    "controller": {"common", "model", "sched", "api", "store", "cost", "provider", "obs", "node", "controller"},
    "cli": {"common", "model", "sched", "sim", "api", "store", "cost", "agent", "provider", "controller", "plan", "obs", "node", "cli"},
}
# Headers of outside libraries that only one folder may include: the database clients belong to
# the store, so no other folder grows its own SQL.
EXTERNAL_OWNERS = {
    "libpq-fe.h": {"store"},
    "sqlite3.h": {"store"},
}
# Files directly in src/.
TOP_LEVEL_ALLOWED = {"main.cc": {"cli"}}
# What tests beside their code may add to their module's list.
TEST_EXTRA = {"testing"}
# Modules that must not read the OS clock.
CLOCK_FREE = {"sched"}

SOURCE_SUFFIXES = (".h", ".hh", ".hpp", ".cc", ".cpp", ".cxx", ".inc")

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
# OS clocks, looked for after comments and string literals are blanked out. Plain time( and
# clock( are also common method names (an accessor `clock()`), so those count only when qualified
# (std::time(, ::clock() or, for time, called the C way: time(nullptr), time(NULL), time(0), time(&t).
_CLOCK_MSG = "reads the OS clock ({0}); the scheduler core takes its time from the injected sched::Clock"
CLOCK_RES = [
    re.compile(r"\b(system_clock|steady_clock|high_resolution_clock|utc_clock|tai_clock|gps_clock|file_clock)\b"),
    re.compile(r"((?:\bstd\s*::\s*|(?<![\w:])::\s*)(?:time|clock|clock_gettime|gettimeofday|timespec_get)\s*\()"),
    re.compile(r"((?<![\w.>:])\btime\s*\(\s*(?:nullptr|NULL|0|&))"),
    re.compile(r"((?<![\w.>:])\b(?:clock_gettime|gettimeofday|timespec_get)\s*\()"),
]


def blank_comments_and_strings(text):
    """Returns text with comments, string and char literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and nxt == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == "R" and nxt == '"' and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            # Raw string R"delim( ... )delim".
            open_paren = text.find("(", i + 2)
            if open_paren < 0:
                out.append(c)
                i += 1
                continue
            delim = text[i + 2:open_paren]
            close = text.find(")" + delim + '"', open_paren)
            j = n if close < 0 else close + len(delim) + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == "'" and i > 0 and text[i - 1].isalnum():
            out.append(c)  # a digit separator: 3'600'000
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def module_of(rel_path):
    """'sched/policy/fifo.cc' -> 'sched'; 'main.cc' -> None (a file directly in src/)."""
    parts = rel_path.split("/")
    return parts[0] if len(parts) > 1 else None


def is_test(rel_path):
    base = os.path.basename(rel_path)
    return os.path.splitext(base)[0].endswith("_test")


def source_files(src_dir):
    for root, dirs, files in os.walk(src_dir):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                path = os.path.join(root, name)
                yield path, os.path.relpath(path, src_dir).replace(os.sep, "/")


def check_file(path, rel, modules):
    """Yields (line, message) for each violation in one file."""
    module = module_of(rel)
    if module is None:
        allowed = TOP_LEVEL_ALLOWED.get(rel)
        if allowed is None:
            yield 1, ("no layering rule for src/%s; add it to TOP_LEVEL_ALLOWED in "
                      "scripts/check_layering.py" % rel)
            return
    else:
        allowed = ALLOWED.get(module)
        if allowed is None:
            yield 1, ("no layering rule for src/%s/; add the module and the modules it may use to "
                      "ALLOWED in scripts/check_layering.py (and its DEPS in CMake)" % module)
            return
        if is_test(rel):
            allowed = allowed | TEST_EXTRA
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        yield 1, "cannot read: %s" % e.strerror
        return

    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        m = INCLUDE_RE.match(line)
        if not m:
            continue
        target = m.group(2).strip()
        owners = EXTERNAL_OWNERS.get(target)
        if owners is not None and module not in owners:
            who = "src/%s/" % module if module else "src/%s" % rel
            yield number, ("%s may not include <%s>: only %s may use that library" %
                           (who, target, ", ".join("src/%s/" % o for o in sorted(owners))))
            continue
        if "/" not in target:
            continue  # "foo.h": a header of the same folder
        first = target.split("/", 1)[0]
        if first not in modules:
            continue  # a library header such as "CLI/CLI.hpp" or <sys/types.h>
        if first not in allowed:
            who = "src/%s/" % module if module else "src/%s" % rel
            yield number, ('%s may not include "%s": %s depends only on %s' %
                           (who, target, module or rel, ", ".join(sorted(allowed))))

    if module in CLOCK_FREE:
        code = blank_comments_and_strings(text).split("\n")
        for number, line in enumerate(code, start=1):
            if INCLUDE_RE.match(lines[number - 1]):
                continue
            for regex in CLOCK_RES:
                for m in regex.finditer(line):
                    yield number, _CLOCK_MSG.format(re.sub(r"\s+", "", m.group(1)))


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        sys.stderr.write(__doc__)
        return 2
    src_dir = argv[1]
    if not os.path.isdir(src_dir):
        sys.stderr.write("check_layering.py: %s is not a directory\n" % src_dir)
        return 2
    # Anything that names a folder of src/ (or a module with a rule) is a project include.
    modules = set(ALLOWED) | {d for d in os.listdir(src_dir) if os.path.isdir(os.path.join(src_dir, d))}

    violations = 0
    checked = 0
    for path, rel in source_files(src_dir):
        checked += 1
        for line, message in check_file(path, rel, modules):
            print("%s:%d: %s" % (os.path.join(src_dir, rel), line, message))
            violations += 1
    if violations:
        print("check_layering: %d violation(s) in %s (rules: docs/STYLE.md, scripts/check_layering.py)"
              % (violations, src_dir))
        return 1
    print("check_layering: %d files in %s follow the layering rules" % (checked, src_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
