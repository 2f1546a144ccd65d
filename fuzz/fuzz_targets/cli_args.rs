#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rustpod_fuzz::cli_args(data));
