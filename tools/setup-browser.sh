#!/bin/sh
# Installs what the browser tests (`make test-browser`, part of `make test`)
# and `npm run bench:browser` need: Debian's chromium (apt) and the
# devDependencies (playwright-core, @wllama/wllama, vite) from package.json.
# Idempotent: does nothing when both are there.
set -e
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/chromium ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup-browser: installing chromium (apt)" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
if [ ! -f node_modules/playwright-core/package.json ] || [ ! -f node_modules/@wllama/wllama/package.json ]; then
  echo "setup-browser: npm install (devDependencies)" >&2
  # `npm install` prunes packages that package.json does not list; keep the
  # node-llama-cpp that `make bench` installs with --no-save, if present
  LC=""
  [ -f node_modules/node-llama-cpp/package.json ] && LC=$(node -p "require('./node_modules/node-llama-cpp/package.json').version")
  npm install --no-audit --no-fund
  if [ -n "$LC" ] && [ ! -f node_modules/node-llama-cpp/package.json ]; then
    npm install --no-save --no-audit --no-fund -E "node-llama-cpp@$LC"
  fi
fi
