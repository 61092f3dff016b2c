#!/usr/bin/env python3
"""Every file or folder a document names in backticks exists, and names one.

Reads the Markdown documents and the Rust sources' doc comments (`//!`, `///`) and line
comments of the repository's tracked files, takes each backticked word that looks like a
path (a name with an extension such as `read_buf.rs`, or with a slash), and checks that a
tracked file or folder has it as its path or as the end of its path (`tests/io/read_buf.rs`
names `tierpool/tests/io/read_buf.rs`). In a Rust source, a name resolves from the file's
folder upward (a bare name no further than its `src/` folder, or its crate's folder outside
one; a name with a slash as far as the repository's root): the nearest folder holding
a match must hold exactly one, or the name itself (so `reader.rs` in `tierpool-tonic` is
that crate's, and a name two files share is refused as ambiguous). Paths that a run creates
(`target/...`, `/tmp/...`), placeholders (`<target>`, `DIR`) and URLs are not files. The
records of earlier work (`CHANGELOG.md`, `docs/benchmarks-history.md`) name files as they
were, and are not read.

Exits non-zero listing every name that matches nothing, or more than one, with where it was
found.
"""

import re
import subprocess
import sys

RECORDS = {"CHANGELOG.md", "docs/benchmarks-history.md"}
EXTENSIONS = ("rs", "md", "toml", "py", "sh", "json", "svg", "png", "c", "def", "proto", "txt", "yml", "pem", "key")
PATHLIKE = re.compile(r"^[A-Za-z0-9_.\-/]+$")
# Where a run or the machine makes files: not the repository's.
GENERATED = ("target/", "/", "~", "fuzz/target", "fuzz/corpus/")
# What a report run writes into its folder.
RUN_OUTPUTS = {"report.md", "results.json", "index.html"}
# Other projects' files, named where their tests or definitions are ported or read: tokio-util's
# tests, grpc's `.proto` files (Debian's grpc-proto package).
ELSEWHERE = {"framed_write.rs", "framed_read.rs", "messages.proto", "grpc/testing/messages.proto",
             "benchmark_service.proto", "grpc/testing/benchmark_service.proto"}


def tracked():
    out = subprocess.run(["git", "ls-files", "-z"], capture_output=True, check=True).stdout
    files = [f for f in out.decode().split("\0") if f]
    dirs = set()
    for f in files:
        parts = f.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
    return files, dirs


def candidates(text):
    for word in re.findall(r"`([^`\n]+)`", text):
        word = word.strip()
        # `path:line` and `path#anchor` name the path.
        word = re.sub(r"(:\d+)+$", "", word).split("#")[0]
        if (not PATHLIKE.match(word) or word.startswith(GENERATED) or "//" in word
                or word in RUN_OUTPUTS or word in ELSEWHERE):
            continue
        ext = word.rsplit(".", 1)[-1] if "." in word.rsplit("/", 1)[-1] else ""
        if ext in EXTENSIONS or (word.endswith("/") and len(word) > 1):
            yield word


def doc_text(path, content):
    if path.endswith(".md"):
        return content
    # Rust: comments only (strings and code name files a run creates).
    return "\n".join(
        line.split("//", 1)[1] for line in content.splitlines() if line.lstrip().startswith("//")
    )


def resolves_in_rust(path, name, files, dirs):
    """`name`, written in the Rust source `path`: resolved from its folder upward (a bare name
    no further than its crate's folder, the first folder of its path); the nearest folder
    holding a match holds exactly one, or `name` itself."""
    if name in ("mod.rs", "lib.rs", "main.rs"):
        return True
    entries = set(files) | {d for d in dirs}
    target = name.rstrip("/")
    # The repository's own documents (`BENCHMARKS.md`), and a folder the file is in.
    if target in entries and "/" not in target and (target in files or path.startswith(target + "/")):
        return True
    # A bare name no further than the `src/` folder it is written in (or, outside one, the
    # crate's folder).
    crate = path.split("/", 1)[0] if "/" in path else ""
    home = path[: path.index("/src/") + 4] if "/src/" in path else crate
    stop = home if "/" not in target else ""
    d = path.rsplit("/", 1)[0] if "/" in path else ""
    while True:
        pre = d + "/" if d else ""
        hits = [e for e in entries if e.startswith(pre) and (e == pre + target or e.endswith("/" + target))]
        if hits:
            return len(hits) == 1 or (pre + target) in hits
        if d == stop or not d:
            return False
        d = d.rsplit("/", 1)[0] if "/" in d else ""


def main():
    files, dirs = tracked()
    suffixes = set()
    for f in files:
        parts = f.split("/")
        for i in range(len(parts)):
            suffixes.add("/".join(parts[i:]))
    for d in dirs:
        parts = d.split("/")
        for i in range(len(parts)):
            suffixes.add("/".join(parts[i:]) + "/")
    missing = []
    for path in files:
        if path in RECORDS or not path.endswith((".md", ".rs")):
            continue
        try:
            content = open(path, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError):
            continue
        for word in candidates(doc_text(path, content)):
            name = word.removeprefix("./")
            if path.endswith(".rs") and "/" in path:
                if resolves_in_rust(path, name, files, dirs):
                    continue
            elif name in suffixes or name.rstrip("/") in suffixes or name.rstrip("/") + "/" in suffixes:
                continue
            missing.append((path, word))
    for path, word in missing:
        print(f"{path}: `{word}` names no file of the repository, or more than one from there")
    if missing:
        return 1
    print(f"doc paths: every backticked file name in {len(files)} tracked files exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
