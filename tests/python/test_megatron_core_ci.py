"""Megatron-LM's CI-measured 7B steps against memsim on dgx-h100 and dgx-a100-80gb (docs/time-model.md,
"The H100 presets").

All four rows run in about a second. The bounds hold what the doc prints, with room: the
pipeline rows' steps within 10% on both machines (+1.7% on the H100, +6.2% on the A100), the
tensor-parallel rows' peaks within 3% (-0.4%, -2.2%); the tensor-parallel steps, a quarter
fast on both machines, are held to that side and size (-20% to -30%), so a change that closes
the gap shows here and is written down. A change that moves the H100 presets away from the
A100 time model, or the gpt generator's grouped-query attention and untied head away from
Megatron-core's, fails here.
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
    for k in ("7B-pp4-H100", "7B-pp4-A100"):
        assert abs(step[k]) <= 10.0, step
    for k in ("7B-tp4-H100", "7B-tp4-A100"):
        assert -30.0 <= step[k] <= -20.0, step
        assert abs(peak[k]) <= 3.0, peak
