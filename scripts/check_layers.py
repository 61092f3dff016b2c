#!/usr/bin/env python3
"""Checks that a crate's imports go bottom-up, as its folders' docs say: tierpool's library
(by default) and the report tool's (`tierpool-bench/src`).

The layers are the modules `lib.rs` declares, in its order (tierpool: `base`, `sys`,
`observe`, `engine`, `buf`, `pool`, `io`, `compat`; the report tool: `harness`,
`contenders`, `fixtures`, `workloads`, `report`); inside a folder, its files in the order its
`mod.rs` declares them. A file may use (`crate::...`, `super::...`, or a name the crate root
re-exports) only what is declared before it: an earlier layer, or an earlier file of its own
folder. Doc comments, strings and `#[cfg(test)]` modules, inline or in files of their own,
are not checked (tests may use the whole crate). A file may name an exception, with its reason, in a comment
`// check_layers: allow <module path> (why)`. A folder's `mod.rs` may name its door,
`// check_layers: door <file>, <file>, ...`: files outside the folder may then use only those
of its files (tierpool's `engine/`: `ops`, `config`, `error`). Exits 1 and lists each upward
import and each one that goes around a door.

    python3 scripts/check_layers.py [tierpool/src]
    python3 scripts/check_layers.py tierpool-bench/src

Bottom-up order also means no two modules import each other in a circle.
"""
import os
import re
import sys

SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tierpool", "src")
MOD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_0-9]+)\s*;", re.M)
TEST_DECL = re.compile(r"^\s*#\[cfg\([^\n]*\btest\b[^\n]*\)\]\s*\n\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_0-9]+)\s*;", re.M)


def declared(path):
    """The child modules a module file declares, in order, but not its test modules."""
    with open(path) as f:
        text = f.read()
    tests = set(TEST_DECL.findall(text))
    return [m for m in MOD_DECL.findall(text) if m not in tests]


def module_file(parts):
    base = os.path.join(SRC, *parts)
    for p in (base + ".rs", os.path.join(base, "mod.rs")):
        if os.path.exists(p):
            return p
    return None


# Every module path (tuple) -> its rank, a tuple giving its position bottom-up at each level.
rank = {}


def walk(parts, prefix_rank):
    f = module_file(parts) if parts else os.path.join(SRC, "lib.rs")
    if f is None:
        return
    rank[tuple(parts)] = prefix_rank
    if parts and not f.endswith("mod.rs"):
        return
    for i, child in enumerate(declared(f)):
        walk(parts + [child], prefix_rank + (i,))


walk([], ())

# Folders with a door: folder path -> the children outside files may use.
doors = {}
for mod in rank:
    f = module_file(list(mod)) if mod else None
    if f and f.endswith("mod.rs"):
        with open(f) as fh:
            m = re.search(r"// check_layers: door ([a-z_0-9, ]+)", fh.read())
        if m:
            doors[mod] = {n.strip() for n in m.group(1).split(",") if n.strip()}

# The names lib.rs re-exports, resolved to the module they come from.
reexports = {}
with open(os.path.join(SRC, "lib.rs")) as f:
    lib = f.read()
for m in re.finditer(r"pub use ([a-z_:]+)::(?:\{([^}]*)\}|([A-Za-z_0-9]+));", lib):
    path = tuple(m.group(1).split("::"))
    names = m.group(2) or m.group(3)
    for n in re.split(r"[\s,]+", names):
        if n:
            reexports[n] = path


def resolve(path):
    """The longest declared module prefix of `path` (a tuple of names under crate::)."""
    if path and path[0] in reexports:
        return reexports[path[0]]
    for k in range(len(path), 0, -1):
        if tuple(path[:k]) in rank:
            return tuple(path[:k])
    return None


def code_lines(text):
    """Lines outside doc comments and #[cfg(test)] modules (a test module ends at the first
    line that is a closing brace at column 0)."""
    in_test = False
    pending_test = False
    for no, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if in_test:
            if line.startswith("}"):
                in_test = False
            continue
        if s.startswith("#[cfg(") and "test" in s and "not(test" not in s:
            pending_test = True
            continue
        if pending_test and re.match(r"(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", s):
            in_test = True
            pending_test = False
            continue
        if not s.startswith("#["):
            pending_test = False
        if s.startswith("//"):
            continue
        yield no, re.sub(r'"(?:[^"\\]|\\.)*"', '""', line.split("//")[0])


problems = []
for mod, r in sorted(rank.items()):
    if not mod:
        continue
    f = module_file(list(mod))
    with open(f) as fh:
        text = fh.read()
    # What this file may use: anything whose rank sorts before its own, its own descendants,
    # and its ancestors' declarations before it (which is the same comparison).
    allowed = {tuple(a.split("::")) for a in re.findall(r"// check_layers: allow ([a-z_:]+)", text)}
    parent = mod if f.endswith("mod.rs") else mod[:-1]

    def check(ref, no):
        target = resolve(ref)
        if target is None or target == mod:
            return
        if target[: len(mod)] == mod:  # a descendant
            return
        if mod[: len(target)] == target:  # an ancestor (its mod.rs: re-exports, docs)
            return
        if rank[target] > r and target not in allowed:
            problems.append(f"{os.path.relpath(f, SRC)}:{no}: uses crate::{'::'.join(ref)} ({'::'.join(target)}), declared above it")
        for folder, door in doors.items():
            inside = target[: len(folder)] == folder and len(target) > len(folder)
            if inside and mod[: len(folder)] != folder and target[len(folder)] not in door:
                problems.append(f"{os.path.relpath(f, SRC)}:{no}: uses crate::{'::'.join(ref)}, behind {'::'.join(folder)}'s door ({', '.join(sorted(door))})")

    code = []
    for no, line in code_lines(text):
        code.append((no, line))
        refs = [tuple(p.split("::")) for p in re.findall(r"\bcrate::((?:[a-z_0-9]+::)*[A-Za-z_0-9]+)", line)]
        for p in re.findall(r"\bsuper::((?:[a-z_0-9]+::)*[A-Za-z_0-9]+)", line):
            refs.append(parent[:-1] + tuple(p.split("::")) if f.endswith("mod.rs") else parent + tuple(p.split("::")))
        for g in re.findall(r"\bcrate::\{([^}]*)\}", line):
            refs += [(n.strip(),) for n in g.split(",") if n.strip()]
        for ref in refs:
            check(ref, no)
    # Grouped imports under a path, on one line or several (`use crate::a::{b::C, d};`): each
    # item is a path of its own.
    joined = "\n".join(line for _, line in code)
    numbers = [no for no, _ in code]
    for m in re.finditer(r"\bcrate::((?:[a-z_0-9]+::)+)\{([^{}]*)\}", joined):
        prefix = tuple(m.group(1).rstrip(":").split("::"))
        no = numbers[joined.count("\n", 0, m.start())]
        for item in m.group(2).split(","):
            item = item.strip().split(" as ")[0].strip()
            if not item:
                continue
            path = prefix if item == "self" else prefix + tuple(item.split("::"))
            check(path, no)

if problems:
    print("imports that go up the layers (scripts/check_layers.py):")
    print("\n".join(problems))
    sys.exit(1)
print(f"layers: {len(rank) - 1} modules, every import goes down")
