# Thin wrapper over meson. `make demo` and `make test` each do the whole set-up
# on a fresh Debian 12 machine: install missing packages, build, run.
BUILD      ?= build
BUILD_SAN  ?= build-san
MESON_OPTS ?=
PKGS = gcc pkg-config meson ninja-build zlib1g-dev libzip-dev libcjson-dev libcmocka-dev \
       python3-torch libxml2-utils man-db

.PHONY: all deps build build-san demo test test-fast bench clean

all: build

deps:
	@missing=$$(for p in $(PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:" $$missing; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    (apt-get install -y -q $$missing >/dev/null 2>&1) || { apt-get update -q && apt-get install -y -q $$missing; }; \
	  else \
	    echo "missing Debian packages; run: sudo apt-get update && sudo apt-get install -y $$missing"; exit 1; \
	  fi; \
	fi

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

$(BUILD_SAN)/build.ninja:
	meson setup $(BUILD_SAN) -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

build-san: deps $(BUILD_SAN)/build.ninja
	ninja -C $(BUILD_SAN)

demo: build
	./demo.sh $(BUILD)/cmd/tpconv

# Every test, in the normal and the sanitizer build; ends with "N passed, N failed".
test: build build-san
	./tests/run_all.sh $(BUILD) $(BUILD_SAN)

test-fast: build
	./tests/run_all.sh $(BUILD)

bench: build
	./bench/bench.sh $(BUILD)/cmd/tpconv

clean:
	rm -rf $(BUILD) $(BUILD_SAN)
