//! PLY, ASCII and binary: the input is the whole file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    caustic_fuzz::check(caustic_fuzz::load(&[("scene.ply", data)]));
});
