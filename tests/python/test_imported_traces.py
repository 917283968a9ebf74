"""An imported trace's run, as the analysis scripts read it: summary.json says what the
importer left out or chose (import_notes) and how the ops were timed (durations), and the
collectives are ops of their own kind in timeline.csv."""
import csv
import json

from conftest import memsim


def test_summary_carries_import_notes_and_duration_sources(tmp_path):
    out = tmp_path / "ddp"
    r = memsim("run", "a100-40gb", "tests/data/et/ddp_two_steps-2.x.json", "--out", out)
    assert r.stderr.startswith("memsim: importing ddp_two_steps-2.x: 2 notes\n")
    s = json.loads((out / "summary.json").read_text())
    assert s["import_notes"][0].startswith("imported ProfilerStep#2 of 2")
    assert s["durations"] == {"measured_ops": 0, "modelled_ops": 7}
    with open(out / "timeline.csv", newline="") as f:
        kinds = [row["op_kind"] for row in csv.DictReader(f) if row["kind"] == "compute"]
    assert kinds.count("all_reduce") == 1
    assert kinds.index("all_reduce") < kinds.index("elementwise")  # backward's, before the step


def test_measured_durations_are_used_when_asked(tmp_path):
    # step-1.1.json measured one op (inclusive_dur 12.5 us): --durations measured uses it.
    s = json.loads(memsim("run", "a100-40gb", "tests/data/et/step-1.1.json", "--durations", "measured",
                          "--out", tmp_path / "m", "--json").stdout)
    assert s["durations"] == {"measured_ops": 1, "modelled_ops": 5}
    s = json.loads(memsim("run", "a100-40gb", "tests/data/et/step-1.1.json", "--out", tmp_path / "d", "--json").stdout)
    assert s["durations"]["measured_ops"] == 0  # measured on no platform of that name
    assert s["import_notes"] == []
