//! The SIMD vocabulary of the wide BVH: [`Lanes`], a vector of `N` `f32`
//! with exactly the operations the node and triangle tests need, written
//! once per instruction set:
//!
//! - [`Avx8k`]: 8 lanes in a `__m256` with comparisons into AVX-512 mask
//!   registers (AVX-512VL, chosen at run time by [`Avx512::detect`]);
//! - [`Avx8`]: 8 lanes in a `__m256` (AVX2, chosen at run time by
//!   [`Avx2::detect`]);
//! - [`Sse4`]: 4 lanes in a `__m128` (SSE2, part of every x86_64 CPU);
//! - [`Portable`]: `N` lanes in a plain array, for other CPUs; the compiler
//!   vectorises its loops where it can.
//!
//! Exactness: every operation is one IEEE-754 single-precision operation per
//! lane, rounded to nearest, never fused (no FMA: the watertight test is
//! specified without it, and a fused multiply-add rounds differently),
//! except [`Lanes::mul_add`], which the AVX backends fuse: the box tests'
//! plane distances use it, whose margins cover both roundings (see
//! `traverse`), so their hits are brute force's either way.
//! `min_or`/`max_or` have the semantics of x86's `minps` / `maxps`
//! (`a < b ? a : b`), so a NaN in the first operand leaves the second,
//! which the slab test relies on (see `bvh::traverse`). The portable and
//! SIMD versions therefore give the same bits (`mul_add` those of a fused
//! or an unfused multiply-add); a test checks it.
//!
//! Soundness: running an AVX instruction on a CPU without AVX is undefined
//! behaviour, so safe code must not be able to make an [`Avx8`] there.
//! Every backend names a token type, [`Lanes::Isa`], that proves the CPU
//! runs its instructions, and the only ways to make a vector from scalars,
//! [`Lanes::splat`] and [`Lanes::load`], take one. [`Avx2`] tokens come
//! only from [`Avx2::detect`] and [`Avx512`] tokens only from
//! [`Avx512::detect`] (`is_x86_feature_detected!`); [`Sse2`] and
//! [`AnyCpu`] tokens are free, as their instructions are part of the
//! target. Every other vector is computed from vectors, so an `Avx8` is
//! itself proof that the CPU has AVX2 (an `Avx8k`, AVX-512), and its
//! methods may run those instructions without further checks. Speed is another matter: the
//! methods are `#[inline(always)]` so that callers compiled with
//! `#[target_feature(enable = "avx2")]` (see `accel`) get the instructions
//! inline; elsewhere each becomes a call, correct but slow.

use std::ops::{Add, BitAnd, BitOr, Div, Mul, Sub};

/// A vector of `N` `f32` lanes with lane-wise IEEE arithmetic.
pub trait Lanes<const N: usize>:
    Copy + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self>
{
    /// Lane-wise comparison results.
    type Mask: Copy + BitAnd<Output = Self::Mask> + BitOr<Output = Self::Mask>;
    /// The token that proves this CPU runs the backend's instructions (see
    /// the module docs): [`Avx2`], [`Sse2`] or [`AnyCpu`].
    type Isa: Copy;

    /// `x` in every lane.
    fn splat(isa: Self::Isa, x: f32) -> Self;
    /// The lanes of `row`.
    fn load(isa: Self::Isa, row: &[f32; N]) -> Self;
    fn to_array(self) -> [f32; N];
    fn abs(self) -> Self;
    /// `self * a + b`: one rounding (a fused multiply-add) on the AVX
    /// backends, two on the others. Only for results whose error bound
    /// covers both (the box tests' plane distances, see `traverse`).
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// `self < other ? self : other` per lane: `other` when either is NaN
    /// in the first operand's place.
    fn min_or(self, other: Self) -> Self;
    /// `self > other ? self : other` per lane.
    fn max_or(self, other: Self) -> Self;
    fn lt(self, other: Self) -> Self::Mask;
    fn le(self, other: Self) -> Self::Mask;
    fn gt(self, other: Self) -> Self::Mask;
    fn eq(self, other: Self) -> Self::Mask;
    /// Not equal and neither NaN.
    fn ne_ordered(self, other: Self) -> Self::Mask;
    /// Lane `i` of the mask as bit `i`.
    fn bits(mask: Self::Mask) -> u32;
    /// `!mask & other`.
    fn andnot(mask: Self::Mask, other: Self::Mask) -> Self::Mask;
    /// Per lane, `a` where `mask` is set, else `b` (bits copied unchanged).
    fn select(mask: Self::Mask, a: Self, b: Self) -> Self;
    /// Per lane, the bits of `self` or'ed with those of `bits` where `mask`
    /// is set (lanes as bit sets, not numbers: the streams' child masks).
    fn or_where(self, mask: Self::Mask, bits: Self) -> Self;
    /// Runs `f` in a cold function of its own compiled with the backend's
    /// instruction set: a rare path kept out of a hot loop's registers. A
    /// plain `#[inline(never)]` function would be compiled without the
    /// instruction set, every SIMD operation in it a call (see the module
    /// docs); `f`, inlined into this one, gets them inline.
    fn out_of_line<R>(isa: Self::Isa, f: impl FnOnce() -> R) -> R;
}

/// The token of [`Portable`], whose plain arithmetic runs on any CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AnyCpu;

/// `N` lanes in an array: the fallback for CPUs without a SIMD backend here.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Portable<const N: usize>(pub [f32; N]);

macro_rules! portable_binary {
    ($trait:ident, $method:ident, $op:tt) => {
        impl<const N: usize> $trait for Portable<N> {
            type Output = Self;
            #[inline(always)]
            fn $method(self, rhs: Self) -> Self {
                Self(std::array::from_fn(|i| self.0[i] $op rhs.0[i]))
            }
        }
    };
}

portable_binary!(Add, add, +);
portable_binary!(Sub, sub, -);
portable_binary!(Mul, mul, *);
portable_binary!(Div, div, /);

impl<const N: usize> Portable<N> {
    #[inline(always)]
    fn mask(self, other: Self, pred: impl Fn(f32, f32) -> bool) -> u32 {
        (0..N).fold(0, |bits, i| {
            bits | (u32::from(pred(self.0[i], other.0[i])) << i)
        })
    }
}

impl<const N: usize> Lanes<N> for Portable<N> {
    type Mask = u32;
    type Isa = AnyCpu;

    #[inline(never)]
    #[cold]
    fn out_of_line<R>(_: AnyCpu, f: impl FnOnce() -> R) -> R {
        f()
    }

    #[inline(always)]
    fn splat(_: AnyCpu, x: f32) -> Self {
        Self([x; N])
    }
    #[inline(always)]
    fn load(_: AnyCpu, row: &[f32; N]) -> Self {
        Self(*row)
    }
    #[inline(always)]
    fn to_array(self) -> [f32; N] {
        self.0
    }
    #[inline(always)]
    fn abs(self) -> Self {
        Self(self.0.map(f32::abs))
    }
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        self * a + b
    }
    #[inline(always)]
    fn min_or(self, other: Self) -> Self {
        Self(std::array::from_fn(|i| {
            if self.0[i] < other.0[i] {
                self.0[i]
            } else {
                other.0[i]
            }
        }))
    }
    #[inline(always)]
    fn max_or(self, other: Self) -> Self {
        Self(std::array::from_fn(|i| {
            if self.0[i] > other.0[i] {
                self.0[i]
            } else {
                other.0[i]
            }
        }))
    }
    #[inline(always)]
    fn lt(self, other: Self) -> u32 {
        self.mask(other, |a, b| a < b)
    }
    #[inline(always)]
    fn le(self, other: Self) -> u32 {
        self.mask(other, |a, b| a <= b)
    }
    #[inline(always)]
    fn gt(self, other: Self) -> u32 {
        self.mask(other, |a, b| a > b)
    }
    #[inline(always)]
    fn eq(self, other: Self) -> u32 {
        self.mask(other, |a, b| a == b)
    }
    #[inline(always)]
    fn ne_ordered(self, other: Self) -> u32 {
        self.mask(other, |a, b| a != b && !a.is_nan() && !b.is_nan())
    }
    #[inline(always)]
    fn bits(mask: u32) -> u32 {
        mask
    }
    #[inline(always)]
    fn andnot(mask: u32, other: u32) -> u32 {
        !mask & other
    }
    #[inline(always)]
    fn select(mask: u32, a: Self, b: Self) -> Self {
        Self(std::array::from_fn(|i| {
            if mask & (1 << i) != 0 { a.0[i] } else { b.0[i] }
        }))
    }
    #[inline(always)]
    fn or_where(self, mask: u32, bits: Self) -> Self {
        Self(std::array::from_fn(|i| {
            let add = if mask & (1 << i) != 0 {
                bits.0[i].to_bits()
            } else {
                0
            };
            f32::from_bits(self.0[i].to_bits() | add)
        }))
    }
}

#[cfg(target_arch = "x86_64")]
pub use x86::{Avx2, Avx8, Avx8k, Avx512, Mask4, Mask8, MaskK, Sse2, Sse4};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Lanes;
    use std::arch::x86_64::*;
    use std::ops::{Add, BitAnd, BitOr, Div, Mul, Sub};

    /// Proof that this CPU runs AVX2 (with BMI1, BMI2, LZCNT and POPCNT,
    /// which every AVX2 CPU has): the token of [`Avx8`]. The field is
    /// private, so [`Avx2::detect`] is the only way to get one.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Avx2(());

    impl Avx2 {
        /// The token, where this CPU has AVX2 (and so AVX) and the bit
        /// instructions the AVX2 code is compiled with (`accel`).
        pub fn detect() -> Option<Self> {
            let all = is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("bmi1")
                && is_x86_feature_detected!("bmi2")
                && is_x86_feature_detected!("lzcnt")
                && is_x86_feature_detected!("popcnt");
            all.then_some(Self(()))
        }
    }

    /// Proof that this CPU runs AVX-512 F, VL, BW and DQ (and so AVX2),
    /// with BMI1, BMI2, LZCNT and POPCNT: the token of [`Avx8k`]. Only
    /// [`Avx512::detect`] makes one.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Avx512(());

    impl Avx512 {
        /// The token, where this CPU has every feature the AVX-512 code is
        /// compiled with (`accel`'s `AVX512_FEATURES`).
        pub fn detect() -> Option<Self> {
            let all = is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512vl")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512dq")
                && is_x86_feature_detected!("bmi1")
                && is_x86_feature_detected!("bmi2")
                && is_x86_feature_detected!("lzcnt")
                && is_x86_feature_detected!("popcnt");
            all.then_some(Self(()))
        }
    }

    /// The token of [`Sse4`]: SSE2 is part of every x86_64 CPU.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct Sse2;

    /// 8 lanes in an AVX register; made only with an [`Avx2`] token (see
    /// the module docs).
    #[derive(Clone, Copy, Debug)]
    pub struct Avx8(__m256);

    /// 8 lanes in an AVX register whose comparisons go to an AVX-512 mask
    /// register (AVX-512VL): a compare is one instruction into a `k`
    /// register, the mask logic is integer logic on 8 bits, and
    /// [`Lanes::bits`] is free where [`Avx8`] needs a `movmskps`. Made only
    /// with an [`Avx512`] token.
    #[derive(Clone, Copy, Debug)]
    pub struct Avx8k(__m256);

    /// Comparison results of [`Avx8k`]: bit `i` for lane `i`.
    #[derive(Clone, Copy, Debug)]
    pub struct MaskK(__mmask8);

    impl BitAnd for MaskK {
        type Output = Self;
        #[inline(always)]
        fn bitand(self, rhs: Self) -> Self {
            Self(self.0 & rhs.0)
        }
    }

    impl BitOr for MaskK {
        type Output = Self;
        #[inline(always)]
        fn bitor(self, rhs: Self) -> Self {
            Self(self.0 | rhs.0)
        }
    }

    /// 4 lanes in an SSE register (baseline x86_64).
    #[derive(Clone, Copy, Debug)]
    pub struct Sse4(__m128);

    /// Comparison results of [`Avx8`].
    #[derive(Clone, Copy, Debug)]
    pub struct Mask8(__m256);

    /// Comparison results of [`Sse4`].
    #[derive(Clone, Copy, Debug)]
    pub struct Mask4(__m128);

    /// Implements the arithmetic operators and mask logic of one backend.
    macro_rules! backend_ops {
        ($vec:ident, $mask:ident, $add:ident, $sub:ident, $mul:ident, $div:ident, $and:ident, $or:ident) => {
            impl Add for $vec {
                type Output = Self;
                #[inline(always)]
                fn add(self, rhs: Self) -> Self {
                    // SAFETY: `self` exists, so the CPU runs the backend's
                    // instructions (module docs).
                    Self(unsafe { $add(self.0, rhs.0) })
                }
            }
            impl Sub for $vec {
                type Output = Self;
                #[inline(always)]
                fn sub(self, rhs: Self) -> Self {
                    // SAFETY: as above.
                    Self(unsafe { $sub(self.0, rhs.0) })
                }
            }
            impl Mul for $vec {
                type Output = Self;
                #[inline(always)]
                fn mul(self, rhs: Self) -> Self {
                    // SAFETY: as above.
                    Self(unsafe { $mul(self.0, rhs.0) })
                }
            }
            impl Div for $vec {
                type Output = Self;
                #[inline(always)]
                fn div(self, rhs: Self) -> Self {
                    // SAFETY: as above.
                    Self(unsafe { $div(self.0, rhs.0) })
                }
            }
            impl BitAnd for $mask {
                type Output = Self;
                #[inline(always)]
                fn bitand(self, rhs: Self) -> Self {
                    // SAFETY: as above.
                    Self(unsafe { $and(self.0, rhs.0) })
                }
            }
            impl BitOr for $mask {
                type Output = Self;
                #[inline(always)]
                fn bitor(self, rhs: Self) -> Self {
                    // SAFETY: as above.
                    Self(unsafe { $or(self.0, rhs.0) })
                }
            }
        };
    }

    backend_ops!(
        Avx8,
        Mask8,
        _mm256_add_ps,
        _mm256_sub_ps,
        _mm256_mul_ps,
        _mm256_div_ps,
        _mm256_and_ps,
        _mm256_or_ps
    );
    /// The arithmetic operators of a backend whose masks are plain bits.
    macro_rules! arithmetic_ops {
        ($vec:ident, $add:ident, $sub:ident, $mul:ident, $div:ident) => {
            impl Add for $vec {
                type Output = Self;
                #[inline(always)]
                fn add(self, rhs: Self) -> Self {
                    // SAFETY: `self` exists, so the CPU runs the backend's
                    // instructions (module docs).
                    Self(unsafe { $add(self.0, rhs.0) })
                }
            }
            impl Sub for $vec {
                type Output = Self;
                #[inline(always)]
                fn sub(self, rhs: Self) -> Self {
                    // SAFETY: as above.
                    Self(unsafe { $sub(self.0, rhs.0) })
                }
            }
            impl Mul for $vec {
                type Output = Self;
                #[inline(always)]
                fn mul(self, rhs: Self) -> Self {
                    // SAFETY: as above.
                    Self(unsafe { $mul(self.0, rhs.0) })
                }
            }
            impl Div for $vec {
                type Output = Self;
                #[inline(always)]
                fn div(self, rhs: Self) -> Self {
                    // SAFETY: as above.
                    Self(unsafe { $div(self.0, rhs.0) })
                }
            }
        };
    }

    arithmetic_ops!(
        Avx8k,
        _mm256_add_ps,
        _mm256_sub_ps,
        _mm256_mul_ps,
        _mm256_div_ps
    );
    backend_ops!(
        Sse4, Mask4, _mm_add_ps, _mm_sub_ps, _mm_mul_ps, _mm_div_ps, _mm_and_ps, _mm_or_ps
    );

    // SAFETY (every `unsafe` block below): the CPU has AVX2 wherever an
    // `Avx8` or an `Avx2` token exists (module docs), and SSE2 is part of
    // x86_64; loads and stores go through references to `[f32; N]`, with
    // unaligned instructions.
    impl Lanes<8> for Avx8 {
        type Mask = Mask8;
        type Isa = Avx2;

        #[inline(always)]
        fn out_of_line<R>(_: Avx2, f: impl FnOnce() -> R) -> R {
            #[target_feature(enable = "avx2,fma,bmi1,bmi2,lzcnt,popcnt")]
            #[inline(never)]
            #[cold]
            unsafe fn run<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            // SAFETY: the token proves the CPU has these features (module
            // docs; the list is the one `accel` traces with).
            unsafe { run(f) }
        }

        #[inline(always)]
        fn splat(_: Avx2, x: f32) -> Self {
            Self(unsafe { _mm256_set1_ps(x) })
        }
        #[inline(always)]
        fn load(_: Avx2, row: &[f32; 8]) -> Self {
            Self(unsafe { _mm256_loadu_ps(row.as_ptr()) })
        }
        #[inline(always)]
        fn to_array(self) -> [f32; 8] {
            let mut out = [0.0; 8];
            unsafe { _mm256_storeu_ps(out.as_mut_ptr(), self.0) };
            out
        }
        #[inline(always)]
        fn abs(self) -> Self {
            Self(unsafe { _mm256_andnot_ps(_mm256_set1_ps(-0.0), self.0) })
        }
        #[inline(always)]
        fn mul_add(self, a: Self, b: Self) -> Self {
            Self(unsafe { _mm256_fmadd_ps(self.0, a.0, b.0) })
        }
        #[inline(always)]
        fn min_or(self, other: Self) -> Self {
            Self(unsafe { _mm256_min_ps(self.0, other.0) })
        }
        #[inline(always)]
        fn max_or(self, other: Self) -> Self {
            Self(unsafe { _mm256_max_ps(self.0, other.0) })
        }
        #[inline(always)]
        fn lt(self, other: Self) -> Mask8 {
            Mask8(unsafe { _mm256_cmp_ps::<_CMP_LT_OQ>(self.0, other.0) })
        }
        #[inline(always)]
        fn le(self, other: Self) -> Mask8 {
            Mask8(unsafe { _mm256_cmp_ps::<_CMP_LE_OQ>(self.0, other.0) })
        }
        #[inline(always)]
        fn gt(self, other: Self) -> Mask8 {
            Mask8(unsafe { _mm256_cmp_ps::<_CMP_GT_OQ>(self.0, other.0) })
        }
        #[inline(always)]
        fn eq(self, other: Self) -> Mask8 {
            Mask8(unsafe { _mm256_cmp_ps::<_CMP_EQ_OQ>(self.0, other.0) })
        }
        #[inline(always)]
        fn ne_ordered(self, other: Self) -> Mask8 {
            Mask8(unsafe { _mm256_cmp_ps::<_CMP_NEQ_OQ>(self.0, other.0) })
        }
        #[inline(always)]
        fn bits(mask: Mask8) -> u32 {
            unsafe { _mm256_movemask_ps(mask.0) as u32 }
        }
        #[inline(always)]
        fn andnot(mask: Mask8, other: Mask8) -> Mask8 {
            Mask8(unsafe { _mm256_andnot_ps(mask.0, other.0) })
        }
        #[inline(always)]
        fn select(mask: Mask8, a: Self, b: Self) -> Self {
            Self(unsafe { _mm256_blendv_ps(b.0, a.0, mask.0) })
        }
        #[inline(always)]
        fn or_where(self, mask: Mask8, bits: Self) -> Self {
            Self(unsafe { _mm256_or_ps(self.0, _mm256_and_ps(mask.0, bits.0)) })
        }
    }

    // SAFETY (every `unsafe` block below): the CPU has AVX-512 F, VL, BW
    // and DQ wherever an `Avx8k` or an `Avx512` token exists (module docs).
    impl Lanes<8> for Avx8k {
        type Mask = MaskK;
        type Isa = Avx512;

        #[inline(always)]
        fn out_of_line<R>(_: Avx512, f: impl FnOnce() -> R) -> R {
            #[target_feature(
                enable = "avx2,fma,avx512f,avx512vl,avx512bw,avx512dq,bmi1,bmi2,lzcnt,popcnt"
            )]
            #[inline(never)]
            #[cold]
            unsafe fn run<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            // SAFETY: the token proves the CPU has these features (module
            // docs; the list is the one `accel` traces with).
            unsafe { run(f) }
        }

        #[inline(always)]
        fn splat(_: Avx512, x: f32) -> Self {
            Self(unsafe { _mm256_set1_ps(x) })
        }
        #[inline(always)]
        fn load(_: Avx512, row: &[f32; 8]) -> Self {
            Self(unsafe { _mm256_loadu_ps(row.as_ptr()) })
        }
        #[inline(always)]
        fn to_array(self) -> [f32; 8] {
            let mut out = [0.0; 8];
            unsafe { _mm256_storeu_ps(out.as_mut_ptr(), self.0) };
            out
        }
        #[inline(always)]
        fn abs(self) -> Self {
            Self(unsafe { _mm256_andnot_ps(_mm256_set1_ps(-0.0), self.0) })
        }
        #[inline(always)]
        fn mul_add(self, a: Self, b: Self) -> Self {
            Self(unsafe { _mm256_fmadd_ps(self.0, a.0, b.0) })
        }
        #[inline(always)]
        fn min_or(self, other: Self) -> Self {
            Self(unsafe { _mm256_min_ps(self.0, other.0) })
        }
        #[inline(always)]
        fn max_or(self, other: Self) -> Self {
            Self(unsafe { _mm256_max_ps(self.0, other.0) })
        }
        #[inline(always)]
        fn lt(self, other: Self) -> MaskK {
            MaskK(unsafe { _mm256_cmp_ps_mask::<_CMP_LT_OQ>(self.0, other.0) })
        }
        #[inline(always)]
        fn le(self, other: Self) -> MaskK {
            MaskK(unsafe { _mm256_cmp_ps_mask::<_CMP_LE_OQ>(self.0, other.0) })
        }
        #[inline(always)]
        fn gt(self, other: Self) -> MaskK {
            MaskK(unsafe { _mm256_cmp_ps_mask::<_CMP_GT_OQ>(self.0, other.0) })
        }
        #[inline(always)]
        fn eq(self, other: Self) -> MaskK {
            MaskK(unsafe { _mm256_cmp_ps_mask::<_CMP_EQ_OQ>(self.0, other.0) })
        }
        #[inline(always)]
        fn ne_ordered(self, other: Self) -> MaskK {
            MaskK(unsafe { _mm256_cmp_ps_mask::<_CMP_NEQ_OQ>(self.0, other.0) })
        }
        #[inline(always)]
        fn bits(mask: MaskK) -> u32 {
            u32::from(mask.0)
        }
        #[inline(always)]
        fn andnot(mask: MaskK, other: MaskK) -> MaskK {
            MaskK(!mask.0 & other.0)
        }
        #[inline(always)]
        fn select(mask: MaskK, a: Self, b: Self) -> Self {
            // `mask_blend` takes its second operand where the mask is set.
            Self(unsafe { _mm256_mask_blend_ps(mask.0, b.0, a.0) })
        }
        #[inline(always)]
        fn or_where(self, mask: MaskK, bits: Self) -> Self {
            // One masked `vorps`: lanes outside the mask keep `self`.
            Self(unsafe { _mm256_mask_or_ps(self.0, mask.0, self.0, bits.0) })
        }
    }

    impl Lanes<4> for Sse4 {
        type Mask = Mask4;
        type Isa = Sse2;

        #[inline(never)]
        #[cold]
        fn out_of_line<R>(_: Sse2, f: impl FnOnce() -> R) -> R {
            f()
        }

        #[inline(always)]
        fn splat(_: Sse2, x: f32) -> Self {
            Self(unsafe { _mm_set1_ps(x) })
        }
        #[inline(always)]
        fn load(_: Sse2, row: &[f32; 4]) -> Self {
            Self(unsafe { _mm_loadu_ps(row.as_ptr()) })
        }
        #[inline(always)]
        fn to_array(self) -> [f32; 4] {
            let mut out = [0.0; 4];
            unsafe { _mm_storeu_ps(out.as_mut_ptr(), self.0) };
            out
        }
        #[inline(always)]
        fn abs(self) -> Self {
            Self(unsafe { _mm_andnot_ps(_mm_set1_ps(-0.0), self.0) })
        }
        #[inline(always)]
        fn mul_add(self, a: Self, b: Self) -> Self {
            self * a + b
        }
        #[inline(always)]
        fn min_or(self, other: Self) -> Self {
            Self(unsafe { _mm_min_ps(self.0, other.0) })
        }
        #[inline(always)]
        fn max_or(self, other: Self) -> Self {
            Self(unsafe { _mm_max_ps(self.0, other.0) })
        }
        #[inline(always)]
        fn lt(self, other: Self) -> Mask4 {
            Mask4(unsafe { _mm_cmplt_ps(self.0, other.0) })
        }
        #[inline(always)]
        fn le(self, other: Self) -> Mask4 {
            Mask4(unsafe { _mm_cmple_ps(self.0, other.0) })
        }
        #[inline(always)]
        fn gt(self, other: Self) -> Mask4 {
            Mask4(unsafe { _mm_cmpgt_ps(self.0, other.0) })
        }
        #[inline(always)]
        fn eq(self, other: Self) -> Mask4 {
            Mask4(unsafe { _mm_cmpeq_ps(self.0, other.0) })
        }
        #[inline(always)]
        fn ne_ordered(self, other: Self) -> Mask4 {
            // `cmpneq` is true on NaN; `a < b || a > b` is not.
            Mask4(unsafe {
                _mm_or_ps(_mm_cmplt_ps(self.0, other.0), _mm_cmpgt_ps(self.0, other.0))
            })
        }
        #[inline(always)]
        fn bits(mask: Mask4) -> u32 {
            unsafe { _mm_movemask_ps(mask.0) as u32 }
        }
        #[inline(always)]
        fn andnot(mask: Mask4, other: Mask4) -> Mask4 {
            Mask4(unsafe { _mm_andnot_ps(mask.0, other.0) })
        }
        #[inline(always)]
        fn select(mask: Mask4, a: Self, b: Self) -> Self {
            // `blendv` is SSE4.1, beyond the x86_64 baseline.
            Self(unsafe { _mm_or_ps(_mm_and_ps(mask.0, a.0), _mm_andnot_ps(mask.0, b.0)) })
        }
        #[inline(always)]
        fn or_where(self, mask: Mask4, bits: Self) -> Self {
            Self(unsafe { _mm_or_ps(self.0, _mm_and_ps(mask.0, bits.0)) })
        }
    }
}

/// The AVX2 token for a test of the AVX2 backend, or `None` where the CPU
/// lacks AVX2: the test then says so past the harness's output capture and
/// goes on with its other backends (the portable one always runs). With
/// `CAUSTIC_REQUIRE_AVX2=1` a missing AVX2 fails the test instead, so that
/// a machine meant to test the AVX2 code cannot pass without running it.
#[cfg(all(test, target_arch = "x86_64"))]
pub(crate) fn avx2_for_test(test: &str) -> Option<Avx2> {
    let required = required_by_env("CAUSTIC_REQUIRE_AVX2");
    token_or_say(Avx2::detect(), required, "AVX2", test)
}

/// The AVX-512 token for a test of the AVX-512 backend, with the policy of
/// [`avx2_for_test`] under `CAUSTIC_REQUIRE_AVX512=1`. CI machines may
/// lack AVX-512: the test then says that it skipped that backend.
#[cfg(all(test, target_arch = "x86_64"))]
pub(crate) fn avx512_for_test(test: &str) -> Option<Avx512> {
    let required = required_by_env("CAUSTIC_REQUIRE_AVX512");
    token_or_say(Avx512::detect(), required, "AVX-512", test)
}

#[cfg(all(test, target_arch = "x86_64"))]
fn required_by_env(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v.trim() == "1")
}

/// The policy of [`avx2_for_test`] for a detection result of `feature`.
#[cfg(all(test, target_arch = "x86_64"))]
fn token_or_say<T>(detected: Option<T>, required: bool, feature: &str, test: &str) -> Option<T> {
    if detected.is_none() {
        let var = feature.replace('-', "");
        assert!(
            !required,
            "{test}: CAUSTIC_REQUIRE_{var}=1, but this CPU has no {feature}"
        );
        use std::io::Write;
        // Past the capture: a skipped backend must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "skipping: {test}: its {feature} backend, as this CPU has no {feature} (the other backends are tested)"
        );
    }
    detected
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Awkward values: signed zeros, infinities, NaN, tiny and huge numbers.
    const SPECIAL: [f32; 8] = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-40,
        -3.5,
        1e38,
    ];

    /// Every lane operation of `V` against [`Portable`], bit for bit.
    /// `fuses`: whether `V::mul_add` is a fused multiply-add.
    fn agrees_with_portable<const N: usize, V: Lanes<N>>(isa: V::Isa, fuses: bool) {
        for shift in 0..8 {
            let a: [f32; N] = std::array::from_fn(|i| SPECIAL[(i + shift) % 8]);
            let b: [f32; N] = std::array::from_fn(|i| SPECIAL[(3 * i + 1) % 8] * 0.75);
            let (va, vb) = (V::load(isa, &a), V::load(isa, &b));
            let (pa, pb) = (Portable(a), Portable(b));
            // Bits must agree, except which NaN comes out.
            let same = |x: [f32; N], y: [f32; N]| {
                let key = |v: f32| if v.is_nan() { u32::MAX } else { v.to_bits() };
                assert_eq!(x.map(key), y.map(key), "{a:?} {b:?}")
            };
            same((va + vb).to_array(), (pa + pb).0);
            same((va - vb).to_array(), (pa - pb).0);
            same((va * vb).to_array(), (pa * pb).0);
            same((va / vb).to_array(), (pa / pb).0);
            same(va.abs().to_array(), pa.abs().0);
            // One rounding where the backend fuses, two where it does not.
            let vc = V::load(isa, &b);
            let fused: [f32; N] = std::array::from_fn(|i| a[i].mul_add(b[i], b[i]));
            let unfused = (pa * pb + pb).0;
            let got = va.mul_add(vb, vc).to_array();
            same(got, if fuses { fused } else { unfused });
            same(va.min_or(vb).to_array(), pa.min_or(pb).0);
            same(va.max_or(vb).to_array(), pa.max_or(pb).0);
            same(V::splat(isa, a[0]).to_array(), [a[0]; N]);
            assert_eq!(V::bits(va.lt(vb)), pa.lt(pb));
            assert_eq!(V::bits(va.le(vb)), pa.le(pb));
            assert_eq!(V::bits(va.gt(vb)), pa.gt(pb));
            assert_eq!(V::bits(va.eq(vb)), pa.eq(pb));
            assert_eq!(V::bits(va.ne_ordered(vb)), pa.ne_ordered(pb));
            assert_eq!(V::bits(va.lt(vb) | va.eq(vb)), pa.lt(pb) | pa.eq(pb));
            assert_eq!(V::bits(va.le(vb) & va.ne_ordered(vb)), pa.lt(pb));
            assert_eq!(
                V::bits(V::andnot(va.lt(vb), va.le(vb))),
                <Portable<N> as Lanes<N>>::andnot(pa.lt(pb), pa.le(pb))
            );
            let (vs, ps) = (
                V::select(va.lt(vb), va, vb),
                <Portable<N> as Lanes<N>>::select(pa.lt(pb), pa, pb),
            );
            assert_eq!(vs.to_array().map(f32::to_bits), ps.0.map(f32::to_bits));
            let (vo, po) = (va.or_where(va.lt(vb), vb), pa.or_where(pa.lt(pb), pb));
            assert_eq!(vo.to_array().map(f32::to_bits), po.0.map(f32::to_bits));
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn sse_matches_portable() {
        agrees_with_portable::<4, Sse4>(Sse2, false);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx_matches_portable() {
        // Outside `#[target_feature]` code the methods are calls, not
        // inlined instructions: slower, the same results.
        if let Some(avx) = avx2_for_test("avx_matches_portable") {
            agrees_with_portable::<8, Avx8>(avx, true);
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_matches_portable() {
        if let Some(avx512) = avx512_for_test("avx512_matches_portable") {
            agrees_with_portable::<8, Avx8k>(avx512, true);
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    #[should_panic(expected = "CAUSTIC_REQUIRE_AVX2=1, but this CPU has no AVX2")]
    fn a_required_avx2_that_is_missing_fails() {
        token_or_say::<Avx2>(None, true, "AVX2", "test");
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    #[should_panic(expected = "CAUSTIC_REQUIRE_AVX512=1, but this CPU has no AVX-512")]
    fn a_required_avx512_that_is_missing_fails() {
        token_or_say::<Avx512>(None, true, "AVX-512", "test");
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_detected_avx2_is_handed_on() {
        let detected = Avx2::detect();
        assert_eq!(token_or_say(detected, false, "AVX2", "test"), detected);
        if detected.is_some() {
            assert_eq!(token_or_say(detected, true, "AVX2", "test"), detected);
        }
    }

    /// `or_where` sets bits where the mask says, as integers (the top bit,
    /// a float's sign, included), and leaves the other lanes' bits alone.
    #[test]
    fn portable_or_where_is_bitwise() {
        let bit = |b: u32| f32::from_bits(b);
        let acc = Portable([bit(1), bit(0), bit(1 << 31), bit(6)]);
        let out = acc.or_where(
            0b0110,
            Portable([bit(1 << 31), bit(1 << 31), bit(2), bit(1)]),
        );
        assert_eq!(out.0.map(f32::to_bits), [1, 1 << 31, (1 << 31) | 2, 6]);
    }

    #[test]
    fn portable_nan_rules_follow_minps_maxps() {
        let nan = Portable([f32::NAN; 1]);
        let one = Portable([1.0; 1]);
        assert_eq!(nan.min_or(one).0[0], 1.0);
        assert!(one.min_or(nan).0[0].is_nan());
        assert_eq!(nan.max_or(one).0[0], 1.0);
        assert!(one.max_or(nan).0[0].is_nan());
    }
}
