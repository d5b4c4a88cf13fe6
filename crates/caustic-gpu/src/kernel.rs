//! Kernel modules and typed kernel handles.
//!
//! Every crate of caustic that carries CUDA code keeps each algorithm's
//! kernels next to its Rust code (`src/points/kdtree/build.cu` beside
//! `build_cuda.rs`); its build script (`caustic-gpu-build`) generates a
//! [`Module`] per `.cu` file and a [`Kernel`] constant per `extern "C"`
//! kernel, typed by the kernel's parameter list: `Kernel<(Ptr<f32>, u32,
//! PtrMut<u32>)>` for `k(const float* a, u32 n, u32* out)`. A launch passes
//! a tuple of [`DevicePtr`], [`DevicePtrMut`] and scalars that must match
//! that list in number, order and type, so an argument list that drifts from
//! the kernel is a compile error, not a fault on the GPU machine.
//!
//! Headers (`.cuh`) come in [`HeaderSet`]s, one per crate: the runtime's
//! ([`RUNTIME_HEADERS`](crate::RUNTIME_HEADERS): `common.cuh`, the block
//! and tile-scan helpers, the layout checks), then those of the crates a
//! module builds on. NVRTC gets them by file name, so `#include
//! "points.cuh"` needs no include path and no toolkit on disk.

use std::marker::PhantomData;

use bytemuck::Pod;

use crate::buffer::DeviceBuffer;

/// A header generated at run time: its text.
pub type GeneratedHeader = fn() -> &'static str;

/// The headers of one crate, by include name.
#[derive(Debug)]
pub struct HeaderSet {
    /// `(file name, source)` of every `src/**/*.cuh`.
    pub files: &'static [(&'static str, &'static str)],
    /// Headers generated at run time (layout headers from the Rust structs).
    pub generated: &'static [(&'static str, GeneratedHeader)],
}

impl HeaderSet {
    /// `(name, source)` of every header of the set.
    pub fn headers(&self) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
        self.files
            .iter()
            .copied()
            .chain(self.generated.iter().map(|(name, text)| (*name, text())))
    }
}

/// One `.cu` file: its source, the headers it may include, its kernels.
#[derive(Debug)]
pub struct Module {
    /// `crate/src/path.cu`: unique over the workspace; names the module in
    /// errors and keys the compile and load caches.
    pub name: &'static str,
    pub source: &'static str,
    /// Searched in order; a name found in two sets is an error of the
    /// compile test.
    pub headers: &'static [&'static HeaderSet],
    /// The kernels' names, in source order ([`Kernel::index`] indexes this).
    pub kernels: &'static [&'static str],
}

impl Module {
    /// Every header the module may include, as `(name, source)`.
    pub fn headers(&self) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
        self.headers.iter().flat_map(|set| set.headers())
    }

    /// The file name after `src/`, for messages.
    pub fn file_name(&self) -> &'static str {
        self.name.rsplit('/').next().unwrap_or(self.name)
    }

    /// The value of `#define NAME VALUE` (an integer, `u` suffix allowed)
    /// in the module or one of its headers, for tests that check that the
    /// host launches with the kernels' own block sizes. Panics when absent.
    pub fn define(&self, name: &str) -> usize {
        let prefix = format!("#define {name} ");
        std::iter::once(self.source)
            .chain(self.headers().map(|(_, text)| text))
            .flat_map(str::lines)
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|v| v.trim().trim_end_matches('u').parse().ok())
            .unwrap_or_else(|| panic!("no numeric #define {name} in {}", self.name))
    }
}

/// A kernel of a [`Module`]; `S` is its parameter list as a tuple of
/// [`Param`] types.
pub struct Kernel<S> {
    module: &'static Module,
    index: usize,
    name: &'static str,
    _signature: PhantomData<fn(S)>,
}

impl<S> Clone for Kernel<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Kernel<S> {}

impl<S> std::fmt::Debug for Kernel<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kernel({} in {})", self.name, self.module.name)
    }
}

impl<S> Kernel<S> {
    /// Used by the generated code only.
    #[doc(hidden)]
    pub const fn new(module: &'static Module, index: usize, name: &'static str) -> Kernel<S> {
        Kernel {
            module,
            index,
            name,
            _signature: PhantomData,
        }
    }

    /// The module that defines the kernel.
    pub const fn module(self) -> &'static Module {
        self.module
    }

    /// Position in `self.module().kernels`.
    pub const fn index(self) -> usize {
        self.index
    }

    /// The kernel's symbol name.
    pub const fn name(self) -> &'static str {
        self.name
    }
}

/// A kernel parameter's value as the driver takes it.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum RawArg {
    U32(u32),
    I32(i32),
    U64(u64),
    F32(f32),
    F64(f64),
}

impl RawArg {
    pub(crate) fn as_param(&mut self) -> *mut std::ffi::c_void {
        match self {
            RawArg::U32(v) => (v as *mut u32).cast(),
            RawArg::I32(v) => (v as *mut i32).cast(),
            RawArg::U64(v) => (v as *mut u64).cast(),
            RawArg::F32(v) => (v as *mut f32).cast(),
            RawArg::F64(v) => (v as *mut f64).cast(),
        }
    }
}

/// The most parameters a kernel may have.
pub(crate) const MAX_PARAMS: usize = 24;

/// A launch's encoded arguments.
#[doc(hidden)]
pub struct RawArgs {
    values: [RawArg; MAX_PARAMS],
    len: usize,
}

impl RawArgs {
    fn new() -> RawArgs {
        RawArgs {
            values: [RawArg::U32(0); MAX_PARAMS],
            len: 0,
        }
    }

    fn push(&mut self, arg: RawArg) {
        self.values[self.len] = arg;
        self.len += 1;
    }

    pub(crate) fn values_mut(&mut self) -> &mut [RawArg] {
        &mut self.values[..self.len]
    }
}

/// One parameter type of a kernel signature: a scalar (`u32`, `u64`,
/// `i32`, `f32`, `f64`) passed by value, or a pointer marker ([`Ptr`],
/// [`PtrMut`]). `Value<'a>` is what a launch passes for it.
pub trait Param: sealed::Sealed {
    type Value<'a>;
    #[doc(hidden)]
    fn encode(value: Self::Value<'_>) -> RawArg;
}

mod sealed {
    /// Only this module's parameter types: the driver takes nothing else.
    pub trait Sealed {}
    impl<T> Sealed for super::Ptr<T> {}
    impl<T> Sealed for super::PtrMut<T> {}
    impl Sealed for u32 {}
    impl Sealed for i32 {}
    impl Sealed for u64 {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// Marks a `const T*` parameter; a launch passes a [`DevicePtr<T>`].
pub struct Ptr<T>(PhantomData<T>);

/// Marks a `T*` parameter; a launch passes a [`DevicePtrMut<T>`].
pub struct PtrMut<T>(PhantomData<T>);

impl<T: Pod> Param for Ptr<T> {
    type Value<'a> = DevicePtr<'a, T>;
    fn encode(value: DevicePtr<'_, T>) -> RawArg {
        RawArg::U64(value.address)
    }
}

impl<T: Pod> Param for PtrMut<T> {
    type Value<'a> = DevicePtrMut<'a, T>;
    fn encode(value: DevicePtrMut<'_, T>) -> RawArg {
        RawArg::U64(value.address)
    }
}

macro_rules! scalar_param {
    ($($ty:ty => $variant:ident),*) => {$(
        impl Param for $ty {
            type Value<'a> = $ty;
            fn encode(value: $ty) -> RawArg {
                RawArg::$variant(value)
            }
        }
    )*};
}
scalar_param!(u32 => U32, i32 => I32, u64 => U64, f32 => F32, f64 => F64);

/// A kernel's parameter list: a tuple of [`Param`]s. `Args<'a>` is the
/// tuple of values a launch passes.
pub trait Signature {
    type Args<'a>;
    #[doc(hidden)]
    fn encode(args: Self::Args<'_>) -> RawArgs;
}

macro_rules! tuple_signature {
    ($($p:ident $v:ident),*) => {
        impl<$($p: Param),*> Signature for ($($p,)*) {
            type Args<'a> = ($($p::Value<'a>,)*);
            #[allow(unused_mut, unused_variables, clippy::unused_unit)]
            fn encode(args: Self::Args<'_>) -> RawArgs {
                let ($($v,)*) = args;
                let mut raw = RawArgs::new();
                $(raw.push($p::encode($v));)*
                raw
            }
        }
    };
}

tuple_signature!();
tuple_signature!(A a);
tuple_signature!(A a, B b);
tuple_signature!(A a, B b, C c);
tuple_signature!(A a, B b, C c, D d);
tuple_signature!(A a, B b, C c, D d, E e);
tuple_signature!(A a, B b, C c, D d, E e, F f);
tuple_signature!(A a, B b, C c, D d, E e, F f, G g);
tuple_signature!(A a, B b, C c, D d, E e, F f, G g, H h);
tuple_signature!(A a, B b, C c, D d, E e, F f, G g, H h, I i);
tuple_signature!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j);
tuple_signature!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k);
tuple_signature!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l);
tuple_signature!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m);
tuple_signature!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m, N n);
tuple_signature!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m, N n, O o);
tuple_signature!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m, N n, O o, P p);
tuple_signature!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m, N n, O o, P p, Q q);
tuple_signature!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m, N n, O o, P p, Q q, R r);
tuple_signature!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m, N n, O o, P p, Q q, R r, S s);
tuple_signature!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m, N n, O o, P p, Q q, R r, S s, T t);
tuple_signature!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m, N n, O o, P p, Q q, R r, S s, T t, U u);
tuple_signature!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m, N n, O o, P p, Q q, R r, S s, T t, U u, V v);

/// The device address of a buffer's elements (or of a part of them), for a
/// `const T*` parameter; it borrows the buffer, so the buffer outlives the
/// launch it is passed to (buffers are freed in stream order after that).
/// The null pointer ([`DevicePtr::null`]) is for optional parameters.
pub struct DevicePtr<'a, T> {
    address: u64,
    _buffer: PhantomData<&'a T>,
}

/// Like [`DevicePtr`], for a `T*` parameter the kernel may write through:
/// taken from a mutably borrowed buffer.
pub struct DevicePtrMut<'a, T> {
    address: u64,
    _buffer: PhantomData<&'a mut T>,
}

impl<T> Clone for DevicePtr<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for DevicePtr<'_, T> {}

impl<'a, T: Pod> DevicePtr<'a, T> {
    pub(crate) fn of(buffer: &'a DeviceBuffer<T>) -> Self {
        DevicePtr {
            address: buffer.device_ptr(),
            _buffer: PhantomData,
        }
    }

    /// The null pointer, for a parameter the kernel reads only when non-null.
    pub fn null() -> Self {
        DevicePtr {
            address: 0,
            _buffer: PhantomData,
        }
    }

    /// The device address.
    pub fn address(self) -> u64 {
        self.address
    }

    /// The same bytes seen as elements of `U`, for a kernel that reads a
    /// `[f32; 3]` buffer as `float*`; `T`'s size must be a multiple of `U`'s.
    pub fn cast<U: Pod>(self) -> DevicePtr<'a, U> {
        assert_eq!(
            size_of::<T>() % size_of::<U>(),
            0,
            "cast to a larger element"
        );
        DevicePtr {
            address: self.address,
            _buffer: PhantomData,
        }
    }
}

impl<'a, T: Pod> DevicePtrMut<'a, T> {
    pub(crate) fn of(buffer: &'a mut DeviceBuffer<T>) -> Self {
        DevicePtrMut {
            address: buffer.device_ptr(),
            _buffer: PhantomData,
        }
    }

    /// The null pointer, for an output the kernel writes only when non-null.
    pub fn null() -> Self {
        DevicePtrMut {
            address: 0,
            _buffer: PhantomData,
        }
    }

    /// The device address.
    pub fn address(&self) -> u64 {
        self.address
    }

    /// A read-only copy of the pointer, for a kernel that takes the same
    /// memory as input and output.
    pub fn as_const(&self) -> DevicePtr<'_, T> {
        DevicePtr {
            address: self.address,
            _buffer: PhantomData,
        }
    }

    /// The same bytes seen as elements of `U` (see [`DevicePtr::cast`]).
    pub fn cast<U: Pod>(self) -> DevicePtrMut<'a, U> {
        assert_eq!(
            size_of::<T>() % size_of::<U>(),
            0,
            "cast to a larger element"
        );
        DevicePtrMut {
            address: self.address,
            _buffer: PhantomData,
        }
    }

    /// Splits off the elements from `mid` on, so one buffer can serve two
    /// output parameters (tile status words and a counter, say).
    pub fn split_at(self, mid: usize) -> (DevicePtrMut<'a, T>, DevicePtrMut<'a, T>) {
        let tail = DevicePtrMut {
            address: self.address + (mid * size_of::<T>()) as u64,
            _buffer: PhantomData,
        };
        (self, tail)
    }
}

impl<T: Pod> DeviceBuffer<T> {
    /// The buffer as a read-only kernel argument.
    pub fn ptr(&self) -> DevicePtr<'_, T> {
        DevicePtr::of(self)
    }

    /// The buffer as a kernel argument the kernel may write.
    pub fn ptr_mut(&mut self) -> DevicePtrMut<'_, T> {
        DevicePtrMut::of(self)
    }

    /// Elements `start..` as a read-only kernel argument.
    pub fn ptr_at(&self, start: usize) -> DevicePtr<'_, T> {
        assert!(
            start <= self.len(),
            "offset {start} past the buffer's {}",
            self.len()
        );
        DevicePtr {
            address: self.device_ptr() + (start * size_of::<T>()) as u64,
            _buffer: PhantomData,
        }
    }

    /// Elements `start..` as a kernel argument the kernel may write.
    pub fn ptr_mut_at(&mut self, start: usize) -> DevicePtrMut<'_, T> {
        assert!(
            start <= self.len(),
            "offset {start} past the buffer's {}",
            self.len()
        );
        DevicePtrMut {
            address: self.device_ptr() + (start * size_of::<T>()) as u64,
            _buffer: PhantomData,
        }
    }
}

/// Encodes a launch's arguments for the driver.
pub(crate) fn encode<S: Signature>(args: S::Args<'_>) -> RawArgs {
    S::encode(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuples_encode_in_order() {
        type S = (u32, f32, u64, i32, f64);
        let mut raw = encode::<S>((7, 1.5, 9, -2, 0.25));
        let values: Vec<String> = raw.values_mut().iter().map(|v| format!("{v:?}")).collect();
        assert_eq!(
            values,
            ["U32(7)", "F32(1.5)", "U64(9)", "I32(-2)", "F64(0.25)"]
        );
    }

    #[test]
    fn null_pointers_encode_as_zero() {
        type S = (Ptr<u32>, PtrMut<f32>);
        let mut raw = encode::<S>((DevicePtr::null(), DevicePtrMut::null()));
        let values: Vec<String> = raw.values_mut().iter().map(|v| format!("{v:?}")).collect();
        assert_eq!(values, ["U64(0)", "U64(0)"]);
    }
}
