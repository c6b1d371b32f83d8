#!/usr/bin/env bash
# admin_topics.sh SLUICED RDK_LOAD SLUICE_DUMP SLUICE_ADMIN
#
# sluice-admin topics: create (with configs; an unknown config is refused
# INVALID_CONFIG), list, describe (partitions, leader, start and end
# offsets after a produce), add-partitions (a count not above the topic's
# is refused INVALID_PARTITIONS; the new partitions take produces), delete;
# configs describe and alter;
# and DescribeCluster v0 names this broker, as the controller too.
. "$(dirname "$0")/lib.sh"
integ_init admin-topics 39 "$@"
ADMIN=$(abs_path "${4:-}")
need_exe "$RDK_LOAD"
need_exe "$ADMIN"
start_broker --cores "${SLUICE_CORES:-3}" --no-auto-create
adm() { "$ADMIN" --bootstrap "$BOOTSTRAP" "$@"; }

adm topics create adt 2 retention.ms=3600000 cleanup.policy=delete >"$WORK/c.out" || fail "create exited $?"
grep -qx "created adt partitions=2" "$WORK/c.out" || fail "create printed: $(cat "$WORK/c.out")"
if adm topics create adt-bad 1 no.such.config=1 2>"$WORK/bad.err"; then fail "an unknown config was taken"; fi
grep -q "INVALID_CONFIG" "$WORK/bad.err" || fail "unknown config: $(cat "$WORK/bad.err")"
adm topics list >"$WORK/l.out" || fail "list exited $?"
grep -qx "adt partitions=2" "$WORK/l.out" || fail "list printed: $(cat "$WORK/l.out")"
grep -q "^adt-bad " "$WORK/l.out" && fail "the refused create made its topic"

guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic adt --count 1000 --partitions 2 --size 100 --no-create >/dev/null ||
	fail "rdk_load produce exited $?"
adm topics describe adt >"$WORK/d.out" || fail "describe exited $?"
grep -qx "topic adt partitions=2" "$WORK/d.out" || fail "describe printed: $(cat "$WORK/d.out")"
sum=$(awk '/^partition adt /{ split($6, e, "="); split($5, s, "="); n += e[2] - s[2] } END { print n }' "$WORK/d.out")
[ "$sum" = 1000 ] || fail "describe's end - start over the partitions is $sum, want 1000: $(cat "$WORK/d.out")"
grep -q "^partition adt 1 leader=1 start=0 " "$WORK/d.out" || fail "describe of partition 1: $(cat "$WORK/d.out")"

if adm topics add-partitions adt 2 2>"$WORK/ap.err"; then fail "add-partitions to the same count was taken"; fi
grep -q "INVALID_PARTITIONS" "$WORK/ap.err" || fail "same count: $(cat "$WORK/ap.err")"
adm topics add-partitions adt 4 >"$WORK/ap.out" || fail "add-partitions exited $?"
adm topics describe adt >"$WORK/d2.out" || fail "describe exited $?"
grep -qx "topic adt partitions=4" "$WORK/d2.out" || fail "after add-partitions: $(cat "$WORK/d2.out")"
grep -qx "partition adt 3 leader=1 start=0 end=0" "$WORK/d2.out" || fail "new partition 3: $(cat "$WORK/d2.out")"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic adt --count 1000 --partitions 4 --size 100 --no-create >/dev/null ||
	fail "rdk_load produce to 4 partitions exited $?"
adm topics describe adt >"$WORK/d3.out" || fail "describe exited $?"
sum=$(awk '/^partition adt [23] /{ split($6, e, "="); n += e[2] } END { print n + 0 }' "$WORK/d3.out")
[ "$sum" -gt 0 ] || fail "nothing was produced to the new partitions: $(cat "$WORK/d3.out")"

# CreatePartitions' refusals (hostile counts, a name twice, bad assignments), validateOnly, and an
# explicit assignment: 4 -> 6.
guarded python3 "$(dirname "$0")/admin_client.py" parts "$PORT" adt 4 || fail "CreatePartitions cases"
adm topics describe adt >"$WORK/d4.out" || fail "describe exited $?"
grep -qx "topic adt partitions=6" "$WORK/d4.out" || fail "after the CreatePartitions cases: $(cat "$WORK/d4.out")"

# sluice-admin configs: describe shows what the topic was created with and the broker's flags;
# alter sets and deletes one key at a time; a key sluice does not implement is refused.
adm configs describe topic adt >"$WORK/cf.out" || fail "configs describe exited $?"
grep -qx "retention.ms=3600000 source=topic" "$WORK/cf.out" || fail "configs describe: $(cat "$WORK/cf.out")"
grep -qx "retention.bytes=-1 source=broker" "$WORK/cf.out" || fail "configs describe: $(cat "$WORK/cf.out")"
adm configs alter adt max.message.bytes=5000 -retention.ms >"$WORK/ca.out" || fail "configs alter exited $?"
adm configs describe topic adt >"$WORK/cf2.out" || fail "configs describe exited $?"
grep -qx "max.message.bytes=5000 source=topic" "$WORK/cf2.out" || fail "after alter: $(cat "$WORK/cf2.out")"
grep -qx "retention.ms=604800000 source=broker" "$WORK/cf2.out" || fail "after alter: $(cat "$WORK/cf2.out")"
if adm configs alter adt segment.ms=1000 2>"$WORK/ca.err"; then fail "segment.ms was taken"; fi
grep -q "INVALID_CONFIG" "$WORK/ca.err" || fail "segment.ms: $(cat "$WORK/ca.err")"
adm configs describe broker 1 >"$WORK/cb.out" || fail "configs describe broker exited $?"
grep -qx "num.partitions=1 source=broker read-only" "$WORK/cb.out" || fail "broker configs: $(cat "$WORK/cb.out")"

# DescribeCluster (Kafka's AdminClient describeCluster): this broker, also the controller.
guarded python3 "$(dirname "$0")/admin_client.py" cluster "$PORT" 1 "$BOOTSTRAP" || fail "DescribeCluster"

adm topics delete adt >"$WORK/del.out" || fail "delete exited $?"
adm topics list >"$WORK/l2.out" || fail "list exited $?"
grep -q "^adt " "$WORK/l2.out" && fail "the deleted topic is still listed"
stop_broker
pass "sluice-admin topics: create, list, describe, add-partitions, delete"
