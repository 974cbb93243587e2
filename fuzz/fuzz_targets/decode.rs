#![no_main]
// The target's code is nri_fuzz::decode (src/), shared with the corpus test.
libfuzzer_sys::fuzz_target!(|data: &[u8]| nri_fuzz::decode(data));
