# wasmlm build. `make` builds the native library, CLI and tests, and the wasm
# module; `make test` runs every test (C natively, C in wasm under Node,
# C under ASan+UBSan, then the JS suite). Toolchain: tools/setup.sh.

CLANG   ?= $(shell command -v clang-19 2>/dev/null)
CC      ?= cc
# clang runs binaryen's wasm-opt by itself after a wasm link when it is on
# PATH (Debian's emscripten package puts one in /usr/bin), and wasm-opt 108
# breaks relaxed-SIMD modules. Every wasm link below runs with a PATH without
# wasm-opt and names the linker explicitly (it may live in the same directory),
# so the modules do not depend on what else is installed (measured: with
# wasm-opt 108 in the link, the threaded module hung in generation). (clang-19's
# --no-wasm-opt flag skips the link altogether: not usable.)
NO_WASM_OPT_PATH := $(shell echo "$$PATH" | tr ':' '\n' | while read d; do [ -x "$$d/wasm-opt" ] || printf '%s:' "$$d"; done)
WASM_LD := $(shell command -v wasm-ld-19 2>/dev/null)
WASM_CC  = PATH="$(NO_WASM_OPT_PATH)" $(CLANG) -fuse-ld=$(WASM_LD)
SHARED  ?= ../shared
BUILD   := build

# the library: every .c directly in src/ (front ends live in src/cli/, the
# relaxed-SIMD probe in src/probe/)
CORE_SRC := $(wildcard src/*.c)
CORE_HDR := $(wildcard src/*.h)
CLI_SRC  := src/cli/common.c
CLI_HDR  := src/cli/common.h
TEST_SRC := $(wildcard tests/c/*.c)
TEST_HDR := $(wildcard tests/c/*.h)

COMMON_CFLAGS := -std=c11 -Wall -Wextra -Wno-unused-parameter -ffp-contract=off
# Native builds compile the SIMD kernel sets too, through SIMDe's wasm SIMD
# intrinsics (libsimde-dev, installed by tools/setup.sh; src/simd128.h), for
# this machine's instruction set: the C tests hold them to the reference
# natively and under the sanitizers, and `make bench` has a native baseline
# running the same kernels. Without SIMDe they build with the scalar set only.
# (Expanded when a recipe runs, after `toolchain` has installed SIMDe.)
SIMDE        = $(shell test -f /usr/include/simde/wasm/simd128.h && echo -DWLM_SIMDE)
NATIVE_ARCH ?= -march=native
NATIVE_CFLAGS = $(COMMON_CFLAGS) -Wno-unknown-pragmas -O2 -g $(SIMDE) $(NATIVE_ARCH)
SAN_CFLAGS    = $(COMMON_CFLAGS) -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined $(SIMDE) $(NATIVE_ARCH)

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
# memory64 (wasm64) variants, for model files the 4 GiB of wasm32 cannot
# hold: the same sources with 64-bit pointers and size_t, a memory of up to
# 16 GiB (262144 pages: the most V8 gives a memory64 memory; WLM_WASM_MEMORY_MAX
# in src/base.h). JS picks one only when the file needs it and the memory64
# probe (wasm/probe-memory64.wasm) passes (web/memory64.js).
WASM64_MAX_MEMORY := 17179869184
WASM64_CFLAGS := $(subst --target=wasm32,--target=wasm64,$(WASM_CFLAGS))
WASM64_LDFLAGS := $(subst --max-memory=4294967296,--max-memory=$(WASM64_MAX_MEMORY),$(WASM_LDFLAGS))
WASM64_MT_CFLAGS := $(WASM64_CFLAGS) -matomics
WASM64_MT_LDFLAGS := $(subst --max-memory=4294967296,--max-memory=$(WASM64_MAX_MEMORY),$(WASM_MT_LDFLAGS))
# wasm C test program (wasm32-wasi with Debian's wasi-libc), run by Node
WASI_CFLAGS := $(COMMON_CFLAGS) --target=wasm32-wasi --sysroot=/usr -O2 -msimd128 -mbulk-memory

.PHONY: abi all native wasm test test-c test-wasm test-san test-js toolchain clean bench bench-logprob bench-kernels bench-kernels-native

all: toolchain native wasm

native: $(BUILD)/wasmlm-native $(BUILD)/tests-native $(BUILD)/wasmlm-native-relaxed $(BUILD)/tests-native-relaxed
WASM64 := wasm/wasmlm64.wasm wasm/wasmlm64-mt.wasm wasm/wasmlm64-relaxed.wasm wasm/wasmlm64-mt-relaxed.wasm wasm/probe-memory64.wasm
wasm: wasm/wasmlm.wasm wasm/wasmlm-mt.wasm wasm/wasmlm-relaxed.wasm wasm/wasmlm-mt-relaxed.wasm wasm/probe-relaxed.wasm wasm/wasmlm-cli.wasm $(WASM64)

toolchain:
	@sh tools/setup.sh

$(BUILD)/wasmlm-native: $(CORE_SRC) src/cli/native.c $(CLI_SRC) $(CORE_HDR) $(CLI_HDR)
	@mkdir -p $(BUILD)
	$(CC) $(NATIVE_CFLAGS) -O3 -o $@ $(CORE_SRC) src/cli/native.c $(CLI_SRC) -lm -lpthread

$(BUILD)/tests-native: $(CORE_SRC) $(TEST_SRC) $(CORE_HDR) $(TEST_HDR)
	@mkdir -p $(BUILD)
	$(CC) $(NATIVE_CFLAGS) -o $@ $(CORE_SRC) $(TEST_SRC) -lm -lpthread

# the relaxed-SIMD kernel set natively: the same tests, and the native
# baseline of the relaxed wasm build in `make bench` (without SIMDe, the
# scalar set again)
$(BUILD)/wasmlm-native-relaxed: $(CORE_SRC) src/cli/native.c $(CLI_SRC) $(CORE_HDR) $(CLI_HDR)
	@mkdir -p $(BUILD)
	$(CC) $(NATIVE_CFLAGS) -DWLM_SIMDE_RELAXED -O3 -o $@ $(CORE_SRC) src/cli/native.c $(CLI_SRC) -lm -lpthread
$(BUILD)/tests-native-relaxed: $(CORE_SRC) $(TEST_SRC) $(CORE_HDR) $(TEST_HDR)
	@mkdir -p $(BUILD)
	$(CC) $(NATIVE_CFLAGS) -DWLM_SIMDE_RELAXED -o $@ $(CORE_SRC) $(TEST_SRC) -lm -lpthread

$(BUILD)/tests-san: $(CORE_SRC) $(TEST_SRC) $(CORE_HDR) $(TEST_HDR)
	@mkdir -p $(BUILD)
	$(CLANG) $(SAN_CFLAGS) -o $@ $(CORE_SRC) $(TEST_SRC) -lm -lpthread
$(BUILD)/tests-san-relaxed: $(CORE_SRC) $(TEST_SRC) $(CORE_HDR) $(TEST_HDR)
	@mkdir -p $(BUILD)
	$(CLANG) $(SAN_CFLAGS) -DWLM_SIMDE_RELAXED -o $@ $(CORE_SRC) $(TEST_SRC) -lm -lpthread

wasm/wasmlm.wasm: $(CORE_SRC) $(CORE_HDR)
	@mkdir -p wasm
	@test -n "$(CLANG)" || { echo "clang-19 not found: run 'make toolchain' (sh tools/setup.sh)"; exit 1; }
	$(WASM_CC) $(WASM_CFLAGS) $(WASM_LDFLAGS) -o $@ $(CORE_SRC)

wasm/wasmlm-mt.wasm: $(CORE_SRC) $(CORE_HDR)
	@mkdir -p wasm
	@test -n "$(CLANG)" || { echo "clang-19 not found: run 'make toolchain' (sh tools/setup.sh)"; exit 1; }
	$(WASM_CC) $(WASM_MT_CFLAGS) $(WASM_MT_LDFLAGS) -o $@ $(CORE_SRC)

wasm/wasmlm-relaxed.wasm: $(CORE_SRC) $(CORE_HDR)
	@mkdir -p wasm
	$(WASM_CC) $(WASM_CFLAGS) -mrelaxed-simd $(WASM_LDFLAGS) -o $@ $(CORE_SRC)

wasm/wasmlm-mt-relaxed.wasm: $(CORE_SRC) $(CORE_HDR)
	@mkdir -p wasm
	$(WASM_CC) $(WASM_MT_CFLAGS) -mrelaxed-simd $(WASM_MT_LDFLAGS) -o $@ $(CORE_SRC)

wasm/probe-relaxed.wasm: src/probe/relaxed.c
	@mkdir -p wasm
	$(WASM_CC) --target=wasm32 -nostdlib -O2 -msimd128 -mrelaxed-simd -Wl,--no-entry -o $@ $<

wasm/wasmlm64.wasm: $(CORE_SRC) $(CORE_HDR)
	@mkdir -p wasm
	$(WASM_CC) $(WASM64_CFLAGS) $(WASM64_LDFLAGS) -o $@ $(CORE_SRC)

wasm/wasmlm64-mt.wasm: $(CORE_SRC) $(CORE_HDR)
	@mkdir -p wasm
	$(WASM_CC) $(WASM64_MT_CFLAGS) $(WASM64_MT_LDFLAGS) -o $@ $(CORE_SRC)

wasm/wasmlm64-relaxed.wasm: $(CORE_SRC) $(CORE_HDR)
	@mkdir -p wasm
	$(WASM_CC) $(WASM64_CFLAGS) -mrelaxed-simd $(WASM64_LDFLAGS) -o $@ $(CORE_SRC)

wasm/wasmlm64-mt-relaxed.wasm: $(CORE_SRC) $(CORE_HDR)
	@mkdir -p wasm
	$(WASM_CC) $(WASM64_MT_CFLAGS) -mrelaxed-simd $(WASM64_MT_LDFLAGS) -o $@ $(CORE_SRC)

wasm/probe-memory64.wasm: src/probe/memory64.c
	@mkdir -p wasm
	$(WASM_CC) --target=wasm64 -nostdlib -O2 -msimd128 -Wl,--no-entry,--import-memory,--max-memory=$(WASM64_MAX_MEMORY) -o $@ $<

$(BUILD)/tests-relaxed.wasm: $(CORE_SRC) $(TEST_SRC) $(CORE_HDR) $(TEST_HDR)
	@mkdir -p $(BUILD)
	$(WASM_CC) $(WASI_CFLAGS) -mrelaxed-simd -o $@ $(CORE_SRC) $(TEST_SRC)

# web/worker/abi.js: the layouts of the C structs JS touches, one table per
# pointer width, from tools/gen-abi.c built twice: as a wasm32-wasi program
# run by Node (ABI32: the offsets are wasm32's) and natively (ABI64: LP64,
# which for these types is wasm64's layout; abi-check64 checks that).
# Committed: tests/js/abi.test.mjs regenerates build/abi.js and fails when
# the committed file differs.
$(BUILD)/gen-abi.wasm: tools/gen-abi.c src/wlm.h
	@mkdir -p $(BUILD)
	@test -n "$(CLANG)" || { echo "clang-19 not found: run 'make toolchain' (sh tools/setup.sh)"; exit 1; }
	$(WASM_CC) $(WASI_CFLAGS) -Isrc -o $@ tools/gen-abi.c
$(BUILD)/gen-abi: tools/gen-abi.c src/wlm.h
	@mkdir -p $(BUILD)
	$(CC) $(COMMON_CFLAGS) -O1 -Isrc -o $@ tools/gen-abi.c
$(BUILD)/abi.js: $(BUILD)/gen-abi.wasm $(BUILD)/gen-abi
	{ node tests/c/run_wasi.mjs $(BUILD)/gen-abi.wasm js && $(BUILD)/gen-abi js; } > $@.tmp && mv $@.tmp $@
abi: $(BUILD)/abi.js
	cp $< web/worker/abi.js
# ABI64 is the wasm64 builds' table: the structs compiled for wasm64 must
# have every offset and size the native run printed (tools/gen-abi.c)
$(BUILD)/abi-asserts.h: $(BUILD)/gen-abi
	$(BUILD)/gen-abi asserts > $@.tmp && mv $@.tmp $@
.PHONY: abi-check64
abi-check64: $(BUILD)/abi-asserts.h
	$(CLANG) --target=wasm64 -ffreestanding -fsyntax-only -Isrc -DWLM_ABI_CHECK='"$(abspath $(BUILD)/abi-asserts.h)"' tools/gen-abi.c

$(BUILD)/tests.wasm: $(CORE_SRC) $(TEST_SRC) $(CORE_HDR) $(TEST_HDR)
	@mkdir -p $(BUILD)
	$(WASM_CC) $(WASI_CFLAGS) -o $@ $(CORE_SRC) $(TEST_SRC)

test: toolchain test-c test-wasm test-wasm-relaxed test-san wasm-emcc-if-available test-js test-browser

test-c: $(BUILD)/tests-native $(BUILD)/tests-native-relaxed
	$(BUILD)/tests-native --data $(SHARED)
	@if [ -n "$(SIMDE)" ]; then echo "$(BUILD)/tests-native-relaxed --data $(SHARED)"; $(BUILD)/tests-native-relaxed --data $(SHARED); \
	else echo "libsimde-dev is missing: the native tests ran the scalar kernels only"; fi

test-wasm: $(BUILD)/tests.wasm
	WLM_TEST_DATA=$(SHARED) node tests/c/run_wasi.mjs $(BUILD)/tests.wasm

# the relaxed build's kernels against the scalar reference, in Node with
# relaxed SIMD enabled (skipped, with a message, where the probe fails)
test-wasm-relaxed: $(BUILD)/tests-relaxed.wasm wasm/probe-relaxed.wasm
	@if node --experimental-wasm-relaxed-simd tools/probe-relaxed.mjs; then \
	  WLM_TEST_DATA=$(SHARED) node --experimental-wasm-relaxed-simd tests/c/run_wasi.mjs $(BUILD)/tests-relaxed.wasm kernels; \
	else echo "relaxed SIMD probe failed in this Node: relaxed kernels not run here"; fi

test-san: $(BUILD)/tests-san $(BUILD)/tests-san-relaxed
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(BUILD)/tests-san --data $(SHARED)
	@if [ -n "$(SIMDE)" ]; then echo "$(BUILD)/tests-san-relaxed --data $(SHARED)"; \
	  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(BUILD)/tests-san-relaxed --data $(SHARED); fi

test-js: wasm $(BUILD)/wasmlm-native
	WLM_SHARED=$(abspath $(SHARED)) WASMLM_MODELS=$(abspath $(SHARED))/models node --test --test-reporter=spec tests/js/

# Speed, side by side with native llama.cpp: llama-bench built for this
# machine (CMake Release, GGML_NATIVE=ON) from the source tree at
# LLAMA_CPP_DIR, or from ~/.cache/wasmlm/llama.cpp (cloned there from
# node-llama-cpp's git bundle and built on first use, never in CI; LLAMA_BENCH
# names a binary instead), with node-llama-cpp's prebuilt binaries (installed
# here on first use) as the fallback: bench/llama-native.mjs. JSON + table
# in bench/results/. Both wasm builds (SIMD128 and relaxed SIMD): Node 20 runs
# relaxed SIMD only behind a V8 flag, passed when this node accepts it (Node
# >= 22 runs it by default; where the flag is refused it is left out).
# Expanded only here.
# bench/grammar.mjs: grammar-constrained against unconstrained decoding per
# token (s110m and a 150k-vocabulary qwen2 shape), and grammar compile time.
BENCH_NODE_FLAGS = $(shell node --experimental-wasm-relaxed-simd -e 0 >/dev/null 2>&1 && echo --experimental-wasm-relaxed-simd)
bench: wasm native $(BUILD)/tests.wasm
	@test -d node_modules/node-llama-cpp || npm install --no-save --no-audit --no-fund -E node-llama-cpp@3.21.1
	node $(BENCH_NODE_FLAGS) bench/bench.mjs $(BENCH_ARGS)
	node $(BENCH_NODE_FLAGS) bench/scaling.mjs $(SCALING_ARGS)
	node $(BENCH_NODE_FLAGS) bench/grammar.mjs $(GRAMMAR_ARGS)
	node $(BENCH_NODE_FLAGS) bench/embed.mjs $(EMBED_ARGS)

# Every architecture cross-checked against llama.cpp (node-llama-cpp's
# prebuilt CPU build, installed here on first use, not in CI) on synthetic
# GGUFs: greedy tokens and teacher-forced KL; results in bench/results/xcheck.*
.PHONY: xcheck
xcheck: wasm
	@test -d node_modules/node-llama-cpp || npm install --no-save --no-audit --no-fund -E node-llama-cpp@3.21.1
	node tools/xcheck.mjs $(XCHECK_ARGS)

# Batch kernels side by side in one wasm process per build (bench/kernels.c;
# KERNELS_REPS interleaved reps): the numbers docs/architecture.md quotes.
# The relaxed-SIMD build runs where Node's known-answer probe passes.
# KERNELS_ONLY="Q8_0 decode": only the lines whose name holds that text.
KERNELS_REPS ?= 15
KERNELS_ONLY ?=
KERNELS_ONLY_ARG = $(if $(KERNELS_ONLY),"$(KERNELS_ONLY)")
$(BUILD)/bench-kernels.wasm: $(CORE_SRC) $(CORE_HDR) bench/kernels.c
	@mkdir -p $(BUILD)
	$(WASM_CC) $(WASI_CFLAGS) -O3 -o $@ $(CORE_SRC) bench/kernels.c
$(BUILD)/bench-kernels-relaxed.wasm: $(CORE_SRC) $(CORE_HDR) bench/kernels.c
	@mkdir -p $(BUILD)
	$(WASM_CC) $(WASI_CFLAGS) -O3 -mrelaxed-simd -o $@ $(CORE_SRC) bench/kernels.c
bench-kernels: $(BUILD)/bench-kernels.wasm $(BUILD)/bench-kernels-relaxed.wasm wasm/probe-relaxed.wasm
	node --no-liftoff tests/c/run_wasi.mjs $(BUILD)/bench-kernels.wasm $(KERNELS_REPS) $(KERNELS_ONLY_ARG)
	@if node --experimental-wasm-relaxed-simd tools/probe-relaxed.mjs; then \
	  node --experimental-wasm-relaxed-simd --no-liftoff tests/c/run_wasi.mjs $(BUILD)/bench-kernels-relaxed.wasm $(KERNELS_REPS) $(KERNELS_ONLY_ARG); \
	else echo "relaxed SIMD probe failed in this Node: relaxed kernels not measured"; fi

# the same microbenchmark compiled natively (SIMDe; both kernel sets): native
# code against V8 on the same kernels
bench-kernels-native: $(CORE_SRC) $(CORE_HDR) bench/kernels.c
	@mkdir -p $(BUILD)
	$(CC) $(NATIVE_CFLAGS) -O3 -o $(BUILD)/bench-kernels-native $(CORE_SRC) bench/kernels.c -lm -lpthread
	$(CC) $(NATIVE_CFLAGS) -DWLM_SIMDE_RELAXED -O3 -o $(BUILD)/bench-kernels-native-relaxed $(CORE_SRC) bench/kernels.c -lm -lpthread
	$(BUILD)/bench-kernels-native $(KERNELS_REPS) $(KERNELS_ONLY_ARG)
	$(BUILD)/bench-kernels-native-relaxed $(KERNELS_REPS) $(KERNELS_ONLY_ARG)

# The thread pool's synchronisation costs natively (bench/threads.c): an
# empty job, a barrier, a step's chunks, by thread count up to
# BENCH_THREADS (default: the cores). The figures of the thread-count
# projection in docs/architecture.md; meaningful on an idle machine only.
BENCH_THREADS ?=
.PHONY: bench-threads
bench-threads: $(CORE_SRC) $(CORE_HDR) bench/threads.c
	@mkdir -p $(BUILD)
	$(CC) $(NATIVE_CFLAGS) -O3 -o $(BUILD)/bench-threads $(CORE_SRC) bench/threads.c -lm -lpthread
	$(BUILD)/bench-threads $(BENCH_THREADS)

# Per-token logprob over a 32000-entry vocabulary: the former wlm_expf loop
# against the sum_exp/logit_max kernels, interleaved in one wasm process
# (bench/logprob.c; LOGPROB_REPS reps)
LOGPROB_REPS ?= 300
$(BUILD)/bench-logprob.wasm: $(CORE_SRC) $(CORE_HDR) bench/logprob.c
	@mkdir -p $(BUILD)
	$(WASM_CC) $(WASI_CFLAGS) -O3 -o $@ $(CORE_SRC) bench/logprob.c
bench-logprob: $(BUILD)/bench-logprob.wasm
	node tests/c/run_wasi.mjs $< $(LOGPROB_REPS)

clean:
	rm -rf $(BUILD) wasm/*.wasm

# ---- browser product (issue #6) ------------------------------------------------

.PHONY: test-browser demo

# The demo page in headless Chromium (Debian's chromium + playwright-core,
# installed by tools/setup-browser.sh): greedy = reference, stop, chart,
# offline reload, cache manager, no main-thread long tasks; screenshots in
# test-artifacts/.
test-browser: wasm
	@sh tools/setup-browser.sh
	WLM_SHARED=$(abspath $(SHARED)) WASMLM_MODELS=$(abspath $(SHARED))/models node --test --test-reporter=spec tests/browser/

demo: wasm
	node web/demo/server.mjs

# WASI command build of the CLI (src/cli/wasi.c + the engine, Debian's
# wasi-libc): `node web/cli/wasi-cli.js generate -m MODEL -p ...` or any WASI runtime.
wasm/wasmlm-cli.wasm: $(CORE_SRC) $(CORE_HDR) src/cli/wasi.c $(CLI_SRC) $(CLI_HDR)
	@mkdir -p wasm
	$(WASM_CC) $(WASI_CFLAGS) -O3 -Wl,-z,stack-size=1048576 -o $@ $(CORE_SRC) src/cli/wasi.c $(CLI_SRC)

# The same C sources built by Emscripten (Debian's emcc 3.1.6, package
# `emscripten`, installed by tools/setup.sh) as a standalone module: no
# Emscripten JS glue; it imports only env.memory like wasm/wasmlm.wasm, so
# web/index.js loads it with loadModel(src, {wasm: 'wasm/wasmlm-emcc.wasm'}).
# Single-threaded, SIMD128. Not shipped in the npm package.
EMCC ?= $(shell command -v emcc 2>/dev/null)
EMCC_FLAGS := $(COMMON_CFLAGS) -O3 -msimd128 -mbulk-memory -fvisibility=hidden \
              -sSTANDALONE_WASM=1 --no-entry -sIMPORTED_MEMORY=1 -sINITIAL_MEMORY=2097152 -sTOTAL_STACK=1048576 \
              -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB -sWASM_BIGINT=1 -Wl,--export-dynamic

.PHONY: wasm-emcc wasm-emcc-if-available
wasm-emcc: wasm/wasmlm-emcc.wasm

wasm/wasmlm-emcc.wasm: $(CORE_SRC) $(CORE_HDR)
	@mkdir -p wasm
	@test -n "$(EMCC)" || { echo "emcc not found: apt-get install emscripten (tools/setup.sh installs it)"; exit 1; }
	NODE_PATH=/usr/share/nodejs $(EMCC) $(EMCC_FLAGS) -o $@ $(CORE_SRC)

# for `make test`: builds the Emscripten module when emcc is installed; the
# JS test (tests/js/emcc.test.mjs) skips with a message when it is not
wasm-emcc-if-available:
	@if [ -n "$(EMCC)" ]; then $(MAKE) --no-print-directory wasm/wasmlm-emcc.wasm; \
	else echo "emcc is not installed (Debian package emscripten): the Emscripten build is not tested"; fi

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
FUZZ_TARGETS := gguf tokenize sampler state grammar
comma := ,
FUZZ_CFLAGS = $(COMMON_CFLAGS) -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer $(SIMDE) $(NATIVE_ARCH)
FUZZ_BINS := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)
FUZZ_SEEDS := $(BUILD)/fuzz/models/tiny-bpe.gguf
.PHONY: fuzz fuzz-build fuzz-replay fuzz-template soak

# the engine is compiled once (coverage instrumented, no fuzzer main) and
# linked into each target
FUZZ_OBJS := $(CORE_SRC:src/%.c=$(BUILD)/fuzz/obj/%.o)
.SECONDARY: $(FUZZ_OBJS)
$(BUILD)/fuzz/obj/%.o: src/%.c $(CORE_HDR)
	@mkdir -p $(BUILD)/fuzz/obj
	@test -n "$$(ls /usr/lib/llvm-19/lib/clang/19/lib/linux/libclang_rt.fuzzer-*.a 2>/dev/null)" || { echo "libFuzzer missing: run 'make toolchain' (libclang-rt-19-dev)"; exit 1; }
	$(CLANG) $(subst -fsanitize=fuzzer$(comma),-fsanitize=fuzzer-no-link$(comma),$(FUZZ_CFLAGS)) -c -o $@ $<
$(BUILD)/fuzz/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_common.h $(FUZZ_OBJS)
	$(CLANG) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_OBJS) -lm -lpthread

$(FUZZ_SEEDS): tools/fuzz-seeds.mjs tools/make-hostile.mjs models/make-model.js models/gguf-writer.js
	node tools/fuzz-seeds.mjs $(BUILD)/fuzz

fuzz-build: $(FUZZ_BINS) $(FUZZ_SEEDS)

fuzz: fuzz-build fuzz-options fuzz-protocol
	sh tools/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)
	$(MAKE) fuzz-template

# chat templates rendered with their limits on (web/worker/template.js): random
# templates for FUZZ_SECONDS; a hang, a crash or a non-WasmlmError is a finding
fuzz-template:
	FUZZ_SECONDS=$(FUZZ_SECONDS) node fuzz/fuzz_template.mjs

# JS fuzz targets (fuzz/*.mjs): the public API's option layer against a live
# model, and the worker protocol spoken directly; FUZZ_SEED replays a run.
# `make test` runs each for 5 s with a fixed seed (fuzz-js-quick).
FUZZ_SEED ?=
.PHONY: fuzz-options fuzz-protocol fuzz-js-quick
fuzz-options: wasm
	WLM_SHARED=$(abspath $(SHARED)) timeout $$(( $(FUZZ_SECONDS) + 120 )) node fuzz/fuzz_options.mjs $(FUZZ_SECONDS) $(FUZZ_SEED)
fuzz-protocol: wasm
	WLM_SHARED=$(abspath $(SHARED)) timeout $$(( $(FUZZ_SECONDS) + 120 )) node fuzz/fuzz_protocol.mjs $(FUZZ_SECONDS) $(FUZZ_SEED)
fuzz-js-quick: wasm
	WLM_SHARED=$(abspath $(SHARED)) timeout 150 node fuzz/fuzz_options.mjs 5 1
	WLM_SHARED=$(abspath $(SHARED)) timeout 150 node fuzz/fuzz_protocol.mjs 5 1
test: fuzz-js-quick

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

# ---- C style (.clang-format) ---------------------------------------------------
# format-check holds the files written in the .clang-format style to it
# (FORMAT_CHECKED: add a file once it is formatted); for every other C file
# changed since FORMAT_BASE it prints how many places differ, without
# failing, so untouched and moved code is never reformatted to pass.
CLANG_FORMAT ?= $(shell command -v clang-format-19 2>/dev/null || command -v clang-format 2>/dev/null)
FORMAT_BASE ?= $(shell git merge-base HEAD main 2>/dev/null)
# (not yet: src/unicode_tables.c, generated by tools/gen_unicode.py)
FORMAT_CHECKED := src/attention.c src/attention.h src/base.c src/base.h src/cli/common.c src/cli/common.h \
  src/cli/native.c src/cli/wasi.c src/ctx.c src/ctx.h src/embed.c src/forward.c src/ggml_types.h \
  src/gguf.c src/gguf.h src/grammar.c src/grammar.h src/grammar_mask.c src/internal.h \
  src/kernels.h src/kernels_scalar.c src/kernels_simd128.c src/kvcache.c src/layouts.c src/layouts.h \
  src/matmul.c src/matmul.h src/model.c src/model.h \
  src/quants.h src/quants_scalar.c src/quants_simd128.c src/sampler.c \
  src/probe/memory64.c src/probe/relaxed.c src/requantize.c src/simd128.h src/speculative.c src/sys.c \
  src/threads.c src/threads.h src/tokenizer.c src/tokenizer_bpe.c src/tokenizer_wpm.c src/types.c \
  src/unicode_tables.h src/vocab.h src/wlm.h src/wmath.c src/wmath.h \
  tests/c/gguf_build.h tests/c/ring_check.h tests/c/test_arch.c tests/c/test_embed.c \
  tests/c/test_forward.c tests/c/test_gguf.c tests/c/test_grammar.c tests/c/test_hostile.c \
  tests/c/test_kernels.c tests/c/test_kquants.c tests/c/test_main.c tests/c/test_sampler.c \
  tests/c/test_seq.c tests/c/test_split.c tests/c/test_state.c tests/c/test_swa.c \
  tests/c/test_threads.c tests/c/test_tokenizer.c tests/c/test_tokenizer_bpe.c tests/c/test_types.c \
  tests/c/test_wpm.c tests/c/tst.h tests/c/vocab_util.h \
  bench/threads.c
.PHONY: format-check
format-check:
	@test -n "$(CLANG_FORMAT)" || { echo "clang-format not found (apt-get install clang-format)"; exit 1; }
	$(CLANG_FORMAT) --dry-run -Werror $(FORMAT_CHECKED)
	@for f in $$(git diff --name-only $(FORMAT_BASE) -- 'src/*.c' 'src/*.h' 'tests/c/*.c' 'tests/c/*.h' 'fuzz/*.c' 'fuzz/*.h' 'bench/*.c'); do \
	  case " $(FORMAT_CHECKED) " in *" $$f "*) continue;; esac; \
	  [ -f "$$f" ] || continue; \
	  n=$$($(CLANG_FORMAT) --dry-run "$$f" 2>&1 | grep -c 'warning:'); \
	  [ "$$n" = 0 ] || echo "format-check: $$f: $$n places differ from .clang-format (not checked)"; \
	done

# Lint (eslint.config.js): the recommended set, no unused variables, no
# `_private` member used from outside its object. eslint is a devDependency
# (tools/setup.sh installs it with the others).
LINT_JS := web models tests bench tools fuzz eslint.config.js
lint:
	@test -x node_modules/.bin/eslint || { echo "lint: eslint is not installed (run npm ci)"; exit 1; }
	node_modules/.bin/eslint $(LINT_JS)
	@if [ -n "$(CLANG_FORMAT)" ]; then $(MAKE) --no-print-directory format-check; else echo "lint: clang-format not found, C style not checked"; fi
test: lint
.PHONY: lint
