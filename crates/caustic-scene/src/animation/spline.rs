//! Kochanek–Bartels (tension–continuity–bias, "TCB") keyframe splines, for
//! positions and scales (vectors) and for rotations (unit quaternions).
//!
//! Kochanek and Bartels, "Interpolating Splines with Local Tension,
//! Continuity, and Bias Control", SIGGRAPH 1984: a cubic Hermite segment
//! between each pair of keys, whose end tangents are blends of the chords
//! to the neighbouring keys. At key `i` with parameters `(t, c, b)`:
//!
//! - outgoing (source) tangent `(1-t)(1+c)(1+b)/2 (P_i - P_{i-1}) + (1-t)(1-c)(1-b)/2 (P_{i+1} - P_i)`;
//! - incoming (destination) tangent `(1-t)(1-c)(1+b)/2 (P_i - P_{i-1}) + (1-t)(1+c)(1-b)/2 (P_{i+1} - P_i)`;
//!
//! each scaled by the paper's adjustment for unequal key spacing (its
//! section 5): a tangent used on the segment of length `Δ_i` is multiplied
//! by `2 Δ_i / (Δ_{i-1} + Δ_i)`, so that the speed is continuous across a
//! key. This is exactly the form of Eberly's code that the BART benchmark
//! ships (`kbsplpos.c`, `kbsplrot.c`; Lext, Assarsson and Möller 2001), and
//! its conventions are kept:
//!
//! - the first and the last key only shape the end tangents; the curve runs
//!   from the second key to the second-to-last and is clamped outside that
//!   range (the AFF description: "the first and the last keyframes are only
//!   used internally to get starting tangents"). So at least four keys.
//! - rotations are keyed as axis–angle, turned into unit quaternions and
//!   interpolated by the same blend in the quaternions' tangent space
//!   (logarithms of the relative rotations, Shoemake 1985), evaluated as
//!   Shoemake's `squad`: `Slerp(2s(1-s), Slerp(s, q1, q2), Slerp(s, a, b))`
//!   with inner control points `a = q1 exp((T_out - log(q1⁻¹q2)) / 2)`,
//!   `b = q2 exp((log(q1⁻¹q2) - T_in) / 2)`. Consecutive keys are first
//!   put into the same hemisphere (dot product ≥ 0) so each segment takes
//!   the short way; BART's code flips only from the third key on, which
//!   differs only for key sequences that turn by more than 180° between
//!   the first two keys.
//!
//! All arithmetic is in `f64`: BART clocks run to 50 s with keys a few
//! hundredths of a second apart.

use glam::{DQuat, DVec3};

/// One key of a TCB spline: a time, a value and the three shape
/// parameters (each usually in [-1, 1]; all zero gives a Catmull–Rom
/// spline).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcbKey<T> {
    pub time: f64,
    pub value: T,
    pub tension: f64,
    pub continuity: f64,
    pub bias: f64,
}

impl<T> TcbKey<T> {
    /// A key with all three parameters zero (Catmull–Rom).
    pub fn new(time: f64, value: T) -> Self {
        Self {
            time,
            value,
            tension: 0.0,
            continuity: 0.0,
            bias: 0.0,
        }
    }
}

/// Why keys do not make a spline.
#[derive(Clone, Debug, PartialEq)]
pub enum SplineError {
    /// Fewer than the four keys a TCB spline needs.
    TooFewKeys(usize),
    /// Key `index` is earlier than the key before it.
    TimesDecrease { index: usize },
    /// A time, value or parameter is NaN or infinite.
    NotFinite { index: usize },
}

impl std::fmt::Display for SplineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooFewKeys(n) => write!(
                f,
                "{n} keyframe(s); a Kochanek-Bartels spline needs at least 4 (the first and last only shape the ends)"
            ),
            Self::TimesDecrease { index } => {
                write!(f, "keyframe {index} is earlier than the keyframe before it")
            }
            Self::NotFinite { index } => write!(f, "keyframe {index} has a NaN or infinite number"),
        }
    }
}

/// The multipliers of the two chords at a key for the outgoing tangent
/// `(of previous chord, of next chord)` and the incoming one, before the
/// spacing adjustment.
fn chord_weights<T>(key: &TcbKey<T>) -> ((f64, f64), (f64, f64)) {
    let (t, c, b) = (key.tension, key.continuity, key.bias);
    let outgoing = (
        (1.0 - t) * (1.0 + c) * (1.0 + b) / 2.0,
        (1.0 - t) * (1.0 - c) * (1.0 - b) / 2.0,
    );
    let incoming = (
        (1.0 - t) * (1.0 - c) * (1.0 + b) / 2.0,
        (1.0 - t) * (1.0 + c) * (1.0 - b) / 2.0,
    );
    (outgoing, incoming)
}

/// Checks count, order and finiteness of the keys.
fn check_keys<T>(keys: &[TcbKey<T>], finite: impl Fn(&T) -> bool) -> Result<(), SplineError> {
    if keys.len() < 4 {
        return Err(SplineError::TooFewKeys(keys.len()));
    }
    for (index, key) in keys.iter().enumerate() {
        let numbers = [key.time, key.tension, key.continuity, key.bias];
        if !numbers.iter().all(|x| x.is_finite()) || !finite(&key.value) {
            return Err(SplineError::NotFinite { index });
        }
        if index > 0 && key.time < keys[index - 1].time {
            return Err(SplineError::TimesDecrease { index });
        }
    }
    Ok(())
}

/// The segment containing time `t` (clamped to the curve's range) and the
/// parameter `u ∈ [0, 1]` within it. `starts` are the segments' start
/// times, `end` the last segment's end.
fn locate(starts: &[f64], end: f64, t: f64) -> (usize, f64) {
    let first = starts[0];
    if t.is_nan() || t <= first {
        return (0, 0.0);
    }
    if t >= end {
        return (starts.len() - 1, 1.0);
    }
    // The last segment starting at or before t: a zero-length segment
    // (keys at one time, which BART's kitchen has) is never chosen, as the
    // segment after it starts at the same time.
    let i = starts.partition_point(|&s| s <= t) - 1;
    let t1 = starts.get(i + 1).copied().unwrap_or(end);
    let span = t1 - starts[i];
    (
        i,
        if span > 0.0 {
            (t - starts[i]) / span
        } else {
            1.0
        },
    )
}

/// The spacing adjustment `2 Δ_i / (Δ_{i-1} + Δ_i)` of a tangent used on a
/// segment of length `span` around a key whose two segments total `total`
/// (zero when both have no length: keys at one time jump).
fn adjustment(span: f64, total: f64) -> f64 {
    if total > 0.0 { 2.0 * span / total } else { 0.0 }
}

/// One cubic Hermite segment in power form: `c0 + u c1 + u² c2 + u³ c3`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Cubic {
    c: [DVec3; 4],
}

/// A TCB spline through 3D vectors (translations, scales, BART's camera
/// path).
#[derive(Clone, Debug, PartialEq)]
pub struct VectorSpline {
    starts: Vec<f64>,
    end: f64,
    segments: Vec<Cubic>,
}

impl VectorSpline {
    pub fn new(keys: &[TcbKey<DVec3>]) -> Result<Self, SplineError> {
        check_keys(keys, |v| v.is_finite())?;
        let segments = keys
            .windows(4)
            .map(|k| {
                let (p0, p1, p2, p3) = (k[0].value, k[1].value, k[2].value, k[3].value);
                let span = k[2].time - k[1].time;
                let ((out_prev, out_next), _) = chord_weights(&k[1]);
                let (_, (in_prev, in_next)) = chord_weights(&k[2]);
                let adj_out = adjustment(span, k[2].time - k[0].time);
                let adj_in = adjustment(span, k[3].time - k[1].time);
                let chord = p2 - p1;
                let t_out = adj_out * (out_prev * (p1 - p0) + out_next * chord);
                let t_in = adj_in * (in_prev * chord + in_next * (p3 - p2));
                Cubic {
                    c: [
                        p1,
                        t_out,
                        3.0 * chord - 2.0 * t_out - t_in,
                        -2.0 * chord + t_out + t_in,
                    ],
                }
            })
            .collect();
        Ok(Self {
            starts: keys[1..keys.len() - 2].iter().map(|k| k.time).collect(),
            end: keys[keys.len() - 2].time,
            segments,
        })
    }

    /// The value at time `t`, clamped to the second and second-to-last keys.
    pub fn eval(&self, t: f64) -> DVec3 {
        let (i, u) = locate(&self.starts, self.end, t);
        let [c0, c1, c2, c3] = self.segments[i].c;
        c0 + u * (c1 + u * (c2 + u * c3))
    }

    /// The time range the curve spans (second to second-to-last key).
    pub fn range(&self) -> (f64, f64) {
        (self.starts[0], self.end)
    }
}

/// One squad segment: end rotations `p`, `q` and inner controls `a`, `b`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Squad {
    p: DQuat,
    a: DQuat,
    b: DQuat,
    q: DQuat,
}

/// A TCB spline through rotations given as axis–angle keys.
#[derive(Clone, Debug, PartialEq)]
pub struct RotationSpline {
    starts: Vec<f64>,
    end: f64,
    segments: Vec<Squad>,
}

/// The rotation of `angle` radians about `axis`; a zero axis is no rotation.
pub fn axis_angle(axis: DVec3, angle: f64) -> DQuat {
    match axis.try_normalize() {
        Some(axis) => DQuat::from_axis_angle(axis, angle),
        None => DQuat::IDENTITY,
    }
}

impl RotationSpline {
    /// Keys hold `(axis, angle in radians)`.
    pub fn new(keys: &[TcbKey<(DVec3, f64)>]) -> Result<Self, SplineError> {
        check_keys(keys, |(axis, angle)| axis.is_finite() && angle.is_finite())?;
        // Same hemisphere as the previous key: each segment turns the short way.
        let mut quats: Vec<DQuat> = Vec::with_capacity(keys.len());
        for key in keys {
            let q = axis_angle(key.value.0, key.value.1);
            let q = match quats.last() {
                Some(prev) if prev.dot(q) < 0.0 => -q,
                _ => q,
            };
            quats.push(q);
        }
        let segments = (0..keys.len() - 3)
            .map(|i| {
                let k = &keys[i..i + 4];
                let q = &quats[i..i + 4];
                let span = k[2].time - k[1].time;
                let ((out_prev, out_next), _) = chord_weights(&k[1]);
                let (_, (in_prev, in_next)) = chord_weights(&k[2]);
                let adj_out = adjustment(span, k[2].time - k[0].time);
                let adj_in = adjustment(span, k[3].time - k[1].time);
                let chord = log(q[1].conjugate() * q[2]);
                let t_out = adj_out * (out_prev * log(q[0].conjugate() * q[1]) + out_next * chord);
                let t_in = adj_in * (in_prev * chord + in_next * log(q[2].conjugate() * q[3]));
                Squad {
                    p: q[1],
                    a: q[1] * exp(0.5 * (t_out - chord)),
                    b: q[2] * exp(0.5 * (chord - t_in)),
                    q: q[2],
                }
            })
            .collect();
        Ok(Self {
            starts: keys[1..keys.len() - 2].iter().map(|k| k.time).collect(),
            end: keys[keys.len() - 2].time,
            segments,
        })
    }

    /// The rotation at time `t`, clamped like [`VectorSpline::eval`].
    pub fn eval(&self, t: f64) -> DQuat {
        let (i, u) = locate(&self.starts, self.end, t);
        let s = &self.segments[i];
        let outer = slerp(s.p, s.q, u);
        let inner = slerp(s.a, s.b, u);
        slerp(outer, inner, 2.0 * u * (1.0 - u)).normalize()
    }
}

/// Logarithm of a unit quaternion `(cos θ, sin θ n)`: the pure quaternion
/// `θ n`, kept as its vector part.
fn log(q: DQuat) -> DVec3 {
    let v = DVec3::new(q.x, q.y, q.z);
    let sin = v.length();
    let angle = sin.atan2(q.w);
    if sin < 1e-12 { v } else { v * (angle / sin) }
}

/// Exponential of the pure quaternion with vector part `v`.
fn exp(v: DVec3) -> DQuat {
    let angle = v.length();
    let (sin, cos) = angle.sin_cos();
    let scale = if angle < 1e-12 { 1.0 } else { sin / angle };
    let r = v * scale;
    DQuat::from_xyzw(r.x, r.y, r.z, cos)
}

/// Shoemake's slerp, without flipping to the short way (the keys were
/// arranged for that already, and squad's inner curve must not flip).
fn slerp(p: DQuat, q: DQuat, u: f64) -> DQuat {
    let cos = p.dot(q).clamp(-1.0, 1.0);
    let angle = cos.acos();
    let sin = angle.sin();
    if sin.abs() < 1e-9 {
        return p.lerp(q, u).normalize();
    }
    let wp = ((1.0 - u) * angle).sin() / sin;
    let wq = (u * angle).sin() / sin;
    p * wp + q * wq
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(values: &[(f64, f64)]) -> Vec<TcbKey<DVec3>> {
        values
            .iter()
            .map(|&(t, x)| TcbKey::new(t, DVec3::new(x, 2.0 * x, -x)))
            .collect()
    }

    fn close(a: DVec3, b: DVec3) -> bool {
        (a - b).length() < 1e-9
    }

    #[test]
    fn passes_through_its_inner_keys_and_clamps_outside() {
        let k = keys(&[
            (-1.0, 5.0),
            (0.0, 0.0),
            (1.0, 1.0),
            (3.0, -2.0),
            (4.0, 7.0),
            (6.0, 0.0),
        ]);
        let s = VectorSpline::new(&k).unwrap();
        for key in &k[1..5] {
            assert!(close(s.eval(key.time), key.value), "at {}", key.time);
        }
        assert!(close(s.eval(-10.0), k[1].value));
        assert!(close(s.eval(f64::NAN), k[1].value));
        assert!(close(s.eval(100.0), k[4].value));
        assert_eq!(s.range(), (0.0, 4.0));
    }

    /// Equally spaced keys with t = c = b = 0 give Catmull–Rom: at the
    /// middle of segment (p1, p2) the value is (-p0 + 9 p1 + 9 p2 - p3) / 16.
    #[test]
    fn zero_parameters_give_catmull_rom() {
        let k = keys(&[(0.0, 0.0), (1.0, 1.0), (2.0, 4.0), (3.0, 9.0)]);
        let s = VectorSpline::new(&k).unwrap();
        let x = (-0.0 + 9.0 * 1.0 + 9.0 * 4.0 - 9.0) / 16.0;
        assert!(close(s.eval(1.5), DVec3::new(x, 2.0 * x, -x)));
    }

    /// Hand-computed: keys x = 0, 1, 2, 0 at t = 0..3. Segment (1, 2) has
    /// chord 1; at the key x=1 the chords are 1 and 1, at x=2 they are 1
    /// and -2. With all parameters zero the tangents are 1 and -0.5, and
    /// the Hermite midpoint is (p1 + p2)/2 + (m1 - m2)/8 = 1.5 + 0.1875.
    /// Tension 1 at both ends zeroes the tangents: midpoint 1.5 exactly.
    /// At the second key, bias +1 or continuity -1 make the incoming
    /// tangent the previous chord alone (1): midpoint 1.5; continuity +1
    /// makes it the next chord alone (-2): midpoint 1.5 + (1 + 2)/8.
    #[test]
    fn tension_continuity_and_bias_on_a_known_case() {
        let at_mid = |k1: (f64, f64, f64), k2: (f64, f64, f64)| {
            let mut k = keys(&[(0.0, 0.0), (1.0, 1.0), (2.0, 2.0), (3.0, 0.0)]);
            (k[1].tension, k[1].continuity, k[1].bias) = k1;
            (k[2].tension, k[2].continuity, k[2].bias) = k2;
            VectorSpline::new(&k).unwrap().eval(1.5).x
        };
        let zero = (0.0, 0.0, 0.0);
        assert!((at_mid(zero, zero) - 1.6875).abs() < 1e-12);
        assert!((at_mid((1.0, 0.0, 0.0), (1.0, 0.0, 0.0)) - 1.5).abs() < 1e-12);
        assert!((at_mid(zero, (0.0, 0.0, 1.0)) - 1.5).abs() < 1e-12);
        assert!((at_mid(zero, (0.0, 1.0, 0.0)) - 1.875).abs() < 1e-12);
        // Continuity -1 takes the previous chord alone (1): like bias +1.
        assert!((at_mid(zero, (0.0, -1.0, 0.0)) - 1.5).abs() < 1e-12);
    }

    /// Unequal spacing: the adjustment keeps the speed continuous at a key
    /// (Kochanek and Bartels 1984, section 5).
    #[test]
    fn speed_is_continuous_across_unequally_spaced_keys() {
        let k = keys(&[(0.0, 0.0), (1.0, 1.0), (1.5, 3.0), (4.0, 4.0), (5.0, 0.0)]);
        let s = VectorSpline::new(&k).unwrap();
        let h = 1e-6;
        let before = (s.eval(1.5) - s.eval(1.5 - h)) / h;
        let after = (s.eval(1.5 + h) - s.eval(1.5)) / h;
        assert!(
            (before - after).length() < 1e-3 * before.length(),
            "{before} vs {after}"
        );
    }

    /// Two keys at one time (BART's kitchen wheels): the value jumps there
    /// and everything stays finite.
    #[test]
    fn keys_at_one_time_jump() {
        let k = keys(&[
            (0.0, 0.0),
            (1.0, 1.0),
            (2.0, 2.0),
            (2.0, 5.0),
            (3.0, 6.0),
            (4.0, 7.0),
        ]);
        let s = VectorSpline::new(&k).unwrap();
        assert!(close(s.eval(2.0), k[3].value));
        assert!((s.eval(2.0 - 1e-9) - k[2].value).length() < 1e-6);
        for i in 0..=40 {
            assert!(s.eval(i as f64 * 0.1).is_finite());
        }
    }

    #[test]
    fn bad_keys_are_errors() {
        assert_eq!(
            VectorSpline::new(&keys(&[(0.0, 0.0), (1.0, 1.0), (2.0, 2.0)])),
            Err(SplineError::TooFewKeys(3))
        );
        assert_eq!(
            VectorSpline::new(&keys(&[(0.0, 0.0), (1.0, 1.0), (0.5, 2.0), (3.0, 0.0)])),
            Err(SplineError::TimesDecrease { index: 2 })
        );
        assert_eq!(
            VectorSpline::new(&keys(&[
                (0.0, 0.0),
                (1.0, f64::NAN),
                (2.0, 2.0),
                (3.0, 0.0)
            ])),
            Err(SplineError::NotFinite { index: 1 })
        );
    }

    fn rot_keys(angles_deg: &[f64]) -> Vec<TcbKey<(DVec3, f64)>> {
        angles_deg
            .iter()
            .enumerate()
            .map(|(i, &a)| TcbKey::new(i as f64, (DVec3::Y, a.to_radians())))
            .collect()
    }

    #[test]
    fn rotations_pass_through_keys() {
        let k = rot_keys(&[0.0, 10.0, 80.0, -30.0, 45.0]);
        let s = RotationSpline::new(&k).unwrap();
        for key in &k[1..4] {
            let want = axis_angle(key.value.0, key.value.1);
            assert!(
                s.eval(key.time).dot(want).abs() > 1.0 - 1e-12,
                "at {}",
                key.time
            );
        }
    }

    /// Evenly turning keys about one axis: the spline turns evenly too
    /// (the tangent-space blend of equal steps is that step).
    #[test]
    fn even_turns_interpolate_evenly() {
        let k = rot_keys(&[0.0, 30.0, 60.0, 90.0, 120.0]);
        let s = RotationSpline::new(&k).unwrap();
        for t in [1.25f64, 1.5, 2.7] {
            let want = axis_angle(DVec3::Y, (30.0 * t).to_radians());
            let got = s.eval(t);
            assert!(
                got.dot(want).abs() > 1.0 - 1e-9,
                "at {t}: {got:?} vs {want:?}"
            );
        }
    }

    /// Keys written across ±180° (170° then -170°) are 20° apart the short
    /// way: the hemisphere flip makes the spline turn those 20°, not 340°.
    #[test]
    fn rotations_take_the_short_way() {
        let k = rot_keys(&[150.0, 170.0, -170.0, -150.0, -130.0]);
        let s = RotationSpline::new(&k).unwrap();
        let mid = s.eval(1.5);
        let want = axis_angle(DVec3::Y, 180f64.to_radians());
        assert!(mid.dot(want).abs() > 0.999, "{mid:?}");
    }

    #[test]
    fn log_and_exp_invert_each_other() {
        let q = axis_angle(DVec3::new(1.0, 2.0, 3.0), 1.1);
        let back = exp(log(q));
        assert!(back.dot(q) > 1.0 - 1e-12);
        assert_eq!(exp(DVec3::ZERO), DQuat::IDENTITY);
    }
}
