#!/usr/bin/python3
"""Markdown table of a sweep: per workload and device, every point's peak memory of the
compute tier against its iteration time, the slowdown against `none`, and whether the
point is on the Pareto front across all policies (no other point that fits is at least as
good in both and better in one).

    pareto_table.py out/pareto/results.csv                  # on the terminal
    pareto_table.py out/pareto/results.csv --into docs/policies.md
    make pareto                        # the sweep configs/sweeps/pareto.yaml, then the above

With --into, the table replaces what lies between the lines `<!-- pareto:begin -->` and
`<!-- pareto:end -->` of that file.

Reads only the results.csv of `memsim sweep`.
"""
import argparse
import io
import sys
from pathlib import Path

from plot_sweep import read_results, sweep_axes


def settings(row, axes):
    parts = [f"{a.split('.', 1)[1]}={row[a]}" for a in axes if a.startswith("policy.") and row.get(a, "") != ""]
    return ", ".join(parts)


def table(df, out):
    axes = df.attrs.get("axes", [])
    for (workload, device), grp in df.groupby(["workload", "device"], sort=False):
        base = grp[(grp["policy"] == "none") & (grp["status"] == "ok")]["iteration_time_s"]
        base = float(base.iloc[0]) if len(base) else float("nan")
        ok = grp[(grp["status"] == "ok") & grp["peak_bytes"].notna()]
        front = set()
        for idx, r in ok.iterrows():
            t, m = r["iteration_time_s"], r["peak_bytes"]
            dominated = ((ok["iteration_time_s"] <= t) & (ok["peak_bytes"] <= m) &
                         ((ok["iteration_time_s"] < t) | (ok["peak_bytes"] < m))).any()
            if not dominated:
                front.add(idx)
        out.write(f"\n**{workload} on {device}**\n\n")
        out.write("| policy | settings | status | peak GiB | iteration ms | vs none | front |\n")
        out.write("|---|---|---|---|---|---|---|\n")
        rows = grp.copy()
        # Points that fit by peak, then the rest (oom, failed) in sweep order.
        rows["_key"] = rows["peak_bytes"].where(rows["status"] == "ok").fillna(float("inf"))
        for idx, r in rows.sort_values(["_key", "iteration_time_s"], kind="stable").iterrows():
            if r["status"] == "ok":
                peak = f"{r['peak_bytes'] / 2**30:.2f}"
                ms = f"{r['iteration_time_s'] * 1e3:.1f}"
                slow = f"{r['iteration_time_s'] / base:.3f}x" if base == base else ""
            else:
                peak = ms = slow = ""
            mark = "yes" if idx in front else ""
            out.write(f"| {r['policy']} | {settings(r, axes)} | {r['status']} | {peak} | {ms} | {slow} | {mark} |\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("results", help="results.csv of `memsim sweep` (or its folder)")
    p.add_argument("--into", help="a Markdown file whose pareto:begin/end block to replace")
    a = p.parse_args(argv)
    buf = io.StringIO()
    table(read_results(a.results), buf)
    if not a.into:
        sys.stdout.write(buf.getvalue())
        return 0
    path = Path(a.into)
    text = path.read_text()
    begin, end = "<!-- pareto:begin -->", "<!-- pareto:end -->"
    if begin not in text or end not in text or text.index(begin) > text.index(end):
        raise SystemExit(f"{path}: expected the lines {begin} and {end} around the table, found "
                         f"{'neither' if begin not in text and end not in text else 'only one, or in the wrong order'}")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    path.write_text(head + begin + "\n" + buf.getvalue() + "\n" + end + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
