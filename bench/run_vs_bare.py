#!/usr/bin/env python3
"""The whole `memsim run`, outputs included, against a bare SimGrid loop, in the same run.

  make run-bench                          # or: /usr/bin/python3 bench/run_vs_bare.py build
  /usr/bin/python3 bench/run_vs_bare.py build --layers 20000 --repeat 7
  /usr/bin/python3 bench/run_vs_bare.py build --million   # also the largest chain allowed

For a chain of N layers (4N + 1 ops: forward, backward input and weight, update) it runs,
interleaved, `repeat` times each:
  - memsim_bare_loop 4N+1: one SimGrid actor doing one `execute` per op, as a process;
  - memsim run a100-40gb workloads/chain.yaml with N layers and its default outputs
    (summary.json, timeline.csv, memory.csv, peak.csv, the trace) into a fresh folder.
Each is timed from process start to exit (wall clock); the bare loop also reports the
seconds its simulation took inside the process. Medians are printed with the ratios
bare / memsim (above 1: memsim is faster), and each process's peak resident memory.
--million adds one run of the largest chain allowed (10^6 layers, 4 x 10^6 ops; width 32,
so it fits in 40 GB) with its default outputs, against the limits of 10 s and 2 GB.
Exit 1 when memsim is slower than the bare loop, or the million-layer run is over a limit.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(cmd):
    """(wall seconds, stdout) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"run_vs_bare: {' '.join(cmd)} failed ({proc.returncode}):\n{err.decode()[-2000:]}")
    return wall, out.decode()


def timed_rss(cmd):
    """(wall seconds, peak resident MiB) of one process, its output discarded."""
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.chdir(ROOT)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        try:
            os.execv(cmd[0], cmd)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"run_vs_bare: {' '.join(cmd)} failed ({os.waitstatus_to_exitcode(status)})")
    return wall, usage.ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--layers", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--million", action="store_true")
    a = ap.parse_args()
    build = os.path.join(ROOT, a.build) if not os.path.isabs(a.build) else a.build
    memsim = os.path.join(build, "memsim")
    bare = os.path.join(build, "memsim_bare_loop")
    for b in (memsim, bare):
        if not os.path.exists(b):
            sys.exit(f"run_vs_bare: {b} is missing (cmake --build {a.build} --target memsim memsim_bare_loop)")
    ops = 4 * a.layers + 1
    work = tempfile.mkdtemp(prefix="memsim-run-bench-")
    run_cmd = lambda out, layers, width: [memsim, "run", "a100-40gb", "workloads/chain.yaml", "--set",
                                          f"workload.layers={layers}", "--set", f"workload.width={width}",
                                          "--no-advice", "--out", out]
    bare_wall, bare_inside, memsim_wall, bare_rss, memsim_rss = [], [], [], [], []
    try:
        for k in range(a.repeat):
            w, out = timed([bare, str(ops)])
            bare_wall.append(w)
            bare_inside.append(float(out.split()[3]))
            if k == 0:
                bare_rss.append(timed_rss([bare, str(ops)])[1])
            folder = os.path.join(work, f"run{k}")
            w, rss = timed_rss(run_cmd(folder, a.layers, 128))
            memsim_wall.append(w)
            memsim_rss.append(rss)
            shutil.rmtree(folder, ignore_errors=True)
        b, bi, m = (statistics.median(x) for x in (bare_wall, bare_inside, memsim_wall))
        print(f"run_vs_bare: chain of {a.layers} layers ({ops} ops), median of {a.repeat}, process start to exit")
        print(f"  bare SimGrid loop      {b:7.3f} s  (its simulation alone {bi:.3f} s; {bare_rss[0]:.0f} MiB)")
        print(f"  memsim run, all files  {m:7.3f} s  ({statistics.median(memsim_rss):.0f} MiB)")
        print(f"  ratio bare / memsim    {b / m:7.2f}x  (against the simulation alone: {bi / m:.2f}x)")
        failed = m >= b
        if a.million:
            folder = os.path.join(work, "million")
            w, rss = timed_rss(run_cmd(folder, 1_000_000, 32))
            sizes = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)
                        if os.path.isfile(os.path.join(folder, f)))
            print(f"  10^6 layers (4,000,001 ops), all files: {w:.2f} s, {rss:.0f} MiB peak RSS, "
                  f"{sizes / 2**20:.0f} MiB written (limits 10 s, 2048 MiB)")
            failed |= w > 10 or rss > 2048
        if failed:
            print("run_vs_bare: over a limit", file=sys.stderr)
            return 1
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
