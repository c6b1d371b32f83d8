#!/usr/bin/env bash
# damage.sh SLUICED RDK_LOAD SLUICE_DUMP RDK_TXN RDK_GROUP SLUICE_ADMIN
#
# Damage is not a torn tail (issue 10, item 7). A broker with real data is
# stopped cleanly; bytes are flipped in the middle of each kind of file; it is
# started again on the same data:
#   __consumer_offsets   20 groups committed 50, then 100+i; 4 bytes flipped
#                        in the header of the middle batch and 4 at 3/5 of the
#                        log. Every group must still have its offset (at most
#                        the two whose batches were hit fall back to their
#                        earlier 50); before, every commit after the damage was
#                        dropped (offset 100 became -1 or 50).
#   __transaction_state  8 transactional ids, 3 transactions each; 4 bytes
#                        flipped in the middle batch. Every id must still be
#                        known and a new transaction must commit.
#   aborted.txnindex     the partition those ids wrote (a commit, an abort, a
#                        commit each); 4 bytes flipped in the middle. A
#                        read_committed read must return exactly the committed
#                        records (before, the aborted ones behind the damage
#                        were visible).
#   a partition's log    (small segments) the length of the first batch of a
#                        sealed segment whose index is valid, the length of a
#                        middle batch of a sealed segment without index, and a
#                        header field of a middle batch of the active segment,
#                        plus 100 zero bytes appended to it (a torn tail). The
#                        high watermark must not move; the torn tail is cut; a
#                        consumer reading from 0 gets every record outside the
#                        damaged ranges and an error (INVALID_MSG) exactly where
#                        each damaged range starts, never a silent gap (before,
#                        the log was cut at the damage and later segments deleted).
# A second restart must give the same answers (the damage stays set aside).
. "$(dirname "$0")/lib.sh"

integ_init damage 71 "$1" "$2" "$3"
RDK_TXN=$(abs_path "${4:-}")
RDK_GROUP=$(abs_path "${5:-}")
ADMIN=$(abs_path "${6:-}")
need_exe "$RDK_LOAD"
need_exe "$SLUICE_DUMP"
need_exe "$RDK_TXN"
need_exe "$RDK_GROUP"
need_exe "$ADMIN"
command -v python3 >/dev/null || skip "python3 is not installed"

CORES=${SLUICE_CORES:-2}
GROUPS_N=20
IDS=8
TXN_RECORDS=30
COUNT=30000
BROKER_ARGS=(--cores "$CORES" --segment-bytes 262144)

# flip FILE POS [LEN]: invert LEN (default 4) bytes at POS.
flip() {
	python3 - "$1" "$2" "${3:-4}" <<'EOF' || fail "flip $1 at $2 failed"
import sys
path, pos, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, 'r+b') as f:
    f.seek(pos)
    b = f.read(n)
    assert len(b) == n, "file too short"
    f.seek(pos)
    f.write(bytes(x ^ 0xff for x in b))
EOF
}
fsize() { stat -c %s "$1"; }
last_log() { find "$1" -maxdepth 1 -name '*.log' | sort | tail -n 1; }
# pos_of_middle_batch SEGMENT: byte position of its middle batch (sluice-dump lines).
pos_of_middle_batch() {
	"$SLUICE_DUMP" "$(dirname "$1")" | awk -v seg="$1" '
		/^segment / { cur = $2 } cur == seg && / offset .* pos / { for (i = 1; i <= NF; i++) if ($i == "pos") p[n++] = $(i + 1) }
		END { if (n < 3) exit 1; print p[int(n / 2)] }'
}
hw() { "$RDK_GROUP" watermarks --bootstrap "$BOOTSTRAP" --topic plain --partitions 1 | awk '{ print $2 }'; }

start_broker "${BROKER_ARGS[@]}"

# ---- data -------------------------------------------------------------------
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic plain --partitions 1 --count "$COUNT" \
	--size 100 --acks all --batch-messages 100 >"$WORK/produce.out" 2>"$WORK/produce.err" ||
	fail "produce: $(tail -n 3 "$WORK/produce.err")"
guarded "$RDK_GROUP" commit-many --bootstrap "$BOOTSTRAP" --topic plain --partitions 1 --group g \
	--groups "$GROUPS_N" --offset 50 2>>"$WORK/group.err" || fail "commits of 50: $(tail -n 3 "$WORK/group.err")"
guarded "$RDK_GROUP" commit-many --bootstrap "$BOOTSTRAP" --topic plain --partitions 1 --group g \
	--groups "$GROUPS_N" --offset 100 --offset-step 1 2>>"$WORK/group.err" ||
	fail "commits of 100+i: $(tail -n 3 "$WORK/group.err")"
for ((i = 0; i < IDS; i++)); do
	create=()
	((i == 0)) && create=(--create)
	guarded "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id "tx$i" --topics tx --partitions 1 \
		--count "$TXN_RECORDS" --tag "t$i" --plan commit,abort,commit --out "$WORK/txn.out" "${create[@]}" \
		>>"$WORK/txn.log" 2>&1 || fail "rdk_txn produce tx$i: $(tail -n 3 "$WORK/txn.log")"
done
HW=$(hw)
[ "$HW" = "$COUNT" ] || fail "high watermark $HW, expected $COUNT"
guarded "$ADMIN" --bootstrap "$BOOTSTRAP" transactions | awk '{ print $1 }' | sort >"$WORK/ids.before" ||
	fail "sluice-admin transactions"
[ "$(wc -l <"$WORK/ids.before")" = "$IDS" ] || fail "expected $IDS transactional ids: $(cat "$WORK/ids.before")"
grep '^commit ' "$WORK/txn.out" >"$WORK/txn.committed"
stop_broker

# ---- damage -----------------------------------------------------------------
PLAIN=$DATA/plain-0
mapfile -t SEGS < <(find "$PLAIN" -maxdepth 1 -name '*.log' | sort)
((${#SEGS[@]} >= 4)) || fail "expected at least 4 segments in $PLAIN, got ${#SEGS[@]}"
ACTIVE=${SEGS[${#SEGS[@]} - 1]}
[ -f "${SEGS[1]%.log}.index" ] || fail "sealed segment ${SEGS[1]} has no index"
mid2=$(pos_of_middle_batch "${SEGS[2]}") || fail "no middle batch in ${SEGS[2]}"
mida=$(pos_of_middle_batch "$ACTIVE") || fail "no middle batch in $ACTIVE"
flip "${SEGS[1]}" 8                        # first batch's length; its index stays valid
flip "${SEGS[2]}" $((mid2 + 8))            # a middle batch's length; no index: the open scans it
rm -f "${SEGS[2]%.log}.index"
flip "$ACTIVE" $((mida + 30))              # a middle batch's timestamps (CRC-covered)
active_size=$(fsize "$ACTIVE")
head -c 100 /dev/zero >>"$ACTIVE"          # and a torn tail after the last batch
# The coordinators' logs: inside the middle batch's CRC-covered header (a flipped base offset
# alone would just be written back), and 4 bytes at 3/5 of the file, wherever they fall.
CO=$(last_log "$DATA/__consumer_offsets")
mid=$(pos_of_middle_batch "$CO") || fail "no middle batch in $CO"
flip "$CO" $((mid + 30))
flip "$CO" $(($(fsize "$CO") * 3 / 5))
TS=$(last_log "$DATA/__transaction_state")
mid=$(pos_of_middle_batch "$TS") || fail "no middle batch in $TS"
flip "$TS" $((mid + 30))
TI=$DATA/tx-0/aborted.txnindex
[ "$(fsize "$TI")" -ge $((8 + IDS * 28)) ] || fail "$TI holds fewer than $IDS entries ($(fsize "$TI") bytes)"
flip "$TI" $(($(fsize "$TI") / 2))
log "flipped bytes in ${SEGS[1]##*/}, ${SEGS[2]##*/}, ${ACTIVE##*/}, $CO, $TS, $TI"

# ---- checks -----------------------------------------------------------------
check_all() {
	local from=$1
	local h
	h=$(hw) || fail "watermarks"
	[ "$h" = "$HW" ] || fail "high watermark $h after the restart, was $HW: the partition is served short"
	[ "$(fsize "$ACTIVE")" = "$active_size" ] || fail "the torn tail was not cut: $(fsize "$ACTIVE") != $active_size"

	# Committed offsets: each group has 100+i, at most two (their batches damaged) fall back to 50.
	guarded "$RDK_GROUP" committed --bootstrap "$BOOTSTRAP" --topic plain --partitions 1 --group g \
		--groups "$GROUPS_N" >"$WORK/committed.txt" 2>>"$WORK/group.err" || fail "committed: $(tail -n 3 "$WORK/group.err")"
	[ "$(wc -l <"$WORK/committed.txt")" = "$GROUPS_N" ] || fail "committed: $(cat "$WORK/committed.txt")"
	local fell=0 g off i
	while read -r g _ off; do
		i=${g#g}
		if [ "$off" = $((100 + i)) ]; then
			continue
		elif [ "$off" = 50 ]; then
			fell=$((fell + 1))
		else
			fail "group $g: committed offset $off, expected $((100 + i)) (or its earlier 50)"
		fi
	done <"$WORK/committed.txt"
	((fell <= 2)) || fail "$fell groups lost their last commit: $(tr '\n' ' ' <"$WORK/committed.txt")"

	# Every transactional id is still known.
	guarded "$ADMIN" --bootstrap "$BOOTSTRAP" transactions | awk '{ print $1 }' | sort >"$WORK/ids.after" ||
		fail "sluice-admin transactions"
	diff "$WORK/ids.before" "$WORK/ids.after" >/dev/null ||
		fail "transactional ids lost: before $(tr '\n' ' ' <"$WORK/ids.before"), after $(tr '\n' ' ' <"$WORK/ids.after")"

	# read_committed sees exactly the committed records: no aborted one.
	guarded "$RDK_TXN" consume --bootstrap "$BOOTSTRAP" --topics tx --partitions 1 --isolation committed \
		--expect "$WORK/txn.committed" --timeout 60 >"$WORK/txn.consume" 2>&1 ||
		fail "read_committed check failed: $(grep -v '^wm\|^end' "$WORK/txn.consume" | tail -n 5)"

	# The damaged ranges the broker set aside (its log since this start).
	tail -n +"$from" "$BROKER_LOG" |
		sed -n 's/.*plain-0: segment [0-9]*: DAMAGE (.*offsets \[\([0-9]*\), \([0-9]*\)) in them are lost.*/\1 \2/p' |
		sort -n >"$WORK/ranges.txt"
	[ "$(wc -l <"$WORK/ranges.txt")" = 3 ] || fail "expected 3 damaged ranges in plain-0: $(cat "$WORK/ranges.txt")"
	# Read from 0: every record outside the ranges, an error exactly at each range's start.
	local pos=0 got=0 lost=0 a b out rc n first last
	while read -r a b; do
		lost=$((lost + b - a))
		out=$("$RDK_GROUP" read --bootstrap "$BOOTSTRAP" --topic plain --partitions 1 --partition 0 \
			--offset "$pos" --until-offset "$HW" --timeout 60 2>>"$WORK/read.err")
		rc=$?
		[ "$rc" = 3 ] || fail "read from $pos: exit $rc, expected an error at $a: $out"
		read -r _ n first last <<<"$(grep '^read ' <<<"$out")"
		grep -q "^error $a 2 " <<<"$out" || fail "read from $pos: expected error 2 (INVALID_MSG) at $a: $out"
		if ((a > pos)); then
			[ "$first" = "$pos" ] && [ "$last" = $((a - 1)) ] && [ "$n" = $((a - pos)) ] ||
				fail "read from $pos to the damage at $a: got $n records $first..$last"
		fi
		got=$((got + n))
		pos=$b
	done <"$WORK/ranges.txt"
	out=$("$RDK_GROUP" read --bootstrap "$BOOTSTRAP" --topic plain --partitions 1 --partition 0 \
		--offset "$pos" --until-offset "$HW" --timeout 60 2>>"$WORK/read.err") ||
		fail "read from $pos to the end: $out"
	read -r _ n first last <<<"$(grep '^read ' <<<"$out")"
	[ "$first" = "$pos" ] && [ "$last" = $((HW - 1)) ] && [ "$n" = $((HW - pos)) ] ||
		fail "read from $pos to the end: $n records $first..$last"
	got=$((got + n))
	[ "$got" = $((HW - lost)) ] || fail "read $got records, expected $((HW - lost))"
	log "high watermark $HW kept; $lost offsets in 3 damaged ranges answered INVALID_MSG, $got served"
}

from=$(($(wc -l <"$BROKER_LOG") + 1))
start_broker "${BROKER_ARGS[@]}"
# The data cores open their partitions after the port is up: wait for their lines.
log_wait "$from" 'cutting 100 byte\(s\)' || fail "the torn tail was not cut (broker log)"
log_wait "$from" '__consumer_offsets.*DAMAGED' || fail "no error about the damaged __consumer_offsets in the broker log"
log_wait "$from" 'aborted.txnindex: DAMAGED' || fail "no error about the damaged aborted.txnindex in the broker log"
check_all "$from"
# The coordinator still works: one more transaction commits, and read_committed sees it.
guarded "$RDK_TXN" produce --bootstrap "$BOOTSTRAP" --txn-id tx0 --topics tx --partitions 1 \
	--count "$TXN_RECORDS" --tag again --plan commit --out "$WORK/txn.out" >>"$WORK/txn.log" 2>&1 ||
	fail "a transaction after the restart: $(tail -n 3 "$WORK/txn.log")"
grep '^commit ' "$WORK/txn.out" >"$WORK/txn.committed"
stop_broker

from=$(($(wc -l <"$BROKER_LOG") + 1))
start_broker "${BROKER_ARGS[@]}"
check_all "$from"
stop_broker
pass "damage set aside in all four kinds of file; committed offsets, transactional ids and aborts kept"
