# memsim: the two commands of the set-up (README.md) and a few helpers.
#   make run    install what building memsim needs, build only the memsim binary, run the
#               built-in default (A100-40GB, ResNet-50): the first result soonest
#   make test   install everything, build everything (tests and benchmarks too), run every test
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: run test deps deps-build configure memsim build bench sanitize fuzz clean

deps:
	@./scripts/install-deps.sh all

deps-build:
	@./scripts/install-deps.sh build

configure:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null

# The binary alone.
memsim: deps-build configure
	@cmake --build $(BUILD) -j $(JOBS) --target memsim

# Everything: the binary, the tests and the benchmarks.
build: deps configure
	@cmake --build $(BUILD) -j $(JOBS)

run: memsim
	./$(BUILD)/memsim run --out out
	@echo "pictures: /usr/bin/python3 analysis/report.py out -o out/report.html (one plot each: docs/plots.md); out/trace.pftrace opens in ui.perfetto.dev"

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	MEMSIM_BINARY=$(abspath $(BUILD))/memsim PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/python

# The unit and engine tests again under AddressSanitizer and UBSan (CI runs this too).
sanitize: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMEMSIM_SANITIZE=ON -DMEMSIM_BENCH=OFF > /dev/null
	@cmake --build build-asan -j $(JOBS) --target memsim_unit_tests memsim_engine_tests
	cd build-asan && ctest --output-on-failure -j $(JOBS) -R '^(unit|engine)\.'

# The libFuzzer harnesses of fuzz/, built with clang in their own folder, each run for
# FUZZ_SECONDS (FUZZ=NAME... picks some: platform workload parallel hf sweep native_trace et chakra).
# FUZZ_SEED fixes libFuzzer's mutations (CI: the same inputs on every run); 0 picks anew.
FUZZ_SECONDS ?= 60
FUZZ_SEED ?= 0
FUZZ ?=
fuzz: deps
	@cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMSIM_FUZZ=ON -DMEMSIM_BENCH=OFF > /dev/null
	@cmake --build build-fuzz -j $(JOBS)
	FUZZ_SEED=$(FUZZ_SEED) ./scripts/fuzz.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ)

bench: build
	./$(BUILD)/memsim_bench
	./$(BUILD)/memsim_et_import_bench
	./$(BUILD)/memsim_trace_bench
	/usr/bin/python3 bench/run_vs_bare.py $(BUILD) --million
	/usr/bin/python3 bench/parallel_scale.py $(BUILD)

# The whole `memsim run` of a 20,000-layer chain, files included, against a bare SimGrid
# loop of one execute per op, and the 10^6-layer chain against 10 s and 2 GB (README).
.PHONY: run-bench
run-bench: build
	/usr/bin/python3 bench/run_vs_bare.py $(BUILD) --million

# Data-parallel scale: Llama 7B under ZeRO-3 on 8 to 1,024 H100s (wall time and memory).
.PHONY: parallel-bench pipeline-bench platform-bench
parallel-bench: build
	/usr/bin/python3 bench/parallel_scale.py $(BUILD)

# Llama 3 70B with TP 8, a 1F1B pipeline and ZeRO-1 on 64 and 1,024 H100s (docs/parallel.md).
pipeline-bench: memsim
	/usr/bin/python3 bench/pipeline_scale.py $(BUILD)

# What a platform's size costs: a 1-layer Llama 7B, TP 8, data-parallel over 8 to 16,384 H100s.
platform-bench: memsim
	/usr/bin/python3 bench/platform_scale.py $(BUILD)

# Megatron-LM's published step times (Narayanan et al. 2021, Korthikanti et al. 2022) against
# memsim's (docs/time-model-megatron.md). The rows past 2,000 GPUs take the longest.
.PHONY: megatron-published
megatron-published: memsim
	/usr/bin/python3 analysis/megatron_published.py --binary $(BUILD)/memsim

# The Pareto table of docs/policies.md: every policy on resnet50 and bert-base (a few
# minutes: checkmate takes up to its time limit per point).
.PHONY: pareto
pareto: build
	./$(BUILD)/memsim sweep configs/sweeps/pareto.yaml -j $(JOBS) --out out/pareto
	/usr/bin/python3 analysis/pareto_table.py out/pareto/results.csv --into docs/policies.md

# The sweep tests that split a sweep across "machines": GNU parallel shards, and a 3-task
# Slurm job array on a private one-node cluster (needs root; installs Debian's slurm-wlm
# and munge when missing). `make test` runs them too where they can run, and skips them
# saying why where they cannot.
.PHONY: slurm-test sweep-bench
slurm-test: build
	@command -v slurmctld >/dev/null && command -v munged >/dev/null || { \
	  sudo=; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  echo "slurm-test: installing slurm-wlm munge"; \
	  $$sudo apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null; }
	cd $(BUILD) && ctest --output-on-failure -R '\.Sweep(Slurm|Parallel)\.'

# Sweep overhead: 200 small points, the share of time outside the simulations (< 10%).
sweep-bench: build
	./$(BUILD)/memsim_sweep_bench

clean:
	rm -rf $(BUILD) build-asan build-fuzz out
