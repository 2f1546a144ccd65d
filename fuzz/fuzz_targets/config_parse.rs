// cargo-fuzz target: arbitrary bytes as config.json through parsing and validation (hack/fuzz.sh).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rustpod_fuzz::config_parse(data));
