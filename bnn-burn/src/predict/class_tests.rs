use super::*;
use crate::testing::{test_device, to_vec};

fn samples(rows: &[[f32; 2]], device: &burn::tensor::Device) -> ClassPrediction {
    let flat: Vec<f32> = rows.iter().flatten().copied().collect();
    let probs = Tensor::<1>::from_floats(flat.as_slice(), device).reshape([rows.len(), 1, 2]);
    ClassPrediction::Samples(ClassSamples { probs })
}

/// Gal's binary worked example (spec/gal-mc-dropout.md).
#[test]
fn gal_binary_worked_example() {
    let device = test_device();
    let ln2 = std::f64::consts::LN_2;
    let cases: [([[f32; 2]; 4], f64, f64); 3] = [
        ([[1.0, 0.0]; 4], 0.0, 0.0),
        ([[0.5, 0.5]; 4], ln2, 0.0),
        ([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]], ln2, ln2),
    ];
    for (rows, entropy, mi) in cases {
        let p = samples(&rows, &device);
        let h = to_vec(p.entropy())[0];
        let i = to_vec(p.epistemic_entropy())[0];
        assert!(
            (h - entropy).abs() < 1e-6,
            "entropy {h} vs {entropy} for {rows:?}"
        );
        assert!((i - mi).abs() < 1e-6, "MI {i} vs {mi} for {rows:?}");
        // The two variances add up to p̄(1 − p̄), the total variance of a Bernoulli.
        let (a, e) = (
            to_vec(p.aleatoric_variance()),
            to_vec(p.epistemic_variance()),
        );
        let m = to_vec(p.mean());
        assert!((a[0] + e[0] - m[0] * (1.0 - m[0])).abs() < 1e-6);
    }
}

#[test]
fn variation_ratio_counts_the_modal_label() {
    let device = test_device();
    // 4 samples, 2 inputs: labels (0,0,1,0) and (2,1,2,2) → modal counts 3 and 3.
    let probs = Tensor::<3>::from_floats(
        [
            [[0.9, 0.05, 0.05], [0.1, 0.2, 0.7]],
            [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1]],
            [[0.2, 0.7, 0.1], [0.0, 0.1, 0.9]],
            [[0.6, 0.3, 0.1], [0.3, 0.1, 0.6]],
        ],
        &device,
    );
    let v = to_vec(ClassSamples { probs }.variation_ratio());
    assert!(
        (v[0] - 0.25).abs() < 1e-6 && (v[1] - 0.25).abs() < 1e-6,
        "{v:?}"
    );
}

/// Dirichlet closed forms against Beta integrals on the host: α = (a, b) gives π₁ ~ Beta(a, b),
/// whose expected entropy and variance are integrated by the midpoint rule on 200 000 cells.
#[test]
fn dirichlet_decomposition_matches_beta_integrals() {
    let device = test_device();
    let cases = [(1.0, 1.0), (2.0, 1.0), (0.5, 3.0), (20.0, 5.0)];
    let flat: Vec<f32> = cases
        .iter()
        .flat_map(|&(a, b)| [a as f32, b as f32])
        .collect();
    let alpha = Tensor::<1>::from_floats(flat.as_slice(), &device).reshape([cases.len(), 2]);
    let pred = ClassPrediction::Dirichlet(DirichletPrediction::new(alpha));
    let ale = to_vec(pred.aleatoric_entropy());
    let epi_var = to_vec(pred.epistemic_variance());
    let ale_var = to_vec(pred.aleatoric_variance());
    for (k, &(a, b)) in cases.iter().enumerate() {
        let ln_beta = crate::special::lgamma_scalar(a) + crate::special::lgamma_scalar(b)
            - crate::special::lgamma_scalar(a + b);
        let cells = 200_000;
        let (mut eh, mut m1, mut m2) = (0.0, 0.0, 0.0);
        for i in 0..cells {
            let x = (i as f64 + 0.5) / cells as f64;
            let w =
                ((a - 1.0) * x.ln() + (b - 1.0) * (1.0 - x).ln() - ln_beta).exp() / cells as f64;
            eh += w * -(x * x.ln() + (1.0 - x) * (1.0 - x).ln());
            m1 += w * x;
            m2 += w * x * x;
        }
        // The midpoint rule loses mass at an integrable singularity (a < 1): compare loosely
        // there, tightly elsewhere.
        let tol = if a < 1.0 || b < 1.0 { 2e-3 } else { 1e-4 };
        assert!(
            (ale[k] - eh).abs() < tol,
            "α = ({a}, {b}): E H {} vs {eh}",
            ale[k]
        );
        let var = m2 - m1 * m1;
        assert!(
            (epi_var[2 * k] - var).abs() < tol,
            "Var π₁ {} vs {var}",
            epi_var[2 * k]
        );
        let mean = a / (a + b);
        assert!((ale_var[2 * k] + epi_var[2 * k] - mean * (1.0 - mean)).abs() < 1e-5);
    }
}
