//! Generates `$OUT_DIR/cuda_kernels.rs` from the runtime's own CUDA sources
//! (`src/**/*.cu`, the data-parallel primitives, and `src/**/*.cuh`, the
//! headers every kernel module may include): see `caustic-gpu-build`.

fn main() {
    caustic_gpu_build::Kernels::new()
        .runtime("crate")
        .ty("Ray32", "[u32; 8]")
        .ty("Record32", "[u32; 8]")
        .generate();
}
