//! glTF 2.0 animation samplers (specification section 3.11 and its
//! Appendix C, "Animation Sampler Interpolation Modes"): STEP, LINEAR and
//! CUBICSPLINE over keys of any width (3 for translation and scale, 4 for
//! rotation quaternions, the morph-target count for weights).
//!
//! Before the first key the first value holds, after the last the last.
//! LINEAR rotations are spherically interpolated (slerp, the short way);
//! CUBICSPLINE values are the Hermite form of Appendix C, whose key
//! `k` stores `(in-tangent a_k, value v_k, out-tangent b_k)` and whose
//! tangents are scaled by the key spacing; rotations are normalised after.

use glam::Quat;

/// How a sampler interpolates between its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interpolation {
    Step,
    Linear,
    CubicSpline,
}

/// One glTF sampler: key times and their values, `width` numbers a value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampler {
    times: Vec<f32>,
    /// `width` numbers per key, three times that for CUBICSPLINE.
    values: Vec<f32>,
    width: usize,
    interpolation: Interpolation,
    /// The values are quaternions `(x, y, z, w)`: slerp and normalise.
    rotation: bool,
}

impl Sampler {
    /// Checks that the values match the times (the caller names the
    /// channel in the error): times finite and non-decreasing, one value
    /// per time (three for CUBICSPLINE).
    pub fn new(
        times: Vec<f32>,
        values: Vec<f32>,
        width: usize,
        interpolation: Interpolation,
        rotation: bool,
    ) -> Result<Self, String> {
        let per_key = match interpolation {
            Interpolation::CubicSpline => 3 * width,
            _ => width,
        };
        if times.is_empty() || width == 0 {
            return Err("a sampler needs at least one key".into());
        }
        if times.len().checked_mul(per_key) != Some(values.len()) {
            return Err(format!(
                "{} output numbers for {} keys of {per_key} numbers",
                values.len(),
                times.len()
            ));
        }
        if !times.iter().chain(&values).all(|x| x.is_finite()) {
            return Err("a key time or value is NaN or infinite".into());
        }
        if times.windows(2).any(|w| w[1] < w[0]) {
            return Err("key times decrease".into());
        }
        Ok(Self {
            times,
            values,
            width,
            interpolation,
            rotation,
        })
    }

    /// The time of the last key.
    pub fn end(&self) -> f32 {
        *self.times.last().unwrap_or(&0.0)
    }

    /// The value of key `k`.
    fn value(&self, k: usize) -> &[f32] {
        let w = self.width;
        match self.interpolation {
            Interpolation::CubicSpline => &self.values[(3 * k + 1) * w..(3 * k + 2) * w],
            _ => &self.values[k * w..(k + 1) * w],
        }
    }

    /// Tangent of key `k`: `0` in, `2` out (CUBICSPLINE only).
    fn tangent(&self, k: usize, which: usize) -> &[f32] {
        let w = self.width;
        &self.values[(3 * k + which) * w..(3 * k + which + 1) * w]
    }

    /// Writes the value at time `t` into `out` (`width` numbers).
    pub fn eval(&self, t: f32, out: &mut [f32]) {
        let last = self.times.len() - 1;
        if t.is_nan() || t <= self.times[0] {
            out.copy_from_slice(self.value(0));
            return;
        }
        if t >= self.times[last] {
            out.copy_from_slice(self.value(last));
            return;
        }
        let k = self.times.partition_point(|&x| x <= t) - 1;
        let span = self.times[k + 1] - self.times[k];
        let u = if span > 0.0 {
            (t - self.times[k]) / span
        } else {
            1.0
        };
        match self.interpolation {
            Interpolation::Step => out.copy_from_slice(self.value(k)),
            Interpolation::Linear if self.rotation => {
                let q = quat(self.value(k)).slerp(quat(self.value(k + 1)), u);
                out.copy_from_slice(&q.to_array());
            }
            Interpolation::Linear => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = self.value(k)[i] * (1.0 - u) + self.value(k + 1)[i] * u;
                }
            }
            Interpolation::CubicSpline => self.hermite(k, u, span, out),
        }
    }

    /// Appendix C: `p(u) = (2u³-3u²+1) v_k + Δ(u³-2u²+u) b_k
    /// + (-2u³+3u²) v_{k+1} + Δ(u³-u²) a_{k+1}`.
    fn hermite(&self, k: usize, u: f32, span: f32, out: &mut [f32]) {
        let (u2, u3) = (u * u, u * u * u);
        let h00 = 2.0 * u3 - 3.0 * u2 + 1.0;
        let h10 = span * (u3 - 2.0 * u2 + u);
        let h01 = -2.0 * u3 + 3.0 * u2;
        let h11 = span * (u3 - u2);
        let (v0, b0) = (self.value(k), self.tangent(k, 2));
        let (v1, a1) = (self.value(k + 1), self.tangent(k + 1, 0));
        for (i, o) in out.iter_mut().enumerate() {
            *o = h00 * v0[i] + h10 * b0[i] + h01 * v1[i] + h11 * a1[i];
        }
        if self.rotation {
            let q = quat(out).normalize();
            out.copy_from_slice(&q.to_array());
        }
    }
}

fn quat(v: &[f32]) -> Quat {
    Quat::from_xyzw(v[0], v[1], v[2], v[3])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(s: &Sampler, t: f32) -> Vec<f32> {
        let mut out = vec![0.0; s.width];
        s.eval(t, &mut out);
        out
    }

    #[test]
    fn step_linear_and_clamping() {
        let times = vec![0.0, 1.0, 3.0];
        let values = vec![0.0, 10.0, 30.0];
        let step =
            Sampler::new(times.clone(), values.clone(), 1, Interpolation::Step, false).unwrap();
        let linear = Sampler::new(times, values, 1, Interpolation::Linear, false).unwrap();
        assert_eq!(eval(&step, 0.99), [0.0]);
        assert_eq!(eval(&step, 1.0), [10.0]);
        assert_eq!(eval(&linear, 2.0), [20.0]);
        assert_eq!(eval(&linear, -5.0), [0.0]);
        assert_eq!(eval(&linear, 9.0), [30.0]);
    }

    /// Zero tangents: the cubic eases in and out, smoothstep between keys.
    #[test]
    fn cubic_spline_with_zero_tangents_is_smoothstep() {
        let values = vec![0.0, 0.0, 0.0, 0.0, 1.0, 0.0];
        let s = Sampler::new(vec![0.0, 2.0], values, 1, Interpolation::CubicSpline, false).unwrap();
        assert!((eval(&s, 0.5)[0] - 0.15625).abs() < 1e-6);
        assert!((eval(&s, 1.0)[0] - 0.5).abs() < 1e-6);
    }

    /// Tangents are per unit time: out-tangent 1 at a key 2 s before the
    /// next with equal values gives a bump of 2 * (u³ - 2u² + u).
    #[test]
    fn cubic_spline_tangents_scale_with_spacing() {
        let values = vec![0.0, 0.0, 1.0, 0.0, 0.0, 0.0];
        let s = Sampler::new(vec![0.0, 2.0], values, 1, Interpolation::CubicSpline, false).unwrap();
        let u: f32 = 0.5;
        assert!((eval(&s, 1.0)[0] - 2.0 * (u * u * u - 2.0 * u * u + u)).abs() < 1e-6);
    }

    #[test]
    fn linear_rotations_slerp() {
        let a = Quat::IDENTITY;
        let b = Quat::from_rotation_y(std::f32::consts::FRAC_PI_2);
        let values = [a.to_array(), b.to_array()].concat();
        let s = Sampler::new(vec![0.0, 1.0], values, 4, Interpolation::Linear, true).unwrap();
        let q = quat(&eval(&s, 0.5));
        let want = Quat::from_rotation_y(std::f32::consts::FRAC_PI_4);
        assert!(q.dot(want).abs() > 1.0 - 1e-6, "{q:?}");
    }

    #[test]
    fn mismatched_outputs_are_errors() {
        assert!(
            Sampler::new(
                vec![0.0, 1.0],
                vec![0.0; 3],
                1,
                Interpolation::Linear,
                false
            )
            .is_err()
        );
        assert!(
            Sampler::new(
                vec![0.0, 1.0],
                vec![0.0; 2],
                1,
                Interpolation::CubicSpline,
                false
            )
            .is_err()
        );
        assert!(
            Sampler::new(
                vec![1.0, 0.0],
                vec![0.0; 2],
                1,
                Interpolation::Linear,
                false
            )
            .is_err()
        );
        assert!(Sampler::new(vec![], vec![], 1, Interpolation::Linear, false).is_err());
    }
}
