#!/usr/bin/env bash
# Fuzzes rustpod for a bounded time (issue 7): config.json parsing and
# validation (`config_parse`) and the CLI's argument parsers (`cli_args`).
#   hack/fuzz.sh [SECONDS_PER_TARGET]     (default 60)
# With a nightly toolchain it runs cargo-fuzz (installed from crates.io if
# missing). Without nightly it falls back to fuzz/tests/random.rs: a bounded
# random-input loop from a fixed seed on stable (RUSTPOD_FUZZ_ITERATIONS).
# Either way, every input saved under fuzz/regressions/<target>/ is replayed
# by that test: copy a crash from fuzz/artifacts/<target>/ there to keep it.
# Not part of hack/test.sh.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${1:-60}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/rustpod-target}/fuzz"
targets=(config_parse cli_args)

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "fuzz.sh: no nightly toolchain: running the stable random-input fallback instead of cargo-fuzz" >&2
    exec cargo test --release --no-default-features --test random
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install --locked cargo-fuzz
fi
for target in "${targets[@]}"; do
    mkdir -p "corpus/$target"
    [ "$target" = config_parse ] && cp tests/seed-config.json corpus/config_parse/seed.json
    echo "fuzz.sh: $target for ${seconds}s" >&2
    cargo +nightly fuzz run "$target" "corpus/$target" -- -max_total_time="$seconds" -rss_limit_mb=2048
done
# Replay the saved regressions on stable too.
cargo test --release --no-default-features --test random
