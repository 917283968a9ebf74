#!/usr/bin/env python3
"""What a platform's size costs a run: one step of a 1-layer Llama 7B with TP 8 and data
parallelism over every GPU (symmetric: one rank simulated, its data-parallel ring over all
of them), on DGX H100 SuperPOD platforms of 1 to 2,048 nodes (8 to 16,384 GPUs), each a
`memsim run` in a child process. Prints the wall time and peak resident memory of each run
and their ratio to the 8-GPU run's: they should follow the ranks and routes a run uses,
not the platform. Usage: bench/platform_scale.py [BUILD_DIR] [NODES ...]"""
import os
import re
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
nodes_list = [int(n) for n in sys.argv[2:]] or [1, 16, 256, 2048]
memsim = os.path.join(build, "memsim")
print(f"{'GPUs':>6} {'wall s':>8} {'x 8 GPUs':>9} {'max RSS MiB':>12} {'x 8 GPUs':>9} {'step ms':>9}")
first = None
for nodes in nodes_list:
    with tempfile.TemporaryDirectory() as out:
        # wait4's rusage is that child's alone: its own peak, not the largest so far.
        t0 = time.monotonic()
        proc = subprocess.Popen([memsim, "run", "dgx-h100-superpod", "llama-7b", "--set", f"nodes={nodes}",
                                 "--set", "workload.layers=1", "--set", "parallel.tp=8",
                                 "--set", f"parallel.dp={nodes}", "--quiet", "--out", out],
                                stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - t0
        if status != 0:
            sys.exit(f"memsim run on {nodes} nodes failed (status {status})")
        rss = usage.ru_maxrss / 1024
        # Only the head of summary.json: loading the whole file (48 MB at 16,384 GPUs) grows
        # this process, and a child forked from it starts that large, which its ru_maxrss counts.
        with open(os.path.join(out, "summary.json")) as f:
            head = f.read(4096)
        s = {"iteration_time_s": float(re.search(r'"iteration_time_s": ([0-9.eE+-]+)', head).group(1))}
        first = first or (wall, rss)
        print(f"{8 * nodes:>6} {wall:>8.2f} {wall / first[0]:>9.1f} {rss:>12.0f} {rss / first[1]:>9.2f} "
              f"{1e3 * s['iteration_time_s']:>9.1f}", flush=True)
