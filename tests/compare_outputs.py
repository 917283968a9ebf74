#!/usr/bin/python3
"""Runs the same commands with two memsim binaries and compares everything they write.

For refactors that must not change a result: every `build/memsim ...` example of README.md
and docs/*.md, a matrix of every registered policy over small workloads and budgets (one
and several devices, each allocator), and optionally `make pareto`'s sweep. Each command
runs in a scratch folder (one per binary) that sees configs/, workloads/ and docs/ as the
README's reader does; its exit code, stdout, stderr and every file it writes are compared
byte for byte.

    /usr/bin/python3 tests/compare_outputs.py --old /tmp/memsim-before --new build/memsim
    /usr/bin/python3 tests/compare_outputs.py --old A --new B --pareto   # also the Pareto sweep

Exit 0 when everything is identical; 1 with the differences listed otherwise.
"""
import argparse
import collections
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Doc lines that are templates or need files no doc command makes.
PLACEHOLDER = re.compile(r"\b(NAME|FILE|DIR|DEVICE|WORKLOAD|B|P|X|I/N)\b|\.\.\.|\[")
SLOW = ("configs/sweeps/policies.yaml",)  # 144 points: the sweep tests cover it


def doc_commands():
    """Every `build/memsim ...` example in README.md and docs/*.md, in file order."""
    files = [os.path.join(ROOT, "README.md")]
    docs = os.path.join(ROOT, "docs")
    files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    pattern = re.compile(r"^    build/memsim( [^#]*)?(#.*)?$")
    out = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines = iter(f.read().splitlines())
            for line in lines:
                while line.endswith("\\"):  # continued on the next line
                    line = line[:-1] + next(lines, "").strip()
                m = pattern.match(line)
                if not m:
                    continue
                args = (m.group(1) or "").strip()
                if PLACEHOLDER.search(args) or any(s in args for s in SLOW):
                    continue
                out.append(args)
    return out


def policy_names(binary):
    text = subprocess.run([binary, "list"], capture_output=True, text=True, check=True).stdout
    names, section = [], None
    for line in text.splitlines():
        if line and not line.startswith(" "):
            section = line.split()[0].lower()
            continue
        if section and section.startswith("polic"):
            m = re.match(r"^  (\S+)", line)
            if m:
                names.append(m.group(1))
    return names


def matrix_commands(binary):
    """Every policy on small workloads, with and without a budget, on one and eight GPUs."""
    cmds = []
    workloads = [
        "mlp",
        "resnet18 --set workload.batch=8",
        "bert-base --set workload.batch=2",
        "workloads/traces/resnet18-b8.et.json",
    ]
    for policy in policy_names(binary):
        # checkmate: a time limit each solve reaches on none of these (the results do not
        # depend on the machine's speed), short enough for the matrix.
        policy = policy + (" --set policy.seconds=20" if policy == "checkmate" else "")
        for w in workloads:
            cmds.append(f"run a100-40gb {w} --policy {policy}")
            cmds.append(f"run a100-40gb {w} --policy {policy} --set policy.budget=0.5")
        cmds.append(f"run a100-40gb resnet18 --set workload.batch=8 --policy {policy} "
                    f"--set policy.budget=0.3 --set gpu0.hbm.allocator=caching --events")
        cmds.append(f"run dgx-a100 mlp --policy {policy} --set policy.budget=0.6")
    cmds.append("run ipu-gc200 mlp --policy checkpoint-sqrt --set policy.budget=0.5")
    cmds.append("run tpu-v4 resnet18 --set workload.batch=8 --policy dtr --set policy.budget=0.5")
    cmds.append("run a100-40gb resnet18 --set workload.batch=8 --set gpu0.hbm.allocator=best_fit --events")
    return cmds


# With --budget-as-capacity: the new binary's budget reports read as the old ones did, where
# a budget lowered the tier's capacity (summary.json's budget_bytes, the terminal's
# "of 40 GiB (budget 2.68 GiB)"), so that everything else can still be compared byte for byte.
BUDGET_AS_CAPACITY = False
IGNORED_KEYS = ()  # top-level summary.json keys a later version added


def varint(data, i):
    """The varint at data[i:]: (value, index after it)."""
    value, shift = 0, 0
    while True:
        byte = data[i]
        value |= (byte & 0x7F) << shift
        i += 1
        shift += 7
        if byte < 0x80:
            return value, i


def put_varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def edit_strings(data, path, edit):
    """A protobuf message with edit() applied to the length-delimited fields at `path` (field
    numbers from the outside in), every length on the way re-encoded; other fields as they are."""
    out, i = bytearray(), 0
    while i < len(data):
        key, j = varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, end = varint(data, j)
        elif wire == 1:
            end = j + 8
        elif wire == 5:
            end = j + 4
        elif wire == 2:
            length, j = varint(data, j)
            end = j + length
            if path and field == path[0]:
                body = edit(data[j:end]) if len(path) == 1 else edit_strings(data[j:end], path[1:], edit)
                out += data[i:j - len(put_varint(length))] + put_varint(len(body)) + body
                i = end
                continue
        else:
            raise ValueError(f"wire type {wire}")
        out += data[i:end]
        i = end
    return bytes(out)


BUDGET_IN_TIER_NAME = re.compile(rb"(\(\w+, )[0-9.]+ [KMGT]?i?B, budget ([0-9.]+ [KMGT]?i?B)")


def normalize(name, data):
    if not BUDGET_AS_CAPACITY and not IGNORED_KEYS:
        return data
    if name.endswith("summary.json") or name == "<stdout>" and data.lstrip().startswith(b"{"):
        try:
            j = json.loads(data, object_pairs_hook=collections.OrderedDict)
        except ValueError:
            return data
        for key in IGNORED_KEYS:
            j.pop(key, None)
        if BUDGET_AS_CAPACITY:
            for tier in j.get("tiers", {}).values():
                budget = tier.pop("budget_bytes", None)
                if budget is not None:
                    tier["capacity_bytes"] = budget
        return (json.dumps(j, indent=2) + "\n").encode()
    if not BUDGET_AS_CAPACITY:
        return data
    if name == "<stdout>":
        return re.sub(rb" of [0-9.]+ [KMGT]?i?B \(budget ([0-9.]+ [KMGT]?i?B)\)", rb" of \1", data)
    if name.endswith("trace.json"):  # a tier's track: "gpu0.hbm (compute, 40 GiB, budget 2 GiB, ideal)"
        return BUDGET_IN_TIER_NAME.sub(rb"\1\2", data)
    if name.endswith("trace.pftrace"):  # the same, as a process name: Trace.packet.track_descriptor.process.process_name
        return edit_strings(data, [1, 60, 3, 6], lambda s: BUDGET_IN_TIER_NAME.sub(rb"\1\2", s))
    return data


def digest(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(("summary.json", "trace.json", "trace.pftrace")):
        data = normalize(os.path.basename(path), data)
    return hashlib.sha256(data).hexdigest()


def snapshot(folder):
    files = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                files[os.path.relpath(p, folder)] = digest(p)
    return files


def run_all(binary, commands, scratch, timeout):
    os.makedirs(scratch)
    for sub in ("configs", "workloads", "docs"):
        os.symlink(os.path.join(ROOT, sub), os.path.join(scratch, sub))
    results = []
    for i, args in enumerate(commands):
        before = snapshot(scratch)
        argv = [binary] + shlex.split(args)
        if argv[1:2] == ["run"] and "--out" not in argv:
            argv += ["--out", f"out/cmd{i}"]
        try:
            p = subprocess.run(argv, cwd=scratch, capture_output=True, timeout=timeout)
            status, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired:
            status, out, err = "timeout", b"", b""
        out = normalize("<stdout>", out)
        if argv[1] in ("sweep", "fit"):  # their progress lines give the wall time
            for pattern in (rb"in [0-9.]+ (ms|s|min)\b", rb"\([0-9.]+ (ms|s|min)\)"):
                out = re.sub(pattern, b"(time)", out)
                err = re.sub(pattern, b"(time)", err)
            # Points run in parallel finish in any order.
            err = b"\n".join(sorted(re.sub(rb"^\[[0-9]+/", b"[", l) for l in err.split(b"\n")))
        after = snapshot(scratch)
        # A sweep's timing.json holds wall-clock times.
        written = {k: v for k, v in after.items()
                   if before.get(k) != v and os.path.basename(k) != "timing.json"}
        results.append({"args": args, "status": status,
                        "stdout": hashlib.sha256(out).hexdigest(), "stdout_text": out,
                        "stderr": hashlib.sha256(err).hexdigest(), "stderr_text": err,
                        "files": written})
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", required=True, help="the memsim binary before the change")
    ap.add_argument("--new", required=True, help="the memsim binary after it")
    ap.add_argument("--pareto", action="store_true", help="also run make pareto's sweep (minutes)")
    ap.add_argument("--only", help="run only commands containing this text")
    ap.add_argument("--keep", help="keep the scratch folders here")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per command")
    ap.add_argument("--budget-as-capacity", action="store_true",
                    help="read the new binary's budget_bytes (summary.json, terminal) as the old "
                         "binary's lowered capacity_bytes")
    ap.add_argument("--ignore-keys", default="",
                    help="top-level summary.json keys to leave out, separated by commas (keys the "
                         "new version added, e.g. durations,import_notes)")
    a = ap.parse_args()
    global BUDGET_AS_CAPACITY, IGNORED_KEYS
    BUDGET_AS_CAPACITY = a.budget_as_capacity
    IGNORED_KEYS = tuple(k for k in a.ignore_keys.split(",") if k)
    old, new = os.path.abspath(a.old), os.path.abspath(a.new)
    commands = doc_commands() + matrix_commands(old)
    if a.pareto:
        commands.append("sweep configs/sweeps/pareto.yaml -j 1 --out out/pareto")
    if a.only:
        commands = [c for c in commands if a.only in c]
    base = a.keep or tempfile.mkdtemp(prefix="memsim-compare-")
    if a.keep and os.path.exists(base):
        shutil.rmtree(base)
    print(f"compare_outputs: {len(commands)} commands, old {old}, new {new}, in {base}", flush=True)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        fo = pool.submit(run_all, old, commands, os.path.join(base, "old"), a.timeout)
        fn = pool.submit(run_all, new, commands, os.path.join(base, "new"), a.timeout)
        ro, rn = fo.result(), fn.result()
    differences = 0
    for o, n in zip(ro, rn):
        what = []
        if o["status"] != n["status"]:
            what.append(f"exit {o['status']} -> {n['status']}")
        for stream in ("stdout", "stderr"):
            if o[stream] != n[stream]:
                what.append(stream)
        names = sorted(set(o["files"]) | set(n["files"]))
        for f in names:
            if o["files"].get(f) != n["files"].get(f):
                what.append(f)
        if what:
            differences += 1
            print(f"DIFFERS: memsim {o['args']}: {', '.join(what)}")
            if "stdout" in what and len(o["stdout_text"]) < 4000:
                sys.stdout.write("  old stdout:\n" + o["stdout_text"].decode(errors="replace"))
                sys.stdout.write("  new stdout:\n" + n["stdout_text"].decode(errors="replace"))
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)
    print(f"compare_outputs: {len(commands) - differences} of {len(commands)} commands identical")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
