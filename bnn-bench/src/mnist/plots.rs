//! The figures: reliability diagrams, entropy histograms, entropy and error against rotation.

use super::*;

pub(crate) type Area<'a> =
    plotters::drawing::DrawingArea<plotters::prelude::SVGBackend<'a>, plotters::coord::Shift>;

/// A white SVG with one panel per result: one row per architecture, one column per method.
/// Returns the root (to present) and the results' panels, in result order.
pub(crate) fn panel_grid<'a>(
    path: &'a Path,
    results: &[MnistResult],
) -> Result<(Area<'a>, Vec<Area<'a>>), Box<dyn Error>> {
    use plotters::prelude::*;
    let mut archs = Vec::new();
    let mut methods: Vec<&str> = Vec::new();
    for r in results {
        if !archs.contains(&r.arch) {
            archs.push(r.arch);
        }
        if !methods.contains(&r.method.as_str()) {
            methods.push(&r.method);
        }
    }
    let (rows, cols) = (archs.len().max(1), methods.len().max(1));
    let root = SVGBackend::new(path, (300 * cols as u32, 300 * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let cells = root.split_evenly((rows, cols));
    let panels = results
        .iter()
        .map(|r| {
            let row = archs.iter().position(|a| *a == r.arch).unwrap_or(0);
            let col = methods.iter().position(|m| *m == r.method).unwrap_or(0);
            cells[row * cols + col].clone()
        })
        .collect();
    Ok((root, panels))
}

/// Reliability diagrams: accuracy per confidence bin against the diagonal.
pub(crate) fn plot_reliability(path: &Path, results: &[MnistResult]) -> Result<(), Box<dyn Error>> {
    use plotters::prelude::*;
    let (root, panels) = panel_grid(path, results)?;
    for (r, area) in results.iter().zip(&panels) {
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{} {} (ECE {:.3})", short(r.arch), r.method, r.ece),
                ("sans-serif", 14),
            )
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(35)
            .build_cartesian_2d(0f64..1f64, 0f64..1f64)?;
        chart
            .configure_mesh()
            .x_desc("confidence")
            .y_desc("accuracy")
            .disable_mesh()
            .draw()?;
        chart.draw_series(r.reliability.iter().filter(|b| b.count > 0).map(|b| {
            Rectangle::new(
                [(b.lower, 0.0), (b.upper, b.accuracy)],
                BLUE.mix(0.6).filled(),
            )
        }))?;
        chart.draw_series(LineSeries::new(
            [(0.0, 0.0), (1.0, 1.0)],
            BLACK.stroke_width(1),
        ))?;
    }
    root.present()?;
    Ok(())
}

pub(crate) fn short(arch: Arch) -> &'static str {
    match arch {
        Arch::Mlp => "MLP",
        Arch::LeNet5 => "LeNet5",
        Arch::LeNet5Pooled => "LeNet5-pool",
        Arch::LeNet5Sensoy => "LeNet5-sensoy",
        Arch::Conv96 => "Conv96",
    }
}

/// Predictive-entropy histograms on `[0, ln C]`, the test images (blue) against the first OOD
/// set (red), as densities.
pub(crate) fn plot_entropy(
    path: &Path,
    results: &[MnistResult],
    data: &MnistData,
) -> Result<(), Box<dyn Error>> {
    use plotters::prelude::*;
    let (root, panels) = panel_grid(path, results)?;
    let max_h = (data.n_classes() as f64).ln();
    let (name, ood_name) = data.names();
    let (in_label, out_label) = (format!("{name} test (in)"), format!("{ood_name} (OOD)"));
    let width = max_h / ENTROPY_BINS as f64;
    let density = |h: &[usize]| -> Vec<f64> {
        let n = h.iter().sum::<usize>().max(1) as f64;
        h.iter().map(|&c| c as f64 / (n * width)).collect()
    };
    for (k, (r, area)) in results.iter().zip(&panels).enumerate() {
        let (din, dout) = (density(&r.entropy_hist_in), density(&r.entropy_hist_out));
        // Clip the y axis so the in-distribution spike at 0 does not flatten the OOD bars.
        let top = dout.iter().copied().fold(1.0, f64::max) * 1.2;
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!(
                    "{} {} (AUROC {:.3})",
                    short(r.arch),
                    r.method,
                    r.auroc_entropy
                ),
                ("sans-serif", 14),
            )
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(35)
            .build_cartesian_2d(0f64..max_h, 0f64..top)?;
        chart
            .configure_mesh()
            .x_desc("predictive entropy (nats)")
            .y_desc("density")
            .disable_mesh()
            .draw()?;
        for (d, color, label) in [
            (&din, BLUE, in_label.as_str()),
            (&dout, RED, out_label.as_str()),
        ] {
            chart
                .draw_series(d.iter().enumerate().map(|(i, &v)| {
                    let x0 = i as f64 * width;
                    Rectangle::new(
                        [(x0, 0.0), (x0 + width, v.min(top))],
                        color.mix(0.4).filled(),
                    )
                }))?
                .label(label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.mix(0.4).filled())
                });
        }
        if k == 0 {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
        }
    }
    root.present()?;
    Ok(())
}

/// Mean predictive entropy (top) and test error (bottom) against the rotation angle, one
/// panel per architecture, one line per method.
pub(crate) fn plot_rotation(
    path: &Path,
    results: &[MnistResult],
    classes: usize,
) -> Result<(), Box<dyn Error>> {
    use plotters::prelude::*;
    let mut archs = Vec::new();
    for r in results {
        if !archs.contains(&r.arch) {
            archs.push(r.arch);
        }
    }
    let cols = archs.len().max(1);
    let root = SVGBackend::new(path, (420 * cols as u32, 640)).into_drawing_area();
    root.fill(&WHITE)?;
    let cells = root.split_evenly((2, cols));
    let max_h = (classes as f64).ln();
    for (c, arch) in archs.iter().enumerate() {
        let rows: Vec<&MnistResult> = results.iter().filter(|r| r.arch == *arch).collect();
        for (panel, (what, top)) in [("mean entropy (nats)", max_h), ("test error %", 100.0)]
            .into_iter()
            .enumerate()
        {
            let mut chart = ChartBuilder::on(&cells[panel * cols + c])
                .caption(
                    format!("{}: {what} vs rotation", short(*arch)),
                    ("sans-serif", 14),
                )
                .margin(8)
                .x_label_area_size(30)
                .y_label_area_size(40)
                .build_cartesian_2d(0f64..315f64, 0f64..top)?;
            chart
                .configure_mesh()
                .x_desc("rotation (degrees)")
                .y_desc(what)
                .disable_mesh()
                .draw()?;
            for (k, r) in rows.iter().enumerate() {
                let color = Palette99::pick(k).to_rgba();
                let points: Vec<(f64, f64)> = r
                    .rotations
                    .iter()
                    .map(|a| {
                        let v = if panel == 0 {
                            a.mean_entropy
                        } else {
                            a.error_pct
                        };
                        (a.degrees, v)
                    })
                    .collect();
                chart
                    .draw_series(LineSeries::new(points, color.stroke_width(2)))?
                    .label(r.method.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
                    });
            }
            if panel == 0 {
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::UpperRight)
                    .background_style(WHITE.mix(0.8))
                    .border_style(BLACK)
                    .draw()?;
            }
        }
    }
    root.present()?;
    Ok(())
}
