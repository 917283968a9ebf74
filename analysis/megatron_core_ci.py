#!/usr/bin/python3
"""Megatron-core's measured 7B steps from its own CI against memsim, on a DGX H100 and a DGX A100.

    megatron_core_ci.py                    # the four rows, a markdown table
    megatron_core_ci.py --format csv
    megatron_core_ci.py --set KEY=VALUE    # passed to every memsim run (e.g. a platform key)

Megatron-LM's functional tests gpt3_7b_tp4_pp1_memory_speed and gpt3_7b_tp1_pp4_memory_speed
(tests/functional_tests/test_cases/gpt/, model_config.yaml and golden_values_dev_dgx_h100.json
and golden_values_dev_dgx_a100.json, NVIDIA/Megatron-LM at d98e8a64dd, 2026-08-22) run one
configuration on one node of 8 GPUs (the recipe's default, tests/test_utils/recipes/h100/gpt.yaml)
of NVIDIA's CI and record the iteration time and torch's max allocated memory every few steps.
The model: Megatron-core's GPT (TransformerEngine, LayerNorm, GeLU, learned positions, biases),
32 layers x 4096, 32 heads in 8 query groups, vocabulary 131,073, sequence 8,192, untied
embeddings, dropout 0.1, bf16 (so fp32 gradient accumulation and reduction: Megatron turns
--accumulate-allreduce-grads-in-fp32 on with --bf16), the distributed optimizer with
--overlap-grad-reduce and --overlap-param-gather (DDP buckets of max(40M, 1M x dp) = 40M fp32
gradients, 160 MB), no gradient-accumulation fusion; tp 4 with micro-batch 2, or pp 4 with
micro-batch 1 and --num-layers-per-virtual-pipeline-stage 1 (Megatron's interleaved schedule,
eight one-layer chunks per stage: the CSV's virtual_stages), dp 2, global batch 8. The
measured step is the median of the recorded steps after the second (the first two hold the
start-up); the measured peak is mem-max-allocated-bytes, which Megatron logs from the last rank
(the last pipeline stage), against memsim's peak on that stage less the platform's reserved
memory (CUDA context and NCCL, outside torch's allocator); the first stage's is printed too.
The rows were not used to fit anything.
"""
import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "analysis" / "data" / "megatron_core_ci.csv"


def workload(r):
    return ("model: gpt\nlayers: 32\nhidden: 4096\nheads: 32\nnum_kv_heads: 8\ntie_embeddings: false\n"
            "vocab: 131073\nmax_positions: 8192\nseq_len: 8192\n"
            f"batch: {r['micro_batch']}\nattention_impl: fused\ndropout: 0.1\ndtype: bf16\nmixed_precision: true\n"
            "main_grads: fp32\noptimizer: adam\n"
            f"parallel: {{tp: {r['tp']}, pp: {r['pp']}, dp: {r['dp']}, global_batch: {r['global_batch']}, zero: 1, "
            "overlap_param_gather: true, bucket: 160MB"
            + (f", schedule: interleaved, virtual_stages: {r['virtual_stages']}" if r["virtual_stages"] > 1 else "")
            + "}\n")


def run(args, r, tmp):
    spec = Path(tmp) / f"row{r['row']}.yaml"
    spec.write_text(workload(r))
    cmd = [str(args.binary), "run", r["platform"], str(spec), "--json", "--no-advice", "--outputs", "summary",
           "--out", str(Path(tmp) / f"out{r['row']}")]
    for s in args.set:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, f"exit {p.returncode}: {p.stderr.strip()[-300:]}"
    s = json.loads(p.stdout)
    if s["status"] != "ok":
        return None, s["status"]
    # The last stage's first rank: rank = tp_rank + tp x (dp_rank + dp x stage), rank r on gpu r.
    def peak(rank):
        tier = s["tiers"][f"gpu{rank}.hbm"]
        return tier["peak_allocated_bytes"] - tier["peak_by_category"].get("runtime", 0)
    return (s["iteration_time_s"], peak(r["tp"] * r["dp"] * (r["pp"] - 1)), peak(0),
            s.get("exposed_comm_time_s")), None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=REPO / "build" / "memsim")
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--format", choices=["markdown", "csv"], default="markdown")
    args = ap.parse_args()
    with open(args.data, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("row", "tp", "pp", "dp", "virtual_stages", "micro_batch", "global_batch", "measured_peak_bytes"):
            r[k] = int(r[k])
        r["measured_step_s"] = float(r["measured_step_s"])
    out, failed = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for r in rows:
            res, err = run(args, r, tmp)
            if err:
                failed += 1
                print(f"row {r['row']} {r['id']}: {err}", file=sys.stderr)
                continue
            step, peak, first_peak, exposed = res
            out.append(dict(r, memsim_step_s=step, memsim_peak_bytes=peak, memsim_first_stage_peak_bytes=first_peak,
                            exposed_comm_s=exposed,
                            step_error_pct=100 * (step - r["measured_step_s"]) / r["measured_step_s"],
                            peak_error_pct=100 * (peak - r["measured_peak_bytes"]) / r["measured_peak_bytes"]))
    if args.format == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")
        keys = ["row", "id", "platform", "tp", "pp", "dp", "virtual_stages", "micro_batch", "global_batch", "measured_step_s",
                "memsim_step_s", "step_error_pct", "exposed_comm_s", "measured_peak_bytes", "memsim_peak_bytes",
                "peak_error_pct", "memsim_first_stage_peak_bytes"]
        w.writerow(keys)
        for o in out:
            w.writerow([f"{o[k]:.6g}" if isinstance(o[k], float) else o[k] for k in keys])
    else:
        print("| row | platform | layout | measured step | memsim | error | exposed comm | measured peak | memsim peak "
              "(last stage) | error | memsim, first stage |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for o in out:
            layout = (f"tp {o['tp']} pp {o['pp']}" + (f" (interleaved x{o['virtual_stages']})" if o["virtual_stages"] > 1
                                                     else "") + f" dp {o['dp']}, micro-batch {o['micro_batch']}")
            print(f"| {o['row']} {o['id']} | {o['platform']} | {layout} | {o['measured_step_s']:.3f} s | "
                  f"{o['memsim_step_s']:.3f} s | {o['step_error_pct']:+.1f}% | {o['exposed_comm_s']:.3f} s | "
                  f"{o['measured_peak_bytes'] / 2**30:.2f} GiB | {o['memsim_peak_bytes'] / 2**30:.2f} GiB | "
                  f"{o['peak_error_pct']:+.1f}% | "
                  f"{o['memsim_first_stage_peak_bytes'] / 2**30:.2f} GiB |")
        if out:
            mae = sum(abs(o["step_error_pct"]) for o in out) / len(out)
            pmae = sum(abs(o["peak_error_pct"]) for o in out) / len(out)
            print(f"\nstep: {len(out)} of {len(rows)} rows; mean absolute error {mae:.1f}%; "
                  f"peak: mean absolute error {pmae:.1f}%")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
