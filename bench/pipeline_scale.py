#!/usr/bin/env python3
"""Scale of 3-D parallel training, each run a `memsim run` in a child process, once as memsim
runs it and once with --exact (every op its own SimGrid activity):
- Llama 3 70B with Megatron-LM's layout (tensor parallelism 8 with sequence parallelism inside
  a DGX H100, a 1F1B pipeline across nodes, ZeRO-1 data parallelism, selective
  recomputation, fused gradient accumulation, fp32 main gradients), sequence 8192,
  micro-batch 1, on DGX H100 SuperPOD platforms of 64 GPUs (summary.json only, then every
  file) and 1,024 GPUs (every file);
- GPT-3 175B with Megatron's layout (TP 8 with SP, PP 16, DP 8, ZeRO-1, global batch 1,536:
  192 micro-batches) on 1,024 A100s (summary.json only).
Prints each run's CPU time (user + system, all threads), wall time and peak resident memory,
the ratio of the two CPU times, and the simulated step: its time, how far the two runs' step
times are apart, the first stage's bubble and peak (the two runs' peaks must be equal to the
byte).
Usage: bench/pipeline_scale.py [BUILD_DIR]"""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
memsim = os.path.join(build, "memsim")
LLAMA = ["parallel.fused_accumulation=true", "workload.attention_impl=selective", "workload.main_grads=fp32"]
# (platform, model, nodes, pp, dp, global batch, other settings, other arguments): Llama 3 70B
# on 64 GPUs as docs/parallel.md runs it, summary.json only and with every file (the timeline,
# memory and peak CSVs and a Perfetto trace of its first million events), then on 1,024;
# GPT-3 175B on 1,024 (summary.json only).
runs = [("dgx-h100-superpod", "llama3-70b", 8, 4, 2, 128, LLAMA, ["--outputs", "summary"]),
        ("dgx-h100-superpod", "llama3-70b", 8, 4, 2, 128, LLAMA, []),
        ("dgx-h100-superpod", "llama3-70b", 128, 8, 16, 512, LLAMA, []),
        ("dgx-a100-superpod", "gpt3-175b", 128, 16, 8, 1536, [], ["--outputs", "summary"])]


def run(platform, model, nodes, pp, dp, global_batch, other, args, exact):
    """(CPU s, wall s, max RSS MiB, summary) of one child run."""
    with tempfile.TemporaryDirectory() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        sets = [f"nodes={nodes}", "parallel.tp=8", "parallel.sp=true", f"parallel.pp={pp}", f"parallel.dp={dp}",
                "parallel.zero=1", f"parallel.global_batch={global_batch}"] + other
        cmd = [memsim, "run", platform, model, "--quiet", "--no-advice", "--out", out] + args
        for s in sets:
            cmd += ["--set", s]
        if exact:
            cmd.append("--exact")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        # ru_maxrss of the children is the largest so far (KiB on Linux): a run smaller than an
        # earlier one shows the earlier one's.
        rss = after.ru_maxrss / 1024
        with open(os.path.join(out, "summary.json")) as f:
            return cpu, wall, rss, json.load(f)


print(f"{'model':>10} {'files':>7} {'GPUs':>6} {'tp pp dp':>9} {'micro':>6} {'CPU s':>7} {'exact CPU s':>12} {'ratio':>6} {'wall s':>7} "
      f"{'max RSS MiB':>12} {'step s':>8} {'step diff':>10} {'bubble 0':>9} {'peak 0 GiB':>11}")
for platform, model, nodes, pp, dp, global_batch, other, args in runs:
    exact_cpu, _, _, e = run(platform, model, nodes, pp, dp, global_batch, other, args, True)
    cpu, wall, rss, s = run(platform, model, nodes, pp, dp, global_batch, other, args, False)
    peaks_equal = all(s["tiers"][t]["peak_allocated_bytes"] == e["tiers"][t]["peak_allocated_bytes"] for t in s["tiers"])
    if not peaks_equal:
        print("peaks differ from the exact run's", file=sys.stderr)
    diff = abs(s["iteration_time_s"] - e["iteration_time_s"]) / e["iteration_time_s"]
    stage0 = s["pipeline"]["stages"][0]
    peak0 = s["tiers"]["gpu0.hbm"]["peak_reserved_bytes"] / 2**30
    files = "summary" if "--outputs" in args else "all"
    print(f"{model:>10} {files:>7} {8 * nodes:>6} {f'8 {pp} {dp}':>9} {s['pipeline']['micro_batches']:>6} {cpu:>7.2f} {exact_cpu:>12.2f} "
          f"{exact_cpu / cpu:>6.2f} {wall:>7.2f} {rss:>12.0f} {s['iteration_time_s']:>8.3f} {diff:>10.1e} "
          f"{stage0['bubble_fraction']:>9.3f} {peak0:>11.1f}")
    sys.stdout.flush()
