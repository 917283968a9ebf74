#!/usr/bin/python3
"""Hostile parallel configurations: random `memsim run` and `memsim sweep` command lines.

Draws combinations of presets (devices, workloads, Hugging Face configs), --set values of the
workload's `parallel:` keys and of its model keys, policies, and small sweeps whose axes are
parallel keys; runs each (one at a time) under a per-run timeout and sorts the outcome:

  ok         exit 0 with a sane summary          absurd     exit 0, a summary that is not
  located    exit 1, a message naming the file,             (a NaN, a negative time, ...)
             key or --set it is about           unlocated  exit 1, a message that does not
  usage      exit 2                             internal   exit 3 (memsim's own fault)
  signal     killed by a signal (a crash)       timeout    still running at the timeout, and
                                                           again at --confirm seconds
                                                slow       past the timeout, but ended ok or
                                                           located within --confirm seconds

Every case but ok, located and usage is a finding: its command line goes to
OUT/findings.txt (and each class's count to OUT/tally.json), to be run again as written.
Deterministic for a seed: the same --seed draws the same cases.

  /usr/bin/python3 fuzz/hostile_parallel.py --memsim build/memsim --minutes 30 --seed 1
"""
import argparse
import csv
import json
import math
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Presets: single devices, one node, two nodes of a SuperPOD (--set nodes=N).
SINGLE = ["a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb", "v100-16gb", "tpu-v4", "a100-40gb-nvme"]
MULTI = ["dgx-a100", "dgx-h100", "dgx-h100-superpod", "box4-v100-shared-pcie"]
TRANSFORMERS = ["llama-7b", "llama3-8b", "mistral-7b", "mixtral-8x7b", "deepseek-moe-16b", "gpt2-small",
                "gpt2-medium", "bert-base", "gpt3-175b-layer"]
HF = ["tests/data/hf/llama3-8b.yaml", "tests/data/hf/mixtral-8x7b.yaml", "tests/data/hf/gpt2.yaml",
      "tests/data/hf/qwen2-0.5b.yaml", "tests/data/hf/deepseek-moe-16b.yaml",
      "tests/data/hf/bert-base-uncased.yaml", "tests/data/hf/mistral-7b.yaml"]
OTHERS = ["resnet18", "resnet50", "mlp", "chain", "lstm-1000", "mobilenet_v2"]
POLICIES = ["none", "none", "none", "keep-all", "dtr", "swap-lru", "checkpoint-sqrt", "vdnn", "zero-offload",
            "swap-budget", "checkmate"]

# Small workloads written to the scratch folder (llama families with experts, a tiny GPT).
SMALL = {
    "gpt2l.yaml": "model: gpt\nlayers: 2\nhidden: 256\nheads: 8\nseq_len: 128\nmax_positions: 128\nbatch: 1\n",
    "llama-tiny.yaml": "model: llama\nlayers: 4\nhidden: 256\nheads: 4\nnum_kv_heads: 2\nintermediate: 512\n"
                       "vocab: 1000\nseq_len: 64\nbatch: 2\ndtype: bf16\nmixed_precision: true\noptimizer: adamw\n",
    "llama-tied.yaml": "model: llama\nlayers: 4\nhidden: 128\nheads: 4\nintermediate: 256\nvocab: 500\n"
                       "tie_embeddings: true\nseq_len: 32\nbatch: 1\n",
    "moe-tiny.yaml": "model: llama\nlayers: 4\nhidden: 128\nheads: 4\nintermediate: 256\nvocab: 500\n"
                     "num_experts: 4\ntop_k: 2\nseq_len: 32\nbatch: 1\n",
}

# Per key: values a user would write, then hostile ones (drawn one time in five).
PARALLEL = {
    "tp": ([1, 2, 4, 8], [0, 3, 5, 7, 16, 32, 1024, -2, "two"]),
    "dp": ([1, 2, 4, 8, 16], [0, 3, 6, 32, 256, 100000, -1]),
    "pp": ([1, 2, 4], [0, 3, 5, 7, 8, 33, 1000]),
    "ep": ([1, 2, 4, 8], [0, 3, 5, 1000]),
    "sp": (["true", "false"], ["1", "yes", "maybe"]),
    "zero": ([0, 1, 2, 3], [4, -1, "x"]),
    "micro_batches": ([1, 2, 4, 8], [3, 7, 16, 64, 0, 1000, 100000]),
    "global_batch": ([8, 16, 32, 64], [1, 17, 512, 0, -8, 10**9]),
    "schedule": (["gpipe", "1f1b", "interleaved"], ["zb", "GPipe", "''"]),
    "virtual_stages": ([1, 2, 4], [3, 8, 0, 1000]),
    "prefetch": (["true", "false"], ["2"]),
    "reshard_after_forward": (["true", "false"], ["maybe"]),
    "bucket": (["25MiB", "1MiB", "100MiB"], ["1B", "1", "0B", "1TiB", "-1MiB", "1KiB"]),
    "bucket_view": (["true", "false"], ["x"]),
    "fused_accumulation": (["true", "false"], ["x"]),
    "symmetric": (["true", "true", "false"], ["x"]),
}
WORKLOAD = {
    "heads": ([8, 16, 32], [1, 2, 3, 7, 64, 0, 4096, 5]),
    "num_kv_heads": ([1, 2, 8], [3, 0, 64]),
    "hidden": ([256, 512, 1024], [8, 64, 96, 1000, 4097, 0, 2**20]),
    "layers": ([2, 4, 8], [1, 3, 0, 1000, 100000]),
    "seq_len": ([128, 512, 2048], [1, 2, 1000, 2**16, 0]),
    "batch": ([1, 2, 4, 8], [3, 64, 0, -1, 10**6]),
    "num_experts": ([4, 8], [0, 1, 2, 3, 64, 1000]),
    "top_k": ([1, 2], [0, 3, 8, 9]),
    "capacity_factor": ([1, 1.25, 2], [0, 0.01, 1e6, 1e300, -1, "nan", "inf"]),
    "tie_embeddings": (["true", "false"], ["x"]),
    "intermediate": ([1024, 4096], [1, 8, 1000, 0]),
    "vocab": ([1000, 32000], [1, 2, 0, 2**24]),
    "dropout": ([0, 0.1], [1, -0.5, "nan"]),
    "attention_impl": (["fused", "materialized", "selective"], ["flash"]),
    "recompute": (["none", "full"], ["selective", "blocks"]),
    "dtype": (["fp32", "bf16", "fp16"], ["fp8", "int4"]),
    "optimizer": (["adamw", "sgd", "momentum"], ["adafactor"]),
}
POLICY_SETS = {
    "budget": [0.5, 0.1, 0, 1, 2, "1GiB", "nan"],
}

# "where: what" — a file:line:col, a --set, a file, a trace or op named before the colon.
LOCATED = re.compile(r"^[^\s:][^:\n]{0,300}(:\d+:\d+)?( \([^)\n]*\))?: \S")


def draw_value(rng, values):
    if isinstance(values, tuple):
        sane, hostile = values
        return rng.choice(hostile if rng.random() < 0.2 else sane)
    return rng.choice(values)


COMMON = ["batch", "seq_len", "dropout", "attention_impl", "dtype", "optimizer"]
GPT = COMMON + ["heads", "hidden", "layers", "vocab"]
LLAMA = sorted(WORKLOAD)


def keys_of(workload):
    """The workload keys its model takes (a few others, one time in ten)."""
    name = os.path.basename(workload)
    if name.startswith(("llama", "mistral", "mixtral", "deepseek", "moe-")):
        return LLAMA
    if name.startswith(("gpt2l", "gpt3")):
        return GPT
    if name.startswith(("gpt2", "bert")) or workload.startswith("tests/data/hf"):
        return COMMON + (["capacity_factor"] if "mixtral" in name or "deepseek" in name else [])
    return ["batch"]


def draw_run(rng, scratch):
    multi = rng.random() < 0.7
    device = rng.choice(MULTI if multi else SINGLE)
    sets = []
    if device == "dgx-h100-superpod":
        sets.append(f"nodes={rng.choice([1, 2, 2, 4, 0, 1000])}")
    pool = rng.random()
    if pool < 0.3:
        workload = rng.choice(TRANSFORMERS)
    elif pool < 0.65:
        workload = os.path.join(scratch, rng.choice(sorted(SMALL)))
    elif pool < 0.85:
        workload = rng.choice(HF)
    else:
        workload = rng.choice(OTHERS)
    for key in rng.sample(sorted(PARALLEL), rng.randint(1, 5)):
        sets.append(f"parallel.{key}={draw_value(rng, PARALLEL[key])}")
    if rng.random() < 0.6:
        keys = keys_of(workload)
        for key in rng.sample(keys, min(len(keys), rng.randint(1, 3))):
            sets.append(f"workload.{key}={draw_value(rng, WORKLOAD[key])}")
    policy = rng.choice(POLICIES)
    if policy in ("swap-budget", "checkmate") or rng.random() < 0.1:
        sets.append(f"policy.budget={draw_value(rng, POLICY_SETS['budget'])}")
    if policy == "checkmate":
        sets += ["policy.seconds=5", "policy.max_nodes=60"]
    args = ["run", device, workload, "--policy", policy] + [x for s in sets for x in ("--set", s)]
    return args


def draw_sweep(rng, scratch, n):
    device = rng.choice(MULTI + SINGLE[:2])
    workload = rng.choice(TRANSFORMERS[:6] + [os.path.join(scratch, k) for k in sorted(SMALL)])
    axes = rng.sample(sorted(PARALLEL), rng.randint(1, 2))
    lines = [f"devices: [{device}]", f"workloads: [{workload}]", "policies: [none]", "set:"]
    points = 1
    for key in axes:
        values = sorted({str(draw_value(rng, PARALLEL[key])) for _ in range(rng.randint(1, 3))})
        points *= len(values)
        lines.append(f"  parallel.{key}: [{', '.join(values)}]")
    if rng.random() < 0.3:
        key = rng.choice(sorted(set(PARALLEL) - set(axes)))
        a, b = draw_value(rng, PARALLEL[key]), draw_value(rng, PARALLEL[key])
        wkey = rng.choice(["batch", "seq_len", "layers"])
        lines += ["zip:", f"  - parallel.{key}: [{a}, {b}]", f"    workload.{wkey}: [{draw_value(rng, WORKLOAD[wkey])}, "
                  f"{draw_value(rng, WORKLOAD[wkey])}]"]
    path = os.path.join(scratch, f"sweep-{n}.yaml")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(path) as f:
        text = f.read()
    return ["sweep", path, "-j", "1"], text


def bad_number(x):
    return isinstance(x, (int, float)) and (math.isnan(x) or math.isinf(x) or x < 0)


def absurd(summary):
    """Why a summary of an exit 0 run makes no sense, or None."""
    if summary.get("status") not in ("ok", "oom"):
        return f"status {summary.get('status')!r}"
    for key, value in summary.items():
        if key.endswith("_s") or key.endswith("_bytes"):
            if bad_number(value):
                return f"{key} = {value}"
    it = summary.get("iteration_time_s")
    if summary.get("status") == "ok" and isinstance(it, (int, float)) and it <= 0:
        return f"iteration_time_s = {it} on an ok run"
    # The iteration line adds up (tests/scenarios/test_policy_matrix.cpp, IterationLine).
    terms = ["compute_time_s", "exposed_host_time_s", "stall_time_s", "recompute_time_s", "exposed_comm_time_s",
             "idle_time_s"]
    if summary.get("status") == "ok" and all(isinstance(summary.get(k, 0), (int, float)) for k in terms):
        total = sum(summary.get(k, 0) for k in terms)
        if isinstance(it, (int, float)) and abs(total - it) > 1e-6 * max(abs(it), 1e-12):
            return f"iteration_time_s {it} but its terms add up to {total}"
    for name, tier in (summary.get("tiers") or {}).items():
        for key, value in tier.items():
            if key.endswith("_bytes") or key.endswith("_s"):
                if bad_number(value):
                    return f"tier {name}: {key} = {value}"
        cap, peak = tier.get("capacity_bytes"), tier.get("peak_allocated_bytes")
        budget = tier.get("budget_bytes") or cap
        if summary.get("status") == "ok" and isinstance(peak, int) and isinstance(budget, int) and peak > budget:
            return f"tier {name}: status ok with a peak of {peak} bytes above {budget}"
    return None


def classify_sweep(rc, err, out_dir):
    """A sweep by its points: the worst of their errors (results.csv's error column)."""
    path = os.path.join(out_dir, "results.csv")
    if rc not in (0, 1) or not os.path.exists(path):
        return None
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    worst = ("ok", "")
    rank = {"ok": 0, "located": 1, "unlocated": 2, "internal": 3, "signal": 4, "timeout": 5}
    for row in rows:
        if row.get("status") != "error":
            continue
        e = row.get("error", "")
        kind = ("internal" if "internal error" in e else
                "signal" if re.search(r"signal|killed|core dumped", e) else
                "located" if LOCATED.match(e) else "unlocated")
        if rank[kind] > rank[worst[0]]:
            worst = (kind, f"point {row.get('point_id')}: {e}")
    return worst


def run_case(cmd, timeout):
    """Runs one case: (exit code, stderr, whether it timed out, seconds)."""
    t0 = time.monotonic()
    timed_out = False
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the run and, for a sweep, its children
        _, err = proc.communicate()
        timed_out = True
    return proc.returncode, err.decode(errors="replace"), timed_out, time.monotonic() - t0


def classify(rc, err, out_dir, timed_out, sweep=False):
    if timed_out:
        return "timeout", ""
    if rc < 0:
        return "signal", f"signal {-rc}"
    if sweep:
        found = classify_sweep(rc, err, out_dir)
        if found:
            return found
    lines = [l for l in err.strip().splitlines() if not l.startswith("sweep ")]
    first = lines[0] if lines else ""
    if rc == 0:
        path = os.path.join(out_dir, "summary.json")
        if os.path.exists(path):
            try:
                with open(path) as f:
                    why = absurd(json.load(f))
            except (ValueError, OSError) as e:
                why = f"summary.json unreadable: {e}"
            if why:
                return "absurd", why
        return "ok", ""
    if rc == 1:
        return ("located" if LOCATED.match(first) else "unlocated"), first
    if rc == 2:
        return "usage", first
    if rc == 3:
        return "internal", first
    return f"exit{rc}", first


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memsim", default="build/memsim")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--cases", type=int, default=0, help="stop after this many (0: when the time is up)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30, help="seconds one run may take")
    ap.add_argument("--confirm", type=float, default=300,
                    help="seconds a case that timed out gets on a second try: one that ends then is "
                         "'slow', not a hang (0: no second try)")
    ap.add_argument("--out", default="out/hostile-parallel")
    a = ap.parse_args()
    memsim = os.path.abspath(a.memsim)
    os.makedirs(a.out, exist_ok=True)
    # Inputs (the small workloads, the sweeps) stay in OUT/inputs, so that a finding's command
    # runs again as written; outputs go to a scratch folder.
    inputs = os.path.abspath(os.path.join(a.out, "inputs"))
    os.makedirs(inputs, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="memsim-hostile-")
    for name, text in SMALL.items():
        with open(os.path.join(inputs, name), "w") as f:
            f.write(text)
    rng = random.Random(a.seed)
    tally, findings = {}, []
    start = time.monotonic()
    n = 0
    try:
        while (a.cases == 0 or n < a.cases) and time.monotonic() - start < a.minutes * 60:
            sweep_text = ""
            if rng.random() < 0.15:
                args, sweep_text = draw_sweep(rng, inputs, n)
            else:
                args = draw_run(rng, inputs)
            out_dir = os.path.join(scratch, f"out-{n}")
            cmd = [memsim] + args + ["--out", out_dir] + (["--no-advice"] if args[0] == "run" else [])
            rc, err, timed_out, seconds = run_case(cmd, a.timeout)
            kind, why = classify(rc, err, out_dir, timed_out, sweep=args[0] == "sweep")
            if timed_out and a.confirm > a.timeout:
                # Slow or stuck? The same case again with the longer limit: one that ends then,
                # with a result or a located error, is slow (big, finite work), not a hang.
                shutil.rmtree(out_dir, ignore_errors=True)
                rc, err, timed_out, seconds = run_case(cmd, a.confirm)
                kind, why = classify(rc, err, out_dir, timed_out, sweep=args[0] == "sweep")
                if kind in ("ok", "located", "usage"):
                    kind, why = "slow", f"{kind} after {seconds:.1f} s (over the {a.timeout:g} s timeout)"
            tally[kind] = tally.get(kind, 0) + 1
            if kind not in ("ok", "located", "usage"):
                shown = " ".join(shlex.quote(x) for x in [os.path.relpath(memsim, ROOT)] + args)
                findings.append({"case": n, "class": kind, "why": why, "seconds": round(seconds, 1),
                                 "command": shown, "sweep": sweep_text, "stderr": err[-2000:]})
                print(f"[{n}] {kind} ({seconds:.1f} s): {shown}\n    {why}", flush=True)
            shutil.rmtree(out_dir, ignore_errors=True)
            n += 1
            if n % 25 == 0:
                print(f"{n} cases in {time.monotonic() - start:.0f} s: {json.dumps(tally, sort_keys=True)}",
                      flush=True)
    finally:
        with open(os.path.join(a.out, "tally.json"), "w") as f:
            json.dump({"cases": n, "seed": a.seed, "timeout_s": a.timeout, "confirm_s": a.confirm, "tally": tally}, f, indent=1,
                      sort_keys=True)
        with open(os.path.join(a.out, "findings.txt"), "w") as f:
            for x in findings:
                f.write(f"[{x['case']}] {x['class']} ({x['seconds']} s): {x['why']}\n  {x['command']}\n")
                if x["sweep"]:
                    f.write("  sweep file:\n" + "".join("    " + l + "\n" for l in x["sweep"].splitlines()))
                f.write("".join("  | " + l + "\n" for l in x["stderr"].strip().splitlines()[-6:]))
        print(f"{n} cases: {json.dumps(tally, sort_keys=True)}; findings in {a.out}/findings.txt")
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
