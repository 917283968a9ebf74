"""The command line's names: a did-you-mean for a mistyped command, preset, policy, model
or key; a swapped device and workload; `memsim list` filtered and as JSON; -o/--out on the
commands that write; the GPT-2 presets."""
import json

import pytest

from conftest import memsim


@pytest.mark.parametrize("args, code, expected", [
    (["runn"], 2, "memsim: unknown command 'runn'; did you mean 'run'?"),
    (["run", "a100-40gb", "resnt50"], 1, "resnt50: no such file, and no built-in preset of that name; did you mean 'resnet50'?"),
    (["run", "a100-40gb-nvm", "resnet50"], 1, "did you mean 'a100-40gb-nvme'?"),
    (["run", "--policy", "swap-lur"], 1, "--policy swap-lur: no such policy; did you mean 'swap-lru'?"),
    (["run", "--set", "workload.btch=8"], 1, "unknown key 'btch' (did you mean 'batch'?)"),
    (["run", "--policy", "dtr", "--set", "policy.budgte=0.5"], 1, "unknown key 'budgte' (did you mean 'budget'?)"),
    (["list", "polices"], 2, "list polices: expected one of policies, allocators, models, collectives, importers, parallel, presets; did you mean 'policies'?"),
    (["run", "resnet50", "a100-40gb"], 2, "the device comes first: memsim run a100-40gb resnet50"),
])
def test_mistakes_are_named(args, code, expected, tmp_path):
    r = memsim(*args, "--out", tmp_path, check=False) if args[0] == "run" else memsim(*args, check=False)
    assert r.returncode == code, r.stderr
    assert expected in r.stderr


def test_a_mistyped_model(tmp_path):
    spec = tmp_path / "w.yaml"
    spec.write_text("model: resnett\ndepth: 50\n")
    r = memsim("run", "a100-40gb", spec, "--out", tmp_path / "o", check=False)
    assert r.returncode == 1
    assert "did you mean 'resnet'?" in r.stderr


def test_no_suggestion_when_nothing_is_close(tmp_path):
    r = memsim("run", "a100-40gb", "zzzzzz", "--out", tmp_path, check=False)
    assert r.returncode == 1 and "did you mean" not in r.stderr


def test_list_filters_and_json():
    whole = memsim("list").stdout
    policies = memsim("list", "policies").stdout
    assert policies.startswith("policies (") and "allocators (" not in policies
    assert policies.strip() in whole
    j = json.loads(memsim("list", "--json").stdout)
    assert list(j) == ["policies", "allocators", "models", "collectives", "importers", "parallel", "parallel_schemes",
                       "presets"]
    assert [i["name"] for i in j["importers"]] == ["pytorch-et", "kineto", "chakra-feeder-json", "chakra"]
    assert [a["name"] for a in j["collectives"]] == ["ring", "tree", "nvls", "hierarchical", "direct"]
    collectives = memsim("list", "collectives").stdout
    assert collectives.startswith("collective algorithms (") and "policies (" not in collectives
    names = [p["name"] for p in j["policies"]]
    assert "swap-lru" in names and "dtr" in names
    budget = next(p for p in j["policies"] if p["name"] == "swap-budget")["params"]
    assert {"name": "budget", "required": True} .items() <= next(q for q in budget if q["name"] == "budget").items()
    # A workload's parallel keys, as the parallel: section and --set parallel.KEY take them.
    parallel = {k["name"]: k for k in j["parallel"]}
    assert {"tp", "sp", "ep", "pp", "dp", "zero", "schedule", "micro_batches", "global_batch"} <= set(parallel)
    assert parallel["pp"]["default"] == "1" and not parallel["pp"]["required"]
    # Each key with the parallel scheme that declares it; the schemes in registry order.
    assert (parallel["tp"]["scheme"], parallel["zero"]["scheme"], parallel["pp"]["scheme"]) == ("tensor", "data", "pipeline")
    schemes = {s["name"]: s for s in j["parallel_schemes"]}
    assert list(schemes) == ["tensor", "context", "expert", "data", "pipeline", "ranks"]
    assert schemes["tensor"]["carried_out_by"] == "model generator" and schemes["data"]["carried_out_by"] == "step transform"
    assert sorted(k for s in schemes.values() for k in s["keys"]) == sorted(parallel)
    text = memsim("list", "parallel").stdout
    assert text.startswith("parallel keys (") and "policies (" not in text and "\n      zero " in text
    presets = json.loads(memsim("list", "presets", "--json").stdout)
    assert list(presets) == ["presets"]
    for size in ("small", "medium", "large", "xl"):
        assert f"gpt2-{size}" in presets["presets"]["workloads"]


@pytest.mark.parametrize("size, layers", [("small", 12), ("medium", 24), ("large", 36), ("xl", 48)])
def test_gpt2_presets(size, layers):
    info = json.loads(memsim("info", f"gpt2-{size}", "--json").stdout)
    assert f"{layers} layers" in info["description"]


def test_every_writing_command_takes_o_and_out(tmp_path):
    for flag in ("-o", "--out"):
        memsim("run", "a100-40gb", "mlp", flag, tmp_path / f"run{flag}")
        assert (tmp_path / f"run{flag}" / "summary.json").exists()
        memsim("trace", "mlp", flag, tmp_path / f"t{flag}.json")
        assert (tmp_path / f"t{flag}.json").exists()
        memsim("fit", "a100-40gb", "mlp", "--max", "4", flag, tmp_path / f"fit{flag}")
        assert (tmp_path / f"fit{flag}" / "points").is_dir()
