//! The arguments the op families share, on a backend's tensors (`LocScaleTensors`,
//! `PriorTensors`, `DrawSpec`) and on burn's (`LocScale`, `FusedPrior`), with the reference
//! bodies' host transfers and `σ(ρ)`.

// burn marks its NdArray backend deprecated; the project still offers it as a feature.
#![allow(deprecated)]

use super::prelude::*;

/// A tensor of `shape` from host values of the CPU kernels' counter-based streams.
pub(crate) fn uploaded<B: Backend>(
    values: Vec<f32>,
    shape: Shape,
    device: &B::Device,
) -> FloatTensor<B> {
    B::float_from_data(TensorData::new(values, shape), device)
}

/// The elements of `t` on the host, in row-major order.
pub(crate) fn host<B: Backend>(t: FloatTensor<B>) -> Vec<f32> {
    try_read_sync(B::float_into_data(t))
        .expect("a synchronous read of the backend's tensor")
        .expect("the backend's tensor data")
        .into_vec::<f32>()
        .expect("f32 tensor data")
}

/// A one-element tensor holding `x`.
pub(crate) fn scalar<B: Backend>(x: f64, device: &B::Device) -> FloatTensor<B> {
    B::float_from_data(TensorData::from([x as f32]), device)
}

/// `softplus(x) = max(x, 0) + ln(1 + t)`, `t = e^{−|x|}`, from burn primitives, with
/// `ln(1 + t) = 2 atanh(t/(2 + t))` by its series (`t/(2+t) ≤ 1/3`): only multiplications and
/// additions, so it keeps full relative accuracy where a GPU's `ln` near 1 does not.
pub(crate) fn softplus<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_add(B::relu(x.clone()), log1p_exp_neg_abs::<B>(x))
}

/// `ln(1 + e^{−|x|})`: the softplus of `x` less `max(x, 0)`, by `2 atanh(t/(2 + t))`,
/// `t = e^{−|x|}`.
pub(crate) fn log1p_exp_neg_abs<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let t = B::float_exp(B::float_neg(B::float_abs(x)));
    let s = B::float_div(t.clone(), B::float_add_scalar(t, Scalar::from(2.0)));
    let z = B::float_mul(s.clone(), s.clone());
    // 1 + z/3 + z²/5 + … + z⁷/15 by Horner's rule.
    let mut p = B::float_mul_scalar(z.clone(), Scalar::from(1.0 / 15.0));
    for k in (1..7).rev() {
        let c = 1.0 / (2 * k + 1) as f64;
        p = B::float_mul(B::float_add_scalar(p, Scalar::from(c)), z.clone());
    }
    let p = B::float_add_scalar(p, Scalar::from(1.0));
    B::float_mul_scalar(B::float_mul(s, p), Scalar::from(2.0))
}

/// `(σ, ln σ, dσ/dρ)` of `ρ` under `rule`, from burn primitives.
pub(crate) fn sigma_of<B: Backend>(
    rho: FloatTensor<B>,
    rule: SigmaRule,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
    match rule {
        SigmaRule::Softplus => {
            let sigma = softplus::<B>(rho.clone());
            (sigma.clone(), B::float_log(sigma), B::sigmoid(rho))
        }
        SigmaRule::LogVariance => {
            let ln_sigma = B::float_mul_scalar(rho, Scalar::from(0.5));
            let sigma = B::float_exp(ln_sigma.clone());
            let d = B::float_mul_scalar(sigma.clone(), Scalar::from(0.5));
            (sigma, ln_sigma, d)
        }
        SigmaRule::SigmoidVariance { ln_bound } => {
            let neg = B::float_neg(rho);
            // ½(ln λ − softplus(−ρ)).
            let ln_sigma = B::float_mul_scalar(
                B::float_sub_scalar(softplus::<B>(neg.clone()), Scalar::from(ln_bound)),
                Scalar::from(-0.5),
            );
            let sigma = B::float_exp(ln_sigma.clone());
            let d = B::float_mul(
                B::float_mul_scalar(sigma.clone(), Scalar::from(0.5)),
                B::sigmoid(neg),
            );
            (sigma, ln_sigma, d)
        }
    }
}

/// A location-scale tensor as an op's argument: `μ`, `ρ` (same shape) and the rule of `σ(ρ)`.
#[derive(ExtensionType, Debug, Clone)]
pub struct LocScaleTensors<B: Backend> {
    /// `μ`.
    pub mu: FloatTensor<B>,
    /// `ρ`.
    pub rho: FloatTensor<B>,
    /// How `σ` follows from `ρ`.
    pub rule: SigmaRule,
}

/// The draws an op takes: sub-streams `0..S` of `key`, draw `s` scaled by `scales[s]`, of
/// `w − μ` when `center`.
#[derive(Debug, Clone)]
pub struct DrawSpec {
    /// The stream key.
    pub key: u64,
    /// A scale per draw (1 for mean-field; radial's radius over the norm).
    pub scales: Vec<f32>,
    /// Draws of `w − μ` rather than `w`.
    pub center: bool,
}

/// A Gaussian prior's KL as an op's argument ([`elementwise::Prior`]): none, the scalar terms,
/// or the terms per weight with `μ₀` and `σ₀`, each of the weight's length.
#[derive(ExtensionType, Debug, Clone)]
pub enum PriorTensors<B: Backend> {
    /// No KL.
    Off,
    /// The terms alone ([`KlTerms`]).
    Scalar(KlTerms),
    /// The terms per weight ([`elementwise::PerWeight`]).
    PerWeight {
        /// The terms ([`KlTerms::per_weight`]).
        terms: KlTerms,
        /// `μ₀`.
        mean: FloatTensor<B>,
        /// `σ₀`.
        std: FloatTensor<B>,
    },
}

impl<B: Backend> PriorTensors<B> {
    /// The KL's terms, `None` for [`PriorTensors::Off`].
    pub fn terms(&self) -> Option<KlTerms> {
        match self {
            Self::Off => None,
            Self::Scalar(terms) | Self::PerWeight { terms, .. } => Some(*terms),
        }
    }

    /// The terms and the per-weight `(μ₀, σ₀)` reshaped to `shape`; `None` for
    /// [`PriorTensors::Off`].
    pub(crate) fn parts(self, shape: &Shape) -> Option<(KlTerms, PerWeightPrior<B>)> {
        match self {
            Self::Off => None,
            Self::Scalar(terms) => Some((terms, None)),
            Self::PerWeight { terms, mean, std } => Some((
                terms,
                Some((
                    B::float_reshape(mean, shape.clone()),
                    B::float_reshape(std, shape.clone()),
                )),
            )),
        }
    }
}

/// A per-weight prior's `(μ₀, σ₀)` reshaped for burn ops, or `None`.
pub(crate) type PerWeightPrior<B> = Option<(FloatTensor<B>, FloatTensor<B>)>;

/// `x/σ₀²` under a per-weight prior, `x` otherwise.
pub(crate) fn per_precision<B: Backend>(
    x: FloatTensor<B>,
    prior: &PerWeightPrior<B>,
) -> FloatTensor<B> {
    match prior {
        Some((_, std)) => B::float_div(x, B::float_mul(std.clone(), std.clone())),
        None => x,
    }
}

/// A location-scale tensor as the fused ops take it: `μ`, `ρ` (one shape) and the rule of
/// `σ(ρ)` (softplus, log-variance or Depeweg's sigmoid variance).
#[derive(Debug, Clone)]
pub(crate) struct LocScale<const D: usize> {
    pub mu: Tensor<D>,
    pub rho: Tensor<D>,
    pub rule: SigmaRule,
}

impl<const D: usize> LocScale<D> {
    /// The ops' argument.
    pub(crate) fn dispatch(self) -> LocScaleTensors<Dispatch> {
        LocScaleTensors {
            mu: self.mu.into_dispatch(),
            rho: self.rho.into_dispatch(),
            rule: self.rule,
        }
    }

    pub(crate) fn numel(&self) -> usize {
        self.mu.shape().num_elements()
    }
}

/// A Gaussian prior's KL as the fused ops take it: the kernels' terms ([`KlTerms`]) and, for a
/// prior with a mean and a standard deviation per weight, `[μ₀, σ₀]` (flat, of the weight's
/// length; constants), whose terms are per weight: `½(σ²·inv_var_sigma + (μ − μ₀)²·inv_var_mu)/σ₀²
/// − ln σ + ln σ₀` ([`elementwise::PerWeight`], with [`KlTerms::per_weight`]'s terms).
#[derive(Debug, Clone)]
pub(crate) struct FusedPrior {
    pub terms: KlTerms,
    pub per_weight: Option<[Tensor<1>; 2]>,
}

impl FusedPrior {
    /// The ops' argument, the per-weight tensors checked against the weight's `n` elements.
    pub(crate) fn dispatch(self, n: usize) -> PriorTensors<Dispatch> {
        match self.per_weight {
            Some([mean, std]) => {
                assert!(
                    mean.dims() == [n] && std.dims() == [n],
                    "a per-weight prior: mean {:?} and standard deviation {:?} for {n} weights",
                    mean.dims(),
                    std.dims()
                );
                PriorTensors::PerWeight {
                    terms: self.terms,
                    mean: mean.into_dispatch(),
                    std: std.into_dispatch(),
                }
            }
            None => PriorTensors::Scalar(self.terms),
        }
    }
}

/// The ops' argument for an optional prior ([`PriorTensors::Off`] for none).
pub(crate) fn prior_dispatch(prior: Option<FusedPrior>, n: usize) -> PriorTensors<Dispatch> {
    prior.map_or(PriorTensors::Off, |p| p.dispatch(n))
}

/// The device's boolean type (as burn's tensor API picks it; wgpu has no native `bool` buffers).
pub(crate) fn bool_dtype<B: Backend>(device: &B::Device) -> BoolDType {
    burn::backend::get_device_settings::<B>(device).bool_dtype
}
