#!/usr/bin/python3
"""Megatron-LM's published step times on A100 clusters against memsim's prediction.

    megatron_published.py                          # every row, one at a time
    megatron_published.py --rows 1-4,11-12         # by row number (1-based, as in the CSV)
    megatron_published.py --rows K5,K4 --jobs 2    # by id prefix: Korthikanti's tables 5 and 4
    megatron_published.py --rows N-1.7B --dry-run  # the workload and command, not run
    megatron_published.py --timeout 600 --format csv

The rows (analysis/data/megatron_published.csv, each with its paper, table and row) are
Narayanan et al. 2021 table 1 (weak scaling, 1.7B to 1T parameters on 32 to 3,072 GPUs;
the paper gives achieved TFLOP/s per GPU, and the step time follows from its equation 3:
F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) FLOPs per iteration, with full recomputation,
divided by TFLOP/s per GPU x GPUs), Korthikanti et al. 2022 table 5 (end-to-end iteration
times of 22B, 175B, 530B and 1T, full recomputation vs. selective recomputation with
sequence parallelism) and table 4 (forward and backward time of one transformer layer of
the 22B model, five variants).

Each row becomes the run Megatron-LM made: GPT (learned positions, GELU, tied embeddings,
dropout 0.1) with the 51,200-token vocabulary, sequence 2048, fp16 mixed precision with
Adam, `recompute: full` or `attention_impl: selective` with `parallel.sp`, its tp, pp and
dp, its global and micro batch, the interleaved schedule where the paper used it, and is run
as `memsim run dgx-a100-superpod W.yaml --set nodes=GPUS/8 --json --no-advice --outputs
summary`. A table 4 row runs a few layers of the 22B model (--layer-rows-layers) and reads
one middle layer's forward and backward span (its first op's start to its last op's end,
recomputation and tensor-parallel communication included) from timeline.csv.

Each run's wall time and peak memory (max RSS) are reported; a run past --timeout is killed
and reported as such, and a run that fails prints why. Exit status 1 if any row failed.
"""
import argparse
import concurrent.futures
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "analysis" / "data" / "megatron_published.csv"
GPUS_PER_NODE = 8

INTS = ("row", "heads", "hidden", "layers", "vocab", "seq", "tp", "pp", "dp", "gpus", "global_batch",
        "micro_batch", "virtual_stages")
FLOATS = ("published_tflops_per_gpu", "published_step_s", "published_forward_ms", "published_backward_ms")


def read_rows(path):
    out = []
    with open(path, newline="") as f:
        for line, raw in enumerate(csv.DictReader(f), start=2):
            try:
                r = dict(raw)
                for k in INTS:
                    r[k] = int(raw[k])
                for k in FLOATS:
                    r[k] = float(raw[k]) if raw[k] else None
                r["sp"] = {"true": True, "false": False}[raw["sp"]]
            except (KeyError, ValueError) as e:
                raise SystemExit(f"{path}:{line}: {e} in {dict(raw)}")
            if r["recompute"] not in ("full", "selective", "none") or r["measure"] not in ("step", "layer"):
                raise SystemExit(f"{path}:{line}: recompute must be full, selective or none and measure step "
                                 f"or layer, found {r['recompute']!r}, {r['measure']!r}")
            if r["tp"] * r["pp"] * r["dp"] != r["gpus"]:
                raise SystemExit(f"{path}:{line}: tp x pp x dp = {r['tp'] * r['pp'] * r['dp']}, not {r['gpus']} GPUs")
            out.append(r)
    return out


def narayanan_flops(r):
    """Equation 3 of Narayanan et al. 2021: FLOPs of one iteration with full recomputation."""
    B, s, l, h, V = r["global_batch"], r["seq"], r["layers"], r["hidden"], r["vocab"]
    return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))


def published_step(r):
    """The published iteration time in seconds: given (table 5) or derived from TFLOP/s (table 1)."""
    if r["published_step_s"] is not None:
        return r["published_step_s"]
    if r["published_tflops_per_gpu"] is not None:
        return narayanan_flops(r) / (r["published_tflops_per_gpu"] * 1e12 * r["gpus"])
    return None


def layer_rows_layers(r, n):
    return min(r["layers"], n)


def workload_yaml(r, layer_layers):
    layers = layer_rows_layers(r, layer_layers) if r["measure"] == "layer" else r["layers"]
    attention = "selective" if r["recompute"] == "selective" else "materialized"
    par = [f"tp: {r['tp']}", f"dp: {r['dp']}", f"pp: {r['pp']}", f"sp: {str(r['sp']).lower()}",
           f"global_batch: {r['micro_batch'] * r['dp'] if r['measure'] == 'layer' else r['global_batch']}",
           f"schedule: {r['schedule']}", "scatter_gather: true"]
    if r["schedule"] == "interleaved":
        par.append(f"virtual_stages: {r['virtual_stages']}")
    # Megatron-LM's examples/sc21/run_table_1.sh: DDP=local for every table 1 row with PP > 1,
    # torch for the others (Korthikanti et al.'s rows have no data parallelism).
    if r["id"].startswith("N-") and r["pp"] > 1:
        par.append("ddp: local")
    return (f"# {r['id']}: {r['source']}, {r['table']}, {r['table_row']}\n"
            f"model: gpt\nlayers: {layers}\nhidden: {r['hidden']}\nheads: {r['heads']}\nvocab: {r['vocab']}\n"
            f"max_positions: {r['seq']}\nseq_len: {r['seq']}\nbatch: {r['micro_batch']}\n"
            f"attention_impl: {attention}\nfused_softmax: megatron\ndtype: fp16\nmixed_precision: true\noptimizer: adam\n"
            + ("recompute: full\n" if r["recompute"] == "full" else "")
            + "parallel: {" + ", ".join(par) + "}\n")


def nodes(r):
    return max(1, math.ceil(r["gpus"] / GPUS_PER_NODE))


def command(args, r, spec, out):
    outputs = "summary,timeline" if r["measure"] == "layer" else "summary"
    cmd = [str(args.binary), "run", args.device, str(spec), "--set", f"nodes={nodes(r)}", "--json",
           "--no-advice", "--outputs", outputs, "--out", str(out)]
    for s in args.set:
        cmd += ["--set", s]
    return cmd


def layer_spans(timeline, layer):
    """Forward and backward spans (s) of transformer.h.LAYER's ops on the first device of the timeline."""
    prefix = f"transformer.h.{layer}."
    spans = {"forward": [math.inf, -math.inf], "backward": [math.inf, -math.inf]}
    device = None
    with open(timeline, newline="") as f:
        for t in csv.DictReader(f):
            if t["kind"] not in ("compute", "comm") or not t["op"].split(":")[-1].startswith(prefix):
                continue
            device = device or t["device"]
            if t["device"] != device or t["phase"] not in spans:
                continue
            sp = spans[t["phase"]]
            sp[0] = min(sp[0], float(t["start_s"]))
            sp[1] = max(sp[1], float(t["end_s"]))
    if any(math.isinf(a) for a, _ in spans.values()):
        raise ValueError(f"no forward or backward op of {prefix}* in {timeline}")
    return spans["forward"][1] - spans["forward"][0], spans["backward"][1] - spans["backward"][0]


def run_row(args, r, tmp):
    spec = Path(tmp) / f"row{r['row']}.yaml"
    spec.write_text(workload_yaml(r, args.layer_rows_layers))
    out = Path(tmp) / f"out{r['row']}"
    cmd = command(args, r, spec, out)
    res = dict(r, wall_s=None, cpu_s=None, rss_mib=None, status=None, ok=False)
    stdout_path, stderr_path = Path(tmp) / f"row{r['row']}.out", Path(tmp) / f"row{r['row']}.err"
    start = time.monotonic()
    with open(stdout_path, "w") as so, open(stderr_path, "w") as se:
        p = subprocess.Popen(cmd, stdout=so, stderr=se)
        status, rusage = None, None
        while True:
            pid, status, rusage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if args.timeout and time.monotonic() - start > args.timeout:
                p.kill()
                _, status, rusage = os.wait4(p.pid, 0)
                status = None
                break
            time.sleep(0.05)
        p.returncode = 0  # reaped here, not by Popen
    res["wall_s"] = time.monotonic() - start
    res["rss_mib"] = rusage.ru_maxrss / 1024 if rusage else None
    res["cpu_s"] = rusage.ru_utime + rusage.ru_stime if rusage else None
    err = stderr_path.read_text().strip()
    if status is None:
        res["status"] = f"timed out after {args.timeout:.0f} s (--timeout), killed"
    elif os.WIFSIGNALED(status):
        res["status"] = f"killed by signal {os.WTERMSIG(status)}: {err[-300:]}"
    elif os.WEXITSTATUS(status) != 0:
        res["status"] = f"exit {os.WEXITSTATUS(status)}: {err[-300:] or '(no message)'}"
    else:
        try:
            s = json.loads(stdout_path.read_text())
        except ValueError as e:
            res["status"] = f"unreadable summary ({e}): {err[-300:]}"
            return res
        res["status"] = s["status"]
        if s["status"] != "ok":
            res["status"] = f"{s['status']}: " + json.dumps(s.get("oom") or s.get("error") or "")[:300]
            return res
        if r["measure"] == "step":
            res["memsim_step_s"] = s["iteration_time_s"]
            res["exposed_comm_s"] = s.get("exposed_comm_time_s")
            pub = published_step(r)
            res["error_pct"] = 100.0 * (s["iteration_time_s"] - pub) / pub
        else:
            try:
                fwd, bwd = layer_spans(out / "timeline.csv", layer_rows_layers(r, args.layer_rows_layers) // 2)
            except (OSError, ValueError) as e:
                res["status"] = f"no layer times: {e}"
                return res
            res["memsim_forward_ms"], res["memsim_backward_ms"] = 1e3 * fwd, 1e3 * bwd
            pub = r["published_forward_ms"] + r["published_backward_ms"]
            res["error_pct"] = 100.0 * (1e3 * (fwd + bwd) - pub) / pub
        res["ok"] = True
    return res


def select(rows, spec):
    if not spec:
        return rows
    keep = []
    for part in spec.split(","):
        part = part.strip()
        a, dash, b = part.partition("-")
        if a.isdigit() and (not dash or b.isdigit()):
            nums = range(int(a), int(b or a) + 1)
            found = [r for r in rows if r["row"] in nums]
        else:
            found = [r for r in rows if r["id"].startswith(part)]
        if not found:
            raise SystemExit(f"--rows {spec}: {part!r} matches no row (rows 1-{len(rows)}, ids "
                             f"{', '.join(r['id'] for r in rows)})")
        keep += [r for r in found if r not in keep]
    return sorted(keep, key=lambda r: r["row"])


def configuration(r):
    rec = {"full": "full recompute", "selective": "selective recompute", "none": "no recompute"}[r["recompute"]]
    sched = f", interleaved x{r['virtual_stages']}" if r["schedule"] == "interleaved" else ""
    return (f"{r['layers']} x {r['hidden']}, {r['heads']} heads; tp {r['tp']}{' sp' if r['sp'] else ''} "
            f"pp {r['pp']}{sched} dp {r['dp']} ({r['gpus']} GPUs); batch {r['global_batch']}, "
            f"micro {r['micro_batch']}; {rec}")


def fmt_s(x):
    return "—" if x is None else (f"{x:.2f} s" if x >= 1 else f"{1e3 * x:.0f} ms")


def run_cost(r):
    return f"{r['wall_s']:.1f} s wall, {r['cpu_s'] or 0:.1f} s CPU, {r['rss_mib'] or 0:.0f} MiB"


def stats(results):
    ok = [r for r in results if r["ok"]]
    if not ok:
        return "no row ran"
    mae = sum(abs(r["error_pct"]) for r in ok) / len(ok)
    signed = sum(r["error_pct"] for r in ok) / len(ok)
    worst = max(ok, key=lambda r: abs(r["error_pct"]))
    return (f"{len(ok)} of {len(results)} rows ran; mean absolute error {mae:.1f}%, mean signed {signed:+.1f}%, "
            f"max {worst['error_pct']:+.1f}% (row {worst['row']}, {worst['id']})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", default=str(DATA), help="published rows (default: analysis/data/megatron_published.csv)")
    ap.add_argument("--device", default="dgx-a100-superpod", help="platform preset or YAML (default dgx-a100-superpod)")
    ap.add_argument("--binary", default=str(REPO / "build" / "memsim"))
    ap.add_argument("--set", action="append", default=[], help="passed to every memsim run, e.g. parallel.zero=1")
    ap.add_argument("--rows", help="row numbers (1-4,11) or id prefixes (N-, K5, K4-22B-sel), separated by commas")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds a run may take before it is killed "
                    "(default 1800; 0 for none)")
    ap.add_argument("--layer-rows-layers", type=int, default=4, help="layers of the model a table 4 row "
                    "simulates (default 4; the middle one is measured)")
    ap.add_argument("--format", choices=["markdown", "csv"], default="markdown")
    ap.add_argument("--dry-run", action="store_true", help="print each row's workload and command, run nothing")
    args = ap.parse_args()

    rows = select(read_rows(args.csv), args.rows)
    if args.dry_run:
        for r in rows:
            print(f"# row {r['row']}\n{workload_yaml(r, args.layer_rows_layers)}# "
                  + " ".join(command(args, r, "W.yaml", "OUT")) + "\n")
        return 0
    if not Path(args.binary).exists():
        raise SystemExit(f"{args.binary}: no memsim binary (build it: cmake --build build --target memsim, "
                         "or pass --binary)")

    def one(r):
        res = run_row(args, r, tmp)
        print(f"row {r['row']} {r['id']}: {run_cost(res)}, {res['status']}", file=sys.stderr, flush=True)
        return res

    with tempfile.TemporaryDirectory(prefix="memsim-megatron-") as tmp:
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as ex:
            results = list(ex.map(one, rows))

    steps = [r for r in results if r["measure"] == "step"]
    layers = [r for r in results if r["measure"] == "layer"]
    if args.format == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(["row", "id", "table", "table_row", "gpus", "published_step_s", "memsim_step_s",
                    "published_forward_ms", "published_backward_ms", "memsim_forward_ms", "memsim_backward_ms",
                    "error_pct", "wall_s", "cpu_s", "max_rss_mib", "status"])
        for r in results:
            g = lambda k, f="{:.4f}": "" if r.get(k) is None else f.format(r[k])  # noqa: E731
            w.writerow([r["row"], r["id"], r["table"], r["table_row"], r["gpus"],
                        "" if r["measure"] != "step" else f"{published_step(r):.4f}", g("memsim_step_s"),
                        g("published_forward_ms", "{}"), g("published_backward_ms", "{}"),
                        g("memsim_forward_ms", "{:.3f}"), g("memsim_backward_ms", "{:.3f}"),
                        g("error_pct", "{:.2f}"), g("wall_s", "{:.1f}"), g("cpu_s", "{:.1f}"),
                        g("rss_mib", "{:.0f}"), r["status"]])
    else:
        if steps:
            print("| row | source | configuration | published step | memsim | error | exposed comm | run |")
            print("|---|---|---|---|---|---|---|---|")
            for r in steps:
                pub = published_step(r)
                if r["published_tflops_per_gpu"] is not None:
                    pubs = f"{fmt_s(pub)} ({r['published_tflops_per_gpu']:.0f} TFLOP/s per GPU)"
                else:
                    pubs = fmt_s(pub)
                err = f"{r['error_pct']:+.1f}%" if r["ok"] else r["status"]
                print(f"| {r['row']} {r['id']} | {r['table']}: {r['table_row']} | {configuration(r)} | {pubs} "
                      f"| {fmt_s(r.get('memsim_step_s'))} | {err} | {fmt_s(r.get('exposed_comm_s'))} "
                      f"| {run_cost(r)} |")
            print()
        if layers:
            print("| row | Korthikanti table 4 (22B, one layer) | published fwd / bwd | memsim fwd / bwd "
                  "| error (fwd + bwd) | run |")
            print("|---|---|---|---|---|---|")
            for r in layers:
                mem = (f"{r['memsim_forward_ms']:.1f} / {r['memsim_backward_ms']:.1f} ms" if r["ok"] else "—")
                err = f"{r['error_pct']:+.1f}%" if r["ok"] else r["status"]
                print(f"| {r['row']} {r['id']} | {r['table_row']}: {configuration(r).split('; ', 1)[1]} "
                      f"| {r['published_forward_ms']} / {r['published_backward_ms']} ms | {mem} | {err} "
                      f"| {run_cost(r)} |")
            print()
    out = sys.stdout if args.format == "markdown" else sys.stderr
    if steps:
        print(f"step times: {stats(steps)}", file=out)
    if layers:
        print(f"layer times (22B, forward + backward): {stats(layers)}", file=out)
    failed = [r for r in results if not r["ok"]]
    for r in failed:
        print(f"row {r['row']} {r['id']} failed: {r['status']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
