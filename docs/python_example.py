"""memsim from Python, as a notebook would use it (docs/python.md); tests/python/test_package.py
runs it. Each `# %%` is a cell.

    PYTHONPATH=build/python /usr/bin/python3 docs/python_example.py [FOLDER]

FOLDER receives the plot (default: a new temporary folder).
"""
# %% Set-up: the package, and a folder for the plot.
import sys
import tempfile
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

import memsim

folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="memsim-example-"))
GiB = 2**30

# %% Sizing a model: GPT-2 medium on one A100 40GB, batch by batch. A run that does not fit
# has status "oom"; its times are those of a partial step, so only the runs that fit count.
rows = []
for batch in (1, 2, 4, 8, 16):
    r = memsim.run("a100-40gb", "gpt2-medium", overrides={"workload.batch": batch})
    rows.append({"batch": batch, "status": r.status, "peak_GiB": r.peak_bytes("gpu0.hbm") / GiB,
                 "step_s": r.summary["iteration_time_s"] if r.ok else None})
sizing = pd.DataFrame(rows)
print(sizing.to_string(index=False))
fits = sizing[sizing.status == "ok"]
print(f"largest batch that fits: {fits.batch.max()}\n")

# %% A policy comparison: Llama 3 8B at sequence 4096 on one A100 80GB. Without a policy the
# weights, gradients and AdamW's states alone (16 bytes a parameter) do not fit.
rows = []
for policy in ("none", "checkpoint-sqrt", "swap-lru", "zero-offload"):
    r = memsim.run("a100-80gb", "llama3-8b", policy, overrides={"workload.seq_len": 4096})
    host = sum(t["peak_allocated_bytes"] for name, t in r.summary["tiers"].items() if name != "gpu0.hbm")
    rows.append({"policy": policy, "status": r.status, "gpu_peak_GiB": r.peak_bytes("gpu0.hbm") / GiB,
                 "host_peak_GiB": host / GiB,  # the other tiers: host DRAM
                 "step_s": r.summary["iteration_time_s"] if r.ok else None,
                 "swapped_GiB": (r.summary["swap_out_bytes"] + r.summary["swap_in_bytes"]) / GiB})
    if policy == "zero-offload":
        offloaded = r
policies = pd.DataFrame(rows).set_index("policy")
print("llama3-8b on a100-80gb, seq_len 4096:")
print(policies.round(3).to_string())

# %% What is live at the peak (peak.csv) and the memory curve (memory.csv) of the run that fits.
peaks = offloaded.peaks
hbm = peaks[peaks.tier == "gpu0.hbm"]
print("\nlargest buffers at gpu0.hbm's peak under zero-offload:")
print(hbm.groupby("category").bytes.sum().sort_values(ascending=False).div(GiB).round(2).to_string())

# %% A plot: GPU memory over the step under zero-offload, and each policy's peak.
curve = offloaded.memory
curve = curve[curve.tier == "gpu0.hbm"]
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
left.plot(curve.time_s * 1e3, curve.allocated_bytes / GiB)
left.set(xlabel="time (ms)", ylabel="allocated (GiB)", title="gpu0.hbm under zero-offload")
colours = ["tab:red" if s != "ok" else "tab:blue" for s in policies.status]
right.bar(policies.index, policies.gpu_peak_GiB, color=colours)
right.axhline(80, color="grey", linestyle="--", label="capacity (80 GiB)")
right.set(ylabel="gpu0.hbm peak (GiB)", title="peak by policy (red: oom)")
right.legend()
fig.savefig(folder / "policies.png", dpi=100)
print(f"\nplot: {folder / 'policies.png'}")
