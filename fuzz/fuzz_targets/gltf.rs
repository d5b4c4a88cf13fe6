//! glTF: the input is a `.glb` file when it starts with the GLB magic,
//! otherwise a `.gltf` JSON file (buffers as `data:` URIs, or the file
//! `buffer.bin`, which is fixed: the fuzzer varies the JSON around it).
#![no_main]

use libfuzzer_sys::fuzz_target;

/// One triangle: f32 VEC3 positions (0,0,0) (1,0,0) (0,1,0), then u16
/// indices 0 1 2 (1.0f32 is `00 00 80 3f` in little endian).
const BUFFER: [u8; 42] = [
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // (0, 0, 0)
    0, 0, 0x80, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0, // (1, 0, 0)
    0, 0, 0, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0, // (0, 1, 0)
    0, 0, 1, 0, 2, 0, // 0 1 2
];

fuzz_target!(|data: &[u8]| {
    let name = if data.starts_with(b"glTF") {
        "scene.glb"
    } else {
        "scene.gltf"
    };
    caustic_fuzz::check(caustic_fuzz::load(&[(name, data), ("buffer.bin", &BUFFER)]));
});
