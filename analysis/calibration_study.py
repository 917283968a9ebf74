#!/usr/bin/python3
"""How well a calibrated device predicts the step time of models it was not fitted on.

    calibration_study.py                 # the shipped captures, on the cpu preset
    calibration_study.py --device cpu --traces workloads/traces

Two studies over every capture NAME.et.json with a NAME.measured.json (its `step_s`):

  - one trace: calibrate on each trace alone, predict every trace's step;
  - leave one out: calibrate on all the others together, predict the one left out;

each with `memsim calibrate --residuals relative` and `--residuals absolute`. Prints
markdown tables: predicted step and its error against the measured one. A fit that fails
(an efficiency the residuals cannot place in (0, 1]) is shown with memsim's reason.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(cmd):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True)


def calibrate(binary, device, traces, residuals, out):
    r = run([binary, "calibrate", device, *traces, "--residuals", residuals, "-o", out])
    if r.returncode != 0:
        return (r.stderr.strip().splitlines() or ["failed"])[-1]
    return None


def step_s(binary, platform, trace, out):
    r = run([binary, "run", platform, trace, "--json", "--out", out])
    if r.returncode != 0:
        raise SystemExit(f"memsim run {platform} {trace} failed ({r.returncode}):\n{r.stderr}")
    return json.loads(r.stdout)["iteration_time_s"]


def cell(predicted, measured):
    return f"{predicted * 1e3:.0f} ms ({100 * (predicted - measured) / measured:+.0f}%)"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--traces", default=str(REPO / "workloads" / "traces"))
    ap.add_argument("--memsim", default=os.environ.get("MEMSIM_BINARY", str(REPO / "build" / "memsim")))
    args = ap.parse_args()
    if not Path(args.memsim).exists():
        raise SystemExit(f"{args.memsim}: no memsim binary (build it with make, or give --memsim)")

    names = sorted(p.name[: -len(".measured.json")] for p in Path(args.traces).glob("*.measured.json"))
    if not names:
        raise SystemExit(f"{args.traces}: no NAME.measured.json captures")
    trace = {n: str(Path(args.traces) / f"{n}.et.json") for n in names}
    measured = {n: json.loads((Path(args.traces) / f"{n}.measured.json").read_text())["step_s"] for n in names}

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run")
        print(f"Measured steps: " + ", ".join(f"{n} {measured[n] * 1e3:.0f} ms" for n in names) + ".\n")
        for residuals in ("relative", "absolute"):
            print(f"**Fitted on one trace, `--residuals {residuals}`** (rows: fitted on; columns: predicted)\n")
            print("| fitted on | " + " | ".join(names) + " |")
            print("|---|" + "---|" * len(names))
            for fit in names:
                platform = os.path.join(tmp, f"{fit}-{residuals}.yaml")
                failed = calibrate(args.memsim, args.device, [trace[fit]], residuals, platform)
                if failed:
                    print(f"| {fit} | fit failed: {failed} |" + " |" * (len(names) - 1))
                    continue
                cells = [cell(step_s(args.memsim, platform, trace[n], out), measured[n]) for n in names]
                print(f"| {fit} | " + " | ".join(cells) + " |")
            print()
        print("**Left out of the fit** (calibrated on all the other traces together)\n")
        print("| left out | measured | relative | absolute |")
        print("|---|---|---|---|")
        for left in names:
            row = [left, f"{measured[left] * 1e3:.0f} ms"]
            for residuals in ("relative", "absolute"):
                platform = os.path.join(tmp, f"loo-{left}-{residuals}.yaml")
                others = [trace[n] for n in names if n != left]
                failed = calibrate(args.memsim, args.device, others, residuals, platform)
                row.append(f"fit failed: {failed}" if failed
                           else cell(step_s(args.memsim, platform, trace[left], out), measured[left]))
            print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
