#!/usr/bin/env bash
# txn_epoch_wrap.sh SLUICED RDK_LOAD [SLUICE_DUMP]
#
# An epoch at the int16 limit in __transaction_state (a hostile or very old
# file: the broker itself never hands out more than 32766). Transactional id
# "wrap" opens a transaction (InitProducerId, AddOffsetsToTxn); with the
# broker stopped, every record of it in the log is rewritten to epoch 32767
# (CRCs fixed, so the file is sound). After a restart, a new InitProducerId
# for "wrap" must fence and abort the open transaction without wrapping the
# epoch, and, as Kafka does when the epoch is exhausted (KIP-360,
# prepareFenceProducerEpoch / prepareIncrementProducerEpoch), hand out a new
# producer id with epoch 0 (before: the fence bumped 32767 to -32768 and the
# answer carried the old id with a negative epoch). The new identity then
# commits a transaction, and after another restart it is still the one in
# the log. Before that, a request at epoch 32767 itself (a producer holding
# the file's epoch) is fenced: the broker never hands that epoch out.
. "$(dirname "$0")/lib.sh"

integ_init txn-epoch-wrap 54 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
CLIENT_DIR=$(cd "$(dirname "$0")" && pwd)

cat >"$WORK/txn.py" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
import admin_client as ac
import bad_client as bc
port, step = int(sys.argv[1]), sys.argv[3]
c = bc.Conn(port)
if step == 'zombie':   # a producer holding the rewritten epoch: fenced, its transaction not extended
    err, _ = ac.add_offsets_to_txn_v1(c, 'wrap', int(sys.argv[4]), 32767, 'wrap-group')
    sys.exit(0 if err == 47 else f'AddOffsetsToTxn at epoch 32767: error {err}, want 47 INVALID_PRODUCER_EPOCH')
pid, epoch = ac.retried('InitProducerId', lambda: ac.init_producer_id_v1(c, 'wrap'))
if step == 'open':
    ac.retried('AddOffsetsToTxn', lambda: ac.add_offsets_to_txn_v1(c, 'wrap', pid, epoch, 'wrap-group'))
    print(pid)
elif step == 'after':
    old = int(sys.argv[4])
    if pid == old or epoch != 0:
        sys.exit(f'InitProducerId at epoch 32767: id {pid} epoch {epoch}; want a new id (not {old}) with epoch 0')
    ac.retried('AddOffsetsToTxn', lambda: ac.add_offsets_to_txn_v1(c, 'wrap', pid, epoch, 'wrap-group'))
    ac.retried('EndTxn', lambda: ac.end_txn_v1(c, 'wrap', pid, epoch, True))
    print(pid)
else:   # 'again': the identity survived the restart, bumped once
    want = int(sys.argv[4])
    if (pid, epoch) != (want, 1):
        sys.exit(f'InitProducerId after the restart: id {pid} epoch {epoch}; want {want} epoch 1')
PY

start_broker --no-fsync
old=$("$PY" "$WORK/txn.py" "$PORT" "$CLIENT_DIR" open) || fail "open a transaction: $old"
stop_broker

# Every record of id $old: value version 1, producer id, epoch (txn/coord.c txn_meta_encode).
"$PY" - "$CLIENT_DIR" "$DATA/__transaction_state" "$old" <<'PY' || fail "rewriting the epoch"
import glob, struct, sys
sys.path.insert(0, sys.argv[1])
import bad_client as bc
pat = b'\x00\x01' + struct.pack('>q', int(sys.argv[3]))
n = 0
for path in glob.glob(sys.argv[2] + '/*.log'):
    b = bytearray(open(path, 'rb').read())
    pos = 0
    while pos + 61 <= len(b):
        end = pos + 12 + struct.unpack('>i', b[pos + 8:pos + 12])[0]
        i = b.find(pat, pos + 61, end)
        if i >= 0:
            b[i + 10:i + 12] = struct.pack('>h', 32767)
            b[pos + 17:pos + 21] = struct.pack('>I', bc.crc32c(bytes(b[pos + 21:end])))
            n += 1
        pos = end
    open(path, 'wb').write(b)
if n == 0:
    sys.exit('no record of the producer id found')
print(f'{n} record(s) rewritten', file=sys.stderr)
PY

from=$(($(wc -l <"$BROKER_LOG") + 1))
start_broker --no-fsync
guarded "$PY" "$WORK/txn.py" "$PORT" "$CLIENT_DIR" zombie "$old" || fail "the producer at epoch 32767"
new=$(guarded "$PY" "$WORK/txn.py" "$PORT" "$CLIENT_DIR" after "$old") || fail "after the rewrite: $new"
tail -n +"$from" "$BROKER_LOG" | grep -q "txn wrap: epoch 32767 is the last" ||
	fail "no log line for the exhausted epoch: $(tail -n +"$from" "$BROKER_LOG" | grep 'txn wrap' | head -n 3)"
stop_broker
start_broker --no-fsync
guarded "$PY" "$WORK/txn.py" "$PORT" "$CLIENT_DIR" again "$new" || fail "after a restart"
stop_broker
pass "an epoch of 32767 fenced without wrapping: a new producer id with epoch 0 ($old -> $new)"
