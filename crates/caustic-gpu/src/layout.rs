//! The byte layout of the structs that Rust and CUDA share, written out for
//! the compiler.
//!
//! Each crate with kernels builds a layout header at run time from its Rust
//! definitions (`size_of`, `align_of`, `offset_of!`) with
//! [`layout_header!`](crate::layout_header) and offers it to NVRTC as a
//! generated header of its [`HeaderSet`](crate::HeaderSet). The CUDA twin of
//! each struct is followed by `CAUSTIC_CHECK_SIZE`/`CAUSTIC_CHECK_FIELD`
//! (`layout_check.cuh`), which `static_assert` its size, alignment and
//! every field offset against those numbers: a field added, moved or
//! retyped on one side only is a compile error of every module that
//! includes it, in CI's NVRTC compile test. Nothing is kept in step by hand.

/// The text of a layout header: `RUST_SIZEOF_T`, `RUST_ALIGNOF_T` and
/// `RUST_OFFSETOF_T_field` for each listed struct, built once per process.
///
/// ```
/// #[repr(C)]
/// struct Pair { a: u32, b: f32 }
/// fn header() -> &'static str {
///     caustic_gpu::layout_header!("pair_layout.cuh", [Pair as "Pair" { a, b }])
/// }
/// assert!(header().contains("#define RUST_OFFSETOF_Pair_b 4"));
/// ```
#[macro_export]
macro_rules! layout_header {
    ($file:literal, [$($ty:ty as $name:literal { $($field:ident),+ $(,)? }),+ $(,)?]) => {{
        static HEADER: ::std::sync::OnceLock<String> = ::std::sync::OnceLock::new();
        HEADER.get_or_init(|| {
            use ::std::fmt::Write as _;
            let mut s = format!(
                "// {}: generated at run time from the Rust definitions.\n#pragma once\n",
                $file
            );
            $(
                writeln!(s, "#define RUST_SIZEOF_{} {}", $name, ::std::mem::size_of::<$ty>()).unwrap();
                writeln!(s, "#define RUST_ALIGNOF_{} {}", $name, ::std::mem::align_of::<$ty>()).unwrap();
                $(
                    writeln!(
                        s,
                        "#define RUST_OFFSETOF_{}_{} {}",
                        $name,
                        stringify!($field),
                        ::std::mem::offset_of!($ty, $field)
                    )
                    .unwrap();
                )+
            )+
            s
        })
        .as_str()
    }};
}
