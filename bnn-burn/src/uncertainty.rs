//! Predictive distributions from `S` posterior samples, and their uncertainty decompositions.
//!
//! * [`ClassPrediction`]: class probabilities `[S, B, C]` → predictive entropy (total),
//!   expected entropy (aleatoric), mutual information (epistemic, BALD), variation ratio
//!   (Gal 2016 §3.3; Depeweg 2019 §3.2).
//! * [`GaussianPrediction`]: per-sample Gaussians `[S, B, D]` → law of total variance,
//!   `Var[y] = E_s[σ²_s] (aleatoric) + Var_s[μ_s] (epistemic)`, and the mixture log-likelihood.

use crate::special::{HALF_LN_2PI, log_mean_exp};
use burn::tensor::{Int, Tensor};

/// Smallest probability inside a logarithm: `p ln p` is 0 at `p = 0`, never NaN.
const P_FLOOR: f64 = 1e-30;

fn entropy_last_dim<const D: usize>(p: Tensor<D>) -> Tensor<D> {
    let d = D - 1;
    (p.clone() * p.clamp_min(P_FLOOR).log()).sum_dim(d).neg()
}

/// Class probabilities from `S` stochastic passes, `[S, B, C]`.
#[derive(Debug, Clone)]
pub struct ClassPrediction {
    /// `p_s(c | x_b)`, shape `[S, B, C]`; rows sum to one.
    pub probs: Tensor<3>,
}

impl ClassPrediction {
    /// From logits `[S, B, C]` (softmax over classes).
    pub fn from_logits(logits: Tensor<3>) -> Self {
        Self {
            probs: burn::tensor::activation::softmax(logits, 2),
        }
    }

    /// Predictive distribution `p̄ = (1/S) Σ_s p_s`, `[B, C]`.
    pub fn predictive(&self) -> Tensor<2> {
        self.probs.clone().mean_dim(0).squeeze_dim(0)
    }

    /// Predictive (total) entropy `H[p̄] = −Σ_c p̄_c ln p̄_c`, `[B]`.
    pub fn predictive_entropy(&self) -> Tensor<1> {
        entropy_last_dim(self.predictive()).squeeze_dim(1)
    }

    /// Expected entropy `(1/S) Σ_s H[p_s]` (aleatoric), `[B]`.
    pub fn expected_entropy(&self) -> Tensor<1> {
        entropy_last_dim(self.probs.clone())
            .mean_dim(0)
            .reshape([self.probs.dims()[1]])
    }

    /// Mutual information `I[y, ω] = H[p̄] − (1/S) Σ_s H[p_s]` (epistemic, BALD), `[B]`.
    ///
    /// Clamped at 0: the two entropies can differ by rounding when the samples agree.
    pub fn mutual_information(&self) -> Tensor<1> {
        (self.predictive_entropy() - self.expected_entropy()).clamp_min(0.0)
    }

    /// Variation ratio `1 − f/S`, `f` the count of the modal sampled label, `[B]`.
    pub fn variation_ratio(&self) -> Tensor<1> {
        let [s, b, c] = self.probs.dims();
        let labels = self.probs.clone().argmax(2).reshape([s, b]);
        let counts = labels.one_hot::<3>(c).float().sum_dim(0).reshape([b, c]);
        counts
            .max_dim(1)
            .reshape([b])
            .div_scalar(s as f64)
            .neg()
            .add_scalar(1.0)
    }

    /// `ln p̄(y_b | x_b)` for integer labels `[B]`, `[B]`.
    pub fn log_likelihood(&self, labels: Tensor<1, Int>) -> Tensor<1> {
        let b = labels.dims()[0];
        self.predictive()
            .gather(1, labels.reshape([b, 1]))
            .clamp_min(P_FLOOR)
            .log()
            .reshape([b])
    }
}

/// Per-sample Gaussian predictions `N(mean_s, var_s)`, each `[S, B, D]`.
#[derive(Debug, Clone)]
pub struct GaussianPrediction {
    /// Means `μ_s(x_b)`, `[S, B, D]`.
    pub mean: Tensor<3>,
    /// Variances `σ²_s(x_b)` (the aleatoric noise of each sample), `[S, B, D]`.
    pub var: Tensor<3>,
}

impl GaussianPrediction {
    fn squeeze(t: Tensor<3>) -> Tensor<2> {
        t.squeeze_dim(0)
    }

    /// Predictive mean `E_s[μ_s]`, `[B, D]`.
    pub fn predictive_mean(&self) -> Tensor<2> {
        Self::squeeze(self.mean.clone().mean_dim(0))
    }

    /// Aleatoric variance `E_s[σ²_s]`, `[B, D]`.
    pub fn aleatoric_variance(&self) -> Tensor<2> {
        Self::squeeze(self.var.clone().mean_dim(0))
    }

    /// Epistemic variance `Var_s[μ_s]` (population form, `1/S`), `[B, D]`.
    pub fn epistemic_variance(&self) -> Tensor<2> {
        let m = self.mean.clone().mean_dim(0);
        Self::squeeze((self.mean.clone() - m).square().mean_dim(0))
    }

    /// Total predictive variance (law of total variance), `[B, D]`.
    pub fn predictive_variance(&self) -> Tensor<2> {
        self.aleatoric_variance() + self.epistemic_variance()
    }

    /// Log-density of `y [B, D]` under the equal-weight mixture `(1/S) Σ_s N(y; μ_s, σ²_s)`,
    /// summed over output dimensions: `log_mean_exp_s Σ_d ln N(y_d; μ_sd, σ²_sd)`, `[B]`.
    pub fn log_likelihood(&self, y: Tensor<2>) -> Tensor<1> {
        let b = y.dims()[0];
        let per_sample = (self.var.clone().log() * 0.5
            + (y.unsqueeze::<3>() - self.mean.clone()).square() / (self.var.clone() * 2.0)
            + HALF_LN_2PI)
            .sum_dim(2)
            .neg();
        log_mean_exp(per_sample, 0).reshape([b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{test_device, to_vec};

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
        for (samples, entropy, mi) in cases {
            let probs = Tensor::<2>::from_floats(samples, &device).reshape([4, 1, 2]);
            let p = ClassPrediction { probs };
            let h = to_vec(p.predictive_entropy())[0];
            let i = to_vec(p.mutual_information())[0];
            assert!(
                (h - entropy).abs() < 1e-6,
                "entropy {h} vs {entropy} for {samples:?}"
            );
            assert!((i - mi).abs() < 1e-6, "MI {i} vs {mi} for {samples:?}");
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
        let v = to_vec(ClassPrediction { probs }.variation_ratio());
        assert!(
            (v[0] - 0.25).abs() < 1e-6 && (v[1] - 0.25).abs() < 1e-6,
            "{v:?}"
        );
    }

    #[test]
    fn gaussian_decomposition_and_mixture_likelihood() {
        let device = test_device();
        let mean = Tensor::<3>::from_floats([[[1.0]], [[3.0]]], &device);
        let var = Tensor::<3>::from_floats([[[0.5]], [[1.5]]], &device);
        let p = GaussianPrediction { mean, var };
        assert!((to_vec(p.predictive_mean())[0] - 2.0).abs() < 1e-6);
        assert!((to_vec(p.aleatoric_variance())[0] - 1.0).abs() < 1e-6);
        assert!((to_vec(p.epistemic_variance())[0] - 1.0).abs() < 1e-6);
        assert!((to_vec(p.predictive_variance())[0] - 2.0).abs() < 1e-6);
        let y = 2.5f64;
        let pdf = |m: f64, v: f64| {
            (-(y - m).powi(2) / (2.0 * v)).exp() / (2.0 * std::f64::consts::PI * v).sqrt()
        };
        let expected = (0.5 * pdf(1.0, 0.5) + 0.5 * pdf(3.0, 1.5)).ln();
        let got = to_vec(p.log_likelihood(Tensor::<2>::from_floats([[y as f32]], &device)))[0];
        assert!((got - expected).abs() < 1e-5, "{got} vs {expected}");
    }
}
