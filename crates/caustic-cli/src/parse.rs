//! Value parsers for the numeric flags of every subcommand, so that a
//! value no algorithm can use (`nan`, `inf`, a zero count, a fraction
//! outside its range) is refused by clap when the command line is read,
//! with the flag's name, before any scene is loaded. Numeric flags also
//! set `allow_negative_numbers`, so that `-1` reaches its parser and is
//! refused by name rather than taken for an unknown flag.

use caustic::AccelKind;
use caustic_geom::DVec3;

/// A finite `f32`.
pub fn finite_f32(text: &str) -> Result<f32, String> {
    let value = text
        .trim()
        .parse::<f32>()
        .map_err(|_| format!("'{text}' is not a number"))?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(format!("{value} is not a finite number"))
    }
}

/// A finite `f32` above zero.
pub fn positive_f32(text: &str) -> Result<f32, String> {
    let value = finite_f32(text)?;
    if value > 0.0 {
        Ok(value)
    } else {
        Err(format!("{value} must be greater than 0"))
    }
}

/// A finite `f32` of zero or more.
pub fn non_negative_f32(text: &str) -> Result<f32, String> {
    let value = finite_f32(text)?;
    if value >= 0.0 {
        Ok(value)
    } else {
        Err(format!("{value} must be 0 or more"))
    }
}

/// A fraction of the scene's diagonal: in (0, 1].
pub fn diagonal_fraction(text: &str) -> Result<f32, String> {
    let value = positive_f32(text)?;
    if value <= 1.0 {
        Ok(value)
    } else {
        Err(format!(
            "{value} is a fraction of the scene diagonal and must lie in (0, 1]"
        ))
    }
}

/// A number strictly between 0 and 1 (SPPM's alpha).
pub fn open_unit(text: &str) -> Result<f32, String> {
    let value = finite_f32(text)?;
    if value > 0.0 && value < 1.0 {
        Ok(value)
    } else {
        Err(format!("{value} must lie strictly between 0 and 1"))
    }
}

/// PNG exposure in stops: beyond ±64 the scale `2^stops` leaves every
/// pixel black or white, so such a value is a typo, not a choice.
pub fn exposure(text: &str) -> Result<f32, String> {
    let value = finite_f32(text)?;
    if value.abs() <= 64.0 {
        Ok(value)
    } else {
        Err(format!("{value} stops is out of range (-64 to 64)"))
    }
}

/// A field of view in degrees, in the open interval (0, 180) where a
/// pinhole camera exists.
pub fn fov_degrees(text: &str) -> Result<f64, String> {
    let value = text
        .trim()
        .parse::<f64>()
        .map_err(|_| format!("'{text}' is not a number"))?;
    if value > 0.0 && value < 180.0 {
        Ok(value)
    } else {
        Err(format!(
            "{value}° is not a field of view: it must lie strictly between 0 and 180 degrees (e.g. --fov 45)"
        ))
    }
}

/// `x,y,z` in `f64`: the ray protocol computes its camera in `f64` from
/// the numbers as written.
pub fn vec3(text: &str) -> Result<DVec3, String> {
    let parts: Vec<&str> = text
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(str::trim)
        .collect();
    if parts.len() != 3 {
        return Err(format!("expected x,y,z but got '{text}'"));
    }
    let mut out = [0.0f64; 3];
    for (o, p) in out.iter_mut().zip(&parts) {
        *o = p
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| format!("'{p}' is not a finite number"))?;
    }
    Ok(DVec3::from(out))
}

/// A count written `12345`, `1e6`, `2.5e6`, `250k` or `5M`; zero allowed.
pub fn count(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let (number, scale) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('m' | 'M') => (&t[..t.len() - 1], 1e6),
        _ => (t, 1.0),
    };
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v * scale < 1e15 => Ok((v * scale).round() as usize),
        _ => Err(format!("`{text}` is not a count (e.g. 1000, 1e6, 250k)")),
    }
}

/// A count as [`count`] that must be at least 1.
pub fn positive_count(text: &str) -> Result<usize, String> {
    match count(text)? {
        0 => Err(format!("`{text}` must be at least 1")),
        n => Ok(n),
    }
}

/// An image size `WIDTHxHEIGHT`, each side 1 to 32768 pixels.
pub fn resolution(text: &str) -> Result<(u32, u32), String> {
    let parsed = text
        .split_once(['x', 'X'])
        .and_then(|(w, h)| Some((w.trim().parse().ok()?, h.trim().parse().ok()?)));
    match parsed {
        Some((w, h)) if (1..=MAX_SIDE).contains(&w) && (1..=MAX_SIDE).contains(&h) => Ok((w, h)),
        _ => Err(format!(
            "`{text}` is not an image size such as 512x512 (1 to {MAX_SIDE} pixels a side)"
        )),
    }
}

/// The largest image side any renderer accepts.
pub const MAX_SIDE: u32 = 1 << 15;

/// `render --accel`: one spec for either device. On the CPU the structure
/// it names, `cpu:SPEC` meaning SPEC (also after `bvh-wide:from=`); on a
/// GPU the device build of that name (`lbvh`, `hlbvh`, `ploc`, `bvh-binned`,
/// `bvh-binned-staged`, `bvh-sweep`, `bvh-wide`) or, for `cpu:SPEC`, a
/// CPU-built tree uploaded. Whether the GPU builds it
/// is judged once the device is known (`--device cuda`: before the scene
/// loads). `dacrt[:...]` (divide-and-conquer ray tracing) builds nothing:
/// the GPU renderers trace their wavefronts with it, and on the CPU every
/// renderer traces waves with it (`render::cpu_dacrt`).
#[derive(Clone, Debug, PartialEq)]
pub struct AccelArg {
    /// The spec as given: what the GPU builds.
    pub spec: String,
    /// The structure the CPU builds; `None` for `dacrt`, which builds none.
    pub cpu: Option<AccelKind>,
}

/// [`AccelArg`] from its spec; the CPU's reading is checked against the
/// registry (an unknown name or parameter fails here, before the scene).
pub fn accel_arg(text: &str) -> Result<AccelArg, String> {
    let spec = text.trim();
    if spec.starts_with("dacrt") {
        caustic_accel::dacrt::DacrtConfig::parse(spec)?;
        return Ok(AccelArg {
            spec: spec.to_owned(),
            cpu: None,
        });
    }
    let cpu_spec = spec
        .strip_prefix("cpu:")
        .unwrap_or(spec)
        .replace("from=cpu:", "from=");
    Ok(AccelArg {
        spec: spec.to_owned(),
        cpu: Some(accel_spec(&cpu_spec)?),
    })
}

/// An acceleration-structure spec (`bvh-wide`, `ploc:r=32`) as the
/// facade's typed [`AccelKind`], judged by the registry without building
/// anything (its messages), so a typo fails before the scene loads.
pub fn accel_spec(text: &str) -> Result<AccelKind, String> {
    text.parse().map_err(|e: caustic::Error| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_refuse_what_no_algorithm_uses() {
        assert_eq!(finite_f32("-1.5"), Ok(-1.5));
        for bad in ["nan", "NaN", "inf", "-inf", "", "x", "1e39"] {
            assert!(finite_f32(bad).is_err(), "{bad}");
        }
        assert!(positive_f32("0").is_err());
        assert_eq!(non_negative_f32("0"), Ok(0.0));
        assert!(non_negative_f32("-0.1").is_err());
        assert!(diagonal_fraction("1.5").is_err());
        assert_eq!(diagonal_fraction("1"), Ok(1.0));
        assert!(open_unit("1").is_err() && open_unit("0").is_err());
        assert_eq!(exposure("-3"), Ok(-3.0));
        assert!(exposure("200").is_err() && exposure("nan").is_err());
        assert!(fov_degrees("0").is_err() && fov_degrees("180").is_err());
        assert!(fov_degrees("nan").is_err());
        assert_eq!(fov_degrees("39.3"), Ok(39.3));
    }

    #[test]
    fn vectors_counts_and_resolutions_parse() {
        assert_eq!(vec3("1, -2,3"), Ok(DVec3::new(1.0, -2.0, 3.0)));
        assert_eq!(vec3("[1, 2, 3]"), Ok(DVec3::new(1.0, 2.0, 3.0)));
        assert!(vec3("1,2").is_err() && vec3("1,nan,2").is_err());
        assert_eq!(count("12345"), Ok(12345));
        assert_eq!(count("1e6"), Ok(1_000_000));
        assert_eq!(count("2.5e6"), Ok(2_500_000));
        assert_eq!(count("250k"), Ok(250_000));
        assert_eq!(count("5M"), Ok(5_000_000));
        assert_eq!(count("0"), Ok(0));
        assert!(positive_count("0").is_err());
        assert!(count("-3").is_err() && count("many").is_err());
        assert_eq!(resolution("1920x1080"), Ok((1920, 1080)));
        assert!(resolution("0x10").is_err() && resolution("512").is_err());
        assert!(resolution("40000x10").is_err());
    }

    #[test]
    fn accel_specs_are_checked_without_a_scene() {
        let ploc = accel_spec("ploc:r=32").map(|kind| kind.to_string());
        assert_eq!(ploc, Ok("ploc:r=32".to_owned()));
        // `render` and `bench accel` default to the facade's structure.
        let default = accel_spec(crate::render::DEFAULT_ACCEL);
        assert_eq!(default, Ok(AccelKind::default()));
        assert!(accel_spec("bvh-fast").is_err());
        assert!(accel_spec("lbvh:bits=99").is_err());
    }

    #[test]
    fn accel_args_read_cpu_specs_as_the_cpu_structure() {
        let cpu = |text: &str| accel_arg(text).map(|a| (a.spec, a.cpu.unwrap().to_string()));
        assert_eq!(
            cpu("cpu:bvh-binned"),
            Ok(("cpu:bvh-binned".into(), "bvh-binned".into()))
        );
        assert_eq!(
            cpu("bvh-wide:from=cpu:bvh-sweep"),
            Ok((
                "bvh-wide:from=cpu:bvh-sweep".into(),
                "bvh-wide:from=bvh-sweep".into()
            ))
        );
        assert_eq!(cpu("grid"), Ok(("grid".into(), "grid".into())));
        // Every structure the GPU builds has a CPU reading.
        for spec in [
            "ploc:r=32",
            "lbvh:bits=63",
            "hlbvh",
            "bvh-wide",
            "bvh-wide:from=lbvh",
        ] {
            assert!(accel_arg(spec).is_ok(), "{spec}");
        }
        assert!(
            accel_arg("bogus")
                .unwrap_err()
                .contains("unknown accel `bogus`")
        );
        assert!(accel_arg("cpu:bogus").is_err());
        // DACRT builds no structure: no CPU reading.
        assert_eq!(accel_arg("dacrt:split=rdh").unwrap().cpu, None);
        assert!(accel_arg("dacrt:split=sah").is_err());
    }
}
