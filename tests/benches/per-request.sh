#!/usr/bin/env bash
# What one request costs the gateway, counted rather than timed (a count
# does not drift with the machine's load as a time does): user-space
# instructions (the gateway under valgrind's callgrind, 20 requests a
# second), calls that allocate (perf's uprobes on the gateway's own
# mimalloc, or on the C library's malloc and realloc for nginx; 500 a
# second), or its CPU split between user space and the kernel with the
# system calls and context switches behind it (500 a second), over a
# 10 s window of the gateway bench's `-- profile` run.
#
#   tests/benches/per-request.sh instructions responses streamed
#   tests/benches/per-request.sh allocations every-pack streamed
#   tests/benches/per-request.sh cpu every-pack
#   tests/benches/per-request.sh instructions nginx
#
# The words after the first are `-- profile`'s (`every-pack`, `streamed`,
# `responses`, `nginx`; see tests/benches/gateway.rs). With `nginx` the
# baseline is counted the same way: nginx as the plain proxy, one
# process. Needs valgrind (instructions) or perf with uprobes and root
# (allocations, cpu). Builds the workspace and the bench first. Every pack
# is counted too: the budget clock is read through the C library, whose
# vDSO call valgrind follows. The packs' own functions show as `???` in
# the dump (they run from a sealed in-memory copy valgrind cannot read
# symbols from); their share is the dump's `???` object.
set -euo pipefail
mode=${1:?usage: per-request.sh instructions|allocations|cpu [profile words]}
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
    # The allocation probes go with the run (they name this binary's file).
    [ "$mode" != allocations ] || perf probe -q -d 'per_request:*' 2>/dev/null || true
    rm -f "$gateway"
    cp -p "$work/chimera" "$gateway"
    rm -rf "$work"
}
trap restore EXIT
nginx=
for word in "$@"; do [ "$word" = nginx ] && nginx=$(command -v nginx || echo /usr/sbin/nginx); done
case $mode in
instructions)
    rate=20
    # The bench starts `target/release/chimera` (or the nginx that
    # `CHIMERA_NGINX` names): here, the real one under callgrind.
    wrap() {
        printf '#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s "%s" "$@"\n' \
            "$work/callgrind.out" "$2" >"$1"
        chmod +x "$1"
    }
    if [ -n "$nginx" ]; then
        wrap "$work/nginx" "$nginx"
        export CHIMERA_NGINX=$work/nginx
    else
        rm -f "$gateway"
        wrap "$gateway" "$work/chimera"
    fi
    ;;
cpu)
    rate=500
    ;;
allocations)
    rate=500
    # The gateway allocates through mimalloc, linked into its own binary
    # (host/src/allocator.rs): its entry points are probed there. nginx
    # allocates through the C library's.
    if [ -n "$nginx" ]; then
        probed=$(ldconfig -p | sed -n 's/.*libc.so.6 (libc6,x86-64) => //p' | head -1)
        calls="malloc realloc"
    else
        probed=$gateway
        calls="mi_malloc mi_zalloc mi_malloc_aligned mi_zalloc_aligned mi_realloc mi_realloc_aligned"
    fi
    perf probe -q -d 'per_request:*' 2>/dev/null || true
    for call in $calls; do
        perf probe -q -x "$probed" -a "per_request:$call=$call" ||
            { echo "per-request.sh: perf cannot probe $call in $probed" >&2; exit 1; }
    done
    ;;
*)
    echo "per-request.sh: the first word is instructions, allocations or cpu" >&2
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
    perf stat -x, -e 'per_request:*' -p "$pid" -- sleep 10 2>"$work/stat"
    wait "$run"
    awk -F, -v n=$((10 * rate)) '{ printf "%s a request: %.1f\n", $3, $1 / n }' "$work/stat"
    ;;
cpu)
    # The CPU a request from perf's task clock, split between user space
    # and the kernel by where perf's samples (4 kHz) of the same window
    # landed; the calls and switches counted alongside.
    perf record -q -e cpu-clock -F 4000 -p "$pid" -o "$work/perf.data" -- sleep 10 2>/dev/null &
    sampling=$!
    perf stat -x, -e task-clock,raw_syscalls:sys_enter,context-switches -p "$pid" -- sleep 10 2>"$work/stat"
    wait "$sampling"
    wait "$run"
    kernel=$(perf report -i "$work/perf.data" --stdio --sort dso --percent-limit 0 2>/dev/null |
        awk '/\[kernel\.kallsyms\]/ { sub(/%/, "", $1); k += $1 } END { print k + 0 }')
    awk -F, -v n=$((10 * rate)) -v k="$kernel" '
        $3 == "task-clock" { printf "CPU ms a request: %.3f (user space %.3f, kernel %.3f)\n",
            $1 / n, $1 / n * (1 - k / 100), $1 / n * k / 100; next }
        { sub(/^raw_syscalls:sys_enter$/, "system calls", $3);
          printf "%s a request: %.2f\n", $3, $1 / n }' "$work/stat"
    ;;
esac
tail -1 "$work/out"
