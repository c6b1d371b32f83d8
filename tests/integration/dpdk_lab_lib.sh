# dpdk_lab_lib.sh: what the lab tests (dpdk_lab.sh, dpdk_lab_kafkajs.sh) share.
# Sourced after lib.sh and integ_init; SLUICED_DPDK set by the caller.
#   lab_start [SLUICED FLAGS...]  skip (77) without root / netns / veth / EAL,
#                                 else the lab up (tools/dpdk-lab.sh) and BOOT set
#   lab_stop_check IDLE           SIGTERM, clean stop logged, one DPDK queue line per
#                                 data core, at most IDLE flows held at stop; sets
#                                 BROKER_LOG to the copy in $WORK
# DPDK_LAB_CORES data cores (default 1), DPDK_LAB_FAULTS the seeded link faults.
LAB=$(cd "$(dirname "$0")/../.." && pwd)/tools/dpdk-lab.sh
export DPDK_LAB_NAME=sltest$$ SLUICED_DPDK SLUICED
CORES=${DPDK_LAB_CORES:-1}
lab_cleanup() {
	local rc=$?
	[ -f "/tmp/$DPDK_LAB_NAME.lab/broker.log" ] && cp "/tmp/$DPDK_LAB_NAME.lab/broker.log" "$WORK/broker.log" 2>/dev/null
	"$LAB" down >/dev/null 2>&1 || true
	# No exit here: it would end the EXIT trap before integ_cleanup (the broker log tail on a
	# failure, $WORK removed on a pass); integ_cleanup reads the status from $? and exits.
	(exit $rc)
}

lab_start() {
	trap 'lab_cleanup; integ_cleanup' EXIT
	[ "$(id -u)" = 0 ] || skip "cannot create network namespaces: not root"
	local out
	if ! out=$(ip netns add "$DPDK_LAB_NAME-p" 2>&1); then
		skip "cannot create network namespaces: $out"
	fi
	ip netns del "$DPDK_LAB_NAME-p"
	BROKER_LOG=/tmp/$DPDK_LAB_NAME.lab/broker.log
	# DPDK_LAB_FAULTS: the backend's seeded link faults (--dpdk-faults, test only)
	FAULTS=()
	[ -n "${DPDK_LAB_FAULTS:-}" ] && FAULTS=(--dpdk-faults "$DPDK_LAB_FAULTS")
	local up
	if ! up=$("$LAB" up --no-fsync --cores "$CORES" "${FAULTS[@]}" "$@" 2>&1); then
		if grep -q "cannot create network namespace\|cannot create a veth pair" <<<"$up"; then
			skip "cannot create network namespaces or a veth pair: $(grep -m1 'dpdk-lab:' <<<"$up")"
		fi
		if grep -q "EAL cannot start" <<<"$up"; then
			skip "DPDK's EAL cannot start here: $(grep -m1 'EAL cannot start' <<<"$up")"
		fi
		fail "the lab did not come up: $up"
	fi
	log "$up"
	# the kernel holds no address on the broker's end: every answer is the userspace stack's
	local addrs
	addrs=$(ip -n "$DPDK_LAB_NAME-s" -4 addr show | grep -c inet || true)
	[ "$addrs" -eq 1 ] || fail "the server namespace has $addrs IPv4 addresses, only lo's expected"
	BOOT=198.18.0.1:9092
}

lab_stop_check() {
	local idle=$1 pid
	pid=$(cat "/tmp/$DPDK_LAB_NAME.lab/pid")
	kill -TERM "$pid"
	for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && fail "sluiced-dpdk did not stop within 30 s of SIGTERM"
	cp "$BROKER_LOG" "$WORK/broker.log"
	BROKER_LOG=$WORK/broker.log
	grep -q "info .*stopped" "$BROKER_LOG" || fail "sluiced-dpdk did not log its clean stop"
	local queues held
	queues=$(grep -c "DPDK queue [0-9]*: rx" "$BROKER_LOG" || true)
	[ "$queues" -eq "$CORES" ] || fail "$queues of $CORES DPDK queues reported at stop"
	grep "DPDK queue" "$BROKER_LOG" | sed 's/^.*info  //' >&2
	# no flow leaked: the stack holds at most the flows of clients still connected
	# at the stop (FIN_WAIT_2 or TIME_WAIT)
	held=$(sed -n 's/.* \([0-9]*\) flows still held.*/\1/p' "$BROKER_LOG" | awk '{ s += $1 } END { print s + 0 }')
	[ "$held" -le "$idle" ] ||
		fail "$held TCP flows still held at stop (at most $idle clients were connected then)"
}
