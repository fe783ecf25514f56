#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 30) each, one after the other.
#
#   fuzz/run.sh [SECONDS]
#
# Seeds are read from fuzz/corpus/TARGET (kept in git); what the fuzzer adds
# goes to fuzz/work/corpus/TARGET and crashes to fuzz/artifacts/TARGET (both
# ignored by git). Exits non-zero if any target found a crash or a timeout.
#
# cargo fuzz needs nightly-only compiler flags (-Zsanitizer=address). The
# machine's one toolchain is stable, so by default they are unlocked with
# RUSTC_BOOTSTRAP=1; set FUZZ_TOOLCHAIN=nightly to use a nightly toolchain instead.
set -euo pipefail
cd "$(dirname "$0")"

seconds=${1:-30}
case $seconds in
'' | *[!0-9]*)
    echo "usage: $0 [SECONDS]" >&2
    exit 2
    ;;
esac
targets=(systemctl_output service_name manifest terminal_text)

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    cargo install --locked cargo-fuzz
fi

toolchain=()
if [ -n "${FUZZ_TOOLCHAIN:-}" ]; then
    toolchain=("+$FUZZ_TOOLCHAIN")
else
    export RUSTC_BOOTSTRAP=1
fi

cargo "${toolchain[@]}" fuzz build

mkdir -p work
summary=()
status=0
for target in "${targets[@]}"; do
    mkdir -p "work/corpus/$target"
    log="work/$target.log"
    echo "== $target: ${seconds}s (log: fuzz/$log)"
    set +e
    # -timeout: an input that takes longer than 10 s is a finding too.
    cargo "${toolchain[@]}" fuzz run "$target" "work/corpus/$target" "corpus/$target" -- \
        -max_total_time="$seconds" -timeout=10 -print_final_stats=1 >"$log" 2>&1
    rc=$?
    set -e
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    if [ "$rc" -eq 0 ]; then
        result=ok
    else
        result="FAILED (exit $rc; see fuzz/$log and fuzz/artifacts/$target/)"
        status=1
        tail -n 40 "$log" >&2
    fi
    summary+=("$(printf '%-18s %6ss %12s execs  %s' "$target" "$seconds" "${execs:-?}" "$result")")
done

echo
printf '%s\n' "${summary[@]}"
exit "$status"
