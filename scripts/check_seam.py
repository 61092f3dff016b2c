#!/usr/bin/env python3
"""The companion crates use tierpool's public, documented API and nothing else.

`tierpool-rustls` and `tierpool-tonic` (and any `tierpool-*` crate but the report's and the
probe's) are built on what tierpool documents for protocol crates. They cannot reach its
`pub(crate)` items (they are other crates); what this checks is the rest of the way around
the seam:

- no `#[doc(hidden)]` item of tierpool (the crate's bench hooks, `__bench`) is named by them;
- they depend on tierpool through its published features only, and on nothing of its
  sources (`#[path]` into `tierpool/`, `include!` of its files);
- tierpool's own `#[doc(hidden)]` items are the ones listed here (a new back door needs a
  line, and a reason).

    python3 scripts/check_seam.py
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CORE = os.path.join(ROOT, "tierpool", "src")
# tierpool's hidden items, each with why it is there.
ALLOWED_HIDDEN = {
    "__bench": "the report's and the criterion benches' lookup hook and the reclaim probe",
}
# Workspace crates that may use the hidden items (they are not protocol crates).
INSIDERS = {"tierpool", "tierpool-bench", "tierpool-probe"}


def rust_files(top):
    for dirpath, _, names in os.walk(top):
        for n in names:
            if n.endswith(".rs"):
                yield os.path.join(dirpath, n)


def hidden_items():
    """The names tierpool declares under `#[doc(hidden)]`."""
    found = {}
    item = re.compile(r"#\[doc\(hidden\)\]\s*(?:#\[[^\]]*\]\s*)*pub(?:\([^)]*\))?\s+"
                      r"(?:unsafe\s+)?(?:mod|fn|struct|enum|trait|type|const|static|use)\s+([A-Za-z_0-9]+)")
    for path in rust_files(CORE):
        text = open(path, encoding="utf-8").read()
        for m in item.finditer(text):
            found[m.group(1)] = os.path.relpath(path, ROOT)
    return found


def companion_crates():
    for name in sorted(os.listdir(ROOT)):
        manifest = os.path.join(ROOT, name, "Cargo.toml")
        if name.startswith("tierpool-") and name not in INSIDERS and os.path.exists(manifest):
            yield name


def main():
    problems = []
    hidden = hidden_items()
    for name, where in hidden.items():
        if name not in ALLOWED_HIDDEN:
            problems.append(f"{where}: `#[doc(hidden)]` item `{name}` is not listed in "
                            "scripts/check_seam.py (ALLOWED_HIDDEN) with its reason")
    crates = list(companion_crates())
    if not crates:
        problems.append("no companion crate found (tierpool-*)")
    for crate in crates:
        manifest = open(os.path.join(ROOT, crate, "Cargo.toml"), encoding="utf-8").read()
        for m in re.finditer(r"^tierpool\s*=\s*\{([^}]*)\}", manifest, re.M):
            for feature in re.findall(r'"([^"]+)"', m.group(1).split("features", 1)[-1]):
                if feature.startswith("_") or "internal" in feature or "private" in feature:
                    problems.append(f"{crate}/Cargo.toml: tierpool feature `{feature}` is not a published one")
        for path in rust_files(os.path.join(ROOT, crate)):
            text = open(path, encoding="utf-8").read()
            rel = os.path.relpath(path, ROOT)
            for n, line in enumerate(text.splitlines(), 1):
                code = line.split("//", 1)[0]
                for name in hidden:
                    if re.search(r"\btierpool::(?:[A-Za-z_0-9]+::)*" + re.escape(name) + r"\b", code):
                        problems.append(f"{rel}:{n}: names tierpool's hidden `{name}`")
                if re.search(r"#\[path\s*=\s*\"[^\"]*\btierpool/", code) or re.search(
                        r"include(?:_str|_bytes)?!\(\s*\"[^\"]*\btierpool/src", code):
                    problems.append(f"{rel}:{n}: reaches into tierpool's sources")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"seam: {', '.join(crates)} use tierpool's public API only "
          f"(hidden items: {', '.join(sorted(hidden)) or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
