//! Per-row latent variables: the variational table `q(z_n) = N(m_n, v_n)` of BNN+LV (Depeweg
//! 2019 §3.1, eq. 3.12) and its sparse optimiser.
//!
//! Each training row `n` owns `d` latent inputs with `v_n = 10⁻⁶ + sigmoid(ℓ_n)·(γ − 2·10⁻⁶)`
//! (the reference code's parameterisation of eq. 3.20: the variance stays strictly inside
//! `(0, γ)`, so the tied site `f_n(z_n)` stays finite), under the prior `z_n ~ N(0, γ)`.
//! Initialisation `m = 0`, `ℓ = 5` (`v ≈ 0.993γ`): `q(z)` starts at the prior and the net first
//! learns as a plain BNN.
//!
//! **Sparse updates.** A minibatch touches `B` of the `N` rows. Burn's dense Adam would keep
//! moving the other rows through their momentum; the table is instead updated by its own Adam
//! ([`LatentTable::sparse_step`]): only the batch's rows, each with its own moment buffers and
//! step count (bias correction per row), at the learning rate times `N/B` (each row's gradient
//! carries the `1/N` of the per-point objective and it is visited once an epoch), as Depeweg's
//! code does.

use crate::error::{Check, ConfigError};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Int, Tensor};

/// Lower and upper margins of the latent variance inside `(0, γ)`.
const V_MARGIN: f64 = 1e-6;

/// Configuration of a [`LatentTable`].
#[derive(Config, Debug)]
pub struct LatentConfig {
    /// Latent inputs per row `d_z` (the thesis: 1).
    #[config(default = 1)]
    pub d_latent: usize,
    /// Prior variance `γ` of each latent; `None`: the input dimension `d` (the code's default).
    #[config(default = "None")]
    pub prior_variance: Option<f64>,
    /// Initial variance logit `ℓ` (the code: 5, `v ≈ 0.993γ`).
    #[config(default = 5.0)]
    pub init_logit: f64,
    /// Adam's `β₁` of the sparse optimiser.
    #[config(default = 0.9)]
    pub beta_1: f64,
    /// Adam's `β₂`.
    #[config(default = 0.999)]
    pub beta_2: f64,
    /// Adam's `ε`.
    #[config(default = 1e-8)]
    pub epsilon: f64,
}

impl LatentConfig {
    /// A table of `rows` rows for inputs of `d_input` dimensions (for `γ`'s default).
    ///
    /// # Errors
    /// A zero `rows` or `d_latent`, a `γ` that is not finite and above `2·10⁻⁶`, a non-finite
    /// logit, or Adam constants outside `[0, 1)` / not positive: the error names the field.
    pub fn init(
        &self,
        rows: usize,
        d_input: usize,
        device: &Device,
    ) -> Result<LatentTable, ConfigError> {
        let check = Check("LatentConfig");
        check.at_least_one("rows", rows)?;
        check.at_least_one("d_latent", self.d_latent)?;
        let gamma = self.prior_variance.unwrap_or(d_input as f64);
        check.positive("prior_variance", gamma - 2.0 * V_MARGIN)?;
        check.finite("init_logit", self.init_logit)?;
        check.probability("beta_1", self.beta_1)?;
        check.open_unit("beta_2", self.beta_2)?;
        check.positive("epsilon", self.epsilon)?;
        let shape = [rows, self.d_latent];
        let n = rows * self.d_latent;
        Ok(LatentTable {
            mean: Param::from_tensor(Tensor::zeros(shape, device)),
            logit: Param::from_tensor(Tensor::full(shape, self.init_logit, device)),
            gamma,
            adam: SparseAdam {
                beta_1: self.beta_1,
                beta_2: self.beta_2,
                epsilon: self.epsilon,
                moments: vec![0.0; 4 * n],
                steps: vec![0; rows],
            },
        })
    }
}

/// Per-row Adam state of the table (not part of the record, like burn's optimiser state).
#[derive(Debug, Clone)]
pub struct SparseAdam {
    beta_1: f64,
    beta_2: f64,
    epsilon: f64,
    /// `[m₁(mean), m₂(mean), m₁(logit), m₂(logit)]`, each `[rows·d_z]`.
    moments: Vec<f32>,
    /// Updates each row has had.
    steps: Vec<u32>,
}

/// The variational table `q(z_n) = N(m_n, v_n)` (module docs).
#[derive(Module, Debug)]
pub struct LatentTable {
    /// Means `m`, `[N, d_z]`.
    pub mean: Param<Tensor<2>>,
    /// Variance logits `ℓ`, `[N, d_z]`.
    pub logit: Param<Tensor<2>>,
    /// Prior variance `γ`.
    #[module(skip)]
    pub gamma: f64,
    /// The sparse optimiser's state.
    #[module(skip)]
    pub adam: SparseAdam,
}

impl LatentTable {
    /// Rows `N`.
    pub fn rows(&self) -> usize {
        self.mean.dims()[0]
    }

    /// Latent dimensions `d_z`.
    pub fn d_latent(&self) -> usize {
        self.mean.dims()[1]
    }

    /// `v = 10⁻⁶ + sigmoid(ℓ)·(γ − 2·10⁻⁶)`.
    pub fn variance_of(&self, logit: Tensor<2>) -> Tensor<2> {
        burn::tensor::activation::sigmoid(logit) * (self.gamma - 2.0 * V_MARGIN) + V_MARGIN
    }

    /// `(m, v)` of the rows `index`, `[B, d_z]` each.
    pub fn rows_of(&self, index: Tensor<1, Int>) -> (Tensor<2>, Tensor<2>) {
        let mean = self.mean.val().select(0, index.clone());
        let logit = self.logit.val().select(0, index);
        (mean, self.variance_of(logit))
    }

    /// `KL(q(z_n) ‖ N(0, γ))` per row, summed over `d_z`, `[B]`:
    /// `½ Σ [v/γ + m²/γ − 1 − ln(v/γ)]`.
    pub fn kl(&self, mean: Tensor<2>, var: Tensor<2>) -> Tensor<1> {
        let g = self.gamma;
        let terms = (var.clone() + mean.square()) / g - 1.0 - (var / g).log();
        (terms.sum_dim(1) * 0.5).squeeze_dim(1)
    }

    /// The sparse optimiser's moments and per-row step counts, for a training state saved
    /// between epochs.
    pub fn adam_state(&self) -> crate::train::LocalState {
        crate::train::LocalState {
            floats: self.adam.moments.clone(),
            counts: self.adam.steps.clone(),
        }
    }

    /// The table with the sparse optimiser's state from [`LatentTable::adam_state`].
    ///
    /// # Errors
    /// When the state's sizes do not fit the table.
    pub fn with_adam_state(mut self, state: crate::train::LocalState) -> Result<Self, String> {
        let (moments, steps) = (4 * self.rows() * self.d_latent(), self.rows());
        if state.floats.len() != moments || state.counts.len() != steps {
            return Err(format!(
                "the latent table's optimiser state has {} moments and {} step counts; the \
                 table needs {moments} and {steps}",
                state.floats.len(),
                state.counts.len()
            ));
        }
        self.adam.moments = state.floats;
        self.adam.steps = state.counts;
        Ok(self)
    }

    /// One Adam step of the rows `rows` (unique, in the batch's order) from the gradients of
    /// the table in `grads`, which are removed from it (so that the dense optimiser leaves the
    /// table alone); the step size is `learning_rate·N/B`. The table unchanged when `grads`
    /// holds no gradient of it.
    pub fn sparse_step(
        mut self,
        grads: &mut GradientsParams,
        rows: &[usize],
        learning_rate: f64,
    ) -> Self {
        let (Some(g_mean), Some(g_logit)) = (
            grads.remove::<2>(self.mean.id),
            grads.remove::<2>(self.logit.id),
        ) else {
            return self;
        };
        let d = self.d_latent();
        let b = rows.len();
        let host = |g: Tensor<2>| {
            let index = crate::host::labels(rows, &g.device());
            crate::host::to_vec(g.select(0, index))
        };
        let (g_mean, g_logit) = (host(g_mean), host(g_logit));
        let n = self.rows() * d;
        let lr = learning_rate * self.rows() as f64 / b as f64;
        let SparseAdam {
            beta_1,
            beta_2,
            epsilon,
            ..
        } = self.adam;
        let mut deltas = [vec![0f32; b * d], vec![0f32; b * d]];
        for (i, &row) in rows.iter().enumerate() {
            self.adam.steps[row] += 1;
            let t = self.adam.steps[row] as i32;
            let (c1, c2) = (1.0 - beta_1.powi(t), 1.0 - beta_2.powi(t));
            for (p, grad) in [&g_mean, &g_logit].into_iter().enumerate() {
                for j in 0..d {
                    let (k, at) = (row * d + j, i * d + j);
                    let g = grad[at];
                    let m1 = &mut self.adam.moments[2 * p * n + k];
                    *m1 = (beta_1 * *m1 as f64 + (1.0 - beta_1) * g) as f32;
                    let m1 = *m1 as f64;
                    let m2 = &mut self.adam.moments[(2 * p + 1) * n + k];
                    *m2 = (beta_2 * *m2 as f64 + (1.0 - beta_2) * g * g) as f32;
                    let m2 = *m2 as f64;
                    deltas[p][at] = (-lr * (m1 / c1) / ((m2 / c2).sqrt() + epsilon)) as f32;
                }
            }
        }
        let apply = |param: Param<Tensor<2>>, delta: &[f32]| {
            param.map(|t| {
                let add = |t: Tensor<2>| {
                    let delta = Tensor::<1>::from_floats(delta, &t.device()).reshape([b, d]);
                    let index = crate::host::labels(rows, &t.device());
                    t.select_assign(0, index, delta, burn::tensor::IndexingUpdateOp::Add)
                };
                // A new leaf, as an optimiser leaves it: updated outside the graph.
                if t.is_autodiff() {
                    Tensor::from_inner(add(t.inner())).require_grad()
                } else {
                    add(t)
                }
            })
        };
        self.mean = apply(self.mean, &deltas[0]);
        self.logit = apply(self.logit, &deltas[1]);
        self
    }
}

#[cfg(test)]
#[path = "latent_tests.rs"]
mod tests;
