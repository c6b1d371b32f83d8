#!/usr/bin/env bash
# delete_records_pipeline.sh SLUICED RDK_LOAD SLUICE_DUMP SLUICE_ADMIN
#
# DeleteRecords pipelined on one connection with --cores 1: the core owning the
# partition owns the connection too, so answering one request runs the next one
# inside the answer. Every request is answered exactly once, in order, and the
# log start ends at the high watermark.
. "$(dirname "$0")/lib.sh"
integ_init delete-records-pipeline 86 "$@"
ADMIN=$(abs_path "${4:-}")
need_exe "$RDK_LOAD"
need_exe "$ADMIN"
start_broker --cores 1 --no-auto-create
adm() { "$ADMIN" --bootstrap "$BOOTSTRAP" "$@"; }
adm topics create drp 1 >/dev/null || fail "create exited $?"
guarded "$RDK_LOAD" produce --bootstrap "$BOOTSTRAP" --topic drp --count 200 --partitions 1 --size 20 --batch-messages 1 --no-create >/dev/null ||
	fail "rdk_load produce exited $?"
guarded python3 "$(dirname "$0")/delete_records.py" pipeline "$PORT" drp || fail "pipelined DeleteRecords"
stop_broker
pass
