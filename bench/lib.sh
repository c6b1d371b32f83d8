# bench/lib.sh: shell helpers shared by run.sh and suite.sh (sourced, not run).
# shellcheck shell=bash disable=SC2034 # the bench_* globals are the results, read by the caller
#
# Locality: the calling script's shell. Functions that start or stop sluiced
# must run in that shell itself (not in a $(...) subshell), so that the broker
# stays its child and can be waited for. Results come back in bench_* globals,
# named in each function's comment; failures return 1 with the reason on stderr.

# bench_kv LINE KEY: the value of KEY=value in a RESULT line.
bench_kv() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p" | head -n 1; }

# bench_fs_info DIR REPO: sets bench_fs_type (ext4, tmpfs, ...), bench_fs_dev
# ("/dev/vda on /") and bench_same_fs (yes/no: DIR is on REPO's filesystem).
bench_fs_info() {
	read -r bench_fs_type bench_fs_dev < <(df -PT "$1" | awk 'NR == 2 { print $2, $1 " on " $7 }')
	bench_same_fs=no
	[ "$(stat -c %d "$1")" = "$(stat -c %d "$2")" ] && bench_same_fs=yes
	return 0
}

# bench_fs_is_ram: whether bench_fs_type is a memory filesystem, where
# fdatasync costs nothing and a durable figure means nothing.
bench_fs_is_ram() { [ "$bench_fs_type" = tmpfs ] || [ "$bench_fs_type" = ramfs ]; }

# bench_dd_write DIR MIB KIND: sequential 1 MiB writes of MIB MiB into a new
# file in DIR, then one fdatasync (dd conv=fdatasync), as KIND:
#   direct    O_DIRECT: no page cache, what the disk itself takes
#   buffered  through the page cache: what a buffered log append meets (the
#             kernel's copy into freshly allocated page-cache folios, block
#             allocation, then writeback)
#   prealloc  through the page cache into a file fallocate'd to its full size
#             (and synced) first: no block allocation during the writes, though
#             the fdatasync still marks the unwritten extents written
# Sets bench_dd_mbps (MiB/s) and bench_dd_line (dd's own summary line).
bench_dd_write() {
	local f=$1/ddtest.$3 out bytes secs
	local -a flags
	rm -f "$f"
	case "$3" in
	direct) flags=(oflag=direct conv=fdatasync) ;;
	buffered) flags=(conv=fdatasync) ;;
	prealloc)
		out=$({ fallocate -l "$(($2 * 1048576))" "$f" && sync "$f"; } 2>&1) || {
			rm -f "$f"; echo "fallocate in $1 failed: $out" >&2; return 1; }
		flags=(conv=notrunc conv=fdatasync) ;;
	*) echo "bench_dd_write: unknown kind $3" >&2; return 1 ;;
	esac
	out=$(dd if=/dev/zero of="$f" bs=1M count="$2" "${flags[@]}" 2>&1) || {
		rm -f "$f"; echo "dd ($3 sequential write) failed: $out" >&2; return 1; }
	rm -f "$f"
	bench_dd_line=$(tail -n 1 <<<"$out")
	read -r bytes secs < <(sed -E 's/^([0-9]+) bytes.* copied, ([0-9.e+-]+) s,.*/\1 \2/' <<<"$bench_dd_line")
	bench_dd_mbps=$(awk -v b="$bytes" -v s="$secs" 'BEGIN { printf "%.1f", b / s / 1048576 }')
}

# bench_disk_seq DIR MIB: sequential write bandwidth with O_DIRECT and a final
# fdatasync (what a log append can hope for at best). Sets bench_disk_mbps
# (MiB/s) and bench_disk_line (dd's own summary line).
bench_disk_seq() {
	bench_dd_write "$1" "$2" direct || return 1
	bench_disk_mbps=$bench_dd_mbps bench_disk_line=$bench_dd_line
}

# bench_sync_rate DIR OPS: how many small durable writes (4 KiB, O_DSYNC: one
# write + one data sync each) the disk completes per second, i.e. the cost of
# one fdatasync, which group commit amortises. Sets bench_sync_rate (writes/s),
# bench_sync_ms (ms each) and bench_sync_line.
bench_sync_rate() {
	local out secs
	out=$(dd if=/dev/zero of="$1/synctest" bs=4k count="$2" oflag=dsync 2>&1) || {
		rm -f "$1/synctest"; echo "dd (O_DSYNC writes) failed: $out" >&2; return 1; }
	rm -f "$1/synctest"
	bench_sync_line=$(tail -n 1 <<<"$out")
	secs=$(sed -E 's/.* copied, ([0-9.e+-]+) s,.*/\1/' <<<"$bench_sync_line")
	bench_sync_rate=$(awk -v n="$2" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')
	bench_sync_ms=$(awk -v n="$2" -v s="$secs" 'BEGIN { printf "%.3f", s * 1000 / n }')
}

# bench_tcp_loop EXE SECONDS: loopback TCP bandwidth over one connection
# (sluice-tcp-loop), the ceiling for any client on this host. Sets bench_tcp_mbps.
bench_tcp_loop() {
	local line
	line=$("$1" --seconds "$2" | grep '^RESULT') || { echo "sluice-tcp-loop did not run" >&2; return 1; }
	bench_tcp_mbps=$(bench_kv "$line" mb_per_sec)
}

# bench_start_sluiced EXE DATADIR LOG CORES PARTITIONS [ARG...]: starts sluiced
# on a random loopback port that nothing answers on, and waits for its
# 'listening on' line. If it still cannot bind (a race: its log says the
# address is in use), another port is tried. Sets bench_pid and bench_bootstrap.
bench_start_sluiced() {
	local exe=$1 data=$2 log=$3 cores=$4 parts=$5 attempt port
	shift 5
	bench_pid="" bench_bootstrap=""
	for attempt in 1 2 3 4 5; do
		port=$((20000 + RANDOM % 12000))   # below the ephemeral ports (32768 up)
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then continue; fi
		"$exe" --listen "127.0.0.1:$port" --data "$data" --cores "$cores" --log-level info \
			--partitions "$parts" "$@" >"$log" 2>&1 &
		bench_pid=$!
		for _ in $(seq 300); do
			grep -q 'listening on' "$log" && break
			kill -0 "$bench_pid" 2>/dev/null || break
			sleep 0.1
		done
		if grep -q 'listening on' "$log"; then
			bench_bootstrap=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$log" | head -n 1)
			return 0
		fi
		if kill -0 "$bench_pid" 2>/dev/null; then
			echo "sluiced did not log 'listening on' within 30 s" >&2
			return 1
		fi
		wait "$bench_pid" 2>/dev/null || true
		bench_pid=""
		grep -qi 'in use' "$log" || { echo "sluiced exited at start-up" >&2; return 1; }
		echo "port $port was taken (attempt $attempt); trying another" >&2
	done
	echo "sluiced did not start" >&2
	return 1
}

# bench_stop_sluiced PID: SIGTERM, up to 10 s for a clean exit, then SIGKILL.
# Only ever the PID this script started.
bench_stop_sluiced() {
	[ -n "$1" ] || return 0
	kill -TERM "$1" 2>/dev/null || true
	for _ in $(seq 100); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$1" 2>/dev/null; then
		echo "sluiced $1 did not exit 10 s after SIGTERM; sending SIGKILL" >&2
		kill -KILL "$1" 2>/dev/null || true
	fi
	wait "$1" 2>/dev/null || true
}

# bench_cpu_ticks PID: user+system clock ticks of PID so far.
# bench_child_ticks: user+system ticks of this shell's waited-for children so
# far (the client's CPU, read before and after it ran in the foreground).
# bench_busy_ticks: ticks all CPUs spent not idle (user nice system irq softirq steal).
# bench_io_bytes PID: bytes PID caused to be written to storage so far.
bench_cpu_ticks() { awk '{ printf "%d\n", $14 + $15 }' "/proc/$1/stat"; }
bench_child_ticks() { awk '{ printf "%d\n", $16 + $17 }' "/proc/$$/stat"; }
bench_busy_ticks() { awk '$1 == "cpu" { printf "%d\n", $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
bench_io_bytes() { sed -n 's/^write_bytes: //p' "/proc/$1/io" 2>/dev/null || echo 0; }
