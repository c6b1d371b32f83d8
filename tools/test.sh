#!/usr/bin/env bash
# Fresh Debian 12 to a full test run: installs dependencies, builds, and runs
# every test (unit, fuzz, integration with librdkafka and kafkajs, bench smoke).
# Extra arguments go to `meson test` (e.g. --suite unit).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
bash tools/build.sh
meson test -C build --print-errorlogs --num-processes 2 "$@"
