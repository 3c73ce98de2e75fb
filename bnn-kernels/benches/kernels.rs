//! Times each kernel on a million weights (the MLP 784-400-400-10 has 478 000): warm-up, then
//! the median and the spread of 15 samples, as nanoseconds per element.
//! `cargo bench -p bnn-kernels [-- FILTER]`.

use bnn_kernels::elementwise::{self, AdamStep, Draws, KlTerms, LocScale, Prior, SigmaRule, Tape};
use bnn_kernels::rectifier::{self, RectifierRule};
use bnn_kernels::simd::Out;
use bnn_kernels::{DropoutNoise, factor};
use std::hint::black_box;
use std::time::Instant;

const N: usize = 1 << 20;
const SAMPLES: usize = 15;

/// Runs `f` once to warm up, then `SAMPLES` times; prints the median, the lowest and the highest
/// time per element.
fn bench(filter: &Option<String>, name: &str, elements: usize, mut f: impl FnMut()) {
    if filter.as_ref().is_some_and(|w| !name.contains(w.as_str())) {
        return;
    }
    f();
    let mut ns: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_nanos() as f64 / elements as f64
        })
        .collect();
    ns.sort_by(f64::total_cmp);
    println!(
        "{name:<28} {:>7.3} ns/element  [{:.3} .. {:.3}]",
        ns[SAMPLES / 2],
        ns[0],
        ns[SAMPLES - 1]
    );
}

fn main() {
    // `cargo bench` passes `--bench`; the first other argument filters by name.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let mu: Vec<f32> = (0..N).map(|i| ((i % 97) as f32 - 48.0) * 1e-3).collect();
    let rho: Vec<f32> = (0..N).map(|i| -5.0 + (i % 13) as f32 * 0.1).collect();
    let grad: Vec<f32> = (0..N).map(|i| ((i % 31) as f32 - 15.0) * 1e-2).collect();
    let var: Vec<f32> = rho.iter().map(|r| r.exp()).collect();
    let terms = KlTerms::new(0.0, 1.0, 1.0);
    let (mut out, mut out2) = (vec![0f32; N], vec![0f32; N]);
    let mut tape = vec![0f32; 2 * N];
    let f = &filter;

    bench(f, "normals", N, || {
        elementwise::normals(1, 0, &mut out);
    });
    let q = LocScale {
        mu: &mu,
        rho: &rho,
        rule: SigmaRule::Softplus,
    };
    let prior = Prior::scalar(terms);
    bench(f, "sample (draw, KL, tape)", N, || {
        let draws = Draws {
            key: 7,
            scales: &[1.0],
            center: false,
        };
        let (out, tape) = (&mut out, &mut tape);
        black_box(elementwise::sample(
            q,
            draws,
            Some(prior),
            Tape::DrawsAndKl,
            out,
            tape,
        ));
    });
    for (name, keep, kl) in [
        ("sample (draw only)", Tape::Off, None),
        ("sample (draw, tape)", Tape::Draws, None),
        ("sample (draw, KL, draw tape)", Tape::Draws, Some(prior)),
    ] {
        bench(f, name, N, || {
            let draws = Draws {
                key: 7,
                scales: &[1.0],
                center: false,
            };
            let rows = N * keep.rows(1);
            black_box(elementwise::sample(
                q,
                draws,
                kl,
                keep,
                &mut out,
                &mut tape[..rows],
            ));
        });
    }
    bench(f, "sample_backward", N, || {
        let fold = Some((prior, 1e-3));
        elementwise::sample_backward(&grad, 1, false, &mu, fold, &mut tape, &mut []);
    });
    // One draw and its log-ratio.
    let mut with_ratio = vec![0f32; N + 1];
    bench(f, "sample_ratio (1 draw)", N, || {
        black_box(elementwise::sample_ratio(
            7,
            q,
            1,
            prior,
            &mut with_ratio,
            true,
        ));
    });
    bench(f, "moments", N, || {
        black_box(elementwise::moments(
            q,
            1.0,
            Some(Out::as_uninit(&mut out)),
            Some(prior),
        ));
    });
    bench(f, "moments (no KL)", N, || {
        black_box(elementwise::moments(
            q,
            1.0,
            Some(Out::as_uninit(&mut out)),
            None,
        ));
    });
    let log_var = LocScale {
        rule: SigmaRule::LogVariance,
        ..q
    };
    bench(f, "moments (log-variance rule)", N, || {
        black_box(elementwise::moments(
            log_var,
            1.0,
            Some(Out::as_uninit(&mut out)),
            Some(prior),
        ));
    });
    bench(f, "noise (local reparam.)", N, || {
        elementwise::noise(3, &mu, &var, &mut out, false);
    });
    bench(f, "dropout (Bernoulli)", N, || {
        elementwise::dropout(3, &mu, 0.5, DropoutNoise::Bernoulli, &mut out);
    });
    bench(f, "flip (Flipout signs)", N, || {
        elementwise::flip(3, &mu, 256, &mut out);
    });
    let (mut p, mut m, mut v) = (mu.clone(), vec![0f32; N], vec![0f32; N]);
    let step = AdamStep {
        lr: 1e-3,
        beta_1: 0.9,
        beta_2: 0.999,
        epsilon: 1e-8,
        time: 10,
        decoupled_decay: None,
    };
    bench(f, "adam", N, || {
        elementwise::adam(&mut p, &grad, &mut m, &mut v, step);
    });
    bench(f, "rectifier (Gaussian rule)", N, || {
        rectifier::rectifier(RectifierRule::Gaussian, &mu, &var, &mut out, &mut out2);
    });
    let k = 4;
    let (fac, z) = (vec![0.01f32; N * k], vec![0.5f32; k]);
    bench(f, "add_factor_draws (k = 4)", N, || {
        factor::add_factor_draws(&fac, &z, k, &mut out);
    });
    bench(f, "gram (k = 4)", N, || {
        black_box(factor::gram(&fac, &rho, SigmaRule::Softplus, k, None));
    });
}
