#!/usr/bin/env bash
# Fuzzes rustpod for a bounded time (issue 7): config.json parsing and
# validation (`config_parse`) and the CLI's argument parsers (`cli_args`).
#   hack/fuzz.sh [SECONDS_PER_TARGET]     (default 60)
# Runs cargo-fuzz (libFuzzer, coverage-guided; installed from crates.io if
# missing). With a nightly toolchain it adds AddressSanitizer; on stable it
# runs with `--sanitizer none` (the targets are safe Rust: a panic, an abort
# or a timeout is what it finds). Every input saved under
# fuzz/regressions/<target>/ is replayed on stable afterwards by
# fuzz/tests/random.rs: copy a crash from fuzz/artifacts/<target>/ there to
# keep it. Not part of hack/test.sh.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${1:-60}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/rustpod-target}/fuzz"
targets=(config_parse cli_args)

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz from crates.io" >&2
    cargo install --quiet --locked cargo-fuzz
fi
toolchain=() sanitizer=(--sanitizer none)
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    toolchain=(+nightly) sanitizer=()
fi
for target in "${targets[@]}"; do
    corpus="$PWD/corpus/$target"
    mkdir -p "$corpus"
    [ "$target" = config_parse ] && cp tests/seed-config.json "$corpus/seed.json"
    echo "fuzz.sh: $target for ${seconds}s (${toolchain[*]:-stable} ${sanitizer[*]:-with ASan})" >&2
    cargo "${toolchain[@]}" fuzz run "${sanitizer[@]}" "$target" "$corpus" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10
done
# Replay the saved regressions on stable too.
cargo test --release --no-default-features --test random
