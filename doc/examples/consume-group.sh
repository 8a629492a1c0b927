#!/bin/sh
# consume-group.sh MNT TOPIC GROUP COMMAND
# Runs COMMAND (a shell command reading kcat -J style JSON lines on stdin) on the records of
# TOPIC that GROUP has not processed yet, one partition at a time, and commits after each:
# at-least-once (a crash or a failed COMMAND before the commit means those records come again;
# none is skipped).
set -eu
mnt=$1 topic=$2 group=$3 command=$4
g="$mnt/$topic/groups/$group"
mkdir -p "$g"                                  # the first run creates the group
snap=$(mktemp)
trap 'rm -f "$snap"' EXIT
for p in $(ls "$g" | grep -x '[0-9][0-9]*'); do
    cp "$g/$p/next.json" "$snap"               # snapshot: committed offset .. log end now
    [ -s "$snap" ] || continue                 # nothing new in this partition
    sh -c "$command" < "$snap"                 # process it (set -e: stop on failure)
    last=$(tail -n 1 "$snap" | jq .offset)
    echo "$p $((last + 1))" > "$g/offsets"     # commit exactly what was processed
done
