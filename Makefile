# Thin wrapper over meson. `make demo` and `make test` each do the whole set-up
# on a fresh Debian 12 machine: install missing packages, build, run.
BUILD      ?= build
BUILD_SAN  ?= build-san
MESON_OPTS ?=
PKGS = gcc pkg-config meson ninja-build zlib1g-dev libzip-dev libcjson-dev libcmocka-dev \
       python3-torch libxml2-utils man-db openmpi-bin libopenmpi-dev \
       libxxhash-dev libssl-dev xxhash python3-xxhash libopenblas-openmp-dev

.PHONY: all deps build build-san demo test test-fast test-slow bench fuzz interop interop-optim interop-universal interop-megatron clean

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
	meson setup $(BUILD_SAN) -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug -Dcuda=disabled $(MESON_OPTS)

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

# The slow suite alone (not in `make test`): zip and torch records over 4 GiB
# (about 5 minutes on a 2-core machine; ~9 GiB free disk, ~10 GiB memory)
test-slow: build
	TPC_TEST_SUITE=slow ./tests/run_all.sh $(BUILD)

bench: build
	./bench/bench.sh $(BUILD)/cmd/tpconv
	./bench/floor.sh $(BUILD)/cmd/tpconv
	./bench/verify_bench.sh $(BUILD)/cmd/tpconv
	./bench/dcp_bench.sh $(BUILD)/cmd/tpconv
	./bench/zero_bench.sh $(BUILD)/cmd/tpconv
	./bench/gguf_bench.sh $(BUILD)/cmd/tpconv
	./bench/mix_bench.sh $(BUILD)/cmd/tpconv
	./bench/lora_bench.sh $(BUILD)/cmd/tpconv
	./bench/mdist_bench.sh $(BUILD)/cmd/tpconv
	./bench/optim_bench.sh $(BUILD)/cmd/tpconv
	./bench/mcore_optim_bench.sh $(BUILD)/cmd/tpconv

# libFuzzer targets (tests/fuzz): build with clang -fsanitize=fuzzer,address,undefined
# and run each target FUZZ_SECONDS in turn (FUZZ_TARGETS="pickle zip" for some);
# finds land in $(BUILD_FUZZ)/fuzz-artifacts/<target>/. The saved corpus is
# replayed by `make test` in both builds without clang.
BUILD_FUZZ   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
FUZZ_CFLAGS = -fsanitize=fuzzer-no-link -fno-sanitize-recover=all -fno-omit-frame-pointer

$(BUILD_FUZZ)/build.ninja:
	CC=clang meson setup $(BUILD_FUZZ) -Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false \
	  -Dslow_tests=false "-Dc_args=$(FUZZ_CFLAGS)" $(MESON_OPTS)

fuzz: deps $(BUILD_FUZZ)/build.ninja
	@command -v clang >/dev/null || { echo "make fuzz needs clang (apt-get install clang)"; exit 1; }
	ninja -C $(BUILD_FUZZ)
	./tests/fuzz/run_fuzz.sh $(BUILD_FUZZ) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Opt-in, never part of `make test`: tpconv's outputs loaded by the real consumers
# (transformers, torch, safetensors of Debian forky) in a chroot cached in
# INTEROP_ROOT (built once: root, Debian's archive, about 8 minutes, 2.4 GB);
# writes doc/interop-results.md (doc/interop.md).
INTEROP_ROOT ?= /var/cache/tpconv-interop/forky

# FAMILIES="olmo2 granite": only those (the report in /tmp/tpconv-interop-results.md)
interop: build
	TPCONV_INTEROP_ROOT=$(INTEROP_ROOT) TPCONV_INTEROP_FAMILIES="$(FAMILIES)" ./tests/interop/run.sh $(BUILD)/cmd/tpconv .
# optimizer state resumed in torch 2.14 (FSDP2 on 2 and 4 gloo processes, AdamW, the
# HF Trainer) from tpconv's DCP and optimizer.pt outputs (tests/interop/optim.sh; TAP)
interop-optim: build
	TPCONV_INTEROP_ROOT=$(INTEROP_ROOT) ./tests/interop/optim.sh $(BUILD)/cmd/tpconv .

# megatron-dist sets (qwen2, qwen3, mistral, llama, mixtral, qwen3-moe, deepseek-v3) loaded by
# torch 2.14's DCP reader against Megatron-Core's sharded_state_dict (tests/interop/megatron_dist.sh; TAP)
interop-megatron: build
	TPCONV_INTEROP_ROOT=$(INTEROP_ROOT) ./tests/interop/megatron_dist.sh $(BUILD)/cmd/tpconv .

# DeepSpeed universal checkpoints read and written under torch 2.14 (the forky chroot)
interop-universal: build
	TPCONV_INTEROP_ROOT=$(INTEROP_ROOT) ./tests/deepspeed/universal_forky.sh $(BUILD)/cmd/tpconv .

clean:
	rm -rf $(BUILD) $(BUILD_SAN) $(BUILD_FUZZ)
