//! Any burn module made Bayesian, as bayesian-torch's `dnn_to_bnn` does for PyTorch: chosen
//! float parameters (every `Linear` and `Conv*` weight and bias by default) get a mean-field or
//! radial posterior `w = μ + σ ⊙ ε` and a Gaussian prior through burn's
//! `Module::apply_reparameterization`; the module keeps its type and `forward`, and each
//! forward pass draws its weights. [`Converted`] adds a likelihood for the library's
//! objectives. MOPED (Krishnan et al. 2020): `μ = w`, `σ = δ|w|`, the prior centred on `w`.
//! No layer-level estimators or moments: they need the layer's own operation. Guide: the
//! book's *Any burn model made Bayesian* page.

use crate::batch::{Batch, Minibatch};
use crate::dist::{GaussianPrior, WeightPrior};
use crate::error::{Check, ConfigError};
use crate::likelihood::Likelihood;
use crate::posterior::{MeanFieldDist, PosteriorDist, RadialDist, Unsupported};
use crate::predict::{Predict, PredictError, PredictMode};
use crate::special::softplus;
use crate::step::{KlTerm, Model, StepRequest, StepTerms};
use burn::config::Config;
use burn::module::{
    Module, ModuleDisplay, ModuleVisitor, Param, Reparameterization, Reparameterizer,
};
use burn::tensor::Tensor;
use std::collections::BTreeSet;

/// The posterior family of a converted parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ConvertedFamily {
    /// Independent Gaussians (Blundell et al. 2015).
    MeanField,
    /// One direction and radius per tensor (Farquhar et al. 2020).
    Radial,
}

/// Which parameters to make Bayesian, their family, prior and initial spread.
#[derive(Config, Debug)]
pub struct ConvertConfig {
    /// Every float parameter directly inside a module of these types (burn's struct names).
    #[config(default = "vec![\"Linear\".into(), \"Conv1d\".into(), \"Conv2d\".into()]")]
    pub types: Vec<String>,
    /// When not empty: only parameters whose path (`fc1.weight`) starts with one of these.
    #[config(default = "Vec::new()")]
    pub paths: Vec<String>,
    /// The family.
    #[config(default = "ConvertedFamily::MeanField")]
    pub family: ConvertedFamily,
    /// The prior's standard deviation σ₀: `N(0, σ₀²)`, or `N(w, σ₀²)` under MOPED.
    #[config(default = 1.0)]
    pub prior_std: f64,
    /// The initial `ρ` of every weight, `σ = softplus(ρ)` (bayesian-torch's −3: σ ≈ 0.049).
    #[config(default = -3.0)]
    pub init_rho: f64,
    /// MOPED's δ: `σ = δ|w|` (floored at 10⁻⁶) and the prior centred on `w`.
    pub moped: Option<f64>,
}

/// A converted parameter's family, as a type: burn names a parameter's reparameterization by
/// its type ([`Reparameterization::NAME`]), which is what a module visitor sees of it.
pub trait Family: Send + Sync + std::fmt::Debug + Clone + 'static {
    /// The family.
    const FAMILY: ConvertedFamily;
    /// The reparameterization's name in paths and records.
    const NAME: &'static str;
}

/// [`ConvertedFamily::MeanField`] as a type.
#[derive(Debug, Clone)]
pub struct MeanField;

/// [`ConvertedFamily::Radial`] as a type.
#[derive(Debug, Clone)]
pub struct Radial;

impl Family for MeanField {
    const FAMILY: ConvertedFamily = ConvertedFamily::MeanField;
    const NAME: &'static str = "bayesian_mean_field";
}

impl Family for Radial {
    const FAMILY: ConvertedFamily = ConvertedFamily::Radial;
    const NAME: &'static str = "bayesian_radial";
}

/// A converted parameter's posterior spread and prior, attached to the parameter, whose stored
/// value is the posterior mean `μ`.
#[derive(Module, Debug)]
pub struct BayesianParam<F: Family> {
    /// `ρ`, `σ = softplus(ρ)`, flattened.
    pub rho: Param<Tensor<1>>,
    /// The prior (constants, saved with the module).
    pub prior: GaussianPrior<1>,
    #[module(skip)]
    family: std::marker::PhantomData<F>,
}

/// The posterior of a flattened parameter with mean `mu` and scale `σ`.
fn dist(family: ConvertedFamily, mu: Tensor<1>, sigma: Tensor<1>) -> Box<dyn PosteriorDist<1>> {
    match family {
        ConvertedFamily::MeanField => Box::new(MeanFieldDist::new(mu, sigma)),
        ConvertedFamily::Radial => Box::new(RadialDist::new(mu, sigma)),
    }
}

impl<F: Family> BayesianParam<F> {
    /// `σ`, flattened.
    pub fn sigma(&self) -> Tensor<1> {
        softplus(self.rho.val())
    }
}

impl<F: Family> Reparameterization for BayesianParam<F> {
    const NAME: &'static str = F::NAME;

    /// One draw `μ + σ ⊙ ε` of the family.
    fn apply<const D: usize>(&self, base: Tensor<D>) -> Tensor<D> {
        let dims = base.dims();
        let n = dims.iter().product::<usize>();
        dist(F::FAMILY, base.reshape([n]), self.sigma())
            .sample(1)
            .reshape(dims)
    }
}

impl ConvertConfig {
    /// Checks every field.
    ///
    /// # Errors
    /// The first field out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = Check("ConvertConfig");
        check.positive("prior_std", self.prior_std)?;
        check.finite("init_rho", self.init_rho)?;
        if let Some(delta) = self.moped {
            check.positive("moped", delta)?;
        }
        Ok(())
    }

    /// `module` with its chosen parameters Bayesian: their current values become the posterior
    /// means.
    ///
    /// # Errors
    /// A field out of range, or no parameter chosen (the error names the types and paths).
    pub fn convert<M: Module>(&self, module: M) -> Result<M, ConfigError> {
        self.validate()?;
        let mut finder = Chooser {
            config: self,
            path: Vec::new(),
            containers: Vec::new(),
            chosen: BTreeSet::new(),
        };
        module.visit(&mut finder);
        if finder.chosen.is_empty() {
            return Err(ConfigError {
                config: "ConvertConfig",
                field: "types",
                value: format!("{:?} (paths {:?})", self.types, self.paths),
                expected: "types or paths that name at least one float parameter of the module",
            });
        }
        let chosen = finder.chosen;
        Ok(match self.family {
            ConvertedFamily::MeanField => module.apply_reparameterization(Attach::<MeanField> {
                config: self,
                chosen,
                family: std::marker::PhantomData,
            }),
            ConvertedFamily::Radial => module.apply_reparameterization(Attach::<Radial> {
                config: self,
                chosen,
                family: std::marker::PhantomData,
            }),
        })
    }
}

/// The paths of the chosen parameters: burn's mapper gives a reparameterizer the path only, so
/// the container types are read by a visitor first.
struct Chooser<'a> {
    config: &'a ConvertConfig,
    path: Vec<String>,
    containers: Vec<String>,
    chosen: BTreeSet<String>,
}

impl ModuleVisitor for Chooser<'_> {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.push(name.to_string());
        let kind = container_type.rsplit(':').next().unwrap_or(container_type);
        self.containers.push(kind.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
        self.containers.pop();
    }

    fn visit_float<const D: usize>(&mut self, _param: &Param<Tensor<D>>) {
        let path = self.path.join(".");
        let of_type = self
            .containers
            .last()
            .is_some_and(|c| self.config.types.iter().any(|t| t == c));
        let on_path = self.config.paths.is_empty()
            || self
                .config
                .paths
                .iter()
                .any(|p| path.starts_with(p.as_str()));
        if of_type && on_path {
            self.chosen.insert(path);
        }
    }
}

struct Attach<'a, F> {
    config: &'a ConvertConfig,
    chosen: BTreeSet<String>,
    family: std::marker::PhantomData<F>,
}

impl<F: Family> Reparameterizer for Attach<'_, F> {
    type Reparam = BayesianParam<F>;

    fn reparameterize<const D: usize>(
        &mut self,
        path: &str,
        param: Param<Tensor<D>>,
    ) -> (Param<Tensor<D>>, Option<BayesianParam<F>>) {
        if !self.chosen.contains(path) {
            return (param, None);
        }
        let w = param.val();
        let device = w.device();
        let n = w.dims().iter().product::<usize>();
        let flat = w.reshape([n]).detach();
        let (rho, prior_mean) = match self.config.moped {
            Some(delta) => (
                flat.clone()
                    .abs()
                    .mul_scalar(delta)
                    .clamp_min(1e-6)
                    .exp_m1_inverse_softplus(),
                flat,
            ),
            None => (
                Tensor::full([n], self.config.init_rho, &device),
                Tensor::zeros([n], &device),
            ),
        };
        let prior_std = Tensor::full([n], self.config.prior_std, &device);
        let reparam = BayesianParam {
            rho: Param::from_tensor(rho),
            prior: GaussianPrior::new(prior_mean, prior_std),
            family: std::marker::PhantomData,
        };
        (param, Some(reparam))
    }
}

/// `ρ = ln(eᶻ − 1)` elementwise, the inverse of softplus, stable for large `z`.
trait InverseSoftplus {
    fn exp_m1_inverse_softplus(self) -> Self;
}

impl InverseSoftplus for Tensor<1> {
    fn exp_m1_inverse_softplus(self) -> Self {
        // ln(eᶻ − 1) = z + ln(1 − e⁻ᶻ).
        self.clone() + (-(self.neg().exp())).log1p()
    }
}

/// `Σ KL(q(w) ‖ p(w))` over a module's converted parameters (one element; `None` without
/// any), and how many there are.
pub fn converted_kl<M: Module>(module: &M) -> (Option<Tensor<1>>, usize) {
    let mut kl = KlSum::default();
    module.visit(&mut kl);
    (kl.sum, kl.count)
}

/// burn's visitor sees a reparameterized parameter as its base, then the reparameterization's
/// own parameters inside a module named after it: the KL is taken when that module closes.
#[derive(Default)]
struct KlSum {
    sum: Option<Tensor<1>>,
    count: usize,
    /// The last base visited, flattened.
    base: Option<Tensor<1>>,
    /// Inside a converted parameter's reparameterization: its family and parameters by path.
    inside: Option<Inside>,
}

/// A converted parameter's family, the path inside its reparameterization, and the
/// parameters seen there by path.
type Inside = (ConvertedFamily, Vec<String>, Vec<(String, Tensor<1>)>);

impl ModuleVisitor for KlSum {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        match &mut self.inside {
            Some((_, path, _)) => path.push(name.to_string()),
            None if container_type == "Reparameterization" => {
                let family = match name {
                    n if n == MeanField::NAME => Some(MeanField::FAMILY),
                    n if n == Radial::NAME => Some(Radial::FAMILY),
                    _ => None,
                };
                self.inside = family.map(|f| (f, Vec::new(), Vec::new()));
            }
            None => {}
        }
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        let closes = matches!(&self.inside, Some((_, path, _)) if path.is_empty());
        if let Some((_, path, _)) = &mut self.inside {
            path.pop();
        }
        if !closes {
            return;
        }
        let (family, _, params) = self.inside.take().expect("inside a reparameterization");
        let get = |name: &str| {
            params
                .iter()
                .find(|(p, _)| p == name)
                .map(|(_, t)| t.clone())
                .unwrap_or_else(|| panic!("a converted parameter without its {name}"))
        };
        let mu = self
            .base
            .take()
            .expect("a reparameterization follows its base");
        let prior = GaussianPrior::new(get("prior.mean"), get("prior.std"));
        let kl = dist(family, mu, softplus(get("rho"))).kl(&WeightPrior::Gaussian(prior));
        self.sum = Some(match self.sum.take() {
            Some(sum) => sum + kl,
            None => kl,
        });
        self.count += 1;
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let value = param.val();
        let n = value.dims().iter().product::<usize>();
        match &mut self.inside {
            Some((_, path, params)) => params.push((path.join("."), value.reshape([n]))),
            None => self.base = Some(value.reshape([n])),
        }
    }
}

/// A burn module's forward pass from a batch of inputs (`Tensor<2>` rows, `Tensor<4>` images,
/// any [`Batch`]) to the likelihood's parameters `[B, k]`. burn has no forward trait: implement
/// it by calling the module's own `forward`.
pub trait Forward {
    /// The inputs.
    type Input: Batch;
    /// The outputs of `x`.
    fn apply(&self, x: Self::Input) -> Tensor<2>;
}

/// A converted burn module and a likelihood: a [`Model`] for the library's trainers and
/// objectives, and a [`Predict`] model.
#[derive(Module, Debug)]
pub struct Converted<M: Module, L: Module> {
    /// The converted module.
    pub net: M,
    /// The observation model of its outputs.
    pub likelihood: L,
}

impl<M: Module + Forward, L: Likelihood> Converted<M, L> {
    /// `net` (converted by [`ConvertConfig::convert`]) with `likelihood`.
    pub fn new(net: M, likelihood: L) -> Self {
        Self { net, likelihood }
    }

    /// `samples` forward passes, each with its own weight draw: `[S, B, k]`.
    fn outputs(&self, x: M::Input, samples: usize) -> Tensor<3> {
        let outs = (0..samples)
            .map(|_| self.net.apply(x.clone()).unsqueeze_dim::<3>(0))
            .collect();
        Tensor::cat(outs, 0)
    }
}

impl<M, L> Model for Converted<M, L>
where
    M: Module + ModuleDisplay + Forward + 'static,
    L: Likelihood,
{
    type Input = M::Input;
    type Target = L::Target;

    fn step(
        &self,
        batch: Minibatch<M::Input, L::Target>,
        request: StepRequest,
    ) -> Result<StepTerms, Unsupported> {
        if request.inference == crate::step::Inference::Moments {
            return Err(Unsupported {
                family: "a converted burn module",
                what: "has no moment rules (they need each layer's own operation): train it by \
                       sampling",
            });
        }
        if request.log_ratio {
            return Err(Unsupported {
                family: "a converted burn module",
                what: "does not keep its draws, so it has no per-draw ln q(w) − ln p(w): train \
                       it with the ELBO or PAC-Bayes",
            });
        }
        let out = self.outputs(batch.input, request.samples);
        let device = out.device();
        let local_kl = self.likelihood.local_kl(&out, &batch.target);
        let log_likelihood = self.likelihood.log_likelihood(out, batch.target);
        let kl = match (request.weight_kl, converted_kl(&self.net).0) {
            (true, Some(kl)) => kl,
            _ => Tensor::zeros([1], &device),
        };
        Ok(StepTerms {
            log_likelihood,
            kl: KlTerm::new(kl),
            local_kl,
            log_ratio: None,
            local_log_ratio: None,
        })
    }
}

impl<M, L> Predict for Converted<M, L>
where
    M: Module + ModuleDisplay + Forward,
    L: Likelihood,
{
    type Input = M::Input;
    type Prediction = L::Prediction;

    fn predict(&self, input: M::Input, mode: PredictMode) -> Result<L::Prediction, PredictError> {
        let samples = match mode {
            PredictMode::Samples(0) => return Err(PredictError::NoSamples),
            PredictMode::Samples(n) => n,
            PredictMode::Moments => {
                return Err(PredictError::Unsupported {
                    model: "a converted burn module",
                    mode,
                    reason: "moment propagation needs each layer's own operation: predict \
                             with PredictMode::Samples",
                });
            }
        };
        if let Some(row) = input.first_non_finite() {
            return Err(PredictError::NonFiniteInput { row });
        }
        let out = self.outputs(input, samples);
        crate::nets::check_outputs_finite(out.clone())?;
        Ok(self.likelihood.predict(out))
    }
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
