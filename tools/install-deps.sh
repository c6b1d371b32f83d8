#!/usr/bin/env bash
# Installs everything sluice needs to build and test on Debian 12 (run as root).
# Broker: meson, ninja, a C compiler, liburing, xxHash, the codecs Kafka batches
# use (zlib, snappy, lz4, zstd: checked on produce), ISA-L (CRC-32C); DPDK is probed for the
# later userspace-TCP backend. Tests: CUnit, librdkafka, clang's libFuzzer,
# Node.js + npm (kafkajs is installed by its test from the npm registry), python3;
# librdkafka 2.0.2's own test suite (tests/rdkafka-suite) fetches its source with
# `apt-get source` (dpkg-dev unpacks it, with xz) and builds it with g++ (in
# build-essential) against zlib and zstd; its stats test checks JSON with RapidJSON.
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
	echo "install-deps: run as root (or: sudo bash $0)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
pkgs=(build-essential meson ninja-build pkg-config python3
      liburing-dev libxxhash-dev libdpdk-dev
      zlib1g-dev libsnappy-dev liblz4-dev libzstd-dev libisal-dev
      libcunit1-dev librdkafka-dev clang libclang-rt-dev
      procps iproute2 ethtool kcat
      dpkg-dev xz-utils debian-archive-keyring rapidjson-dev)
# Node.js: keep one that is already there (e.g. from NodeSource, which bundles npm).
command -v node >/dev/null || pkgs+=(nodejs)
command -v npm >/dev/null || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	apt-get update
	apt-get install -y --no-install-recommends "${missing[@]}"
fi
