#!/bin/bash
# Issue 47's figures: the example policy's three services (httpd running and
# enabled, legacy-ftpd stopped and disabled, metrics-agent running) declared
# in Rust (policies/example), Python (policies/example-python, componentize-py)
# and JavaScript (policies/example-js, componentize-qjs), the Python and
# JavaScript declarations composed with the engine (`host compose`), each
# signed with a throwaway key, then `host compile`d cold (a fresh cache, three
# times) and run three times against the fake systemctl (converging, then
# nothing to do). Prints a Markdown table of medians.
#
# Needs: a release host (cargo build --release -p policy-host --bin host),
# the Rust example and the engine (cargo build --release -p example-policy
# -p declaration-engine --target wasm32-wasip2), componentize-py (pip install
# componentize-py==0.25.1) and componentize-qjs (npm install -g
# componentize-qjs@0.4.5). Usage: bench/languages/measure.sh [WORKDIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${1:-$(mktemp -d)}
host=$root/target/release/host
engine=$root/target/wasm32-wasip2/release/declaration_engine.wasm
mkdir -p "$work/python" "$work/js"
"$host" keygen --out "$work/keys" --unencrypted >/dev/null
declare -A built=(
  [rust]=$root/target/wasm32-wasip2/release/example_policy.wasm
  [python]=$work/python/example_policy.wasm
  [js]=$work/js/example_policy.wasm
)
(cd "$root" && componentize-py -d wit/declaration -w declaration componentize app \
  -p policies/example-python -p sdk/python -o "$work/python/declaration.wasm" >/dev/null)
(cd "$root" && componentize-qjs --wit wit/declaration -j policies/example-js/policy.js \
  --module-root . -n declaration --sync --stub-wasi -o "$work/js/declaration.wasm" >/dev/null)
for lang in python js; do
  "$host" compose "$work/$lang/declaration.wasm" -o "${built[$lang]}" --engine "$engine" >/dev/null
done
med() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
echo "| policy | size (bytes) | cold compile (s) | compile peak RSS (MiB) | converging run (s) | run with nothing to do (s) | run peak RSS (MiB) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for lang in rust python js; do
  d=$work/run-$lang
  rm -rf "$d"; mkdir -p "$d/fake/bin" "$d/fake/state/units"
  cp "${built[$lang]}" "$d/example_policy.wasm"
  "$host" sign "$d/example_policy.wasm" --key "$work/keys/policy-host.key" >/dev/null
  cp "$root/tests/fake-systemctl/systemctl" "$d/fake/bin/"
  cd "$d"
  compile=(); compile_peak=(); converge=(); noop=(); run_peak=()
  for _ in 1 2 3; do
    rm -rf cache; mkdir -m 700 cache
    /usr/bin/time -f "%e %M" -o t "$host" compile example_policy.wasm \
      --trusted-key "$work/keys/policy-host.pub" --cache-dir "$d/cache" >/dev/null
    read -r s kib < t; compile+=("$s"); compile_peak+=("$kib")
  done
  for _ in 1 2 3; do
    rm -rf state run; mkdir -m 700 state run
    for u in httpd:inactive:disabled legacy-ftpd:active:enabled metrics-agent:inactive:disabled; do
      IFS=: read -r n a e <<<"$u"
      mkdir -p "fake/state/units/$n.service"
      echo "$a" >"fake/state/units/$n.service/active"
      echo "$e" >"fake/state/units/$n.service/enabled"
    done
    for what in converge noop; do
      PATH=$d/fake/bin:/usr/bin:/bin /usr/bin/time -f "%e %M" -o t "$host" run example_policy.wasm \
        --trusted-key "$work/keys/policy-host.pub" --cache-dir "$d/cache" --state-dir "$d/state" \
        --lock-file "$d/run/lock" --provider systemctl --settle 0 --json >out.json 2>/dev/null || true
      read -r s kib < t
      said=$(python3 -c "import json; r = json.load(open('out.json'))['summary']; print(r['success'], r['changed'])")
      want=$([ "$what" = converge ] && echo "True 3" || echo "True 0")
      [ "$said" = "$want" ] || { echo "$lang $what: the run said $said, not $want" >&2; exit 1; }
      if [ "$what" = converge ]; then converge+=("$s"); else noop+=("$s"); run_peak+=("$kib"); fi
    done
  done
  echo "| $lang | $(stat -c %s example_policy.wasm) | $(med "${compile[@]}") | $(( $(med "${compile_peak[@]}") / 1024 )) | $(med "${converge[@]}") | $(med "${noop[@]}") | $(( $(med "${run_peak[@]}") / 1024 )) |"
done
