#!/usr/bin/env python3
"""Turns the criterion results of `cargo bench -p tierpool` into the Markdown tables of
BENCHMARKS.md: per benchmark group and parameter, each contender's median (with criterion's
95% confidence interval) and its ratio to tierpool.

Usage: python3 scripts/criterion_table.py [target/criterion]
"""
import json
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")

# Per-element divisors: the lookup bench times 2^19 lookup pairs per iteration.
PER_ITER = {"lookup": 1 << 19}


def fmt(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} us"
    return f"{ns:.2f} ns"


for group in ("lookup", "get_put", "cross_thread"):
    gdir = root / group
    if not gdir.is_dir():
        continue
    rows = {}
    for est in gdir.glob("*/*/new/estimates.json"):
        contender = json.loads((est.parent / "benchmark.json").read_text())["function_id"]
        param = est.parent.parent.name
        e = json.loads(est.read_text())["median"]
        div = PER_ITER.get(group, 1)
        rows.setdefault(param, {})[contender] = (
            e["point_estimate"] / div,
            e["confidence_interval"]["lower_bound"] / div,
            e["confidence_interval"]["upper_bound"] / div,
        )
    unit = "per lookup pair" if group == "lookup" else "per buffer"
    print(f"\n### {group} (median {unit}, 95% CI; ratio = contender / tierpool)\n")
    print("| parameter | contender | median | CI | vs tierpool |")
    print("|---|---|---:|---:|---:|")
    for param in sorted(rows, key=lambda p: int(p) if p.isdigit() else p):
        by = rows[param]
        base = by.get("tierpool", (None,))[0]
        for name in sorted(by, key=lambda n: by[n][0]):
            med, lo, hi = by[name]
            ratio = f"{med / base:.2f}x" if base else "-"
            print(f"| {param} | {name} | {fmt(med)} | {fmt(lo)} - {fmt(hi)} | {ratio} |")
