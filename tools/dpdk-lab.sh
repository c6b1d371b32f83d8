#!/usr/bin/env bash
# dpdk-lab.sh: a two-namespace veth lab for sluiced-dpdk (issue 13). As root.
#
#   tools/dpdk-lab.sh up [--socket] [SLUICED FLAGS...]   make the lab, start the broker
#   tools/dpdk-lab.sh exec CMD...                         run CMD in the client namespace,
#                                                         SLUICE_BOOTSTRAP set
#   tools/dpdk-lab.sh down                                stop the broker, remove the lab
#   tools/dpdk-lab.sh status                              the broker's pid, log and counters
#   tools/dpdk-lab.sh ab [ROUNDS [COUNT [SIZE]]]           DPDK vs socket over this veth, A B A B:
#                                                         produce (acks=all, idempotent) and consume
#                                                         MiB/s and the broker's CPU s per GiB
#
# Two namespaces NAME-s (server) and NAME-c (client) joined by one veth pair;
# nothing else is attached, so no frame leaves them. The client end has
# 198.18.0.2/24 (RFC 2544's benchmark range). The server end has NO address
# and IPv6 off, so the kernel never answers on it: sluiced-dpdk drives it
# through DPDK's net_af_packet vdev with its own ARP/IPv4/TCP on 198.18.0.1.
# With --socket the same lab runs the socket sluiced instead, the address on
# the server end (the A/B against the kernel's TCP over the same veth).
#
# DPDK in a container: --no-huge -m MB (no hugepages needed), --no-shconf and a
# --file-prefix of the lab's name (no shared runtime files, so several labs run
# side by side; --in-memory is refused with --no-huge),
# --no-pci (no device scan), -l on one lcore (the data cores are the broker's
# own threads, not EAL lcores). The client end has checksum offload, TSO and
# GSO off, and the server end GRO off: the PMD reads frames from a packet
# socket as the kernel holds them, and our stack checks every checksum and
# takes frames of at most one MTU.
#
# One data core per queue: net_af_packet's qpairs=N spreads flows over the
# queues by the kernel's flow hash (PACKET_FANOUT_HASH), so a flow's packets
# always reach the core that owns its connection. The lab passes
# qpairs=<data cores>; the default run is --cores 1 (one queue).
#
# Environment: DPDK_LAB_NAME (default sluicelab; the state dir is
# /tmp/DPDK_LAB_NAME.lab), SLUICED_DPDK / SLUICED (binaries; default the build
# dir's), DPDK_LAB_PORT (9092), DPDK_LAB_MEM_MB (512), DPDK_LAB_DRIVER
# (net_af_packet or net_af_xdp).
set -euo pipefail
NAME=${DPDK_LAB_NAME:-sluicelab}
STATE=/tmp/$NAME.lab
NS_S=$NAME-s
NS_C=$NAME-c
# interface names are at most 15 bytes
IF_S=$(printf '%.12s' "$NAME")s0
IF_C=$(printf '%.12s' "$NAME")c0
SRV_IP=198.18.0.1
CLI_IP=198.18.0.2
PORT=${DPDK_LAB_PORT:-9092}
MEM_MB=${DPDK_LAB_MEM_MB:-512}
DRIVER=${DPDK_LAB_DRIVER:-net_af_packet}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SLUICED_DPDK=${SLUICED_DPDK:-$ROOT/build/dataplane/sluiced-dpdk}
SLUICED=${SLUICED:-$ROOT/build/dataplane/sluiced}

die() { echo "dpdk-lab: $*" >&2; exit 1; }

# flag value from the broker's flags (--cores N), or $2
flag() {
	local want=$1 def=$2 prev=""
	shift 2
	for a in "$@"; do
		[ "$prev" = "$want" ] && { echo "$a"; return; }
		prev=$a
	done
	echo "$def"
}

lab_down() {
	if [ -f "$STATE/pid" ]; then
		local pid
		pid=$(cat "$STATE/pid")
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid" 2>/dev/null || true
			for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			kill -KILL "$pid" 2>/dev/null || true
		fi
		rm -f "$STATE/pid"
	fi
	# deleting a namespace deletes the veth end in it, and with it the pair
	ip netns del "$NS_S" 2>/dev/null || true
	ip netns del "$NS_C" 2>/dev/null || true
}

lab_up() {
	local mode=dpdk
	if [ "${1:-}" = --socket ]; then mode=socket; shift; fi
	[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
	[ -e "$STATE/pid" ] && die "lab $NAME is up already ($STATE); down first"
	mkdir -p "$STATE"
	rm -rf "$STATE/data"
	mkdir -p "$STATE/data"
	ip netns add "$NS_S" || die "cannot create network namespace $NS_S"
	ip netns add "$NS_C" || { lab_down; die "cannot create network namespace $NS_C"; }
	ip link add "$IF_S" netns "$NS_S" type veth peer name "$IF_C" netns "$NS_C" ||
		{ lab_down; die "cannot create a veth pair"; }
	ip -n "$NS_C" link set lo up
	ip -n "$NS_C" addr add "$CLI_IP/24" dev "$IF_C"
	ip -n "$NS_C" link set "$IF_C" up
	ip -n "$NS_S" link set lo up
	ip netns exec "$NS_S" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || true
	ip netns exec "$NS_C" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || true
	ip -n "$NS_S" link set "$IF_S" up
	if command -v ethtool >/dev/null; then
		ip netns exec "$NS_C" ethtool -K "$IF_C" tx off tso off gso off >/dev/null 2>&1 || true
		ip netns exec "$NS_S" ethtool -K "$IF_S" gro off rx off >/dev/null 2>&1 || true
	else
		echo "dpdk-lab: no ethtool: the client end keeps its offloads (checksums may be left to hardware)" >&2
	fi
	local cores
	cores=$(flag --cores 1 "$@")
	local listen="$SRV_IP:$PORT"
	local cmd
	if [ "$mode" = dpdk ]; then
		[ -x "$SLUICED_DPDK" ] || { lab_down; die "no $SLUICED_DPDK (built only where meson finds libdpdk)"; }
		local vdev
		if [ "$DRIVER" = net_af_xdp ]; then
			vdev="net_af_xdp0,iface=$IF_S,queue_count=$cores"
		else
			vdev="net_af_packet0,iface=$IF_S,qpairs=$cores"
		fi
		local eal="-l 0 --no-huge -m $MEM_MB --no-shconf --file-prefix $NAME --no-pci --no-telemetry --vdev $vdev --log-level=*:notice"
		cmd=("$SLUICED_DPDK" --nic dpdk --dpdk-eal "$eal" --ip "$SRV_IP/24" --listen "$listen")
	else
		ip -n "$NS_S" addr add "$SRV_IP/24" dev "$IF_S"
		cmd=("$SLUICED" --listen "$listen")
	fi
	# --cores 1 unless the flags say otherwise (one queue: see the top)
	local extra=()
	[ "$(flag --cores "" "$@")" = "" ] && extra=(--cores 1)
	echo "$mode" >"$STATE/mode"
	ip netns exec "$NS_S" "${cmd[@]}" --data "$STATE/data" "${extra[@]}" "$@" \
		>"$STATE/broker.log" 2>&1 &
	echo $! >"$STATE/pid"
	for _ in $(seq 1 600); do
		grep -q "listening on" "$STATE/broker.log" && break
		kill -0 "$(cat "$STATE/pid")" 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -q "listening on" "$STATE/broker.log"; then
		echo "dpdk-lab: the broker did not start; its log:" >&2
		tail -20 "$STATE/broker.log" >&2
		lab_down
		exit 3
	fi
	echo "SLUICE_BOOTSTRAP=$listen"
}

lab_exec() {
	[ -e "$STATE/pid" ] || die "lab $NAME is not up"
	exec ip netns exec "$NS_C" env SLUICE_BOOTSTRAP="$SRV_IP:$PORT" "$@"
}

# CPU seconds (user + system) the broker has used so far
broker_cpu_s() {
	awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$(cat "$STATE/pid")/stat"
}

# A B A B: each round brings the lab up in one mode, produces and consumes
# with rdk_load (RDK_LOAD: default the build dir's), and takes it down.
lab_ab() {
	local rounds=${1:-2} count=${2:-200000} size=${3:-1024}
	local rdk=${RDK_LOAD:-$ROOT/build/tests/integration/rdk_load}
	[ -x "$rdk" ] || die "no $rdk"
	local mib
	mib=$(awk -v c="$count" -v s="$size" 'BEGIN { printf "%.1f", c * s / 1048576 }')
	echo "# $rounds rounds of $count x $size B ($mib MiB), --no-fsync --cores 1, A=dpdk B=socket"
	for r in $(seq 1 "$rounds"); do
		for mode in dpdk socket; do
			local up=()
			[ "$mode" = socket ] && up=(--socket)
			lab_up "${up[@]}" --no-fsync >/dev/null
			local p c cpu
			p=$(ip netns exec "$NS_C" "$rdk" produce --bootstrap "$SRV_IP:$PORT" --topic ab --partitions 6 \
				--count "$count" --size "$size" --acks all --idempotent --timeout-ms 240000 2>&1 | tail -1)
			local cpu_p
			cpu_p=$(broker_cpu_s)
			c=$(ip netns exec "$NS_C" "$rdk" consume --bootstrap "$SRV_IP:$PORT" --topic ab --partitions 6 \
				--expect "$count" --timeout 240 2>&1 | tail -1)
			cpu=$(broker_cpu_s)
			lab_down
			local ps cs
			ps=$(sed -n 's/.* in \([0-9.]*\) s .*/\1/p' <<<"$p")
			cs=$(sed -n 's/.* in \([0-9.]*\) s: OK$/\1/p' <<<"$c")
			[ -n "$ps" ] && [ -n "$cs" ] || die "round $r $mode failed: $p / $c"
			awk -v r="$r" -v m="$mode" -v mib="$mib" -v ps="$ps" -v cs="$cs" -v cp="$cpu_p" -v ca="$cpu" \
				'BEGIN { printf "round %s %-6s produce %7.1f MiB/s  consume %7.1f MiB/s  broker CPU %5.1f s/GiB produced, %5.1f s/GiB in all\n",
				         r, m, mib / ps, mib / cs, cp * 1024 / mib, ca * 1024 / mib }'
		done
	done
}

case "${1:-}" in
up) shift; lab_up "$@" ;;
exec) shift; lab_exec "$@" ;;
down) lab_down; rm -rf "$STATE" ;;
ab) shift; lab_ab "$@"; rm -rf "$STATE" ;;
status)
	[ -e "$STATE/pid" ] || die "lab $NAME is not up"
	echo "mode $(cat "$STATE/mode"), pid $(cat "$STATE/pid"), log $STATE/broker.log"
	ip -n "$NS_C" -s link show "$IF_C"
	;;
*) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
