#!/bin/bash
# layout.sh DATAPLANE_DIR - the role folders' include rules (README.md,
# "Source layout"): a role's foo_internal.h is included only inside its own
# folder, and the includes between roles go one way: loop/ names no role,
# shard/ names no conn/ or control/ header, conn/ no control/ header, and
# control/ no conn/ header: the coordinators and the connections meet only
# in loop/call.h's calls, so that a coordinator can move to another core or
# broker. (The build's include paths enforce the one-way rule too; this
# says which file.)
set -u
dp=${1:?usage: layout.sh DATAPLANE_DIR}
bad=0
for dir in loop conn shard control; do
	for f in "$dp/$dir"/*.[ch]; do
		[ -e "$f" ] || continue
		while read -r inc; do
			case $inc in
			*_internal.h)
				[ "${inc%_internal.h}" = "$dir" ] ||
					{ echo "layout: $f includes $inc, another role's internal header"; bad=1; } ;;
			esac
			case "$dir:$inc" in
			loop:conn.h|loop:shard.h|loop:control.h|shard:conn.h|shard:control.h|conn:control.h|control:conn.h)
				echo "layout: $f includes $inc: $dir/ may not use that role"; bad=1 ;;
			esac
		done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
	done
done
[ "$bad" = 0 ] && echo "layout: every include follows the role folders' rules"
exit "$bad"
