#!/usr/bin/env bash
# Fresh Debian 12 to a running broker: installs dependencies, builds, and starts
# sluiced on 127.0.0.1:9092 with data under ./data. Extra arguments go to sluiced.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
bash tools/build.sh
exec ./build/dataplane/sluiced --listen 127.0.0.1:9092 --data ./data "$@"
