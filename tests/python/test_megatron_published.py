"""Megatron-LM's published times against memsim on dgx-a100-superpod (docs/time-model-megatron.md).

The rows that run in a second or two: Korthikanti et al. 2022's 22B step on 8 GPUs and 175B
step on 64 (table 5, full recomputation and selective recomputation with sequence
parallelism) and the five ways of one 22B layer (table 4). Their errors are the ones docs/time-model-megatron.md prints; the
bounds are the issue's (no row past 9%, layers within 4% on average), so a change that moves
the A100 presets' time model away from these measurements fails here.
"""
import csv
import io

from conftest import memsim_binary, script


def test_the_22b_rows_of_korthikanti_et_al_stay_within_the_issues_bounds():
    r = script("megatron_published.py", "--rows", "11-14,19-23", "--format", "csv", "--jobs", "2",
               "--binary", memsim_binary())
    rows = [row for row in csv.DictReader(io.StringIO(r.stdout)) if row.get("row", "").isdigit()]
    assert [row["id"] for row in rows] == ["K5-22B-full", "K5-22B-sel-sp", "K5-175B-full", "K5-175B-sel-sp",
                                           "K4-22B-base", "K4-22B-sp", "K4-22B-full", "K4-22B-sel",
                                           "K4-22B-sel-sp"], r.stdout
    assert all(row["status"] == "ok" for row in rows), r.stdout
    errors = {row["id"]: float(row["error_pct"]) for row in rows}
    # docs/time-model-megatron.md: -4.5%, -9.0% (-8.96), -5.1% and -4.5% for the steps; -2.5, -4.2, -2.1, -3.7, -5.4%
    # for the layers.
    assert all(abs(e) <= 9.0 for e in errors.values()), errors
    layers = [e for k, e in errors.items() if k.startswith("K4")]
    assert sum(abs(e) for e in layers) / len(layers) <= 4.0, errors
