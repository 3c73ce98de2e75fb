//! BNN+LV: a Bayesian MLP with a latent input per data point (Depeweg 2019 ch. 3),
//! `y_n = f(x_n, z_n; W) + ε_n`, `z_n ~ N(0, γ)`. Training uses `q(z_n)` of the row's entry in a
//! [`LatentTable`] (or the amortised encoder); prediction draws `z*` from the prior (eq. 3.19), so
//! the predictive is a Gaussian mixture: noise through `z`, model uncertainty through `W`. A step
//! returns the latents' KL per row and, for black-box α, their per-draw log-ratios (eq. 3.15).
//! More: the book's *Latent-variable BNNs* page.

use super::{Bnn, MlpBody, MlpConfig};
use crate::batch::{Batch, Minibatch};
use crate::error::{ConfigError, DataMismatch};
use crate::latent::{LatentConfig, LatentPosterior, TargetFeatures};
use crate::layers::Pass;
use crate::likelihood::{GaussianLikelihood, Likelihood};
use crate::objective::{Inference, KlTerm, StepRequest, StepTerms};
use crate::posterior::Unsupported;
use crate::predict::{Predict, PredictError, PredictMode};
use crate::step::Model;
use burn::config::Config;
use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::{Device, Distribution, Tensor};

/// Configuration of a [`BnnLv`].
#[derive(Config, Debug)]
pub struct BnnLvConfig {
    /// The network on the observed inputs (`d_input` = their dimension `d`; the latent columns
    /// are added to it).
    pub mlp: MlpConfig,
    /// The latent table.
    #[config(default = "LatentConfig::new()")]
    pub latent: LatentConfig,
    /// Initial noise std of [`BnnLvConfig::init_regressor`]: the code's `ln Σ = −5`, so that
    /// the net must first explain the data through `f` and `z` rather than the noise.
    #[config(default = 0.082_084_998_623_898_8)]
    pub noise_std: f64,
}

impl BnnLvConfig {
    /// A BNN+LV with `likelihood` for `rows` training rows.
    ///
    /// # Errors
    /// An invalid network or latent configuration (the error names the field).
    pub fn init<L: Likelihood>(
        &self,
        likelihood: L,
        rows: usize,
        device: &Device,
    ) -> Result<BnnLv<L>, ConfigError> {
        let d = self.mlp.d_input;
        crate::error::Check("BnnLvConfig").at_least_one("mlp.d_input", d)?;
        let latents = self.latent.init_posterior(rows, d, device)?;
        let mut mlp = self.mlp.clone();
        mlp.d_input = d + self.latent.d_latent;
        Ok(BnnLv {
            net: mlp.init(likelihood, device)?,
            latents,
        })
    }

    /// A regressor (learned homoscedastic Gaussian noise `Σ`, one per output).
    ///
    /// # Errors
    /// As [`BnnLvConfig::init`].
    pub fn init_regressor(
        &self,
        rows: usize,
        device: &Device,
    ) -> Result<LatentRegressor, ConfigError> {
        let likelihood = crate::likelihood::GaussianLikelihoodConfig::new()
            .with_d_output(self.mlp.d_output)
            .with_noise_std(self.noise_std)
            .init(device)?;
        self.init(likelihood, rows, device)
    }
}

/// BNN+LV (module docs).
#[derive(Module, Debug)]
pub struct BnnLv<L: Module> {
    /// The network on `[x, z]`.
    pub net: Bnn<MlpBody, L>,
    /// `q(z_n)` of the training rows: a table, or the amortised encoder.
    pub latents: LatentPosterior,
}

/// BNN+LV regression.
pub type LatentRegressor = BnnLv<GaussianLikelihood>;

/// `ln N(z | m, v) − ln N(z | 0, γ)` summed over the last axis, `[S, B]`, for the draws
/// `z = m + √v·ε`: `½ Σ [z²/γ − ε² − ln(v/γ)]` (the `2π`s cancel, and `(z − m)²/v = ε²`).
/// `var` is `[B, d_z]`, shared by the draws.
fn latent_log_ratio(z: Tensor<3>, eps: Tensor<3>, var: Tensor<2>, gamma: f64) -> Tensor<2> {
    let [s, b, _] = z.dims();
    let draws = (z.square() / gamma - eps.square())
        .sum_dim(2)
        .squeeze_dim(2);
    let log_var = (var / gamma)
        .log()
        .sum_dim(1)
        .reshape([1, b])
        .expand([s, b]);
    (draws - log_var) * 0.5
}

impl<L: Likelihood> BnnLv<L> {
    /// Observed input dimensions `d`.
    pub fn d_input(&self) -> usize {
        self.net.body.d_input - self.latents.d_latent()
    }

    /// The head's outputs `[S, B, k]` for inputs `x [B, d]` and latents `z [S, B, d_z]` under
    /// the pass's `S` weight draws.
    ///
    /// # Panics
    /// If `x` has not `d` columns or `z` does not match `x`'s rows and the latent width.
    pub fn forward(&self, x: Tensor<2>, z: Tensor<3>, pass: &mut Pass) -> Tensor<3> {
        let [b, d] = x.dims();
        let s = z.dims()[0];
        self.forward_each(x.unsqueeze_dim::<3>(0).expand([s, b, d]), z, pass)
    }

    /// [`BnnLv::forward`] with inputs of their own per draw, `x [S, B, d]` (the states of `S`
    /// roll-outs, each under its own weight draw).
    ///
    /// # Panics
    /// If `x` has not `d` columns or `z` does not match `x`'s draws, rows and the latent width.
    pub fn forward_each(&self, x: Tensor<3>, z: Tensor<3>, pass: &mut Pass) -> Tensor<3> {
        let [s, b, d] = x.dims();
        let [sz, bz, dz] = z.dims();
        assert!(
            d == self.d_input() && (sz, bz) == (s, b) && dz == self.latents.d_latent(),
            "BnnLv: inputs [{s}, {b}, {d}] and latents [{sz}, {bz}, {dz}] for a net on {} inputs \
             and {} latents",
            self.d_input(),
            self.latents.d_latent()
        );
        let features = self.net.body.propagate(Tensor::cat(vec![x, z], 2), pass);
        self.net.head.run(features, pass)
    }

    /// The model for `rows` training rows, the first of them the rows it was trained on:
    /// the latent table grows ([`crate::latent::LatentTable::with_rows`], new rows at
    /// `latent`'s initial values); the encoder takes any rows. For warm starts on a training
    /// set that grows, as in active learning.
    ///
    /// # Errors
    /// Fewer rows than the table has, or a non-finite initial logit.
    pub fn with_training_rows(
        mut self,
        rows: usize,
        latent: &LatentConfig,
    ) -> Result<Self, ConfigError> {
        self.latents = match self.latents {
            LatentPosterior::Table(t) => {
                LatentPosterior::Table(t.with_rows(rows, latent.init_logit)?)
            }
            e => e,
        };
        Ok(self)
    }

    /// `samples` prior draws `z* ~ N(0, γ)` for `rows` inputs, `[S, B, d_z]`.
    pub fn prior_latents(&self, samples: usize, rows: usize, device: &Device) -> Tensor<3> {
        let std = self.latents.gamma().sqrt();
        crate::device::uses_generator();
        Tensor::random(
            [samples, rows, self.latents.d_latent()],
            Distribution::Normal(0.0, std),
            device,
        )
    }
}

impl<L: Likelihood> Model for BnnLv<L>
where
    L::Target: TargetFeatures,
{
    type Input = Tensor<2>;
    type Target = L::Target;

    fn check_data(&self, x: &Tensor<2>, target: &L::Target) -> Result<(), DataMismatch> {
        if x.dims()[1] != self.d_input() {
            return Err(DataMismatch::Shape {
                part: "inputs",
                expected: vec![self.d_input()],
                found: vec![x.dims()[1]],
            });
        }
        if let Some(rows) = self.latents.table_rows()
            && rows != x.dims()[0]
        {
            return Err(DataMismatch::Rows {
                part: "inputs",
                expected: rows,
                found: x.dims()[0],
            });
        }
        let [_, outputs] = self.net.head.shape();
        target.check_as_target(outputs / self.net.likelihood.outputs_per_target().max(1))
    }

    fn step(
        &self,
        batch: Minibatch<Tensor<2>, L::Target>,
        request: StepRequest,
    ) -> Result<StepTerms, Unsupported> {
        if request.inference == Inference::Moments {
            return Err(Unsupported {
                family: "BNN+LV",
                what: "has no moment rule for its latent inputs: train it by sampling",
            });
        }
        let s = request.samples;
        let (mean, var) = self
            .latents
            .of_batch(batch.input.clone(), &batch.target, batch.rows);
        let [b, dz] = mean.dims();
        let device = mean.device();
        crate::device::uses_generator();
        let eps = Tensor::<3>::random([s, b, dz], Distribution::Normal(0.0, 1.0), &device);
        let batch3 = |t: Tensor<2>| t.unsqueeze_dim::<3>(0).expand([s, b, dz]);
        let z = batch3(mean.clone()) + batch3(var.clone().sqrt()) * eps.clone();
        let mut pass = Pass::train(s, request.log_ratio)
            .with_kernels(request.kernels)
            .with_noise_key(request.noise_key)
            .collecting_kl(request.weight_kl);
        if let Some(weight) = request.kl_fold {
            pass = pass.fold_kl(weight);
        }
        let out = self.forward(batch.input, z.clone(), &mut pass);
        let log_likelihood = self.net.likelihood.log_likelihood(out, batch.target);
        let (kl, log_ratio) = pass.into_terms(&device);
        let local_log_ratio = request
            .log_ratio
            .then(|| latent_log_ratio(z, eps, var.clone(), self.latents.gamma()));
        Ok(StepTerms {
            log_likelihood,
            kl: KlTerm::of_request(kl, super::folded(&request)),
            local_kl: Some(self.latents.kl(mean, var)),
            log_ratio: log_ratio?,
            local_log_ratio,
        })
    }

    fn has_local_update(&self) -> bool {
        true
    }

    /// The latent table's rows of the batch, by its sparse Adam
    /// ([`crate::latent::LatentTable::sparse_step`]); the encoder is left to the dense optimiser.
    fn local_update(mut self, grads: &mut GradientsParams, rows: &[usize], lr: f64) -> Self {
        self.latents = self.latents.local_step(grads, rows, lr);
        self
    }

    fn local_state(&self) -> crate::batch::LocalState {
        self.latents.local_state()
    }

    fn with_local_state(mut self, state: crate::batch::LocalState) -> Result<Self, String> {
        self.latents = self.latents.with_local_state(state)?;
        Ok(self)
    }
}

impl<L: Likelihood> Predict for BnnLv<L> {
    type Input = Tensor<2>;
    type Prediction = L::Prediction;

    /// `K` joint draws of the weights and of `z* ~ N(0, γ)`: the mixture predictive.
    fn predict(&self, x: Tensor<2>, mode: PredictMode) -> Result<L::Prediction, PredictError> {
        let _flushed = crate::device::SubnormalsFlushed::enter();
        if x.dims()[0] == 0 {
            return Err(DataMismatch::Empty { part: "inputs" }.into());
        }
        if x.dims()[1] != self.d_input() {
            return Err(DataMismatch::Shape {
                part: "inputs",
                expected: vec![self.d_input()],
                found: vec![x.dims()[1]],
            }
            .into());
        }
        if let Some(row) = x.first_non_finite() {
            return Err(PredictError::NonFiniteInput { row });
        }
        let samples = match mode {
            PredictMode::Samples(0) => return Err(PredictError::NoSamples),
            PredictMode::Samples(n) => n,
            PredictMode::Moments => {
                return Err(PredictError::Unsupported {
                    model: "BnnLv",
                    mode,
                    reason: "a latent input's prior is not propagated by moments; predict with \
                             PredictMode::Samples(n)",
                });
            }
        };
        let z = self.prior_latents(samples, x.dims()[0], &x.device());
        let out = self.forward(x, z, &mut Pass::predict(samples));
        super::check_outputs_finite(out.clone())?;
        Ok(self.net.likelihood.predict(out))
    }
}

/// The uncertainty decomposition of one input's regression predictive (Depeweg 2019 §3.2):
/// `W ~ q(W)` carries the epistemic part, `z* ~ N(0, γ)` and `ε ~ N(0, Σ)` the aleatoric one.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Decomposition {
    /// `E[y*]`, the predictive mean (the mean of the conditional means).
    pub mean: f64,
    /// `Var[y*]` (eq. 3.25): the sum of the two parts below.
    pub total_variance: f64,
    /// `E_W[Var(y* | W)]`, the noise `Σ` included.
    pub aleatoric_variance: f64,
    /// `Var_W(E[y* | W])` (unbiased; may be slightly negative where it is near 0).
    pub epistemic_variance: f64,
    /// `H[y*]` (k-NN estimates over sets of `n_z` predictive draws spread over the weight
    /// draws, averaged: the same sample size as the conditional entropies, so that the
    /// estimator's finite-sample bias cancels in the mutual information).
    pub total_entropy: f64,
    /// `E_W H[y* | W]` (eq. 3.23; one k-NN estimate per weight draw, averaged).
    pub aleatoric_entropy: f64,
    /// `H[y*] − E_W H[y* | W] = I(y*; W)` (eq. 3.24; an estimate: may come out slightly
    /// negative where it is near 0).
    pub epistemic_entropy: f64,
}

/// Why a decomposition failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecompositionError {
    /// Sample counts too small for the estimators.
    #[error("decomposition: {what}")]
    Config {
        /// What is wrong, with the argument's name.
        what: String,
    },
    /// The entropy estimator refused the draws.
    #[error(transparent)]
    Entropy(#[from] crate::predict::EntropyError),
}

impl LatentRegressor {
    /// [`Decomposition`] of each input row of `x [B, d]` by nested sampling: `n_w` weight draws,
    /// each with `n_z` prior latents and observation noises of its own; the variances are
    /// unbiased (the epistemic one corrected for the inner means' error, so it may come out
    /// slightly negative where it is near 0); the entropies by the k-NN
    /// estimator with neighbour `k` (the thesis: 500 × 500 draws, `k = 25`). Units: the
    /// (standardised) targets'. One output dimension.
    ///
    /// # Errors
    /// `n_w < 2`, `k ≥ n_z`, more than one output, or draws the entropy estimator refuses.
    pub fn decompose(
        &self,
        x: Tensor<2>,
        n_w: usize,
        n_z: usize,
        k: usize,
    ) -> Result<Vec<Decomposition>, DecompositionError> {
        self.decompose_by(x, n_w, n_z, k, |_| {
            let mut draws = crate::nets::Body::draw(&self.net.body);
            draws.push(self.net.head.params.draw());
            draws
        })
    }

    /// [`Decomposition`] of each input row of `x [B, d]` under given weights instead of the
    /// posterior's draws: one row of `weights [n_w, P]` per draw, in the network's
    /// [`crate::layers::FlatLayout`] (MCMC samples of the weights), each with `n_z` prior
    /// latents and noises, as [`Self::decompose`].
    ///
    /// # Errors
    /// As [`Self::decompose`], or `weights` without `P` columns.
    pub fn decompose_samples(
        &self,
        x: Tensor<2>,
        weights: Tensor<2>,
        n_z: usize,
        k: usize,
    ) -> Result<Vec<Decomposition>, DecompositionError> {
        let layout = self.net.flat_layout();
        let [n_w, p] = weights.dims();
        if p != layout.numel() {
            return Err(DecompositionError::Config {
                what: format!("weights: {p} columns for a network of {}", layout.numel()),
            });
        }
        let weights = weights.to_device(&x.device());
        self.decompose_by(x, n_w, n_z, k, |w| {
            layout.split(weights.clone().slice([w..w + 1, 0..p]))
        })
    }

    /// The decomposition with weight draw `w` given by `draw(w)`.
    fn decompose_by(
        &self,
        x: Tensor<2>,
        n_w: usize,
        n_z: usize,
        k: usize,
        mut draw: impl FnMut(usize) -> Vec<crate::layers::LayerDraw>,
    ) -> Result<Vec<Decomposition>, DecompositionError> {
        let bad = |what: String| Err(DecompositionError::Config { what });
        if n_w < 2 {
            return bad(format!(
                "n_w = {n_w}: the epistemic variance needs 2 weight draws"
            ));
        }
        if k == 0 || k >= n_z {
            return bad(format!("k = {k} must be at least 1 and below n_z = {n_z}"));
        }
        let sigma = crate::host::to_vec(self.net.likelihood.noise_std());
        if sigma.len() != 1 {
            return bad(format!(
                "{} outputs: the decomposition is for one",
                sigma.len()
            ));
        }
        let _flushed = crate::device::SubnormalsFlushed::enter();
        let (b, device) = (x.dims()[0], x.device());
        // means[w][z·B + b]
        // Independent latents and noises per weight draw (a common set would carry its own
        // sampling error into every draw's conditional variance, undiminished by `n_w`).
        let (mut means, mut samples) = (Vec::with_capacity(n_w), Vec::with_capacity(n_w));
        for w in 0..n_w {
            let draws = draw(w);
            let z = self.prior_latents(n_z, b, &device);
            let out = self.forward(x.clone(), z, &mut Pass::fixed(&draws));
            crate::device::uses_generator();
            let noise = Tensor::<3>::random(out.dims(), Distribution::Normal(0.0, 1.0), &device);
            means.push(crate::host::to_vec(out.clone()));
            samples.push(crate::host::to_vec(out + noise * sigma[0]));
        }
        let s2 = sigma[0] * sigma[0];
        (0..b)
            .map(|row| {
                let mut conditional_means = Vec::with_capacity(n_w);
                let (mut within, mut aleatoric_entropy) = (0.0, 0.0);
                let mut all = Vec::with_capacity(n_w * n_z);
                for (mu, y) in means.iter().zip(&samples) {
                    let m: Vec<f64> = (0..n_z).map(|z| mu[z * b + row]).collect();
                    let mean = m.iter().sum::<f64>() / n_z as f64;
                    let var = m.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n_z - 1) as f64;
                    conditional_means.push(mean);
                    within += var / n_w as f64;
                    let y: Vec<f64> = (0..n_z).map(|z| y[z * b + row]).collect();
                    aleatoric_entropy += crate::predict::knn_entropy(&y, 1, k)? / n_w as f64;
                    all.extend(y);
                }
                // One-way analysis of variance: the spread of the conditional means holds
                // `Var_W E[y|W]` plus the inner mean's error `E_W Var(y|W)/n_z`.
                let grand = conditional_means.iter().sum::<f64>() / n_w as f64;
                let between = conditional_means
                    .iter()
                    .map(|m| (m - grand).powi(2))
                    .sum::<f64>()
                    / (n_w - 1) as f64;
                let epistemic_variance = between - within / n_z as f64;
                let aleatoric_variance = within + s2;
                // H[y*] from n_w sets of n_z predictive draws, each set spread over the weight
                // draws (draw t of the stratified order is weight t mod n_w's sample t / n_w):
                // the k-NN estimator's finite-sample bias is then that of the conditional
                // entropies, and cancels in their difference, the mutual information.
                let mut total_entropy = 0.0;
                let mut set = Vec::with_capacity(n_z);
                for c in 0..n_w {
                    set.clear();
                    set.extend((c * n_z..(c + 1) * n_z).map(|t| all[(t % n_w) * n_z + t / n_w]));
                    total_entropy += crate::predict::knn_entropy(&set, 1, k)? / n_w as f64;
                }
                Ok(Decomposition {
                    mean: grand,
                    total_variance: aleatoric_variance + epistemic_variance,
                    aleatoric_variance,
                    epistemic_variance,
                    total_entropy,
                    aleatoric_entropy,
                    epistemic_entropy: total_entropy - aleatoric_entropy,
                })
            })
            .collect()
    }
}

/// The entropy decomposition of one input's class predictive (Depeweg 2019 §3.2, closed form):
/// with `p̄_W = mean_z softmax f(x, z; W)`, total `H(mean_W p̄_W)`, aleatoric `mean_W H(p̄_W)`
/// and epistemic their difference (the mutual information between the label and `W`, ≥ 0).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ClassDecomposition {
    /// `H[y*]` (nats).
    pub total: f64,
    /// `E_W H[y* | W]`.
    pub aleatoric: f64,
    /// `I(y*; W)`.
    pub epistemic: f64,
}

impl BnnLv<crate::likelihood::Categorical> {
    /// [`ClassDecomposition`] of each input row of `x [B, d]` from `n_w` weight draws with `n_z`
    /// prior latents each.
    ///
    /// # Errors
    /// `n_w` or `n_z` of 0.
    pub fn decompose_classes(
        &self,
        x: Tensor<2>,
        n_w: usize,
        n_z: usize,
    ) -> Result<Vec<ClassDecomposition>, DecompositionError> {
        if n_w == 0 || n_z == 0 {
            return Err(DecompositionError::Config {
                what: format!("n_w = {n_w}, n_z = {n_z}: both need at least 1 draw"),
            });
        }
        let _flushed = crate::device::SubnormalsFlushed::enter();
        let (b, device) = (x.dims()[0], x.device());
        let entropy = |p: Tensor<2>| -> Tensor<1> {
            (p.clone() * p.clamp_min(1e-30).log())
                .sum_dim(1)
                .neg()
                .squeeze_dim(1)
        };
        let mut mean_p: Option<Tensor<2>> = None;
        let mut aleatoric = Tensor::<1>::zeros([b], &device);
        for _ in 0..n_w {
            let mut draws = crate::nets::Body::draw(&self.net.body);
            draws.push(self.net.head.params.draw());
            let z = self.prior_latents(n_z, b, &device);
            let logits = self.forward(x.clone(), z, &mut Pass::fixed(&draws));
            let p = burn::tensor::activation::softmax(logits, 2)
                .mean_dim(0)
                .squeeze_dim(0);
            aleatoric = aleatoric + entropy(p.clone()) / n_w as f64;
            mean_p = Some(match mean_p {
                Some(m) => m + p / n_w as f64,
                None => p / n_w as f64,
            });
        }
        let total = crate::host::to_vec(entropy(mean_p.expect("n_w ≥ 1")));
        let aleatoric = crate::host::to_vec(aleatoric);
        Ok(total
            .into_iter()
            .zip(aleatoric)
            .map(|(total, aleatoric)| ClassDecomposition {
                total,
                aleatoric,
                epistemic: total - aleatoric,
            })
            .collect())
    }
}

/// Sensitivities of a BNN+LV's prediction to each input (Depeweg 2019 §3.3, eqs. 3.27–3.33):
/// `I_i = mean_n |∂q(x_n)/∂x_{n,i}|` for `q` the predictive mean, the epistemic std
/// `σ_ep = std_W(mean_z y)` and the aleatoric std `σ_al = √(mean_W var_z y)` of
/// `y = f(x, z; W) + √Σ·ε`; the noise enters in closed form (`var_z y = var_z f + Σ`,
/// `mean_z y = mean_z f`) rather than by sampled `ε`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Sensitivity {
    /// `I_i` of the predictive mean, per input.
    pub mean: Vec<f64>,
    /// `I_i^epi` of the epistemic std, per input.
    pub epistemic: Vec<f64>,
    /// `I_i^ale` of the aleatoric std `√(mean_W var_z f + Σ)` (eq. 3.30: the variance of `y`,
    /// its observation noise included), per input.
    pub aleatoric: Vec<f64>,
}

impl LatentRegressor {
    /// [`Sensitivity`] over the inputs `x [N, d]`, from `n_w` weight draws with `n_z` prior
    /// latents each (the thesis: 200 × 200), by autodiff with respect to `x` with every draw
    /// held fixed. The model must be on an autodiff device (as training leaves it). One output.
    ///
    /// # Errors
    /// `n_w` or `n_z` below 2, more than one output, or a model without autodiff.
    pub fn sensitivity(
        &self,
        x: Tensor<2>,
        n_w: usize,
        n_z: usize,
    ) -> Result<Sensitivity, DecompositionError> {
        let bad = |what: String| Err(DecompositionError::Config { what });
        if n_w < 2 || n_z < 2 {
            return bad(format!(
                "n_w = {n_w}, n_z = {n_z}: both need at least 2 draws"
            ));
        }
        if self.net.head.shape()[1] != 1 {
            return bad("the sensitivities are for one output".into());
        }
        let device = self.devices()[0].clone();
        if !device.is_autodiff() {
            return bad(
                "the model is not on an autodiff device (use the trained model, not \
                        its .valid())"
                    .into(),
            );
        }
        let _flushed = crate::device::SubnormalsFlushed::enter();
        let [n, d] = x.dims();
        let x = x.to_device(&device).detach();
        let draws: Vec<_> = (0..n_w)
            .map(|_| {
                let mut draws = crate::nets::Body::draw(&self.net.body);
                draws.push(self.net.head.params.draw());
                // Constants: the gradient is taken with respect to x only, three times.
                draws
                    .into_iter()
                    .map(|d| crate::layers::LayerDraw {
                        weight: d.weight.detach(),
                        bias: d.bias.map(|b| b.detach()),
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        let latents: Vec<Tensor<3>> = (0..n_w)
            .map(|_| self.prior_latents(n_z, n, &device))
            .collect();
        // The observation noise enters in closed form: y = f + √Σ·ε has Var_z(y | W) =
        // Var_z(f | W) + Σ (eq. 3.30's variance of y, not of f) and E_z(y | W) = E_z(f | W).
        // Sampled ε, held fixed, would estimate the same quantities but add cross terms
        // `2√Σ·cov_z(f, ε)` whose derivatives carry ∂f/∂x, the mean's sensitivity, into the
        // aleatoric and epistemic ones at O(1/√n_z).
        let noise_var = crate::host::to_vec(self.net.likelihood.noise_std())[0].powi(2);
        // f [n_w, n_z, N] with the draws fixed; each quantity per row depends on its own x_n
        // only, so the gradient of the sum over rows gives every row's derivatives.
        let quantity = |which: usize| {
            let x = x.clone().require_grad();
            let f: Vec<Tensor<3>> = draws
                .iter()
                .zip(&latents)
                .map(|(w, z)| {
                    let out = self.forward(x.clone(), z.clone(), &mut Pass::fixed(w));
                    out.reshape([1, n_z, n])
                })
                .collect();
            let f = Tensor::cat(f, 0);
            let inner_mean = f.clone().mean_dim(1); // [n_w, 1, N]
            let q = match which {
                0 => inner_mean.mean_dim(0),
                1 => {
                    let m = inner_mean.clone().mean_dim(0);
                    ((inner_mean - m).square().mean_dim(0) + 1e-12).sqrt()
                }
                _ => {
                    let var = (f - inner_mean).square().mean_dim(1);
                    (var.mean_dim(0) + noise_var + 1e-12).sqrt()
                }
            };
            let grads = q.sum().backward();
            let g = x.grad(&grads).expect("x requires its gradient");
            crate::host::to_vec(g.abs().mean_dim(0).reshape([d]))
        };
        Ok(Sensitivity {
            mean: quantity(0),
            epistemic: quantity(1),
            aleatoric: quantity(2),
        })
    }
}

#[cfg(test)]
#[path = "latent_tests.rs"]
mod tests;
