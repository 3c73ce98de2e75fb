//! What every figure shares: written whole (drawn into a temporary file beside the target, then
//! renamed over it), and axes that refuse what they cannot draw.

use crate::runner::OutFolder;
use std::error::Error;
use std::path::Path;

/// Draws a figure with `draw` (given the path to draw into) and puts it at `name` in `out`
/// whole: a stop while drawing leaves the previous figure, not a cut one. A `draw` that finds
/// nothing to show writes no file: then no figure stays at `name` (an earlier run's is removed).
///
/// # Errors
/// The drawing's error, or a file that cannot be moved into place or removed (named).
pub fn write_svg(
    out: &OutFolder,
    name: &str,
    draw: impl FnOnce(&Path) -> Result<(), Box<dyn Error>>,
) -> Result<(), Box<dyn Error>> {
    let target = out.join(name);
    let temp = out.join(format!(".{name}.tmp-{}", std::process::id()));
    if let Err(e) = draw(&temp) {
        let _ = std::fs::remove_file(&temp);
        return Err(format!("{}: {e}", target.display()).into());
    }
    if !temp.exists() {
        return match std::fs::remove_file(&target) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(format!("{}: cannot remove: {e}", target.display()).into())
            }
            _ => Ok(()),
        };
    }
    std::fs::rename(&temp, &target).map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        format!("{}: cannot write: {e}", target.display())
    })?;
    Ok(())
}

/// A plot axis over `[lo, hi]` padded by `fraction` of its span (at least `min_pad` each
/// side). Finite values whose span is not finite (`±1e308`) would make the axis infinite and
/// the plot never finish: they are an error naming the values, and the caller's record keeps
/// the numbers.
///
/// # Errors
/// Non-finite bounds or span, or `lo > hi`.
pub fn axis_range(
    lo: f64,
    hi: f64,
    fraction: f64,
    min_pad: f64,
) -> Result<std::ops::Range<f64>, String> {
    let pad = ((hi - lo) * fraction).max(min_pad);
    let range = (lo - pad)..(hi + pad);
    if lo.is_finite() && hi.is_finite() && (range.end - range.start).is_finite() && lo <= hi {
        Ok(range)
    } else {
        Err(format!(
            "values from {lo:e} to {hi:e} cannot be drawn (the axis would not be finite); the \
             record keeps the numbers"
        ))
    }
}

/// The top of an axis from 0 that holds `max` with `fraction` of headroom (at least
/// `min_top`).
///
/// # Errors
/// As [`axis_range`].
pub fn axis_top(max: f64, fraction: f64, min_top: f64) -> Result<f64, String> {
    Ok(axis_range(0.0, max.max(0.0), fraction, 0.0)?
        .end
        .max(min_top))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_refuse_what_they_cannot_draw() {
        let r = axis_range(-2.0, 2.0, 0.25, 0.1).unwrap();
        assert_eq!(r, -3.0..3.0);
        assert_eq!(axis_range(1.0, 1.0, 0.25, 0.1).unwrap(), 0.9..1.1);
        for (lo, hi) in [
            (-1e308, 1e308),
            (f64::NAN, 1.0),
            (0.0, f64::INFINITY),
            (2.0, 1.0),
        ] {
            let err = axis_range(lo, hi, 0.1, 0.0).unwrap_err();
            assert!(err.contains("cannot be drawn"), "{err}");
        }
        assert_eq!(axis_top(10.0, 0.1, 1.0).unwrap(), 11.0);
        assert_eq!(axis_top(0.0, 0.1, 1.0).unwrap(), 1.0);
        assert!(axis_top(f64::MAX, 0.5, 1.0).is_err());
    }

    /// A figure is put in place whole; one with nothing to draw leaves none, not an error.
    #[test]
    fn a_figure_with_nothing_to_draw_leaves_no_file() {
        let dir = std::env::temp_dir().join(format!("bnn-plots-{}", std::process::id()));
        let out = OutFolder::open(&dir, "--out").unwrap();
        let target = dir.join("f.svg");
        write_svg(&out, "f.svg", |p| Ok(std::fs::write(p, "<svg/>")?)).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "<svg/>");
        write_svg(&out, "f.svg", |_| Ok(())).unwrap();
        assert!(!target.exists());
        write_svg(&out, "f.svg", |_| Ok(())).unwrap();
        let err = write_svg(&out, "f.svg", |_| Err("no axes".into())).unwrap_err();
        assert!(err.to_string().contains("f.svg: no axes"), "{err}");
        drop(out);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
