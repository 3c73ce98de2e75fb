//! Per-row latent variables: the variational table `q(z_n) = N(m_n, v_n)` of BNN+LV (Depeweg
//! 2019 §3.1, eq. 3.12), `v_n = 10⁻⁶ + sigmoid(ℓ_n)·(γ − 2·10⁻⁶)` under the prior `N(0, γ)`, with
//! its sparse optimiser ([`LatentTable::sparse_step`]: only the batch's rows, each with its own
//! Adam moments, at the learning rate times `N/B`), or the amortised encoder `g(x, y) → (m, v)`
//! ([`LatentEncoder`], eq. 3.22). [`LatentPosterior`] is either form. More: the book's
//! *Latent-variable BNNs* page.

use crate::error::{Check, ConfigError};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig};
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
    /// The table's step is `learning_rate_scale · lr · N/B` for the trainer's (scheduled)
    /// rate `lr` (the code: 1). At black-box α = 1 the local factor cancels in expectation
    /// (`E_q[p(y|z) p(z)/q(z)] = ∫ p(y|z) p(z) dz`), so a row's gradient is mostly noise and
    /// its Adam step a random walk of about the step size per epoch: at `lr = 10⁻²` and
    /// `B = N/25` that is 0.25 per step. A scale of 0.1 keeps the thesis's step (10⁻³·25) when
    /// the weights train at 10⁻².
    #[config(default = 1.0)]
    pub learning_rate_scale: f64,
    /// The amortised encoder instead of the table; `None`: the table.
    #[config(default = "None")]
    pub encoder: Option<EncoderConfig>,
}

/// Configuration of a [`LatentEncoder`].
#[derive(Config, Debug)]
pub struct EncoderConfig {
    /// Width of the target's encoding: the outputs of a regression, the classes of labels
    /// (one-hot).
    pub d_target: usize,
    /// Hidden ReLU units (the thesis: 100).
    #[config(default = 100)]
    pub hidden: usize,
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
        check.positive("learning_rate_scale", self.learning_rate_scale)?;
        let shape = [rows, self.d_latent];
        let n = rows * self.d_latent;
        Ok(LatentTable {
            mean: Param::from_tensor(Tensor::zeros(shape, device)),
            logit: Param::from_tensor(Tensor::full(shape, self.init_logit, device)),
            gamma,
            adam: SparseAdam {
                scale: self.learning_rate_scale,
                beta_1: self.beta_1,
                beta_2: self.beta_2,
                epsilon: self.epsilon,
                moments: vec![0.0; 4 * n],
                steps: vec![0; rows],
            },
        })
    }
}

impl LatentConfig {
    /// The posterior of `rows` rows' latents for inputs of `d_input` dimensions: the table, or
    /// the encoder when [`LatentConfig::encoder`] is set (then `rows` only fixes nothing).
    ///
    /// # Errors
    /// As [`LatentConfig::init`]; a zero `d_target` or `hidden` of the encoder.
    pub fn init_posterior(
        &self,
        rows: usize,
        d_input: usize,
        device: &Device,
    ) -> Result<LatentPosterior, ConfigError> {
        let Some(encoder) = &self.encoder else {
            return Ok(LatentPosterior::Table(self.init(rows, d_input, device)?));
        };
        let check = Check("LatentConfig");
        check.at_least_one("d_latent", self.d_latent)?;
        check.at_least_one("encoder.d_target", encoder.d_target)?;
        check.at_least_one("encoder.hidden", encoder.hidden)?;
        let gamma = self.prior_variance.unwrap_or(d_input as f64);
        check.positive("prior_variance", gamma - 2.0 * V_MARGIN)?;
        check.finite("init_logit", self.init_logit)?;
        let dz = self.d_latent;
        crate::device::uses_generator();
        let hidden = LinearConfig::new(d_input + encoder.d_target, encoder.hidden).init(device);
        // Small output weights and biases (0 for the means, the initial logit for the
        // variances): q(z_n) starts near the prior for every row, as the table's does.
        let out = LinearConfig::new(encoder.hidden, 2 * dz)
            .with_initializer(burn::nn::Initializer::Normal {
                mean: 0.0,
                std: 1e-3,
            })
            .init(device);
        let bias: Vec<f32> = (0..2 * dz)
            .map(|j| if j < dz { 0.0 } else { self.init_logit as f32 })
            .collect();
        let out = Linear {
            bias: Some(Param::from_tensor(Tensor::from_floats(
                bias.as_slice(),
                device,
            ))),
            ..out
        };
        Ok(LatentPosterior::Encoder(LatentEncoder {
            hidden,
            out,
            gamma,
            d_latent: dz,
            d_target: encoder.d_target,
        }))
    }
}

/// A target as encoder input `[B, width]`: regression targets as they are, class labels
/// one-hot.
pub trait TargetFeatures {
    /// The encoding, `width` columns.
    ///
    /// # Panics
    /// If the targets do not have `width` columns.
    fn features(&self, width: usize) -> Tensor<2>;
}

impl TargetFeatures for Tensor<2> {
    fn features(&self, width: usize) -> Tensor<2> {
        assert_eq!(
            self.dims()[1],
            width,
            "LatentEncoder: targets of {} columns for an encoder of d_target = {width}",
            self.dims()[1]
        );
        self.clone()
    }
}

impl TargetFeatures for Tensor<1, Int> {
    fn features(&self, width: usize) -> Tensor<2> {
        self.clone().one_hot::<2>(width).float()
    }
}

/// The amortised `q(z_n | x_n, y_n) = N(m, v)`, `(m, ℓ) = g(x_n, y_n)` by one hidden ReLU
/// layer, `v = 10⁻⁶ + sigmoid(ℓ)·(γ − 2·10⁻⁶)` (the table's parameterisation; Depeweg 2019
/// eq. 3.22).
#[derive(Module, Debug)]
pub struct LatentEncoder {
    /// `[x, y] → hidden`.
    pub hidden: Linear,
    /// `hidden → (m, ℓ)`, `2·d_z` outputs.
    pub out: Linear,
    /// Prior variance `γ`.
    #[module(skip)]
    pub gamma: f64,
    /// Latent dimensions `d_z`.
    #[module(skip)]
    pub d_latent: usize,
    /// Width of the target's encoding.
    #[module(skip)]
    pub d_target: usize,
}

impl LatentEncoder {
    /// `(m, v)`, `[B, d_z]` each, of inputs `x [B, d]` with targets `y`.
    pub fn encode(&self, x: Tensor<2>, y: &impl TargetFeatures) -> (Tensor<2>, Tensor<2>) {
        let y = y.features(self.d_target).to_device(&x.device());
        let h = burn::tensor::activation::relu(self.hidden.forward(Tensor::cat(vec![x, y], 1)));
        let out = self.out.forward(h);
        let [b, _] = out.dims();
        let dz = self.d_latent;
        let mean = out.clone().slice([0..b, 0..dz]);
        let logit = out.slice([0..b, dz..2 * dz]);
        let var =
            burn::tensor::activation::sigmoid(logit) * (self.gamma - 2.0 * V_MARGIN) + V_MARGIN;
        (mean, var)
    }
}

/// `q(z_n)` of BNN+LV: a free entry per training row, or the amortised encoder.
#[derive(Module, Debug)]
pub enum LatentPosterior {
    /// [`LatentTable`].
    Table(LatentTable),
    /// [`LatentEncoder`].
    Encoder(LatentEncoder),
}

impl LatentPosterior {
    /// Rows of a table (the training set it was built for); `None` for the encoder, which
    /// takes any rows.
    pub fn table_rows(&self) -> Option<usize> {
        match self {
            Self::Table(t) => Some(t.rows()),
            Self::Encoder(_) => None,
        }
    }

    /// Latent dimensions `d_z`.
    pub fn d_latent(&self) -> usize {
        match self {
            Self::Table(t) => t.d_latent(),
            Self::Encoder(e) => e.d_latent,
        }
    }

    /// Prior variance `γ`.
    pub fn gamma(&self) -> f64 {
        match self {
            Self::Table(t) => t.gamma,
            Self::Encoder(e) => e.gamma,
        }
    }

    /// The table, if this is one.
    pub fn table(&self) -> Option<&LatentTable> {
        match self {
            Self::Table(t) => Some(t),
            Self::Encoder(_) => None,
        }
    }

    /// The table, mutably, if this is one.
    pub fn table_mut(&mut self) -> Option<&mut LatentTable> {
        match self {
            Self::Table(t) => Some(t),
            Self::Encoder(_) => None,
        }
    }

    /// `(m, v)` of a minibatch, `[B, d_z]` each: the table's rows `rows`, or the encoder's
    /// output for `(x, y)`.
    pub fn of_batch(
        &self,
        x: Tensor<2>,
        y: &impl TargetFeatures,
        rows: Tensor<1, Int>,
    ) -> (Tensor<2>, Tensor<2>) {
        match self {
            Self::Table(t) => t.rows_of(rows),
            Self::Encoder(e) => e.encode(x, y),
        }
    }

    /// `KL(q(z_n) ‖ N(0, γ))` per row, summed over `d_z`, `[B]`:
    /// `½ Σ [v/γ + m²/γ − 1 − ln(v/γ)]`.
    pub fn kl(&self, mean: Tensor<2>, var: Tensor<2>) -> Tensor<1> {
        crate::dist::gaussian::kl_to_centred(mean, var, self.gamma())
    }

    /// The table's sparse step ([`LatentTable::sparse_step`]); the encoder is left to the
    /// dense optimiser.
    pub fn local_step(self, grads: &mut GradientsParams, rows: &[usize], lr: f64) -> Self {
        match self {
            Self::Table(t) => Self::Table(t.sparse_step(grads, rows, lr)),
            e => e,
        }
    }

    /// The sparse optimiser's state (empty for the encoder).
    pub fn local_state(&self) -> crate::batch::LocalState {
        match self {
            Self::Table(t) => t.adam_state(),
            Self::Encoder(_) => crate::batch::LocalState::default(),
        }
    }

    /// With the sparse optimiser's state restored.
    ///
    /// # Errors
    /// A state that does not fit the table, or any state for the encoder.
    pub fn with_local_state(self, state: crate::batch::LocalState) -> Result<Self, String> {
        match self {
            Self::Table(t) => Ok(Self::Table(t.with_adam_state(state)?)),
            e if state.is_empty() => Ok(e),
            _ => Err("the latent encoder keeps no local optimiser state, but one was saved".into()),
        }
    }
}

/// Per-row Adam state of the table (not part of the record, like burn's optimiser state).
#[derive(Debug, Clone)]
pub struct SparseAdam {
    /// [`LatentConfig::learning_rate_scale`].
    scale: f64,
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
        crate::dist::gaussian::kl_to_centred(mean, var, self.gamma)
    }

    /// The sparse optimiser's moments and per-row step counts, for a training state saved
    /// between epochs.
    pub fn adam_state(&self) -> crate::batch::LocalState {
        crate::batch::LocalState {
            floats: self.adam.moments.clone(),
            counts: self.adam.steps.clone(),
        }
    }

    /// The table with the sparse optimiser's state from [`LatentTable::adam_state`].
    ///
    /// # Errors
    /// When the state's sizes do not fit the table.
    pub fn with_adam_state(mut self, state: crate::batch::LocalState) -> Result<Self, String> {
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

    /// The table for `rows` training rows: the first rows keep their `q(z_n)`, the new ones
    /// start at the prior's mean with the logit `init_logit` (as [`LatentConfig::init`] starts
    /// them), and the sparse optimiser starts afresh for every row, as a new trainer's dense
    /// optimiser does. For a training set that grows (active learning's warm start).
    ///
    /// # Errors
    /// Fewer rows than the table has, or a non-finite logit.
    pub fn with_rows(mut self, rows: usize, init_logit: f64) -> Result<Self, ConfigError> {
        let old = self.rows();
        let check = Check("LatentTable::with_rows");
        check.finite("init_logit", init_logit)?;
        if rows < old {
            return Err(ConfigError {
                config: "LatentTable::with_rows",
                field: "rows",
                value: format!("{rows} (the table has {old})"),
                expected: "at least the table's rows (a table only grows)",
            });
        }
        let d = self.d_latent();
        let grow = |param: Param<Tensor<2>>, fill: f64| {
            let device = param.val().device();
            let mut values: Vec<f64> = crate::host::to_vec(param.val());
            values.resize(rows * d, fill);
            Param::from_tensor(crate::host::matrix(&values, d, &device))
        };
        self.mean = grow(self.mean, 0.0);
        self.logit = grow(self.logit, init_logit);
        self.adam.moments = vec![0.0; 4 * rows * d];
        self.adam.steps = vec![0; rows];
        Ok(self)
    }

    /// One Adam step of the rows `rows` (unique, in the batch's order) from the gradients of
    /// the table in `grads`, which are removed from it (so that the dense optimiser leaves the
    /// table alone); the step size is `scale·learning_rate·N/B`
    /// ([`LatentConfig::learning_rate_scale`]). The table unchanged when `grads`
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
        let lr = self.adam.scale * learning_rate * self.rows() as f64 / b as f64;
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
