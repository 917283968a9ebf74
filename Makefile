# memsim: the two commands of the set-up (README.md) and a few helpers.
#   make run    install what is missing, build, run the built-in default (A100-40GB, ResNet-50)
#   make test   install what is missing, build, run every test
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: run test deps build bench sanitize clean

deps:
	@./scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/memsim run --out out
	@echo "pictures: /usr/bin/python3 analysis/report.py out -o out/report.html (one plot each: docs/plots.md); out/trace.json opens in ui.perfetto.dev"

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	MEMSIM_BINARY=$(abspath $(BUILD))/memsim PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/python

# The unit and engine tests again under AddressSanitizer and UBSan (CI runs this too).
sanitize: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMEMSIM_SANITIZE=ON -DMEMSIM_BENCH=OFF > /dev/null
	@cmake --build build-asan -j $(JOBS) --target memsim_unit_tests memsim_engine_tests
	cd build-asan && ctest --output-on-failure -j $(JOBS) -R '^(unit|engine)\.'

bench: build
	./$(BUILD)/memsim_bench

clean:
	rm -rf $(BUILD) build-asan out
