#!/usr/bin/env bash
# txn_basic.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN
#
# librdkafka transactions across 2 topics x 3 partitions (on both shard cores
# of --cores 3): a committed transaction is seen whole by read_committed; an
# aborted one (flushed first, so its batches are in the log) is invisible to
# read_committed and fully visible to read_uncommitted; a later commit by a
# new instance of the same transactional.id is visible again. The consumers
# check each record's exact offset (from the producer's delivery reports).
# TXN_BASIC_CREDITS=N runs the broker with --test-xmsg-credits N (test only):
# with N=2 the coordinator's partition grants and markers, and the clients'
# produces and fetches, are refused for credit toward the owner cores and
# sent again (coordinator) or retried (clients); the outcome must not change.
# SLUICE_CORES and SLUICE_CONTROL (--control-core) choose the layout.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/txn_lib.sh"
txn_init txn-basic 30 "$@"
TOPICS=tb1,tb2
OUT=$WORK/produced.txt

BROKER_ARGS=(--cores "${SLUICE_CORES:-3}")
[ -z "${SLUICE_CONTROL:-}" ] || BROKER_ARGS+=(--control-core "$SLUICE_CONTROL")
[ -z "${TXN_BASIC_CREDITS:-}" ] || BROKER_ARGS+=(--test-xmsg-credits "$TXN_BASIC_CREDITS")
start_broker "${BROKER_ARGS[@]}"
txn_run prod1 "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id tb --topics "$TOPICS" \
	--partitions 3 --count 20 --tag one --plan commit,abort --out "$OUT" --create ||
	fail "producer 1 (commit, abort) exited $?: $(txn_show prod1)"
log "producer 1: $(grep -c . "$OUT") records; $(grep '^txn' "$WORK/prod1.out" | tr '\n' ';')"
expect_lines "$OUT" commit >"$WORK/exp-c1"
expect_lines "$OUT" commit abort >"$WORK/exp-all1"
[ -s "$WORK/exp-c1" ] && [ "$(wc -l <"$WORK/exp-all1")" -eq 240 ] || fail "want 120 + 120 records in $OUT"
consume_check rc1 committed "$WORK/exp-c1" "$TOPICS" 3
consume_check ru1 uncommitted "$WORK/exp-all1" "$TOPICS" 3

txn_run prod2 "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id tb --topics "$TOPICS" \
	--partitions 3 --count 10 --tag two --plan commit --out "$OUT" ||
	fail "producer 2 (commit) exited $?: $(txn_show prod2)"
expect_lines "$OUT" commit >"$WORK/exp-c2"
expect_lines "$OUT" commit abort >"$WORK/exp-all2"
consume_check rc2 committed "$WORK/exp-c2" "$TOPICS" 3
consume_check ru2 uncommitted "$WORK/exp-all2" "$TOPICS" 3
cores=$(grep -oE 'partition tb[12]/[0-9]+ opened on core [0-9]+' "$BROKER_LOG" | awk '{print $NF}' | sort -u | tr '\n' ' ')
log "partitions opened on cores: $cores"
# The layout the broker reports ("N cores: D data"); TXN_BASIC_DATA_CORES=D says what it must be.
ndata=$(grep -oE 'cores: [0-9]+ data' "$BROKER_LOG" | head -1 | awk '{print $2}')
log "data cores: $ndata"
[ -z "${TXN_BASIC_DATA_CORES:-}" ] || [ "$ndata" = "$TXN_BASIC_DATA_CORES" ] ||
	fail "want $TXN_BASIC_DATA_CORES data cores at --cores ${SLUICE_CORES:-3}${SLUICE_CONTROL:+ --control-core $SLUICE_CONTROL}, the broker has ${ndata:-none}"
[ "${ndata:-0}" -lt 2 ] || [ "$(wc -w <<<"$cores")" -ge 2 ] || fail "partitions not on two or more shard cores: $cores"
stop_broker
if [ -n "${TXN_BASIC_CREDITS:-}" ]; then
	refused=$(sed -n 's/.* \([0-9]*\) cross-core requests refused for credit.*/\1/p' "$BROKER_LOG" |
		awk '{s += $1} END {print s + 0}')
	again=$(grep -c 'is sent again every' "$BROKER_LOG")
	log "$refused requests refused for credit; $again coordinator lines of grants or markers sent again"
	[ "$refused" -gt 0 ] && [ "$again" -gt 0 ] ||
		fail "credit ${TXN_BASIC_CREDITS}: want refusals, also of the coordinator's grants or markers"
fi
pass "commit, abort, commit across 2 topics x 3 partitions"
