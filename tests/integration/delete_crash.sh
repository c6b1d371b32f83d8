#!/usr/bin/env bash
# delete_crash.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# A topic delete is all or nothing across a crash. A 16-partition topic (both
# data cores of --cores 3) holds records; DeleteTopics runs with the broker's
# test-only --fault-delete-kill, which SIGKILLs it
#  - mid-delete: after a data core removed one of the topic's partitions
#    (before: the restart recovered the topic from the partitions left, the
#    removed ones came back empty beside others still holding their records);
#  - after-intent: once the delete's record is durable, before any partition
#    is touched.
# After each restart the topic must be gone entirely: not recovered, no
# directory of it left, Metadata does not know it; re-created with the same
# name, every partition is empty (the first append lands at offset 0).
# A deleted partition's directory goes into the core's trash (DATA/.trash/<core>,
# storage/trash.h), emptied by io_uring unlinks after the delete is answered: a
# restart empties what a kill left there, and nothing of the topic stays on disk.
# Last, a delete of a topic one of whose partitions failed to open (its
# segment is a directory) removes that partition's directory too (before:
# only an rmdir, which failed on its files, and a restart brought the topic
# back).
. "$(dirname "$0")/lib.sh"

integ_init delete-crash 53 "$@"
need_exe "$RDK_LOAD"
PY=$(command -v python3) || skip "python3 is not installed"
CLIENT_DIR=$(cd "$(dirname "$0")" && pwd)
PARTS=16
CORES=3

wait_broker_death() {
	local deadline=$((SECONDS + 30)) rc
	while broker_alive && ((SECONDS < deadline)); do sleep 0.1; done
	broker_alive && fail "$1: the broker did not kill itself within 30 s (fault point never reached?)"
	wait "$BROKER_PID" 2>/dev/null
	rc=$?
	BROKER_PID=
	[ "$rc" -eq 137 ] || fail "$1: broker exited with status $rc, want 137 (SIGKILL)"
	tail -n +"$2" "$BROKER_LOG" | grep -q "fault injection: SIGKILL $1" ||
		fail "$1: no 'fault injection: SIGKILL $1' line in the broker log"
}

# The trash holds nothing but the cores' own directories within 20 s ($1: where).
trash_emptied() {
	local deadline=$((SECONDS + 20))
	while [ -n "$(find "$DATA/.trash" -mindepth 2 2>/dev/null | head -n 1)" ]; do
		((SECONDS < deadline)) || fail "$1: the trash still holds $(find "$DATA/.trash" -mindepth 2 | head -n 3)"
		sleep 0.1
	done
}

# Every partition of topic $1: Produce one record, want error $2 (0 NONE, 3 UNKNOWN_TOPIC_OR_PARTITION)
# and, with NONE, base offset $3.
cat >"$WORK/check.py" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
import bad_client as bc
port, topic, parts, want_err, want_base = int(sys.argv[1]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
for p in range(parts):
    err, base = bc.produce_error(port, topic, p, bc.batch_v2(1))
    if err != want_err:
        sys.exit(f'{topic}/{p}: error {err}, want {want_err}')
    if err == 0 and base != want_base:
        sys.exit(f'{topic}/{p}: appended at {base}, want {want_base}')
PY

for point in mid-delete after-intent; do
	topic="doomed-${point%%-*}"
	start_broker --cores $CORES --no-auto-create
	out=$("$PY" "$CLIENT_DIR/admin_client.py" create "$PORT" 1 $PARTS "$topic") || fail "$point: create: $out"
	[ "$out" = "$topic-0 0" ] || fail "$point: create answered: $out"
	guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$topic-0" --partitions $PARTS --count 1600 \
		--size 100 --acks all >"$WORK/p-$point.txt" || fail "$point: produce"
	stop_broker
	n=$(find "$DATA" -maxdepth 1 -name "$topic-0-*" | wc -l)
	[ "$n" -eq $PARTS ] || fail "$point: $n partition directories before the delete, want $PARTS"

	from=$(($(wc -l <"$BROKER_LOG") + 1))
	start_broker --cores $CORES --no-auto-create --fault-delete-kill "$point"
	"$PY" "$CLIENT_DIR/admin_client.py" delete "$PORT" "$topic" 0 1 >"$WORK/del-$point.txt" 2>&1 &
	INTEG_CHILDREN=$!
	wait_broker_death "$point" "$from"
	wait "$INTEG_CHILDREN" 2>/dev/null
	INTEG_CHILDREN=
	left=$(find "$DATA" -maxdepth 1 -name "$topic-0-*" | wc -l)
	log "$point: killed with $left of $PARTS partition directories left"

	from=$(($(wc -l <"$BROKER_LOG") + 1))
	start_broker --cores $CORES --no-auto-create
	tail -n +"$from" "$BROKER_LOG" >"$WORK/start-$point.log"
	! grep -q "recovered topic $topic-0 " "$WORK/start-$point.log" ||
		fail "$point: the topic came back: $(grep "recovered topic $topic-0 " "$WORK/start-$point.log")"
	left=$(find "$DATA" -maxdepth 1 -name "$topic-0*" | wc -l)
	[ "$left" -eq 0 ] || fail "$point: entries of the deleted topic left: $(ls "$DATA" | grep "$topic")"
	trash_emptied "$point: after the restart"
	guarded "$PY" "$WORK/check.py" "$PORT" "$CLIENT_DIR" "$topic-0" $PARTS 3 0 || fail "$point: the topic still answers"
	out=$("$PY" "$CLIENT_DIR/admin_client.py" create "$PORT" 1 $PARTS "$topic") || fail "$point: re-create: $out"
	[ "$out" = "$topic-0 0" ] || fail "$point: re-create answered: $out"
	guarded "$PY" "$WORK/check.py" "$PORT" "$CLIENT_DIR" "$topic-0" $PARTS 0 0 || fail "$point: the re-created topic is not empty"
	stop_broker
done

start_broker --cores $CORES --no-auto-create
out=$("$PY" "$CLIENT_DIR/admin_client.py" create "$PORT" 1 2 broken) || fail "create broken: $out"
stop_broker
seg=$(find "$DATA/broken-0-1" -name '*.log' | head -n 1)
[ -n "$seg" ] || fail "no segment in broken-0-1"
rm "$seg" && mkdir "$seg" && echo x >"$seg/stray"
from=$(($(wc -l <"$BROKER_LOG") + 1))
start_broker --cores $CORES --no-auto-create
# The port is up before every data core has opened its partitions (core 0 also runs the
# control role): wait for the line.
for _ in $(seq 300); do
	tail -n +"$from" "$BROKER_LOG" | grep -q "partition broken-0/1: cannot open" && break
	sleep 0.1
done
tail -n +"$from" "$BROKER_LOG" | grep -q "partition broken-0/1: cannot open" || fail "broken-0/1 opened"
out=$("$PY" "$CLIENT_DIR/admin_client.py" delete "$PORT" broken 0 1) || fail "delete broken: $out"
[ "$out" = "broken-0 0" ] || fail "delete broken answered: $out"
left=$(find "$DATA" -maxdepth 1 -name "broken-0*" | wc -l)
[ "$left" -eq 0 ] || fail "entries of the deleted topic broken-0 left: $(ls "$DATA" | grep broken)"
stop_broker
from=$(($(wc -l <"$BROKER_LOG") + 1))
start_broker --cores $CORES --no-auto-create
! tail -n +"$from" "$BROKER_LOG" | grep -q "recovered topic broken-0 " || fail "broken-0 came back after its delete"
trash_emptied "the last start"
stop_broker
pass "a delete killed mid-way or after its record leaves the topic gone, and a re-create empty; a partition that failed to open goes too"
