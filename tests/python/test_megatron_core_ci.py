"""Megatron-LM's CI-measured 7B steps against memsim on dgx-h100 and dgx-a100-80gb (docs/time-model.md,
"The H100 presets").

All four rows run in about a second. The bounds hold what the doc prints, with room: every
peak within 3% (the pipeline rows' last stage, interleaved over eight one-layer chunks,
within 1%), the steps on the side and about the size the doc gives. A change that closes the
gap shows here and is written down; a change that moves the H100 presets away from the A100
time model, the gpt generator's grouped-query attention and untied head away from
Megatron-core's, or the interleaved schedule's warm-up away from Megatron's, fails here.
"""
import csv
import io

from conftest import memsim_binary, script


def test_the_ci_rows_stay_where_the_doc_puts_them():
    r = script("megatron_core_ci.py", "--format", "csv", "--binary", memsim_binary())
    rows = {row["id"]: row for row in csv.DictReader(io.StringIO(r.stdout))}
    assert sorted(rows) == ["7B-pp4-A100", "7B-pp4-H100", "7B-tp4-A100", "7B-tp4-H100"], r.stdout
    step = {k: float(v["step_error_pct"]) for k, v in rows.items()}
    peak = {k: float(v["peak_error_pct"]) for k, v in rows.items()}
    for k in rows:
        assert -30.0 <= step[k] <= -15.0, step
        assert abs(peak[k]) <= 3.0, peak
    # Both layouts take about the same time on each machine, measured and simulated.
    for gpu in ("H100", "A100"):
        ratio = float(rows[f"7B-pp4-{gpu}"]["memsim_step_s"]) / float(rows[f"7B-tp4-{gpu}"]["memsim_step_s"])
        assert 0.95 <= ratio <= 1.25, (gpu, ratio)
