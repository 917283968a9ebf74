"""An imported trace's run, as the analysis scripts read it: summary.json says what the
importer left out or chose (import_notes) and how the ops were timed (durations), and the
collectives are ops of their own kind in timeline.csv."""
import csv
import json

from conftest import REPO, memsim

REPO_DATA = REPO / "tests" / "data" / "et"


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


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_an_et_names_layers_from_its_scopes(tmp_path):
    # scoped-1.0.json: each submodule's forward in a record_function named by its path
    # (workloads/capture), the model's own "pool" range. The timeline and the peak name them.
    out = tmp_path / "scoped"
    memsim("run", "cpu", "tests/data/et/scoped-1.0.json", "--out", out)
    ops = [r["op"] for r in read_csv(out / "timeline.csv") if r["kind"] == "compute"]
    for layer in ("blocks.0.norm", "blocks.0.fc", "blocks.1.fc", "pool", "head"):
        assert any(op.startswith(layer + "/aten::") for op in ops), layer
    peak = read_csv(out / "peak.csv")
    made = [r for r in peak if r["producer"]]
    assert made and all(r["buffer"].startswith(r["producer"] + ":out") for r in made if "/" in r["producer"])
    assert {r["layer"] for r in made} & {"blocks.1.fc", "blocks.1.norm", "blocks.1", "pool", "head"}
    # memsim explain groups the live buffers by those layers.
    text = memsim("explain", out).stdout
    groups = [line.split()[0] for line in text.split("by layer")[1].splitlines()[1:] if line.startswith("    ") and
              not line.startswith("      ")]
    assert set(groups) & {"blocks.1.fc", "blocks.1.norm", "blocks.1", "pool", "head"}, groups


def kineto_pair(tmp_path, model_name="ScopedNet_0"):
    """The scoped step as a torch 2.x user with with_modules=True would have it: an ET without
    the module ranges (the observer records none), and a Kineto trace whose `nn.Module: Class_N`
    events enclose each module's cpu_ops (Kineto numbers each class's instances). The times
    are made up, nested as the ET's nodes are; Kineto's cpu_ops carry the ET's rf_id."""
    et = json.loads((REPO_DATA / "scoped-1.0.json").read_text())
    nodes = {n["id"]: n for n in et["nodes"]}
    modules = {"blocks.0": "Block_0", "blocks.1": "Block_1", "blocks.0.norm": "LayerNorm_0",
               "blocks.1.norm": "LayerNorm_1", "blocks.0.fc": "Linear_0", "blocks.1.fc": "Linear_1",
               "head": "Linear_2"}
    children = {}
    for n in sorted(et["nodes"], key=lambda n: n["id"]):
        if n["parent"] != n["id"]:
            children.setdefault(n["parent"], []).append(n["id"])
    events, clock = [], [0]

    def walk(i):
        n = nodes[i]
        start = clock[0]
        clock[0] += 1
        for c in children.get(i, []):
            walk(c)
        clock[0] += 1
        ev = {"ph": "X", "pid": 1, "tid": n["tid"], "ts": start, "dur": clock[0] - start, "name": n["name"]}
        if n["name"] in modules:
            ev.update(cat="python_function", name="nn.Module: " + modules[n["name"]])
        else:
            ev.update(cat="user_annotation" if n["name"] in ("pool",) or n["name"].startswith("Optimizer.")
                      else "cpu_op", args={"External id": n["rf_id"]})
        events.append(ev)
    for root in [n["id"] for n in et["nodes"] if n["parent"] == n["id"] or n["parent"] not in nodes]:
        walk(root)
    model = [e for e in events if e["name"] in ("nn.Module: Block_0", "nn.Module: Linear_2")]
    start, end = min(e["ts"] for e in model), max(e["ts"] + e["dur"] for e in model)
    events.append({"ph": "X", "cat": "python_function", "pid": 1, "tid": 1, "ts": start - 0.5,
                   "dur": end - start + 1, "name": "nn.Module: " + model_name})
    # The ET without the module ranges: their children hang from their parents.
    for n in et["nodes"]:
        p = n["parent"]
        while p in nodes and nodes[p]["name"] in modules:
            p = nodes[p]["parent"]
        n["parent"] = p
    et["nodes"] = [n for n in et["nodes"] if n["name"] not in modules]
    (tmp_path / "plain.json").write_text(json.dumps(et))
    kineto = tmp_path / f"plain_kineto_{len(model_name)}.json"
    kineto.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return tmp_path / "plain.json", kineto




def test_kineto_module_events_name_the_ops_of_an_et_without_scopes(tmp_path):
    et, kineto = kineto_pair(tmp_path)
    alone = [r["op"] for r in read_csv(memsim_run(tmp_path / "alone", et)) if r["kind"] == "compute"]
    assert not any("Linear" in op or op.startswith("blocks.") for op in alone)  # the ET has no module scopes
    out = tmp_path / "joined"
    r = memsim("run", "cpu", et, "--kineto", kineto, "--out", out)
    assert "ops named in the scope of their Kineto cpu_op (8 nn.Module events)" in r.stderr
    rows = [r for r in read_csv(out / "timeline.csv") if r["kind"] == "compute"]
    matmuls = [(r["op"].rsplit("/", 1)[0], r["op_kind"]) for r in rows if r["op_kind"] == "matmul"]
    # Forward: each Linear in the modules around it; backward: its forward op's, as in the ET.
    assert [m for m, _ in matmuls] == [
        "ScopedNet_0.Block_0.Linear_0", "ScopedNet_0.Block_1.Linear_1", "ScopedNet_0.Linear_2",
        "ScopedNet_0.Linear_2", "ScopedNet_0.Linear_2", "ScopedNet_0.Block_1.Linear_1",
        "ScopedNet_0.Block_1.Linear_1", "ScopedNet_0.Block_0.Linear_0", "ScopedNet_0.Block_0.Linear_0"]
    # An op that starts as a module's forward ends is past it (traces in whole microseconds).
    assert [r["op"].rsplit("/", 1)[0] for r in rows if r["op_kind"] == "relu_backward"] == [
        "ScopedNet_0.Block_1", "ScopedNet_0.Block_0"]
    assert any(r["op"].startswith("pool/aten::tanh#") for r in rows)  # an annotation nearer than the module
    peak = read_csv(out / "peak.csv")
    assert any(r["layer"].startswith("ScopedNet_0.") for r in peak), peak
    # Only names change: the same peak and step as the ET alone with the same durations.
    a = json.loads((tmp_path / "alone" / "summary.json").read_text())
    b = json.loads((out / "summary.json").read_text())
    assert a["tiers"]["host.dram"]["peak_allocated_bytes"] == b["tiers"]["host.dram"]["peak_allocated_bytes"]


def memsim_run(out, et):
    memsim("run", "cpu", et, "--out", out)
    return out / "timeline.csv"


def test_a_scope_too_long_to_be_a_name_names_nothing_and_says_so(tmp_path):
    # Every op in a scope carries its name: a label of over 512 characters names no op (nor
    # do the modules in it), and the note says so; the annotation inside keeps its name.
    et, kineto = kineto_pair(tmp_path, model_name="M" * 600)
    out = tmp_path / "long"
    r = memsim("run", "cpu", et, "--kineto", kineto, "--out", out)
    assert "(8 scopes with names over 512 characters name nothing)" in r.stderr
    ops = [r["op"] for r in read_csv(out / "timeline.csv") if r["kind"] == "compute"]
    assert not any("M" * 600 in op or "Linear_" in op for op in ops)
    assert any(op.startswith("pool/aten::tanh#") for op in ops)
