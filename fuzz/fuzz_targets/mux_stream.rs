#![no_main]
// The target's code is nri_fuzz::mux_stream (src/), shared with the corpus test.
libfuzzer_sys::fuzz_target!(|data: &[u8]| nri_fuzz::mux_stream(data));
