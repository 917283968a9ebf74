#!/usr/bin/python3
"""How close memsim's predicted step times come to measured training steps.

    time_fidelity.py                                  # the shared A100 single-node rows, dgx-a100
    time_fidelity.py --rows 1-30 --format csv         # a subset, as CSV
    time_fidelity.py --device my-cluster.yaml --csv my-measured.csv

    time_fidelity.py --export-steps steps.csv       # the rows for `memsim calibrate --steps`

Each row of the CSV (the columns of ../shared/validation/measured-steps/
a100-megatron-single-node.csv: GPUs, global batch, micro batch, hidden size, attention heads,
# layers, sequence length, tensor, data and pipeline parallelism, iteration time in ms) is
turned into the run Megatron-DeepSpeed made: the preset workloads/gpt-megatron.yaml (GPT with
a 50,257-token vocabulary and tied embeddings, fp16 mixed precision with Adam, full activation
recomputation of every layer, 1F1B, Megatron's softmax kernel where it takes the shape and its
scatter/gather of the tensors between pipeline stages) with the row's shape and layout as --set overrides, run
with `memsim run DEVICE gpt-megatron --set ...` (policy none). The predicted iteration time is
set against the measured one.

A row on more GPUs than a node has (--gpus-per-node, 8) runs on that many nodes of the preset
(`--set nodes=N`; dgx-a100 joins its nodes with the measured cluster's 800 Gb/s of InfiniBand).
A row whose step the preset's memory does not hold ran for real, so its GPUs held it: it is run
again with --oom-capacity of HBM (80GiB, the A100's larger part) and the status column says
so; `--oom-capacity none` reports it as out of memory instead.
"""
import argparse
import concurrent.futures
import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "validation" / "measured-steps" / "a100-megatron-single-node.csv"

COLUMNS = {
    "gpus": "# GPUs", "global_batch": "global batch", "micro_batch": "micro batch",
    "hidden": "hidden size", "heads": "attention heads", "layers": "# layers",
    "seq": "sequence length", "tp": "tensor parallelism", "dp": "data parallelism",
    "pp": "pipeline parallelism", "ms": "iteration time (ms)",
}


def read_rows(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        out = []
        for line, raw in enumerate(reader, start=2):
            try:
                row = {k: (float(raw[c]) if k == "ms" else int(raw[c])) for k, c in COLUMNS.items()}
            except (KeyError, ValueError) as e:
                raise SystemExit(f"{path}:{line}: expected the columns {list(COLUMNS.values())} "
                                 f"with numbers, found {dict(raw)} ({e})")
            row["line"] = line
            out.append(row)
    return out


WORKLOAD = "gpt-megatron"  # workloads/gpt-megatron.yaml: GPT as Megatron-DeepSpeed trains it


def row_sets(r):
    """The --set overrides that make workloads/gpt-megatron.yaml the row's run."""
    return [f"workload.layers={r['layers']}", f"workload.hidden={r['hidden']}", f"workload.heads={r['heads']}",
            f"workload.seq_len={r['seq']}", f"workload.batch={r['micro_batch']}", f"parallel.tp={r['tp']}",
            f"parallel.dp={r['dp']}", f"parallel.pp={r['pp']}", f"parallel.global_batch={r['global_batch']}"]


def node_sets(r, gpus_per_node, sets):
    """`nodes=N` for a row on more GPUs than one node has (unless --set names nodes)."""
    if r["gpus"] <= gpus_per_node or any(s.split("=", 1)[0].strip() == "nodes" for s in sets):
        return []
    return [f"nodes={-(-r['gpus'] // gpus_per_node)}"]


def run_row(binary, device, sets, r, tmp, gpus_per_node=8, oom_capacity=None):
    def run(extra):
        cmd = [str(binary), "run", device, WORKLOAD, "--json", "--no-advice", "--outputs", "summary",
               "--out", str(Path(tmp) / f"out{r['line']}")]
        for s in row_sets(r) + node_sets(r, gpus_per_node, sets) + sets + extra:
            cmd += ["--set", s]
        return subprocess.run(cmd, capture_output=True, text=True)

    p, note = run([]), ""
    s = json.loads(p.stdout) if p.returncode == 0 else None
    if s and s["iteration_time_s"] is None and oom_capacity:
        # The measured step ran, so its GPUs held it: time it on the larger part.
        p, note = run([f"gpu*.hbm.capacity={oom_capacity}"]), f" at {oom_capacity} (the preset's HBM does not hold it)"
        s = json.loads(p.stdout) if p.returncode == 0 else None
    if p.returncode != 0:
        return dict(r, predicted_ms=None, error_pct=None, status=f"exit {p.returncode}: {p.stderr.strip()[:200]}")
    if s["iteration_time_s"] is None:
        return dict(r, predicted_ms=None, error_pct=None, status=f"{s['status']}{note}")
    pred = 1e3 * s["iteration_time_s"]
    return dict(r, predicted_ms=pred, error_pct=100.0 * (pred - r["ms"]) / r["ms"], status=s["status"] + note)


def export_steps(rows, path, gpus_per_node=8):
    """The rows as `memsim calibrate --steps` reads them: workload, set, iteration_ms."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["workload", "set", "iteration_ms", "source_line"])
        for r in rows:
            w.writerow([WORKLOAD, " ".join(row_sets(r) + node_sets(r, gpus_per_node, [])), f"{r['ms']:.6f}",
                        r["line"]])


def select(rows, spec):
    if not spec:
        return rows
    keep = set()
    for part in spec.split(","):
        a, _, b = part.partition("-")
        try:
            keep.update(range(int(a), int(b or a) + 1))
        except ValueError:
            raise SystemExit(f"--rows {spec}: expected row numbers and ranges such as 1-30,40, found '{part}'")
    return [r for i, r in enumerate(rows, start=1) if i in keep]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", default=str(SHARED), help="measured rows (default: the shared A100 set)")
    ap.add_argument("--device", default="dgx-a100", help="platform preset or YAML (default dgx-a100)")
    ap.add_argument("--binary", default=str(REPO / "build" / "memsim"))
    ap.add_argument("--set", action="append", default=[], help="passed to memsim run")
    ap.add_argument("--rows", help="1-based row numbers of the CSV, e.g. 1-30,40")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--format", choices=["markdown", "csv", "summary", "groups"], default="markdown",
                    help="markdown: every row; groups: mean and worst error by tensor parallelism and "
                         "micro-batch, then by pipeline stages, hidden size and GPUs; csv; summary: one line")
    ap.add_argument("--export-steps", metavar="FILE",
                    help="write the rows as `memsim calibrate --steps` reads them, and run nothing")
    ap.add_argument("--gpus-per-node", type=int, default=8,
                    help="a row on more GPUs runs on ceil(GPUs / this) nodes of the preset (default 8)")
    ap.add_argument("--oom-capacity", default="80GiB",
                    help="HBM a row is run again with when the preset's does not hold its step "
                         "(default 80GiB; none: report it as out of memory)")
    args = ap.parse_args()
    if args.gpus_per_node < 1:
        ap.error(f"--gpus-per-node: expected a positive count, found {args.gpus_per_node}")
    oom_capacity = None if args.oom_capacity.lower() == "none" else args.oom_capacity

    rows = select(read_rows(args.csv), args.rows)
    if args.export_steps:
        export_steps(rows, args.export_steps, args.gpus_per_node)
        return 0
    with tempfile.TemporaryDirectory(prefix="memsim-time-") as tmp:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
            results = list(ex.map(lambda r: run_row(args.binary, args.device, args.set, r, tmp,
                                                    args.gpus_per_node, oom_capacity), rows))

    ok = [r for r in results if r["error_pct"] is not None]
    failed = [r for r in results if r["error_pct"] is None]
    mae = sum(abs(r["error_pct"]) for r in ok) / len(ok) if ok else float("nan")
    signed = sum(r["error_pct"] for r in ok) / len(ok) if ok else float("nan")
    worst = max(ok, key=lambda r: abs(r["error_pct"])) if ok else None

    if args.format == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(["line", "gpus", "global_batch", "micro_batch", "hidden", "heads", "layers", "seq",
                    "tp", "dp", "pp", "measured_ms", "predicted_ms", "error_pct", "status"])
        for r in results:
            w.writerow([r["line"], r["gpus"], r["global_batch"], r["micro_batch"], r["hidden"], r["heads"],
                        r["layers"], r["seq"], r["tp"], r["dp"], r["pp"], f"{r['ms']:.3f}",
                        "" if r["predicted_ms"] is None else f"{r['predicted_ms']:.3f}",
                        "" if r["error_pct"] is None else f"{r['error_pct']:.2f}", r["status"]])
    elif args.format == "groups":
        for title, key in (("tp, micro batch", lambda r: (r["tp"], r["micro_batch"])),
                           ("pp", lambda r: (r["pp"],)), ("hidden", lambda r: (r["hidden"],)),
                           ("gpus", lambda r: (r["gpus"],))):
            groups = {}
            for r in ok:
                groups.setdefault(key(r), []).append(r["error_pct"])
            print(f"| {title} | rows | mean error | mean absolute error | worst |")
            print("|---|---|---|---|---|")
            for k in sorted(groups):
                e = groups[k]
                print(f"| {', '.join(map(str, k))} | {len(e)} | {sum(e) / len(e):+.1f}% "
                      f"| {sum(map(abs, e)) / len(e):.1f}% | {max(e, key=abs):+.1f}% |")
            print()
    elif args.format == "markdown":
        print("| line | GPUs | global batch | micro batch | hidden | heads | layers | seq | tp | dp | pp "
              "| measured ms | memsim ms | error |")
        print("|" + "---|" * 14)
        for r in results:
            pred = "—" if r["predicted_ms"] is None else f"{r['predicted_ms']:.1f}"
            err = r["status"] if r["error_pct"] is None else f"{r['error_pct']:+.1f}%"
            print(f"| {r['line']} | {r['gpus']} | {r['global_batch']} | {r['micro_batch']} | {r['hidden']} "
                  f"| {r['heads']} | {r['layers']} | {r['seq']} | {r['tp']} | {r['dp']} | {r['pp']} "
                  f"| {r['ms']:.1f} | {pred} | {err} |")
        print()
    over = sum(1 for r in ok if abs(r["error_pct"]) > 25)
    print(f"{len(ok)} rows run, {len(failed)} failed; mean absolute error {mae:.1f}%, mean signed "
          f"{signed:+.1f}%, worst {worst['error_pct']:+.1f}% (line {worst['line']}); {over} rows off by more "
          f"than 25%" if worst else
          f"{len(failed)} rows failed", file=sys.stdout if args.format == "summary" else sys.stderr)
    for r in failed:
        print(f"line {r['line']}: {r['status']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
