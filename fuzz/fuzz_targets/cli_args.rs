// cargo-fuzz target: arbitrary words through the CLI's value parsers (signals, sizes, ids; hack/fuzz.sh).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rustpod_fuzz::cli_args(data));
