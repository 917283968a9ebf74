#!/usr/bin/python3
"""One self-contained HTML page (images embedded) for a run, several runs, or a sweep.

    report.py out/ -o report.html                    # a run: figures, memory, timeline (tiles)
    report.py out/none out/vdnn -o report.html       # runs side by side (the first is the baseline)
    report.py out/mysweep -o report.html             # a sweep: outcomes, Pareto fronts, fits, table

A folder holding results.csv (or the CSV itself) is a sweep; any other folder is the --out
folder of `memsim run`. The page needs nothing else to open: images are PNGs inside it.
Reads only memsim's CSV/JSON output.
"""
import argparse
import base64
import html
import sys
import tempfile
from pathlib import Path

import memsim_style as ms
import compare
import plot_memory
import plot_sweep
import plot_tiles
import plot_timeline

CSS = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { padding: 3px 10px; text-align: right; border-bottom: 1px solid #eee; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #f4f4f4; }
img { max-width: 100%; border: 1px solid #eee; }
.ok { color: #2e7d32; } .oom { color: #c62828; font-weight: bold; }
.note { color: #666; font-size: 0.85em; }
"""


def embed(path):
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(Path(path).stem)}" src="data:image/png;base64,{data}">'


def status_span(status):
    cls = "ok" if status == "ok" else "oom"
    return f'<span class="{cls}">{html.escape(str(status))}</span>'


def run_section(run_dirs, tmp):
    parts = []
    values = compare.compare_values(run_dirs)
    table = compare.compare_table(values)
    first = ms.read_summary(run_dirs[0])
    if len(run_dirs) == 1:
        title = f"{first.get('description') or first.get('workload')} on {first.get('platform')}, policy {first.get('policy')}"
        parts.append(f"<h1>{html.escape(title)}: {status_span(first.get('status'))}</h1>")
        oom = first.get("oom")
        if oom:
            parts.append(f"<p class='oom'>out of memory in {html.escape(oom.get('tier', ''))} at op "
                         f"{html.escape(str(oom.get('op')))}: asked {ms.format_bytes(oom.get('requested_bytes', 0))} "
                         f"with {ms.format_bytes(oom.get('allocated_bytes', 0))} of "
                         f"{ms.format_bytes(oom.get('capacity_bytes', 0))} in use</p>")
    else:
        parts.append(f"<h1>{len(run_dirs)} runs compared</h1>")
    parts.append("<h2>Figures</h2>")
    parts.append(compare.as_html(table))
    mem, _ = plot_memory.plot(run_dirs, Path(tmp) / "memory.png")
    parts.append("<h2>Memory of the compute tier, by category</h2>" + embed(mem))
    for k, d in enumerate(run_dirs):
        label = "" if len(run_dirs) == 1 else f": {html.escape(values.index[k])}"
        parts.extend(peak_section(d, k, label, tmp))
        tl, _ = plot_timeline.plot(d, Path(tmp) / f"timeline{k}.png")
        parts.append(f"<h2 id='timeline{k}'>Timeline{label}</h2>" + embed(tl))
        if (Path(d) / "tiles.csv").exists():
            tiles, _ = plot_tiles.plot(d, Path(tmp) / f"tiles{k}.png")
            parts.append(f"<h2>Tiles{label}</h2>" + embed(tiles))
    parts.append("<p class='note'>Zoom into any run: open its trace.pftrace in "
                 "<a href='https://ui.perfetto.dev'>ui.perfetto.dev</a>; with <code>--events</code>, "
                 "analysis/to_memory_viz.py makes a snapshot for "
                 "<a href='https://pytorch.org/memory_viz'>pytorch.org/memory_viz</a>.</p>")
    return parts


def peak_section(run_dir, k, label, tmp):
    """Each compute tier's peak: the op running then, its largest live buffers, and the
    timeline around it (the full timeline below marks it too)."""
    summary = ms.read_summary(run_dir)
    parts = []
    for tier, t in summary.get("tiers", {}).items():
        if t.get("role") != "compute" or not t.get("peak_buffers"):
            continue
        at = t["peak_time_s"]
        op = t.get("peak_op") or {}
        during = f", during <b>{html.escape(op['name'])}</b> ({html.escape(op['phase'])})" if op else ""
        parts.append(f"<h2 id='peak{k}-{html.escape(tier)}'>The peak of {html.escape(tier)}{label}</h2>"
                     f"<p>{ms.format_bytes(t['peak_allocated_bytes'])} at {ms.format_seconds(at)}{during}; "
                     f"{t.get('peak_live_buffers', len(t['peak_buffers']))} buffers live "
                     f"(<code>memsim explain</code> lists them all). On the <a href='#timeline{k}'>timeline</a> "
                     "it is the dashed line.</p>")
        rows = "".join(f"<tr><td>{html.escape(b['name'] or '(workspace)')}</td><td>{ms.format_bytes(b['bytes'])}</td>"
                       f"<td>{html.escape(b['category'])}</td><td>{html.escape(b.get('producer') or '')}</td>"
                       f"<td>{html.escape(b.get('layer') or '')}</td></tr>" for b in t["peak_buffers"])
        parts.append("<table><thead><tr><th>largest live buffers</th><th>bytes</th><th>category</th>"
                     f"<th>made by</th><th>layer</th></tr></thead><tbody>{rows}</tbody></table>")
        # The timeline around the peak: a fiftieth of the step either side.
        span = max(summary.get("iteration_time_s", 0.0), at) / 50 or 1e-6
        zoom, _ = plot_timeline.plot(run_dir, Path(tmp) / f"peak{k}-{tier}.png", window=(max(0.0, at - span), at + span))
        parts.append(embed(zoom))
    return parts


def sweep_section(results, tmp):
    df = plot_sweep.read_results(results)
    parts = [f"<h1>Sweep: {len(df)} points</h1>"]
    counts = df.groupby(["workload", "device", "status"]).size().unstack(fill_value=0)
    parts.append("<h2>Outcomes</h2>" + counts.to_html(border=0))
    par, _ = plot_sweep.plot_pareto(df, Path(tmp) / "pareto.png")
    parts.append("<h2>Peak memory against iteration time</h2>" + embed(par))
    if plot_sweep.default_param(df):
        fits, _ = plot_sweep.plot_fits(df, Path(tmp) / "fits.png")
        parts.append("<h2>What fits</h2>" + embed(fits))
    shown = ["device", "workload", "policy"] + df.attrs["axes"] + ["status", "iteration_time_s", "peak_bytes"]
    table = df[[c for c in shown if c in df]].copy()
    table["iteration"] = table.pop("iteration_time_s").map(lambda s: "" if s != s else ms.format_seconds(s))
    table["peak"] = table.pop("peak_bytes").map(lambda b: "" if b != b else ms.format_bytes(b))
    parts.append("<h2>Every point</h2>" + table.to_html(border=0, index=False))
    return parts


def build(paths):
    with tempfile.TemporaryDirectory() as tmp:
        p0 = Path(paths[0])
        is_sweep = len(paths) == 1 and (p0.suffix == ".csv" or (p0 / "results.csv").exists())
        parts = sweep_section(p0, tmp) if is_sweep else run_section(paths, tmp)
        title = "memsim sweep report" if is_sweep else "memsim run report"
        return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
                f"<title>{title}</title><style>{CSS}</style></head><body>\n"
                + "\n".join(parts) + "\n</body></html>\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="SWEEP_OR_RUN_DIR",
                   help="a sweep folder (or its results.csv), or one or more run folders")
    p.add_argument("-o", "--output", default="report.html", help="HTML file to write (default report.html)")
    a = p.parse_args(argv)
    text = build(a.paths)
    Path(a.output).write_text(text, encoding="utf-8")
    print(a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
