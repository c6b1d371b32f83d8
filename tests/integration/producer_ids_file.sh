#!/usr/bin/env bash
# producer_ids_file.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# DATA/__producer_ids at start-up (dataplane/control/pidfile.c): only the
# 16-byte record the broker writes is taken, and only for a block end it can
# write. Each case writes the file, then starts the broker:
#  1. a record with a good CRC for a negative block end: refused (before:
#     taken, and InitProducerId handed out producer id -5000);
#  2. a good record with a byte after it: refused as damaged (before: the
#     first 16 bytes were read and the rest ignored);
#  3. a block end with no room for another block below INT64_MAX: refused,
#     every id was issued (before: the first block's end overflowed int64);
#  4. a good record of 123000: the broker starts and InitProducerId hands out
#     123000, the first id past every id that file says may have been issued;
#  5. a block end with room for one last block: its 1,000 ids are handed out,
#     then InitProducerId for a new id (idempotent, and transactional) answers
#     UNKNOWN_SERVER_ERROR, as Kafka's coordinator does once its id manager
#     throws "Have exhausted all producerIds" (fatal, no retry helps), and the
#     broker says so in its log (before: COORDINATOR_LOAD_IN_PROGRESS, which
#     clients retry for ever, and no log line).
. "$(dirname "$0")/lib.sh"

integ_init producer-ids-file 53 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
CLIENT_DIR=$(cd "$(dirname "$0")" && pwd)

# pid_file END [EXTRA_HEX]: the record the broker writes for END (magic, big-endian
# int64, CRC32C of the 12 bytes before it), with EXTRA_HEX bytes after it.
pid_file() {
	"$PY" - "$CLIENT_DIR" "$DATA/__producer_ids" "$1" "${2:-}" <<'PY'
import struct, sys
sys.path.insert(0, sys.argv[1])
import bad_client as bc
b = b'SLPI' + struct.pack('>q', int(sys.argv[3]))
open(sys.argv[2], 'wb').write(b + struct.pack('>I', bc.crc32c(b)) + bytes.fromhex(sys.argv[4]))
PY
}

# refused WHY: the broker exits non-zero at start-up and says WHY.
refused() {
	local from=$(($(wc -l <"$BROKER_LOG" 2>/dev/null || echo 0) + 1)) rc=0
	timeout 60 "$SLUICED" --listen "$BOOTSTRAP" --data "$DATA" --no-fsync >>"$BROKER_LOG" 2>&1 || rc=$?
	[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "started (status $rc) on a __producer_ids that should be refused ($1)"
	tail -n +"$from" "$BROKER_LOG" | grep -q "$1" || fail "refused without saying '$1': $(tail -n +"$from" "$BROKER_LOG" | tail -n 3)"
	log "refused: $1"
}

pid_file -5000
refused "__producer_ids is not a block end the broker writes; refusing to start"
pid_file 123000 00
refused "__producer_ids is damaged; refusing to start"
pid_file $(( (1 << 63) - 1 - 1000 ))   # DP_PID_END_MAX: a block end the broker writes last
refused "every producer id was issued; refusing to start"

pid_file 123000
start_broker --no-fsync
cat >"$WORK/init.py" <<'PY'
import struct, sys
sys.path.insert(0, sys.argv[2])
import bad_client as bc
c = bc.Conn(int(sys.argv[1]))
r = bc.Reader(c.call(22, 1, struct.pack('>h', -1) + struct.pack('>i', 60000)))   # no transactional id
r.i32()
err, pid, epoch = r.i16(), r.i64(), r.i16()
if (err, pid, epoch) != (0, 123000, 0):
    sys.exit(f'InitProducerId: error {err}, id {pid}, epoch {epoch}; want 0, 123000, 0')
PY
guarded "$PY" "$WORK/init.py" "$PORT" "$CLIENT_DIR" || fail "InitProducerId after a good __producer_ids"
stop_broker

rm -rf "$DATA"
mkdir -p "$DATA"
last=$(( (1 << 63) - 1 - 2000 ))   # DP_PID_END_MAX - DP_PID_BLOCK: one block left
pid_file $last
from=$(($(wc -l <"$BROKER_LOG") + 1))
start_broker --no-fsync
cat >"$WORK/exhaust.py" <<'PY'
import struct, sys
sys.path.insert(0, sys.argv[2])
import bad_client as bc
c = bc.Conn(int(sys.argv[1]))
first = int(sys.argv[3])
def init(txn_id):
    tid = struct.pack('>h', -1) if txn_id is None else struct.pack('>h', len(txn_id)) + txn_id
    r = bc.Reader(c.call(22, 1, tid + struct.pack('>i', 60000)))
    r.i32()
    return r.i16(), r.i64(), r.i16()
for i in range(1000):
    got = init(None)
    if got != (0, first + i, 0):
        sys.exit(f'InitProducerId {i}: {got}, want (0, {first + i}, 0)')
for txn_id in (None, b'exhausted-txn'):
    err, pid, epoch = init(txn_id)
    if err != -1:
        sys.exit(f'InitProducerId ({txn_id}) past the last id: error {err} (id {pid}), want -1 UNKNOWN_SERVER_ERROR')
PY
guarded "$PY" "$WORK/exhaust.py" "$PORT" "$CLIENT_DIR" $last || fail "InitProducerId at the last block"
tail -n +"$from" "$BROKER_LOG" | grep -q "every producer id was issued (the last block ends at $((last + 1000)))" ||
	fail "no log line for the exhausted producer ids"
stop_broker
pass "negative, long and exhausted __producer_ids refused; a good one carries on; the last ids, then a fatal error"
