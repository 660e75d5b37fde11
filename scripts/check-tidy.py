#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs clang-tidy 14 (.clang-tidy) over the production sources and fails on new findings.

The tree has findings it was written with; .clang-tidy-baseline lists them, each keyed by file,
check and message (numbers in the message normalised, no line number), so that code moving
within a file does not disturb it. A run fails when a key turns up more often than the baseline
holds, so new code is held to the rules while old findings are paid down. After fixing some, or
to accept a finding on purpose, record the tree as it is with
    scripts/check-tidy.py BUILD_DIR --update
and commit .clang-tidy-baseline with the reason.

Every production source under src/ is checked (not the tests, not src/*/testing/), with the
project's headers it includes; generated files (under the build directory) and third-party
headers are not. Results are cached per source under ~/.cache/nlockd-tidy, keyed by the file,
the project headers it reaches, the compile command, .clang-tidy and the clang-tidy version, so
that a run after a small change re-checks only what the change reaches.

Usage: scripts/check-tidy.py BUILD_DIR [--update] [-j JOBS] [FILE...]
  BUILD_DIR has compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS, on in CMakeLists.txt).
  FILE...   only these sources (a quick look while editing; the baseline is not compared).
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

root = pathlib.Path(__file__).resolve().parent.parent
baseline_path = root / ".clang-tidy-baseline"
cache = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "nlockd-tidy"
tidy = shutil.which("clang-tidy-14") or shutil.which("clang-tidy")
# Bumped when what the cache holds changes shape.
cache_format = "2"
finding = re.compile(r"^(/[^:\n]+):(\d+):(\d+): (warning|error): (.*) \[([A-Za-z0-9.,_-]+)\]$",
                     re.M)
include = re.compile(r'^#include "([^"]+)"', re.M)


# Sources clang 14 cannot compile although g++ 12 does, each with why; they are left out (and
# named at every run) until the code or the compiler changes.
clang_cannot_compile = {
    # Heterogeneous std::set lookup of tuple<string_view...> against tuple<string...>: clang 14
    # does not instantiate libstdc++ 12's tuple operator<=> for it.
    "src/server/lock_journal_store.cpp",
}


def production_sources():
    files = subprocess.check_output(["git", "ls-files", "src/*.cpp"], cwd=root, text=True).split()
    return [root / f for f in files if not f.endswith("_test.cpp") and "/testing/" not in f
            and f not in clang_cannot_compile]


def reached_headers(path):
    """The project headers a source includes, transitively (rooted at src/ or include/)."""
    seen, todo = set(), [path]
    while todo:
        for name in include.findall(todo.pop().read_text(errors="replace")):
            for base in (root / "src", root / "include"):
                header = base / name
                if header.exists() and header not in seen:
                    seen.add(header)
                    todo.append(header)
    return sorted(seen)


def cache_key(path, command, version):
    digest = hashlib.sha256()
    # The checkout's own path is left out, so that another clone of the same tree hits the cache.
    for part in (cache_format, version, command.replace(str(root), ""),
                 (root / ".clang-tidy").read_text()):
        digest.update(part.encode())
    for file in [path, *reached_headers(path)]:
        digest.update(str(file.relative_to(root)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def normalise(message):
    """A message without what moves: the checkout's path, line and column numbers, counts."""
    return re.sub(r"\d+", "N", message.replace(str(root) + "/", ""))


def run_one(path, build, command, version):
    """The findings in the project's own files of one source: (file, line, check, message)."""
    cached = cache / cache_key(path, command, version)
    if cached.exists():
        return json.loads(cached.read_text())
    result = subprocess.run([tidy, "-p", str(build), "--quiet", str(path)],
                            capture_output=True, text=True)
    found = []
    for file, line, _, severity, message, checks in finding.findall(result.stdout):
        file_path = pathlib.Path(file).resolve()
        if root not in file_path.parents or build in [file_path, *file_path.parents]:
            continue  # Third-party headers, generated files.
        relative = str(file_path.relative_to(root))
        for check in checks.split(","):
            if check == "clang-diagnostic-error":
                check = "error"  # Not parsed: never baselined (main() fails on it).
            found.append([relative, int(line), check, message])
    if result.returncode != 0 and not any(f[2] == "error" for f in found):
        tail = result.stderr.strip()[-400:]
        found.append([str(path.relative_to(root)), 0, "error",
                      f"clang-tidy exited with {result.returncode}: {tail}"])
    if not any(f[2] == "error" for f in found):  # A failure is not cached: it may be the machine.
        cache.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(found))
    return found


def read_baseline():
    baseline = {}
    if baseline_path.exists():
        for line in baseline_path.read_text().splitlines():
            if line.startswith("#") or not line.strip():
                continue
            file, check, count, message = line.split("\t", 3)
            baseline[(file, check, message)] = int(count)
    return baseline


def write_baseline(totals):
    lines = ["# clang-tidy findings the tree has (scripts/check-tidy.py): file, check, count,",
             "# message with numbers as N. Written by scripts/check-tidy.py BUILD_DIR --update."]
    for (file, check, message), n in sorted(totals.items()):
        lines.append(f"{file}\t{check}\t{n}\t{message}")
    baseline_path.write_text("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(usage=__doc__.split("Usage: ")[1])
    parser.add_argument("build")
    parser.add_argument("--update", action="store_true")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count())
    parser.add_argument("files", nargs="*")
    args = parser.parse_intermixed_args()
    if not tidy:
        sys.exit("check-tidy: clang-tidy-14 is not installed (scripts/install-deps.sh --test)")
    build = pathlib.Path(args.build).resolve()
    database = build / "compile_commands.json"
    if not database.exists():
        sys.exit(f"check-tidy: {database} is missing: configure {args.build} with CMake first")
    commands = {pathlib.Path(e["file"]).resolve(): e["command"] if "command" in e
                else " ".join(e["arguments"]) for e in json.loads(database.read_text())}
    version = subprocess.check_output([tidy, "--version"], text=True)
    wanted = [pathlib.Path(f).resolve() for f in args.files] or production_sources()
    missing = [p for p in wanted if p not in commands]
    if args.files and missing:
        sys.exit(f"check-tidy: not in {database}: {' '.join(map(str, missing))}")
    sources = [p for p in wanted if p in commands]
    started = time.monotonic()
    per_source = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for path, found in zip(sources, pool.map(
                lambda p: run_one(p, build, commands[p], version), sources)):
            per_source[path] = found
    elapsed = time.monotonic() - started

    errors = [f for found in per_source.values() for f in found if f[2] == "error"]
    if errors:
        for file, line, _, message in errors:
            print(f"check-tidy: {file}:{line}: does not compile for clang-tidy: {message}",
                  file=sys.stderr)
        sys.exit(1)
    # A header's findings show up once per source that includes it: the most any one source
    # reports is what the header holds.
    totals, where = {}, {}
    for found in per_source.values():
        counts = {}
        for file, line, check, message in found:
            key = (file, check, normalise(message))
            counts[key] = counts.get(key, 0) + 1
            where.setdefault(key, set()).add((line, message))
        for key, n in counts.items():
            totals[key] = max(totals.get(key, 0), n)
    if args.files:
        for key in sorted(where):
            for line, message in sorted(where[key]):
                print(f"{key[0]}:{line}: {message} [{key[1]}]")
        return
    if args.update:
        write_baseline(totals)
        print(f"check-tidy: baseline written, {sum(totals.values())} findings "
              f"({len(sources)} sources, {elapsed:.0f} s)")
        return
    baseline = read_baseline()
    new = {key: n for key, n in totals.items() if n > baseline.get(key, 0)}
    for (file, check, message), n in sorted(new.items()):
        allowed = baseline.get((file, check, message), 0)
        print(f"check-tidy: {file}: {check}: {n - allowed} new (baseline {allowed}):",
              file=sys.stderr)
        for line, text in sorted(where[(file, check, message)]):
            print(f"  {file}:{line}: {text}", file=sys.stderr)
    if new:
        print(f"check-tidy: FAILED: {sum(n - baseline.get(k, 0) for k, n in new.items())} new "
              "finding(s). Fix them (clang-tidy-14 -p BUILD_DIR FILE shows them with context),\n"
              "  or, to accept a finding on purpose, record it and commit the baseline with the "
              f"reason:\n    scripts/check-tidy.py {args.build} --update", file=sys.stderr)
        sys.exit(1)
    fixed = sum(max(0, n - totals.get(k, 0)) for k, n in baseline.items())
    print("check-tidy: not checked (clang 14 cannot compile them): "
          + " ".join(sorted(clang_cannot_compile)))
    print(f"check-tidy: {len(sources)} sources in {elapsed:.0f} s, no new findings"
          + (f" ({fixed} fewer than the baseline: --update records that)" if fixed else ""))


main()
