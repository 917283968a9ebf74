"""Fixtures for the analysis scripts' tests: memsim runs made once per session.

The memsim binary is $MEMSIM_BINARY, else build/memsim of this repository (what `make test`
builds before it runs these tests).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ANALYSIS = REPO / "analysis"
sys.path.insert(0, str(ANALYSIS))


def memsim_binary():
    path = Path(os.environ.get("MEMSIM_BINARY", REPO / "build" / "memsim"))
    if not path.exists():
        pytest.fail(f"no memsim binary at {path}: build it (make build) or set MEMSIM_BINARY")
    return path


def memsim(*args, check=True):
    r = subprocess.run([str(memsim_binary()), *map(str, args)], cwd=REPO, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"memsim {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stderr}")
    return r


def script(name, *args, check=True):
    """Runs analysis/NAME with Debian's Python, as a user would."""
    r = subprocess.run([sys.executable, str(ANALYSIS / name), *map(str, args)], cwd=REPO,
                       capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"{name} {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stderr}")
    return r


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    """Run folders by name, made once."""
    base = tmp_path_factory.mktemp("runs")
    made = {}

    def get(name):
        if name in made:
            return made[name]
        args = {
            "default": ["run", "--events"],                               # a100-40gb resnet50
            "keep_all": ["run", "--policy", "keep-all"],
            "swap": ["run", "a100-40gb", "resnet50", "--policy", "vdnn", "--set", "gpu0.hbm.capacity=4GiB", "--events"],
            "caching": ["run", "a100-40gb", "mlp", "--set", "gpu0.hbm.allocator=caching", "--events"],
            "ipu": ["run", "ipu-gc200", "mlp", "--events"],
            "oom": ["run", "v100-16gb", "resnet50", "--set", "workload.batch=256", "--events", "--no-advice"],
            "dgx": ["run", "dgx-a100", "mlp", "--events"],
        }[name]
        out = base / name
        memsim(*args, "--out", out)
        made[name] = out
        return out

    return get


SWEEP_POINTS = [(device, policy, batch)
                for device in ("v100-16gb", "a100-40gb")
                for policy in ("none", "keep-all")
                for batch in (32, 128, 512)]


@pytest.fixture(scope="session")
def sweep_csv(tmp_path_factory):
    """A results.csv in the shape `memsim sweep` writes, built from `memsim run --json`."""
    base = tmp_path_factory.mktemp("sweep")
    figures = ["iteration_time_s", "compute_time_s", "stall_time_s", "recompute_time_s",
               "transfer_time_s", "swap_out_bytes", "swap_in_bytes", "recompute_flops",
               "comm_time_s", "exposed_comm_time_s"]
    lines = ["point_id,device,workload,policy,workload.batch,status,error," + ",".join(figures)
             + ",gpu0.hbm.peak_allocated_bytes,gpu0.hbm.peak_reserved_bytes"]
    for k, (device, policy, batch) in enumerate(SWEEP_POINTS):
        r = memsim("run", device, "resnet18", "--policy", policy, "--set", f"workload.batch={batch}",
                   "--json", "--out", base / f"p{k}")
        s = json.loads(r.stdout)
        hbm = s["tiers"]["gpu0.hbm"]
        lines.append(",".join([f"p{k}", device, "resnet18", policy, str(batch), s["status"], ""]
                              + [json.dumps(s[f]) for f in figures]
                              + [str(hbm["peak_allocated_bytes"]), str(hbm["peak_reserved_bytes"])]))
    path = base / "results.csv"
    path.write_text("\n".join(lines) + "\n")
    return path
