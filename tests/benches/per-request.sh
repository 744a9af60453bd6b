#!/usr/bin/env bash
# What one request costs the gateway, counted rather than timed (a count
# does not drift with the machine's load as a time does): user-space
# instructions (the gateway under valgrind's callgrind, 20 requests a
# second) or calls to malloc and realloc (perf's uprobes on libc, 500 a
# second), over a 10 s window of the gateway bench's `-- profile` run.
#
#   tests/benches/per-request.sh instructions responses streamed
#   tests/benches/per-request.sh allocations every-pack streamed
#
# The words after the first are `-- profile`'s (`every-pack`, `streamed`,
# `responses`; see tests/benches/gateway.rs). Needs valgrind
# (instructions) or perf with uprobes and root (allocations). Builds the
# workspace and the bench first. Every pack is counted too: the budget
# clock is read through the C library, whose vDSO call valgrind follows.
# The packs' own functions show as `???` in the dump (they run from a
# sealed in-memory copy valgrind cannot read symbols from); their share is
# the dump's `???` object.
set -euo pipefail
mode=${1:?usage: per-request.sh instructions|allocations [profile words]}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
cd "$root"
cargo build --release --workspace -q
bench=$(cargo bench -q -p chimera-tests --bench gateway --no-run --message-format=json |
    sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
work=$(mktemp -d)
gateway=$target/release/chimera
cp -p "$gateway" "$work/chimera"
restore() {
    rm -f "$gateway"
    cp -p "$work/chimera" "$gateway"
    rm -rf "$work"
}
trap restore EXIT
case $mode in
instructions)
    rate=20
    # The bench starts `target/release/chimera`: here, the real one
    # under callgrind.
    rm -f "$gateway"
    printf '#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s "%s" "$@"\n' \
        "$work/callgrind.out" "$work/chimera" >"$gateway"
    chmod +x "$gateway"
    ;;
allocations)
    rate=500
    perf probe -q -x "$(ldconfig -p | sed -n 's/.*libc.so.6 (libc6,x86-64) => //p' | head -1)" \
        -a malloc -a realloc 2>/dev/null || true
    ;;
*)
    echo "per-request.sh: the first word is instructions or allocations" >&2
    exit 2
    ;;
esac
CARGO=/bin/true "$bench" profile "$@" "rate=$rate" --bench >"$work/out" 2>"$work/err" &
run=$!
pid=
for _ in $(seq 1 120); do
    pid=$(sed -n 's/^profile: .* pid \([0-9]*\)$/\1/p' "$work/err" | head -1)
    [ -n "$pid" ] && break
    sleep 1
done
[ -n "$pid" ] || { cat "$work/err" >&2; exit 1; }
sleep 6
case $mode in
instructions)
    callgrind_control -z "$pid" >/dev/null 2>&1
    sleep 10
    callgrind_control -d "$pid" >/dev/null 2>&1
    sleep 1
    wait "$run"
    dump=$(ls -t "$work"/callgrind.out.* | head -1)
    count=$(sed -n 's/^summary: //p' "$dump")
    echo "instructions a request: $((count / (10 * rate)))"
    ;;
allocations)
    perf stat -x, -e probe_libc:malloc,probe_libc:realloc -p "$pid" -- sleep 10 2>"$work/stat"
    wait "$run"
    awk -F, -v n=$((10 * rate)) '{ printf "%s a request: %.1f\n", $3, $1 / n }' "$work/stat"
    ;;
esac
tail -1 "$work/out"
