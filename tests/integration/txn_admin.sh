#!/usr/bin/env bash
# txn_admin.sh SLUICED RDK_LOAD SLUICE_DUMP SLUICE_ADMIN
# KIP-664 hanging transactions with sluice-admin: a librdkafka producer opens
# a transaction on tx-0, produces and flushes, and then never commits. The
# test checks that `transactions --older-than-ms 0` lists it as Ongoing, that
# `producers` shows it with a current txn start offset, that a read_committed
# consumer is held at that offset (the LSO), and that `abort-transaction`
# writes an ABORT marker after which the consumer reads past it: the
# committed record produced behind the open transaction, none of the
# transaction's own. The producer helper is compiled from the here-document
# below (needs cc and librdkafka's pkg-config; otherwise skipped, 77).
. "$(dirname "$0")/lib.sh"
integ_init txn-admin 37 "$@"
ADMIN=$(abs_path "${4:-}")
need_exe "$ADMIN"
command -v kcat >/dev/null || skip "kcat is not installed"
command -v "${CC:-cc}" >/dev/null && pkg-config --exists rdkafka || skip "no C compiler or librdkafka pkg-config"

cat >"$WORK/txn_open.c" <<'EOF'
/* txn_open BOOTSTRAP TOPIC TXN_ID COUNT: produce COUNT records to partition 0
 * in a transaction that is never ended; print "open" once all are acked. */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static int failed;
static void dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *o) { failed += m->err != 0; }
static void chk(rd_kafka_error_t *e, const char *what)
{
	if (e) {
		fprintf(stderr, "txn_open: %s: %s\n", what, rd_kafka_error_string(e));
		exit(1);
	}
}
int main(int argc, char **argv)
{
	char err[512];
	if (argc != 5)
		return 2;
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	if (rd_kafka_conf_set(c, "bootstrap.servers", argv[1], err, sizeof(err)) ||
	    rd_kafka_conf_set(c, "transactional.id", argv[3], err, sizeof(err)) ||
	    rd_kafka_conf_set(c, "transaction.timeout.ms", "600000", err, sizeof(err))) {
		fprintf(stderr, "txn_open: %s\n", err);
		return 2;
	}
	rd_kafka_conf_set_dr_msg_cb(c, dr);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "txn_open: %s\n", err);
		return 2;
	}
	chk(rd_kafka_init_transactions(rk, 30000), "init_transactions");
	chk(rd_kafka_begin_transaction(rk), "begin_transaction");
	for (int i = 0, n = atoi(argv[4]); i < n; i++) {
		char v[32];
		int len = snprintf(v, sizeof(v), "open-%d", i);
		if (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(argv[2]), RD_KAFKA_V_PARTITION(0), RD_KAFKA_V_VALUE(v, (size_t)len),
		                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END))
			return 1;
	}
	if (rd_kafka_flush(rk, 30000) || failed) {
		fprintf(stderr, "txn_open: flush timed out or %d deliveries failed\n", failed);
		return 1;
	}
	printf("open\n");
	fflush(stdout);
	for (;;)
		pause();   /* never commit: the transaction hangs until the test kills us */
}
EOF
# shellcheck disable=SC2046
"${CC:-cc}" -O1 -o "$WORK/txn_open" "$WORK/txn_open.c" $(pkg-config --cflags --libs rdkafka) ||
	fail "cannot compile the producer helper"

TOPIC=hang
TXN_ID=admin-hang
OPEN_COUNT=5
start_broker --cores "${SLUICE_CORES:-3}"

# Committed records before; kcat (not transactional) on partition 0.
printf 'before-0\nbefore-1\n' | kcat -b "$BOOTSTRAP" -P -t "$TOPIC" -p 0 || fail "kcat produce (before) failed"

"$WORK/txn_open" "$BOOTSTRAP" "$TOPIC" "$TXN_ID" "$OPEN_COUNT" >"$WORK/open.out" 2>"$WORK/open.err" &
OPEN_PID=$!
INTEG_CHILDREN="${INTEG_CHILDREN:-} $OPEN_PID"
for ((i = 0; i < 150; i++)); do
	grep -q '^open$' "$WORK/open.out" && break
	kill -0 "$OPEN_PID" 2>/dev/null || { cat "$WORK/open.err" >&2; fail "the transactional producer exited"; }
	sleep 0.2
done
grep -q '^open$' "$WORK/open.out" || fail "the transaction did not open within 30 s"
printf 'after-0\n' | kcat -b "$BOOTSTRAP" -P -t "$TOPIC" -p 0 || fail "kcat produce (after) failed"

# The hanging transaction is listed with its partition.
guarded "$ADMIN" --bootstrap "$BOOTSTRAP" transactions --older-than-ms 0 >"$WORK/hanging.txt" ||
	fail "sluice-admin transactions exited $?"
cat "$WORK/hanging.txt" >&2
grep -E "^$TXN_ID producer_id=[0-9]+ epoch=[0-9]+ state=Ongoing .* partitions=$TOPIC-0\$" "$WORK/hanging.txt" >/dev/null ||
	fail "the open transaction is not listed as hanging"
[ "$(wc -l <"$WORK/hanging.txt")" -eq 1 ] || fail "expected exactly one hanging transaction"
PID=$(sed -E 's/.* producer_id=([0-9]+) .*/\1/' "$WORK/hanging.txt")
# Not older than an hour: the filter really filters.
guarded "$ADMIN" --bootstrap "$BOOTSTRAP" transactions --older-than-ms 3600000 >"$WORK/old.txt" ||
	fail "sluice-admin transactions (1 h) exited $?"
[ ! -s "$WORK/old.txt" ] || fail "a transaction opened seconds ago was listed as older than an hour"

# The partition's producer state shows the open transaction at offset 2.
guarded "$ADMIN" --bootstrap "$BOOTSTRAP" producers "$TOPIC" 0 >"$WORK/producers.txt" ||
	fail "sluice-admin producers exited $?"
cat "$WORK/producers.txt" >&2
grep -E "^producer_id=$PID epoch=[0-9]+ last_sequence=$((OPEN_COUNT - 1)) .* current_txn_start_offset=2\$" \
	"$WORK/producers.txt" >/dev/null || fail "producer $PID does not show an open transaction at offset 2"

# read_committed stops at the LSO: only the two records before the transaction.
consume() {
	timeout 30 kcat -b "$BOOTSTRAP" -X isolation.level=read_committed -C -t "$TOPIC" -p 0 -o beginning -e \
		-q -f '%s\n' >"$WORK/$1" || fail "kcat consume exited $?"
}
consume held.txt
[ "$(cat "$WORK/held.txt")" = "$(printf 'before-0\nbefore-1')" ] ||
	fail "read_committed saw past the open transaction: $(tr '\n' ' ' <"$WORK/held.txt")"

guarded "$ADMIN" --bootstrap "$BOOTSTRAP" abort-transaction "$TOPIC" 0 "$PID" >"$WORK/abort.txt" ||
	fail "sluice-admin abort-transaction exited $?"
cat "$WORK/abort.txt" >&2
grep -q "error 0 (NONE)" "$WORK/abort.txt" || fail "abort did not succeed"

# Past the aborted transaction: the committed record behind it, none of its own.
consume released.txt
[ "$(cat "$WORK/released.txt")" = "$(printf 'before-0\nbefore-1\nafter-0')" ] ||
	fail "after the abort read_committed read: $(tr '\n' ' ' <"$WORK/released.txt")"
guarded "$ADMIN" --bootstrap "$BOOTSTRAP" producers "$TOPIC" 0 >"$WORK/producers2.txt" ||
	fail "sluice-admin producers (after) exited $?"
grep -E "^producer_id=$PID .* current_txn_start_offset=-1\$" "$WORK/producers2.txt" >/dev/null ||
	fail "producer $PID still shows an open transaction after the abort"
# A second abort has nothing to abort and says so (exit 1).
"$ADMIN" --bootstrap "$BOOTSTRAP" abort-transaction "$TOPIC" 0 "$PID" 2>"$WORK/abort2.err" &&
	fail "a second abort of the same producer succeeded"
grep -q "no open transaction" "$WORK/abort2.err" || fail "second abort: $(cat "$WORK/abort2.err")"

kill -KILL "$OPEN_PID" 2>/dev/null
wait "$OPEN_PID" 2>/dev/null
stop_broker
pass "hanging transaction listed, described and aborted with sluice-admin"
