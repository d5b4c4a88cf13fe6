// layout_check.cuh: checks a CUDA struct against its Rust twin.
//
// Each crate generates a layout header at run time from its Rust structs
// (`caustic_gpu::layout`: RUST_SIZEOF_T, RUST_ALIGNOF_T, RUST_OFFSETOF_T_f);
// a header that declares the CUDA twin of a struct follows it with
// CAUSTIC_CHECK_SIZE(T) and CAUSTIC_CHECK_FIELD(T, f) for every field, so a
// field added, moved or retyped on one side only is a compile error of every
// module that includes it: in CI's NVRTC compile test, not a wrong result on
// the GPU machine.
#pragma once

// offsetof as a constant expression: NVRTC has no <cstddef> and no
// __builtin_offsetof, but its front end (EDG) folds __INTADDR__, which is
// what EDG's own offsetof expands to.
#define CAUSTIC_OFFSETOF(T, f) ((unsigned long long)__INTADDR__(&(((T*)0)->f)))
#define CAUSTIC_CHECK_SIZE(T)                                                   \
    static_assert(sizeof(T) == RUST_SIZEOF_##T && alignof(T) == RUST_ALIGNOF_##T, \
                  "size or alignment of " #T " differs from its Rust twin")
#define CAUSTIC_CHECK_FIELD(T, f)                                     \
    static_assert(CAUSTIC_OFFSETOF(T, f) == RUST_OFFSETOF_##T##_##f, \
                  "offset of " #T "::" #f " differs from its Rust twin")
