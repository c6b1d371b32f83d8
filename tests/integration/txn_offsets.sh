#!/usr/bin/env bash
# txn_offsets.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXOFFS
#
# Transactional offsets (AddOffsetsToTxn + TxnOffsetCommit through
# librdkafka's rd_kafka_send_offsets_to_transaction): a consume-transform-
# produce loop reads 10 records per transaction from a 1-partition topic.
#  (a) commit, abort, commit, abort: the group's committed offset moved only
#      for the committed transactions (20), and is the same after a SIGKILL;
#  (b) commit, then one left open: the broker is SIGKILLed while it is open
#      (its offset staged, not committed); after the restart the staged
#      offset is still pending (not applied), and a new instance of the same
#      transactional id (which aborts the open transaction) resumes from 30
#      and commits 10 more: 40;
#  (c) KIP-447: offsets sent with the group metadata of another generation
#      (a zombie of an earlier rebalance) are refused with ILLEGAL_GENERATION
#      and move nothing; the next transaction commits them properly: 60.
. "$(dirname "$0")/lib.sh"
integ_init txn-offsets 45 "$@"
need_exe "$RDK_LOAD"
RDK_TXOFFS=$(abs_path "${4:-}")
need_exe "$RDK_TXOFFS"
IN=txo-in
OUT=txo-out
G=txo-g

committed_is() {
	guarded "$RDK_TXOFFS" committed --bootstrap "$BOOTSTRAP" --in "$IN" --group "$G" >"$WORK/c.out" 2>"$WORK/c.err" ||
		fail "committed exited $?: $(tail -n 3 "$WORK/c.err" | tr '\n' ';')"
	grep -qx "committed $1" "$WORK/c.out" || fail "$2: want committed $1, got $(cat "$WORK/c.out")"
	log "$2: committed $1"
}

run_plan() {   # NAME PLAN
	guarded "$RDK_TXOFFS" run --bootstrap "$BOOTSTRAP" --in "$IN" --out "$OUT" --group "$G" --txn-id txo \
		--per 10 --plan "$2" >"$WORK/$1.out" 2>"$WORK/$1.err" ||
		fail "$1 exited $?: $(grep -v '^%7' "$WORK/$1.err" | tail -n 5 | tr '\n' ';')"
}

start_broker --cores "${SLUICE_CORES:-2}"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$IN" --partitions 1 --count 100 \
	--size 20 --acks all >"$WORK/prod.log" 2>&1 || fail "rdk_load produce exited $?"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic "$OUT" --partitions 1 --count 1 \
	--size 20 --acks all >"$WORK/prod2.log" 2>&1 || fail "rdk_load produce (out) exited $?"

# (a)
run_plan p1 commit,abort,commit,abort
log "p1: $(tr '\n' ';' <"$WORK/p1.out")"
committed_is 20 "(a) after commit,abort,commit,abort"
kill9_broker
start_broker --cores "${SLUICE_CORES:-2}"
committed_is 20 "(a) after SIGKILL"

# (b)
"$RDK_TXOFFS" run --bootstrap "$BOOTSTRAP" --in "$IN" --out "$OUT" --group "$G" --txn-id txo \
	--per 10 --plan commit,open >"$WORK/p2.out" 2>"$WORK/p2.err" &
P2=$!
INTEG_CHILDREN="$P2"
for _ in $(seq 300); do
	grep -q OPEN "$WORK/p2.out" && break
	kill -0 "$P2" 2>/dev/null || fail "p2 exited: $(grep -v '^%7' "$WORK/p2.err" | tail -n 5 | tr '\n' ';')"
	sleep 0.1
done
grep -q OPEN "$WORK/p2.out" || fail "p2 never opened its second transaction"
log "p2: $(tr '\n' ';' <"$WORK/p2.out")"
kill9_broker
kill -KILL "$P2" 2>/dev/null
wait "$P2" 2>/dev/null
start_broker --cores "${SLUICE_CORES:-2}"
grep -q 'group coordinator: [0-9]* committed offsets loaded, 1 staged by transactions' "$BROKER_LOG" ||
	fail "the open transaction's staged offset was not reloaded: $(grep 'group coordinator' "$BROKER_LOG" | tail -n 1)"
grep -q '0 staged offset(s) of finished transactions resolved, 1 still pending' "$BROKER_LOG" ||
	fail "the open transaction's staged offset was resolved: $(grep 'staged offset' "$BROKER_LOG" | tail -n 1)"
run_plan p3 commit
log "p3: $(tr '\n' ';' <"$WORK/p3.out")"
grep -qx 'step 0 commit 40' "$WORK/p3.out" || fail "p3 did not resume from 30: $(cat "$WORK/p3.out")"
committed_is 40 "(b) after the open transaction was aborted by a new instance"
kill9_broker
start_broker --cores "${SLUICE_CORES:-2}"
committed_is 40 "(b) after SIGKILL"

# (c)
run_plan p4 commit,zombie,commit
log "p4: $(tr '\n' ';' <"$WORK/p4.out")"
grep -qx 'refused ILLEGAL_GENERATION' "$WORK/p4.out" || fail "(c) the zombie's offsets were not refused as ILLEGAL_GENERATION: $(cat "$WORK/p4.out")"
grep -qx 'step 2 commit 60' "$WORK/p4.out" || fail "(c) the zombie's records were not read again: $(cat "$WORK/p4.out")"
committed_is 60 "(c) after commit, zombie, commit"
stop_broker

# (d)
OFFS_DIR=$DATA/__consumer_offsets
[ "$(ls "$OFFS_DIR"/*.log | wc -l)" -eq 1 ] || fail "(d) expected one offsets segment: $(ls "$OFFS_DIR")"
"$SLUICE_DUMP" --records "$OFFS_DIR" >"$WORK/offs.dump" || fail "(d) sluice-dump exited $?"
# The last commit's offset writes: a batch with key version 1 (committed) and a value, then
# one with key version 2 (staged) and none. (A group membership record may follow them.)
cut_at=$(awk '/^  offset / { pos = $4 } /^    offset / { n++; p[n] = pos; k[n] = substr($6, 1, 6); v[n] = $8 }
	END { for (i = n - 1; i >= 1; i--) if (k[i] == "0x0001" && v[i] != "null" && k[i + 1] == "0x0002" && v[i + 1] == "null") { print p[i]; exit } }' \
	"$WORK/offs.dump")
[ -n "$cut_at" ] || fail "(d) no commit's offset writes in the log: $(tail -n 6 "$WORK/offs.dump" | tr '\n' ';')"
truncate -s "$cut_at" "$OFFS_DIR"/*.log
start_broker --cores "${SLUICE_CORES:-2}"
grep -q '1 staged offset(s) of finished transactions resolved, 0 still pending' "$BROKER_LOG" ||
	fail "(d) the staged offset was not resolved at start: $(grep 'staged offset' "$BROKER_LOG" | tail -n 1)"
committed_is 60 "(d) after losing the commit's offset writes"
kill9_broker
start_broker --cores "${SLUICE_CORES:-2}"
committed_is 60 "(d) after another SIGKILL"
stop_broker
pass "offsets moved only with committed transactions, across two crashes; a zombie generation was refused; staged offsets resolved at start"
