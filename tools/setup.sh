#!/bin/sh
# Installs what the build and tests need, once: clang-19 + lld-19 (wasm32
# target), Debian's wasi-libc (for the wasm build of the C test suite and the
# WASI CLI), chromium (browser tests), emscripten (the `make wasm-emcc` build
# and its test) and the npm dependencies (devDependencies: playwright-core,
# vite, ...). Safe to run repeatedly: it only acts on what is missing.
set -e
need=""
command -v clang-19 >/dev/null 2>&1 || need="$need clang-19"
command -v wasm-ld-19 >/dev/null 2>&1 || need="$need lld-19"
[ -f /usr/lib/wasm32-wasi/libc.a ] || need="$need wasi-libc"
[ -f /usr/lib/llvm-19/lib/clang/19/lib/wasi/libclang_rt.builtins-wasm32.a ] || need="$need libclang-rt-19-dev-wasm32"
ls /usr/lib/llvm-19/lib/clang/19/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1 || need="$need libclang-rt-19-dev" # ASan, UBSan, libFuzzer
command -v node >/dev/null 2>&1 || need="$need nodejs npm"
[ -f /usr/include/simde/wasm/simd128.h ] || need="$need libsimde-dev" # native SIMD kernels (src/simd128.h)
[ -x /usr/bin/chromium ] || need="$need chromium"
command -v emcc >/dev/null 2>&1 || need="$need emscripten"
if [ -n "$need" ]; then
  echo "setup: installing$need"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -q || true
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need
fi
if [ -f package.json ] && grep -q -E '"(dev)?[dD]ependencies"' package.json && \
   { [ ! -d node_modules ] || [ package-lock.json -nt node_modules ]; }; then
  echo "setup: npm ci"
  if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
fi
