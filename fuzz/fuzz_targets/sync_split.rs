#![no_main]
// The target's code is nri_fuzz::sync_split (src/), shared with the corpus test.
libfuzzer_sys::fuzz_target!(|data: &[u8]| nri_fuzz::sync_split(data));
