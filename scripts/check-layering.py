#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the module layering that docs/architecture.md describes, against the build.

1. The doc's module table ("Module | Folder | Links | Also") names exactly the CMake modules of
   src/ (nlockd_module() and the executables of src/cmd; test tools are not modules), each
   row's Links column is that module's direct nlockd:: dependencies in CMake, and each module
   links only modules listed above it (no cycles).
2. Every project include ("dir/file.hpp") in a module's sources and headers names a header of
   the module itself or of a module it links, directly or through another (the public headers in
   include/nlockd/ count as the pseudo-module `public`, which the table grants by name).
   Test sources (*_test.cpp, testing/ folders) are not checked: test targets link more.

Exit 1 with one line per violation; 0 when the include graph and the table match the build.
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
src = root / "src"
errors = []

# --- The build: modules, their sources and their direct nlockd:: dependencies. ---------------
modules = {}  # name -> {"dir": Path, "sources": set of Path, "deps": set of names}
call = re.compile(r"(nlockd_module|add_executable|target_link_libraries)\(([^)]*)\)", re.S)
for cmake in sorted(src.glob("*/CMakeLists.txt")):
    folder = cmake.parent
    text = re.sub(r"#[^\n]*", "", cmake.read_text())
    for kind, body in call.findall(text):
        words = body.split()
        if kind == "nlockd_module":
            name = words[0]
            section, sources, deps = None, set(), set()
            for word in words[1:]:
                if word in ("SOURCES", "DEPS"):
                    section = word
                elif section == "SOURCES":
                    sources.add(folder / word)
                elif section == "DEPS" and word.startswith("nlockd::"):
                    deps.add(word.removeprefix("nlockd::"))
            modules[name] = {"dir": folder, "sources": sources, "deps": deps}
        elif kind == "add_executable" and folder.name == "cmd":
            modules[words[0]] = {"dir": folder, "sources": {folder / w for w in words[1:]},
                                 "deps": set()}
        elif kind == "target_link_libraries" and words[0] in modules:
            if modules[words[0]]["dir"] == folder:
                modules[words[0]]["deps"] |= {w.removeprefix("nlockd::") for w in words[1:]
                                               if w.startswith("nlockd::")}


def closure(name):
    seen, todo = set(), [name]
    while todo:
        for dep in modules.get(todo.pop(), {"deps": set()})["deps"]:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


# --- The doc's table. --------------------------------------------------------------------------
doc = (root / "docs" / "architecture.md").read_text()
rows = re.findall(r"^\| `([a-z_]+)` \| `([^`]+)` \| ([^|]*) \|", doc, re.M)
if not rows:
    errors.append("docs/architecture.md: no module table rows (| `name` | `folder` | links |)")
documented = {}
for name, folder, links in rows:
    documented[name] = set(re.findall(r"`([a-z_]+)`", links))
    later = documented[name] - set(documented) - {"public"}
    if later:
        errors.append(f"docs/architecture.md: `{name}` links {sorted(later)}, which the table "
                      f"lists below it (dependencies point up the table, never down)")
    if name not in modules:
        errors.append(f"docs/architecture.md: module `{name}` is not a CMake module of src/")
        continue
    if (root / folder).resolve() != modules[name]["dir"].resolve():
        errors.append(f"docs/architecture.md: `{name}` is in {modules[name]['dir'].relative_to(root)}, "
                      f"not {folder}")
    cmake_links = modules[name]["deps"]
    doc_links = documented[name] - {"public"}
    if doc_links != cmake_links:
        errors.append(f"docs/architecture.md: `{name}` links {sorted(doc_links)} in the table but "
                      f"{sorted(cmake_links)} in CMake")
for name in modules:
    if name not in documented:
        errors.append(f"docs/architecture.md: CMake module `{name}` is missing from the table")

# --- Which module owns each header. ------------------------------------------------------------
owner = {}  # header path -> module
for name, module in modules.items():
    for source in module["sources"]:
        header = source.with_suffix(".hpp")
        if header.exists():
            owner[header] = name
folder_default = {}
for name, module in modules.items():
    if module["dir"].name == name or module["dir"] not in folder_default:
        folder_default[module["dir"]] = name


def owner_of(header):
    if header in owner:
        return owner[header]
    for folder in [header.parent, *header.parents]:
        if folder in folder_default:
            return folder_default[folder]
    return None


def public_allowed(name):
    return "public" in documented.get(name, set()) or any(
        "public" in documented.get(dep, set()) for dep in closure(name))


include = re.compile(r'^#include "([a-z_]+)/([^"]+)"', re.M)
for path in sorted(src.rglob("*.[ch]pp")):
    if path.name.endswith("_test.cpp") or "testing" in path.parts:
        continue
    mine = owner_of(path) if path.suffix == ".hpp" else next(
        (n for n, m in modules.items() if path in m["sources"]), owner_of(path))
    if mine is None:
        continue
    allowed = closure(mine) | {mine}
    for top, rest in include.findall(path.read_text()):
        if top == "nlockd":
            if not public_allowed(mine):
                errors.append(f"{path.relative_to(root)}: includes the public header nlockd/{rest}; "
                              f"`{mine}` may not use `public`")
            continue
        target = src / top / rest
        if not target.exists():
            continue  # generated or outside src/ (tests/testutil has its own rule: tests only)
        theirs = owner_of(target)
        if theirs not in allowed:
            errors.append(f"{path.relative_to(root)}: includes {top}/{rest} of `{theirs}`, which "
                          f"`{mine}` does not link")

for error in errors:
    print(f"check-layering: {error}", file=sys.stderr)
if errors:
    sys.exit(1)
print(f"check-layering: {len(modules)} modules, includes and docs/architecture.md match the build")
