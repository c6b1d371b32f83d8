#!/usr/bin/env bash
# Fresh Debian 12 to a full test run: installs dependencies, builds, and runs
# every test (unit, fuzz, integration with librdkafka and kafkajs, bench smoke), and
# compiles a release configuration into ./build-release.
# Extra arguments go to `meson test` (e.g. --suite unit).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
bash tools/build.sh
# A release configuration (-O3) must compile as well: its optimiser finds warnings
# (-Werror) that ./build's does not. Compile only; the tests run on ./build.
if [ -f build-release/build.ninja ]; then
	meson setup --reconfigure build-release --buildtype=release >/dev/null
else
	meson setup build-release --buildtype=release >/dev/null
fi
ninja -C build-release
meson test -C build --print-errorlogs --num-processes 2 "$@"
