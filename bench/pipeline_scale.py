#!/usr/bin/env python3
"""Scale of 3-D parallel training: one step of Llama 3 70B with Megatron-LM's layout (tensor
parallelism 8 with sequence parallelism inside a DGX H100, a 1F1B pipeline across nodes,
ZeRO-1 data parallelism, selective recomputation, fused gradient accumulation, fp32 main
gradients), sequence 8192, micro-batch 1, on DGX H100 SuperPOD platforms, each a
`memsim run` in a child process. Prints the wall time and peak resident memory of each run,
then the simulated step: its time, the first stage's bubble and peak.
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
# (nodes, pp, dp, global batch): 64 GPUs as docs/parallel.md runs them, then 1,024.
runs = [(8, 4, 2, 128), (128, 8, 16, 512)]
print(f"{'GPUs':>6} {'tp pp dp':>9} {'micro':>6} {'wall s':>8} {'max RSS MiB':>12} {'step s':>8} "
      f"{'bubble 0':>9} {'peak 0 GiB':>11}")
for nodes, pp, dp, global_batch in runs:
    with tempfile.TemporaryDirectory() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t0 = time.monotonic()
        sets = [f"nodes={nodes}", "parallel.tp=8", "parallel.sp=true", f"parallel.pp={pp}", f"parallel.dp={dp}",
                "parallel.zero=1", f"parallel.global_batch={global_batch}", "parallel.fused_accumulation=true",
                "workload.attention_impl=selective", "workload.main_grads=fp32"]
        cmd = [memsim, "run", "dgx-h100-superpod", "llama3-70b", "--out", out]
        for s in sets:
            cmd += ["--set", s]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wall = time.monotonic() - t0
        # ru_maxrss of the children is the largest so far (KiB on Linux); the runs grow.
        rss = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) / 1024
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        stage0 = s["pipeline"]["stages"][0]
        peak0 = s["tiers"]["gpu0.hbm"]["peak_reserved_bytes"] / 2**30
        print(f"{8 * nodes:>6} {f'8 {pp} {dp}':>9} {s['pipeline']['micro_batches']:>6} {wall:>8.2f} {rss:>12.0f} "
              f"{s['iteration_time_s']:>8.2f} {stage0['bubble_fraction']:>9.3f} {peak0:>11.1f}")
