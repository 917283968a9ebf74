#!/usr/bin/env python3
"""Scale of data-parallel training: one step of Llama 7B under ZeRO-3 (FSDP's full shard) on
DGX H100 SuperPOD platforms of 1 to 128 nodes (8 to 1,024 GPUs), each a `memsim run` in a
child process. Prints the wall time and the peak resident memory of each run, and the
simulated step. Usage: bench/parallel_scale.py [BUILD_DIR] [NODES ...]"""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
nodes_list = [int(n) for n in sys.argv[2:]] or [1, 8, 32, 128]
memsim = os.path.join(build, "memsim")
print(f"{'GPUs':>6} {'wall s':>8} {'max RSS MiB':>12} {'step ms':>9} {'exposed comm ms':>16}")
for nodes in nodes_list:
    with tempfile.TemporaryDirectory() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t0 = time.monotonic()
        subprocess.run([memsim, "run", "dgx-h100-superpod", "llama-7b", "--set", f"nodes={nodes}",
                        "--set", f"parallel.dp={8 * nodes}", "--set", "parallel.zero=3",
                        "--out", out], check=True, stdout=subprocess.DEVNULL)
        wall = time.monotonic() - t0
        # ru_maxrss of the children is the largest of them so far (KiB on Linux): the runs go
        # from small to large, so each new maximum is this run's.
        rss = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) / 1024
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        print(f"{8 * nodes:>6} {wall:>8.2f} {rss:>12.0f} {1e3 * s['iteration_time_s']:>9.1f} "
              f"{1e3 * s['exposed_comm_time_s']:>16.1f}")
