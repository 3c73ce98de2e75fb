#!/usr/bin/env bash
# Builds the page's wasm module into examples/web/pkg (release: the net trains in the browser).
# Needs the wasm32-unknown-unknown target and wasm-bindgen-cli of the version in Cargo.lock;
# installs either where it is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=$(grep -A1 '^name = "wasm-bindgen"$' Cargo.lock | sed -n 's/^version = "\(.*\)"$/\1/p')
if ! rustup target list --installed | grep wasm32-unknown-unknown >/dev/null; then
  rustup target add wasm32-unknown-unknown
fi
if [ "$(wasm-bindgen --version 2>/dev/null | cut -d' ' -f2)" != "$version" ]; then
  echo "== installing wasm-bindgen-cli $version"
  cargo install wasm-bindgen-cli --version "$version"
fi
cargo build -p bnn-web --release --target wasm32-unknown-unknown
target=${CARGO_TARGET_DIR:-target}
wasm-bindgen --target web --no-typescript --out-dir examples/web/pkg \
  "$target/wasm32-unknown-unknown/release/bnn_web.wasm"
echo "built examples/web/pkg: serve examples/web (python3 -m http.server -d examples/web) and open it"
