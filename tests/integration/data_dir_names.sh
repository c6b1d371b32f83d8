#!/usr/bin/env bash
# data_dir_names.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# The start-up scan of the data directory takes a directory for a partition
# only under the name the broker writes (TOPIC-P, P decimal without sign or
# leading zero: dataplane/loop/names.c); any other name with a '-' is logged
# and skipped, and the broker starts:
#  - "orders-05", "orders-+3", "orders-00" (before: strtol read them as
#    orders/5, /3 and /0, so orders grew to 6 partitions and a stray copy could
#    be opened as the real partition's log);
#  - "__consumer_offsets-0" (before: a user topic named after a coordinator log);
#  - "plain-2", a regular file (before: opened as partition plain/2's log).
# The real partition orders-0 keeps its records, and orders has 1 partition.
. "$(dirname "$0")/lib.sh"

integ_init data-dir-names 52 "$@"
need_exe "$RDK_LOAD"
PY=$(command -v python3) || skip "python3 is not installed"
CLIENT_DIR=$(cd "$(dirname "$0")" && pwd)

start_broker --cores "${SLUICE_CORES:-2}" --no-fsync
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic orders --partitions 1 --count 100 --size 100 --acks all >"$WORK/p.txt" ||
	fail "produce to orders"
stop_broker
[ -d "$DATA/orders-0" ] || fail "no orders-0 after the produce"

cp -r "$DATA/orders-0" "$DATA/orders-05"   # a stray copy under a second name for the same number
mkdir "$DATA/orders-+3" "$DATA/orders-00" "$DATA/__consumer_offsets-0"
echo not a log >"$DATA/plain-2"
from=$(($(wc -l <"$BROKER_LOG") + 1))
start_broker --cores "${SLUICE_CORES:-2}" --no-fsync
tail -n +"$from" "$BROKER_LOG" >"$WORK/start.log"
for name in orders-05 orders-+3 orders-00 __consumer_offsets-0 plain-2; do
	grep -q "/$name skipped: " "$WORK/start.log" || fail "no 'skipped' line for $name: $(grep -i "$name\|recovered" "$WORK/start.log" | head -n 5)"
done
grep -q "recovered topic orders with 1 partitions" "$WORK/start.log" ||
	fail "orders not recovered with 1 partition: $(grep recovered "$WORK/start.log")"
! grep -q "recovered topic __consumer_offsets\|recovered topic plain" "$WORK/start.log" ||
	fail "a skipped name became a topic: $(grep recovered "$WORK/start.log")"

# On the wire: orders/3 and orders/5 do not exist, orders/0 still holds its 100 records.
cat >"$WORK/produce.py" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
import bad_client as bc
port = int(sys.argv[1])
for p, want in ((0, 0), (3, 3), (5, 3)):   # NONE, UNKNOWN_TOPIC_OR_PARTITION
    err, base = bc.produce_error(port, 'orders', p, bc.batch_v2(1))
    if err != want:
        sys.exit(f'orders/{p}: error {err}, want {want}')
    if p == 0 and base != 100:
        sys.exit(f'orders/0: appended at {base}, want 100 (the partition kept its 100 records)')
PY
guarded "$PY" "$WORK/produce.py" "$PORT" "$CLIENT_DIR" || fail "Produce answers"
stop_broker
pass "non-canonical, internal and non-directory names skipped, orders intact"
