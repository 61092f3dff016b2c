#!/usr/bin/env python3
"""Checks the comparison report's page in a headless browser.

    python3 scripts/check_report_page.py DIR SCREENSHOT.png [--max-height PX]

DIR is a report directory (`cargo run --release -p tierpool-bench -- --out DIR`, `--quick`
will do): DIR/index.html beside results.json and one <workload>.svg per workload. The script

1. loads DIR/index.html in headless Chromium (`/usr/bin/chromium`, Debian package `chromium`;
   CHROMIUM=path to use another) with a virtual-time budget, so that the page's inline script
   has run, and reads from the DOM the number of charts that rendered
   (`<span id="charts-loaded" data-count="N">`) and the page's height;
2. checks that number equals the charts expected (the workloads in DIR/results.json, else the
   page's figures);
3. takes a full-page PNG screenshot (1400 px wide, as tall as the page, at most 40,000 px or
   `--max-height`) into SCREENSHOT.png (Chromium's time grows with the height; CI takes the
   first 6,000 px: the verdict and the first charts);
4. checks the screenshot is not blank: it decodes the PNG with zlib (no packages beyond
   Python's own) and counts the distinct colours and the share of pixels that are not the
   background in rows sampled over the whole page.

Exits 0 when all hold, 1 with a message saying which did not, 2 on bad arguments. Runs
Chromium as root with --no-sandbox, and nothing from the network (the page needs none).
"""

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

WIDTH = 1400
MAX_HEIGHT = 40_000
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def fail(msg):
    print(f"check_report_page: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def chromium(args, timeout=120):
    exe = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(exe) and not shutil.which(exe):
        fail(f"no Chromium at {exe} (apt-get install -y chromium, or set CHROMIUM)")
    profile = tempfile.mkdtemp(prefix="check-report-page-")
    try:
        return subprocess.run(
            [exe, *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        fail(f"Chromium did not finish within {timeout} s")
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def expected_charts(folder, page):
    results = os.path.join(folder, "results.json")
    if os.path.exists(results):
        with open(results, encoding="utf-8") as f:
            return len(json.load(f)["workloads"]), "workloads in results.json"
    return len(re.findall(r'<figure class="chart"', page)), "charts on the page"


def png_rows(path):
    """(width, height, bytes per pixel, filter type of each row, the inflated scanlines)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, chunk = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat.append(chunk)
    if header is None:
        fail(f"{path}: no IHDR")
    width, height, depth, colour, _, _, interlace = header
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace != 0:
        fail(f"{path}: a PNG this check does not decode (depth {depth}, colour type {colour})")
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels + 1
    if len(raw) != stride * height:
        fail(f"{path}: {len(raw)} bytes of pixels for {width}x{height}")
    return width, height, channels, raw, stride


def sampled_pixels(path, samples=300):
    """Pixels of rows spread over the image. A row filtered with None or Sub depends on no
    other row, so those are the rows decoded (about `samples` of them, evenly spread); if the
    encoder used none, the first rows are decoded in order instead."""
    width, height, bpp, raw, stride = png_rows(path)
    standalone = [y for y in range(height) if raw[y * stride] in (0, 1)]
    rows = []
    if standalone:
        step = max(1, len(standalone) // samples)
        for y in standalone[::step]:
            f, line = raw[y * stride], bytearray(raw[y * stride + 1 : (y + 1) * stride])
            if f == 1:
                for i in range(bpp, len(line)):
                    line[i] = (line[i] + line[i - bpp]) & 0xFF
            rows.append(bytes(line))
    else:
        prev = bytearray(stride - 1)
        for y in range(min(height, samples)):
            f, line = raw[y * stride], bytearray(raw[y * stride + 1 : (y + 1) * stride])
            for i in range(len(line)):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
                if f == 1:
                    line[i] = (line[i] + a) & 0xFF
                elif f == 2:
                    line[i] = (line[i] + b) & 0xFF
                elif f == 3:
                    line[i] = (line[i] + (a + b) // 2) & 0xFF
                elif f == 4:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                    line[i] = (line[i] + pred) & 0xFF
            rows.append(bytes(line))
            prev = line
    pixels = [row[i : i + bpp] for row in rows for i in range(0, len(row), bpp)]
    return width, height, len(rows), pixels


def max_height_arg(text):
    """`--max-height`'s value: whole pixels, 1 to MAX_HEIGHT."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 0 < value <= MAX_HEIGHT:
        raise argparse.ArgumentTypeError(
            f"{text!r}: whole pixels, 1 to {MAX_HEIGHT}"
        )
    return value


def main():
    parser = argparse.ArgumentParser(
        usage=__doc__.strip().splitlines()[2].strip(), add_help=False
    )
    parser.add_argument("folder")
    parser.add_argument("shot")
    parser.add_argument("--max-height", type=max_height_arg, default=MAX_HEIGHT)
    args = parser.parse_args()  # exits 2 with a message on bad arguments
    folder, shot, max_height = args.folder, args.shot, args.max_height
    index = os.path.join(folder, "index.html")
    if not os.path.exists(index):
        fail(f"{index} does not exist (the report writes it beside report.md)")
    with open(index, encoding="utf-8") as f:
        page = f.read()
    expected, source = expected_charts(folder, page)
    url = "file://" + os.path.abspath(index)

    dom = chromium(["--virtual-time-budget=10000", f"--window-size={WIDTH},1000", "--dump-dom", url])
    html = dom.stdout.decode("utf-8", "replace")
    marker = re.search(r'<span id="charts-loaded"[^>]*\bdata-count="(\d+)"', html)
    if not marker:
        fail(f"no charts-loaded marker in the rendered DOM of {index} (Chromium exit {dom.returncode})")
    drawn = int(marker.group(1))
    height = re.search(r'<body[^>]*\bdata-height="(\d+)"', html)
    height = int(height.group(1)) if height else 0
    if drawn != expected:
        fail(f"{drawn} of {expected} charts rendered ({source})")
    if height <= 0:
        fail("the page's script did not record its height: it did not run to the end")

    tall = min(height, max_height)
    os.makedirs(os.path.dirname(os.path.abspath(shot)), exist_ok=True)
    if os.path.exists(shot):
        os.remove(shot)
    r = chromium([f"--screenshot={os.path.abspath(shot)}", f"--window-size={WIDTH},{tall}", url])
    if not os.path.exists(shot) or os.path.getsize(shot) == 0:
        fail(f"no screenshot written to {shot} (Chromium exit {r.returncode}): {r.stderr.decode()[-500:]}")

    width, h, rows, pixels = sampled_pixels(shot)
    colours = len(set(pixels))
    background = max(set(pixels), key=pixels.count) if pixels else b""
    ink = sum(1 for p in pixels if p != background) / max(1, len(pixels))
    if colours < 16 or ink < 0.005:
        fail(f"the screenshot looks blank: {colours} colours, {ink:.2%} of sampled pixels not background")
    print(
        f"check_report_page: ok: {drawn} of {expected} charts rendered; screenshot {shot} "
        f"{width}x{h}{' (cut at %d px)' % max_height if height > max_height else ''}; "
        f"{colours} colours, {ink:.1%} ink in {rows} sampled rows"
    )


if __name__ == "__main__":
    main()
