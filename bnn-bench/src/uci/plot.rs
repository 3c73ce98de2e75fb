//! The figure: test LL per data set and method with ±1 standard error bars.

use super::*;

/// Test LL per data set (one panel each) and method, with ±1 standard error bars, as SVG text.
pub(crate) fn plot(results: &[MethodResult]) -> Result<String, Box<dyn Error>> {
    use plotters::prelude::*;
    let sets = sets_in(results);
    let cols = 3usize;
    let rows = sets.len().div_ceil(cols).max(1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (330 * cols as u32, 260 * rows as u32))
            .into_drawing_area();
        root.fill(&WHITE)?;
        let panels = root.split_evenly((rows, cols));
        for (area, d) in panels.iter().zip(&sets) {
            let rs: Vec<&MethodResult> = results.iter().filter(|r| r.dataset == *d).collect();
            // A single split draws its point without a bar.
            let stats: Vec<(f64, f64)> = rs
                .iter()
                .map(|r| {
                    let (m, se) = r.ll();
                    (m, se.unwrap_or(0.0))
                })
                .collect();
            let lo = stats
                .iter()
                .map(|(m, s)| m - s)
                .fold(f64::INFINITY, f64::min);
            let hi = stats
                .iter()
                .map(|(m, s)| m + s)
                .fold(f64::NEG_INFINITY, f64::max);
            // A panel whose numbers cannot be drawn says so in place of its chart (the record
            // and the tables keep them).
            let y_range = match crate::plots::axis_range(lo, hi, 0.15, 0.05) {
                Ok(r) => r,
                Err(why) => {
                    eprintln!("uci.svg, {d}: test LL {why}");
                    area.titled(&format!("{d}: test LL {why}"), ("sans-serif", 11))?;
                    continue;
                }
            };
            let mut chart = ChartBuilder::on(area)
                .caption(format!("{d}: test LL"), ("sans-serif", 15))
                .margin(8)
                .x_label_area_size(40)
                .y_label_area_size(45)
                .build_cartesian_2d(-0.5..(rs.len() as f64 - 0.5), y_range)?;
            let names: Vec<String> = rs.iter().map(|r| r.method.clone()).collect();
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(rs.len())
                .x_label_formatter(&|x| {
                    let i = x.round() as usize;
                    names.get(i).cloned().unwrap_or_default()
                })
                .draw()?;
            for (i, (m, s)) in stats.iter().enumerate() {
                let x = i as f64;
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(x, m - s), (x, m + s)],
                    BLACK.stroke_width(2),
                )))?;
                chart.draw_series(std::iter::once(Circle::new((x, *m), 4, BLUE.filled())))?;
            }
        }
        root.present()?;
    }
    Ok(svg)
}
