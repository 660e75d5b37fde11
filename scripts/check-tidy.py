#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs clang-tidy 14 (.clang-tidy) over the production sources and fails on new findings.

The tree has findings it was written with; .clang-tidy-baseline counts them per file and check.
A run fails when a (file, check) pair has more findings than the baseline allows, so new code
is held to the rules while old findings are paid down; after fixing some, or when a finding is
accepted on purpose, record the counts with `scripts/check-tidy.py BUILD_DIR --update`.

Results are cached per source file under ~/.cache/nlockd-tidy, keyed by the file, the project
headers it reaches, the compile command, .clang-tidy and the clang-tidy version, so a run after
a small change re-checks only what the change reaches.
Usage: scripts/check-tidy.py BUILD_DIR [--update]   (BUILD_DIR has compile_commands.json)
"""
import concurrent.futures
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

root = pathlib.Path(__file__).resolve().parent.parent
baseline_path = root / ".clang-tidy-baseline"
cache = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "nlockd-tidy"
tidy = shutil.which("clang-tidy-14") or shutil.which("clang-tidy")
finding = re.compile(r"^(/[^:]+):\d+:\d+: (?:warning|error): .* \[([a-z0-9.,-]+)\]$", re.M)
include = re.compile(r'^#include "([^"]+)"', re.M)


def production_sources():
    files = subprocess.check_output(["git", "ls-files", "src/*.cpp"], cwd=root, text=True).split()
    return [root / f for f in files if not f.endswith("_test.cpp") and "/testing/" not in f]


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


def key(path, command, version):
    digest = hashlib.sha256()
    # The checkout's own path is left out, so that another clone of the same tree hits the cache.
    for part in (version, command.replace(str(root), ""), (root / ".clang-tidy").read_text()):
        digest.update(part.encode())
    for file in [path, *reached_headers(path)]:
        digest.update(str(file.relative_to(root)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def run_one(path, build, command, version):
    cached = cache / key(path, command, version)
    if cached.exists():
        return cached.read_text()
    result = subprocess.run([tidy, "-p", str(build), "--quiet", str(path)],
                            capture_output=True, text=True)
    counts = {}
    for file, checks in finding.findall(result.stdout):
        file_path = pathlib.Path(file).resolve()
        if root not in file_path.parents or "build" in file_path.relative_to(root).parts[0]:
            continue
        for check in checks.split(","):
            pair = f"{file_path.relative_to(root)} {check}"
            counts[pair] = counts.get(pair, 0) + 1
    text = "".join(f"{pair} {n}\n" for pair, n in sorted(counts.items()))
    cache.mkdir(parents=True, exist_ok=True)
    cached.write_text(text)
    return text


def main():
    if len(sys.argv) < 2 or not tidy:
        sys.exit("usage: scripts/check-tidy.py BUILD_DIR [--update] (needs clang-tidy-14)")
    build = pathlib.Path(sys.argv[1]).resolve()
    update = "--update" in sys.argv[2:]
    commands = {pathlib.Path(e["file"]).resolve(): e["command"] if "command" in e
                else " ".join(e["arguments"])
                for e in json.loads((build / "compile_commands.json").read_text())}
    version = subprocess.check_output([tidy, "--version"], text=True)
    sources = [p for p in production_sources() if p in commands]
    totals = {}
    # A header's findings show up once per source that includes it: the most any one source
    # reports is what the header holds.
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        for text in pool.map(lambda p: run_one(p, build, commands[p], version), sources):
            for line in text.splitlines():
                pair, n = line.rsplit(" ", 1)
                totals[pair] = max(totals.get(pair, 0), int(n))
    if update:
        baseline_path.write_text("".join(f"{pair} {n}\n" for pair, n in sorted(totals.items())))
        print(f"check-tidy: baseline written, {sum(totals.values())} findings in {len(totals)} pairs")
        return
    baseline = {}
    if baseline_path.exists():
        for line in baseline_path.read_text().splitlines():
            pair, n = line.rsplit(" ", 1)
            baseline[pair] = int(n)
    new = {pair: n for pair, n in totals.items() if n > baseline.get(pair, 0)}
    for pair, n in sorted(new.items()):
        file, check = pair.split(" ")
        print(f"check-tidy: {file}: {n} {check} finding(s), baseline {baseline.get(pair, 0)}",
              file=sys.stderr)
    if new:
        print(f"check-tidy: run clang-tidy-14 -p {build} on the files above; fix the new findings "
              f"(or, if one is accepted on purpose, scripts/check-tidy.py {sys.argv[1]} --update)",
              file=sys.stderr)
        sys.exit(1)
    fixed = sum(max(0, baseline[p] - totals.get(p, 0)) for p in baseline)
    print(f"check-tidy: {len(sources)} sources, no new findings"
          + (f" ({fixed} fewer than the baseline: --update records them)" if fixed else ""))


main()
