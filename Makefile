# Thin wrapper around CMake. `make` builds, `make test` runs every test.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all test bench clean install
all:
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: all
	bench/run

install: all
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD)
