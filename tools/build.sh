#!/usr/bin/env bash
# Configures (once) and builds sluice into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f build/build.ninja ]; then
	meson setup --reconfigure build >/dev/null
else
	meson setup build
fi
ninja -C build
