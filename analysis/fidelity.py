#!/usr/bin/python3
"""How close memsim's predicted peak memory comes to what real training steps measured.

    fidelity.py                                   # every capture in workloads/traces, on cpu
    fidelity.py workloads/traces --format markdown > table.md

For each NAME.measured.json (written by workloads/capture/capture.py) the Execution Trace
it names is run with `memsim run DEVICE TRACE` (policy none), and the predicted peak of the
device's compute tier is set against the measured peak. Where the capture names a memsim
generator of the same model, the generator's prediction at the same batch is shown too.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import memsim_style as ms

REPO = Path(__file__).resolve().parents[1]


def memsim_peak(binary, device, workload, out):
    r = subprocess.run([str(binary), "run", device, str(workload), "--json", "--out", str(out)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"memsim run {device} {workload} failed ({r.returncode}):\n{r.stderr}")
    summary = json.loads(r.stdout)
    return summary["tiers"][ms.compute_tier(summary)]["peak_allocated_bytes"]


def yaml_value(v):
    if isinstance(v, list):
        return "[" + ", ".join(str(x) for x in v) + "]"
    return str(v)


def rows(folder, device, binary):
    out = []
    with tempfile.TemporaryDirectory(prefix="memsim-fidelity-") as tmp:
        for measured_path in sorted(Path(folder).glob("*.measured.json")):
            m = json.loads(measured_path.read_text())
            name = measured_path.name[: -len(".measured.json")]
            predicted = memsim_peak(binary, device, measured_path.parent / m["trace"], Path(tmp) / name)
            row = {"name": name, "model": m["model"], "batch": m["batch"],
                   "measured_bytes": m["peak_bytes"], "predicted_bytes": predicted,
                   "error_pct": 100.0 * (predicted - m["peak_bytes"]) / m["peak_bytes"],
                   "generator_bytes": None, "generator_error_pct": None}
            if m.get("generator"):
                spec = Path(tmp) / f"{name}.yaml"
                spec.write_text("".join(f"{k}: {yaml_value(v)}\n" for k, v in m["generator"].items()))
                g = memsim_peak(binary, device, spec, Path(tmp) / f"{name}-generator")
                row["generator_bytes"] = g
                row["generator_error_pct"] = 100.0 * (g - m["peak_bytes"]) / m["peak_bytes"]
            out.append(row)
    return out


def mib(b):
    return f"{b / 2**20:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", nargs="?", default=str(REPO / "workloads" / "traces"))
    ap.add_argument("--device", default="cpu", help="device preset or file (default cpu)")
    ap.add_argument("--memsim", default=os.environ.get("MEMSIM_BINARY", str(REPO / "build" / "memsim")))
    ap.add_argument("--format", choices=["text", "markdown"], default="text")
    a = ap.parse_args()
    table = rows(a.folder, a.device, a.memsim)
    if not table:
        raise SystemExit(f"no *.measured.json in {a.folder}")
    head = ["trace", "model", "batch", "measured MiB", "predicted MiB", "error %",
            "generator MiB", "generator error %"]
    lines = []
    for r in table:
        g = r["generator_bytes"]
        lines.append([r["name"], r["model"], str(r["batch"]), mib(r["measured_bytes"]),
                      mib(r["predicted_bytes"]), f"{r['error_pct']:+.2f}",
                      mib(g) if g is not None else "-",
                      f"{r['generator_error_pct']:+.2f}" if g is not None else "-"])
    if a.format == "markdown":
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join("---" for _ in head) + "|")
        for l in lines:
            print("| " + " | ".join(l) + " |")
    else:
        widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(head)]
        print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
        for l in lines:
            print("  ".join(c.ljust(w) for c, w in zip(l, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
