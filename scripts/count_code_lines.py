#!/usr/bin/env python3
"""Counts a folder's lines of Rust code outside tests: the engine's size, as issue 43 measures it.

A line counts if it is neither blank nor a `//` comment (doc comments included), and is not
inside an item marked `#[cfg(test)]` or `#[cfg(all(test, ...))]` (a test module written
inline, or a test-only function); files named `tests.rs` are left out whole. Prints each
file's count with `-v`, and the total.

    python3 scripts/count_code_lines.py [-v] [tierpool/src/engine]
"""
import os
import sys


def is_test_cfg(line):
    """True for an attribute that keeps the next item to test builds."""
    return line.startswith("#[cfg(") and "test" in line and "not(test)" not in line


def count(path):
    """Lines of code in one file, test-only items left out."""
    lines = open(path, encoding="utf-8").read().split("\n")
    n, i = 0, 0
    while i < len(lines):
        line = lines[i].strip()
        if is_test_cfg(line):
            # Skip the item the attribute marks: up to its closing brace, or its `;`.
            j, depth, opened = i + 1, 0, False
            while j < len(lines):
                depth += lines[j].count("{") - lines[j].count("}")
                opened = opened or "{" in lines[j]
                j += 1
                if (opened and depth <= 0) or (not opened and lines[j - 1].strip().endswith(";")):
                    break
            i = j
            continue
        if line and not line.startswith("//"):
            n += 1
        i += 1
    return n


def main():
    args = [a for a in sys.argv[1:] if a != "-v"]
    root = args[0] if args else os.path.join(os.path.dirname(__file__), "..", "tierpool", "src", "engine")
    rows = []
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".rs") and name != "tests.rs":
                path = os.path.join(folder, name)
                rows.append((count(path), os.path.relpath(path, root)))
    if "-v" in sys.argv:
        for n, path in sorted(rows, reverse=True):
            print(f"{n:6} {path}")
    print(f"{sum(n for n, _ in rows):6} total")


if __name__ == "__main__":
    main()
