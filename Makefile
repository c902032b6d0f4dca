# wasmlm build. `make` builds the native library, CLI and tests, and the wasm
# module; `make test` runs every test (C natively, C in wasm under Node,
# C under ASan+UBSan, then the JS suite). Toolchain: tools/setup.sh.

CLANG   ?= $(shell command -v clang-19 2>/dev/null)
CC      ?= cc
SHARED  ?= ../shared
BUILD   := build

CORE_SRC := $(filter-out src/native_cli.c src/probe_relaxed.c,$(wildcard src/*.c))
CORE_HDR := $(wildcard src/*.h)
TEST_SRC := $(wildcard tests/c/*.c)

COMMON_CFLAGS := -std=c11 -Wall -Wextra -Wno-unused-parameter -ffp-contract=off
NATIVE_CFLAGS := $(COMMON_CFLAGS) -O2 -g
SAN_CFLAGS    := $(COMMON_CFLAGS) -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# wasm product module: freestanding, no libc, imports its memory so that a
# later threaded build can share it. SIMD128 kernels are compiled in.
WASM_CFLAGS := $(COMMON_CFLAGS) --target=wasm32 -nostdlib -ffreestanding -O3 -msimd128 -mbulk-memory \
               -fvisibility=hidden
WASM_LDFLAGS := -Wl,--no-entry,--import-memory,--export-dynamic,--initial-memory=2097152,--max-memory=4294967296 \
                -Wl,--export=__heap_base,-z,stack-size=1048576
# threaded variant: shared imported memory, atomics; worker instances run
# wlm_worker_loop on their own stacks (see docs/architecture.md)
WASM_MT_CFLAGS := $(WASM_CFLAGS) -matomics
WASM_MT_LDFLAGS := -Wl,--no-entry,--import-memory,--shared-memory,--export-dynamic,--initial-memory=2097152,--max-memory=4294967296 \
                   -Wl,--export=__heap_base,--export=__stack_pointer,-z,stack-size=1048576
# wasm C test program (wasm32-wasi with Debian's wasi-libc), run by Node
WASI_CFLAGS := $(COMMON_CFLAGS) --target=wasm32-wasi --sysroot=/usr -O2 -msimd128 -mbulk-memory

.PHONY: all native wasm test test-c test-wasm test-san test-js toolchain clean bench

all: toolchain native wasm

native: $(BUILD)/wasmlm-native $(BUILD)/tests-native
wasm: wasm/wasmlm.wasm wasm/wasmlm-mt.wasm wasm/wasmlm-relaxed.wasm wasm/wasmlm-mt-relaxed.wasm wasm/probe-relaxed.wasm

toolchain:
	@sh tools/setup.sh

$(BUILD)/wasmlm-native: $(CORE_SRC) src/native_cli.c $(CORE_HDR)
	@mkdir -p $(BUILD)
	$(CC) $(NATIVE_CFLAGS) -O3 -o $@ $(CORE_SRC) src/native_cli.c -lm -lpthread

$(BUILD)/tests-native: $(CORE_SRC) $(TEST_SRC) $(CORE_HDR) tests/c/tst.h
	@mkdir -p $(BUILD)
	$(CC) $(NATIVE_CFLAGS) -o $@ $(CORE_SRC) $(TEST_SRC) -lm -lpthread

$(BUILD)/tests-san: $(CORE_SRC) $(TEST_SRC) $(CORE_HDR) tests/c/tst.h
	@mkdir -p $(BUILD)
	$(CLANG) $(SAN_CFLAGS) -o $@ $(CORE_SRC) $(TEST_SRC) -lm -lpthread

wasm/wasmlm.wasm: $(CORE_SRC) $(CORE_HDR)
	@mkdir -p wasm
	@test -n "$(CLANG)" || { echo "clang-19 not found: run 'make toolchain' (sh tools/setup.sh)"; exit 1; }
	PATH="$(NO_WASM_OPT_PATH)" $(CLANG) $(WASM_LD_PIN) $(WASM_CFLAGS) $(WASM_LDFLAGS) -o $@ $(CORE_SRC)

wasm/wasmlm-mt.wasm: $(CORE_SRC) $(CORE_HDR)
	@mkdir -p wasm
	@test -n "$(CLANG)" || { echo "clang-19 not found: run 'make toolchain' (sh tools/setup.sh)"; exit 1; }
	PATH="$(NO_WASM_OPT_PATH)" $(CLANG) $(WASM_LD_PIN) $(WASM_MT_CFLAGS) $(WASM_MT_LDFLAGS) -o $@ $(CORE_SRC)

# relaxed-SIMD variants (JS loads them only after wasm/probe-relaxed.wasm gave
# the right answer). binaryen's wasm-opt 108 breaks relaxed modules (and the
# threaded build: its workers hang), and clang runs it by itself when it is on
# PATH: every wasm link runs with a PATH without it (defined here, used above
# as well: make expands recipes after reading the whole file).
NO_WASM_OPT_PATH := $(shell echo "$$PATH" | tr ':' '\n' | while read d; do [ -x "$$d/wasm-opt" ] || printf '%s:' "$$d"; done)
# ...and that PATH may lose wasm-ld-19 too (binaryen installs into /usr/bin): name the linker by its path
WASM_LD_PIN := $(if $(shell command -v wasm-ld-19 2>/dev/null),-fuse-ld=$(shell command -v wasm-ld-19 2>/dev/null))
wasm/wasmlm-relaxed.wasm: $(CORE_SRC) $(CORE_HDR)
	@mkdir -p wasm
	PATH="$(NO_WASM_OPT_PATH)" $(CLANG) $(WASM_LD_PIN) $(WASM_CFLAGS) -mrelaxed-simd $(WASM_LDFLAGS) -o $@ $(CORE_SRC)

wasm/wasmlm-mt-relaxed.wasm: $(CORE_SRC) $(CORE_HDR)
	@mkdir -p wasm
	PATH="$(NO_WASM_OPT_PATH)" $(CLANG) $(WASM_LD_PIN) $(WASM_MT_CFLAGS) -mrelaxed-simd $(WASM_MT_LDFLAGS) -o $@ $(CORE_SRC)

wasm/probe-relaxed.wasm: src/probe_relaxed.c
	@mkdir -p wasm
	PATH="$(NO_WASM_OPT_PATH)" $(CLANG) $(WASM_LD_PIN) --target=wasm32 -nostdlib -O2 -msimd128 -mrelaxed-simd -Wl,--no-entry -o $@ $<

$(BUILD)/tests-relaxed.wasm: $(CORE_SRC) $(TEST_SRC) $(CORE_HDR) tests/c/tst.h
	@mkdir -p $(BUILD)
	PATH="$(NO_WASM_OPT_PATH)" $(CLANG) $(WASM_LD_PIN) $(WASI_CFLAGS) -mrelaxed-simd -o $@ $(CORE_SRC) $(TEST_SRC)

$(BUILD)/tests.wasm: $(CORE_SRC) $(TEST_SRC) $(CORE_HDR) tests/c/tst.h
	@mkdir -p $(BUILD)
	PATH="$(NO_WASM_OPT_PATH)" $(CLANG) $(WASM_LD_PIN) $(WASI_CFLAGS) -o $@ $(CORE_SRC) $(TEST_SRC)

test: toolchain test-c test-wasm test-wasm-relaxed test-san test-js

test-c: $(BUILD)/tests-native
	$(BUILD)/tests-native --data $(SHARED)

test-wasm: $(BUILD)/tests.wasm
	WLM_TEST_DATA=$(SHARED) node tests/c/run_wasi.mjs $(BUILD)/tests.wasm

# the relaxed build's kernels against the scalar reference, in Node with
# relaxed SIMD enabled (skipped, with a message, where the probe fails)
test-wasm-relaxed: $(BUILD)/tests-relaxed.wasm wasm/probe-relaxed.wasm
	@if node --experimental-wasm-relaxed-simd tools/probe-relaxed.mjs; then \
	  WLM_TEST_DATA=$(SHARED) node --experimental-wasm-relaxed-simd tests/c/run_wasi.mjs $(BUILD)/tests-relaxed.wasm kernels; \
	else echo "relaxed SIMD probe failed in this Node: relaxed kernels not run here"; fi

test-san: $(BUILD)/tests-san
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(BUILD)/tests-san --data $(SHARED)

test-js: wasm $(BUILD)/wasmlm-native
	WLM_SHARED=$(abspath $(SHARED)) WASMLM_MODELS=$(abspath $(SHARED))/models node --test --test-reporter=spec tests/js/

# Speed, side by side with native llama.cpp (node-llama-cpp's prebuilt CPU
# binaries, installed here on first use): JSON + table in bench/results/.
bench: wasm $(BUILD)/wasmlm-native $(BUILD)/tests-native $(BUILD)/tests.wasm
	@test -d node_modules/node-llama-cpp || npm install --no-save --no-audit --no-fund -E node-llama-cpp@3.21.1
	node bench/bench.mjs $(BENCH_ARGS)

clean:
	rm -rf $(BUILD) wasm/*.wasm

# ---- hardening (docs/hardening.md) ---------------------------------------------
# The hostile GGUF corpus (tools/make-hostile.mjs): every C test build (native,
# wasm, ASan) checks each file's status and message.
HOSTILE := $(BUILD)/hostile/manifest.tsv
$(HOSTILE): tools/make-hostile.mjs models/make-model.js models/gguf-writer.js
	node tools/make-hostile.mjs $(BUILD)/hostile
test-c test-wasm test-san test-js: $(HOSTILE)

# libFuzzer targets (fuzz/): clang-19 with libFuzzer + ASan + UBSan, native.
# `make fuzz` runs each for FUZZ_SECONDS (one at a time) and prints
# executions and findings; `make test` only replays the seeds and the saved
# regression inputs once (fuzz-replay, a few seconds).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := gguf tokenize sampler
comma := ,
FUZZ_CFLAGS := $(COMMON_CFLAGS) -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_BINS := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)
FUZZ_SEEDS := $(BUILD)/fuzz/models/tiny-bpe.gguf
.PHONY: fuzz fuzz-build fuzz-replay soak

# the engine is compiled once (coverage instrumented, no fuzzer main) and
# linked into each target
FUZZ_OBJS := $(CORE_SRC:src/%.c=$(BUILD)/fuzz/obj/%.o)
$(BUILD)/fuzz/obj/%.o: src/%.c $(CORE_HDR)
	@mkdir -p $(BUILD)/fuzz/obj
	@test -n "$$(ls /usr/lib/llvm-19/lib/clang/19/lib/linux/libclang_rt.fuzzer-*.a 2>/dev/null)" || { echo "libFuzzer missing: run 'make toolchain' (libclang-rt-19-dev)"; exit 1; }
	$(CLANG) $(subst -fsanitize=fuzzer$(comma),-fsanitize=fuzzer-no-link$(comma),$(FUZZ_CFLAGS)) -c -o $@ $<
$(BUILD)/fuzz/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_common.h $(FUZZ_OBJS)
	$(CLANG) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_OBJS) -lm -lpthread

$(FUZZ_SEEDS): tools/fuzz-seeds.mjs tools/make-hostile.mjs models/make-model.js models/gguf-writer.js
	node tools/fuzz-seeds.mjs $(BUILD)/fuzz

fuzz-build: $(FUZZ_BINS) $(FUZZ_SEEDS)

fuzz: fuzz-build
	sh tools/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# each target once over its seeds and fuzz/regressions/<target> (no mutation)
fuzz-replay: fuzz-build
	@mkdir -p $(BUILD)/fuzz/crashes
	@for t in $(FUZZ_TARGETS); do \
	  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(BUILD)/fuzz/fuzz_$$t -runs=0 -artifact_prefix=$(BUILD)/fuzz/crashes/$$t- \
	    $(BUILD)/fuzz/seed/$$t fuzz/regressions/$$t > $(BUILD)/fuzz/replay-$$t.log 2>&1 \
	    || { cat $(BUILD)/fuzz/replay-$$t.log; echo "fuzz-replay: $$t FAILED"; exit 1; }; \
	  echo "fuzz-replay: $$t: $$(ls $(BUILD)/fuzz/seed/$$t | wc -l) seeds + $$(ls fuzz/regressions/$$t | grep -v README | wc -l) regressions ok"; \
	done
test: fuzz-replay

# Soak (tests/soak/soak.mjs): SOAK_N generations back to back in one process;
# memory curve in build/soak.csv, summary in build/soak-summary.json. `make
# test` runs a 100-generation version (soak-quick, about 20 s).
SOAK_N ?= 1000
soak: wasm
	WLM_SHARED=$(abspath $(SHARED)) node --expose-gc tests/soak/soak.mjs $(SOAK_N) --out $(BUILD)/soak
soak-quick: wasm
	WLM_SHARED=$(abspath $(SHARED)) node --expose-gc tests/soak/soak.mjs 100 --out $(BUILD)/soak-quick
test: soak-quick
.PHONY: soak-quick
