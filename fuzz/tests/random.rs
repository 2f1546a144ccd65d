//! Stable-toolchain fallback for when cargo-fuzz (nightly) is unavailable:
//! a bounded loop of random inputs from a fixed seed, plus a replay of every
//! saved crash in regressions/<target>/. hack/fuzz.sh runs it.

use std::path::Path;

/// xorshift64*: reproducible without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

const SEED_CONFIG: &str = include_str!("seed-config.json");
const TOKENS: &[&str] = &[
    "KILL", "SIGTERM", "9", "-1", "99999999999999999999", "1k", "1.5G", "", "..", ".", "a/b",
    "null", "[]", "{}", "\"", "\\u0000", "-9223372036854775808", "1e400", "ü",
];

/// A mutation of the seed config: bytes flipped, cut, or a token spliced in.
fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut data = seed.to_vec();
    for _ in 0..=rng.next() % 8 {
        let at = (rng.next() as usize) % (data.len() + 1);
        match rng.next() % 4 {
            0 if at < data.len() => data[at] = rng.next() as u8,
            1 => data.truncate(at),
            _ => {
                let token = TOKENS[(rng.next() as usize) % TOKENS.len()];
                data.splice(at..at, token.bytes());
            }
        }
    }
    data
}

fn iterations() -> u64 {
    std::env::var("RUSTPOD_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

fn replay(target: &str, run: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions").join(target);
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        run(&std::fs::read(entry.path()).expect("read regression input"));
    }
}

#[test]
fn config_parse_random_and_regressions() {
    replay("config_parse", rustpod_fuzz::config_parse);
    let mut rng = Rng(0x5eed_0001);
    for _ in 0..iterations() {
        rustpod_fuzz::config_parse(&mutate(&mut rng, SEED_CONFIG.as_bytes()));
    }
}

#[test]
fn cli_args_random_and_regressions() {
    replay("cli_args", rustpod_fuzz::cli_args);
    let mut rng = Rng(0x5eed_0002);
    let seed = TOKENS.join(" ");
    for _ in 0..iterations() {
        rustpod_fuzz::cli_args(&mutate(&mut rng, seed.as_bytes()));
    }
}
