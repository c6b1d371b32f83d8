#!/usr/bin/env bash
# txn_init_retry.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# InitProducerId's new producer id or bumped epoch is the id's only once its
# __transaction_state record is durable, as Kafka applies a pending transition
# only then; a failed write leaves the id as it was, and the client is told
# COORDINATOR_NOT_AVAILABLE (retriable). The broker (test only,
# --fault-init-fail 2) fails the first two InitProducerId writes after each
# start, the first refused at the append and the second reported failed once
# durable. InitProducerId v3 (KIP-360) from a raw client:
#  1. a new id: refused, failed, then answered with epoch 0 (before: each
#     failed write had bumped the epoch in memory, and it answered epoch 2);
#  2. after a restart, the producer bumps its own epoch (its current id and
#     epoch in the request): refused, failed, and its retries with the same id and epoch
#     are still its own: answered epoch 1 (before: the failed bump was taken
#     as done, the retry's epoch was stale, and the producer was fenced);
#  3. after a restart the id is at that epoch: the next bump gives epoch 2.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-init-retry 75 "$@"
PY=$(command -v python3) || skip "python3 is not installed"
CLIENT_DIR=$(cd "$(dirname "$0")" && pwd)

# init_pid WANT... : InitProducerId v3 for "tir" with the id and epoch in $WORK/pid (none at first);
# the answers' errors must be WANT in turn (the last 0), and the id and epoch answered are kept.
init_pid() {
	cat >"$WORK/init.py" <<'PY'
import os, struct, sys
sys.path.insert(0, sys.argv[2])
import bad_client as bc
port, state, want = int(sys.argv[1]), sys.argv[3], [int(x) for x in sys.argv[4:]]
pid, epoch = (-1, -1)
if os.path.exists(state):
    pid, epoch = (int(x) for x in open(state).read().split())
c = bc.Conn(port)
for i, w in enumerate(want):
    body = bc.compact_str('tir') + struct.pack('>iqh', 60000, pid, epoch) + b'\x00'
    r = bc.Reader(c.call(22, 3, body, flexible=True))
    r.skip_tags()   # the response header's tagged fields
    r.i32()
    err, got_pid, got_epoch = r.i16(), r.i64(), r.i16()
    print(f'InitProducerId({pid}, {epoch}): error {err}, id {got_pid}, epoch {got_epoch}')
    if err != w:
        sys.exit(f'call {i + 1}: error {err}, want {w}')
    if err == 0:
        open(state, 'w').write(f'{got_pid} {got_epoch}\n')
        print(f'ANSWER {got_pid} {got_epoch}')
PY
	guarded "$PY" "$WORK/init.py" "$PORT" "$CLIENT_DIR" "$WORK/pid" "$@"
}
answered_epoch() { sed -n 's/^ANSWER [0-9]* \([0-9-]*\)$/\1/p' "$WORK/init.out" | tail -n 1; }

start_broker --cores 2 --fault-init-fail 2
init_pid 15 15 0 >"$WORK/init.out" || fail "a new id: $(cat "$WORK/init.out")"
[ "$(answered_epoch)" = 0 ] || fail "a new id after two failed writes answered epoch $(answered_epoch), want 0: $(cat "$WORK/init.out")"
pid1=$(awk '{print $1}' "$WORK/pid")
stop_broker
start_broker --cores 2 --fault-init-fail 2
init_pid 15 15 0 >"$WORK/init.out" || fail "the producer's own bump: $(cat "$WORK/init.out")"
[ "$(answered_epoch)" = 1 ] && [ "$(awk '{print $1}' "$WORK/pid")" = "$pid1" ] ||
	fail "the producer's own bump after two failed writes: $(cat "$WORK/init.out"), want id $pid1 epoch 1"
[ "$(grep -c "fault injection: the InitProducerId write of txn tir fails" "$BROKER_LOG")" -eq 4 ] ||
	fail "fault injection did not fire 4 times (2 per start): the test proved less than it says"
stop_broker
start_broker --cores 2
init_pid 0 >"$WORK/init.out" || fail "a bump after the restart: $(cat "$WORK/init.out")"
[ "$(answered_epoch)" = 2 ] || fail "after the restart the bump answered epoch $(answered_epoch), want 2: $(cat "$WORK/init.out")"
stop_broker
pass "failed InitProducerId writes left the id as it was; the retries carried on"
