# Thin wrapper around CMake. `make` builds, `make test` runs every test; both
# first install what they need on a fresh Debian machine (tools/install-deps).
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps test-deps test bench clean install
all: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

deps:
	@tools/install-deps build

test-deps:
	@tools/install-deps test

test: test-deps all
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS); status=$$?; \
	  ../tools/report-skips .; exit $$status

bench: all
	bench/run

install: all
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD)
