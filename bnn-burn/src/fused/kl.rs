//! KL terms on the kernels: a location-scale tensor's closed-form KL to a scalar or per-weight
//! Gaussian prior (`kl`), a point's Gaussian cross-entropy (`quadratic`), a low-rank factor's
//! share (`factor_kl`) and the Monte Carlo KL to a scale mixture (`mixture_kl`). The reference
//! KL sums here are also what `draws` and `moments` fold.

// burn marks its NdArray backend deprecated; the project still offers it as a feature.
#![allow(deprecated)]

use super::prelude::*;

/// `Σ ½(σ̃²·inv_var_sigma + (μ − μ₀)²·inv_var_mu) − ln σ̃`, `[1]`, `σ` by `rule` ([`KlTerms`];
/// per weight, `… /σ₀² + ln σ₀`, under `prior`, [`elementwise::PerWeight`]).
pub(crate) fn kl_sum<B: Backend>(
    mu: FloatTensor<B>,
    rho: FloatTensor<B>,
    rule: SigmaRule,
    terms: KlTerms,
    prior: PerWeightPrior<B>,
) -> FloatTensor<B> {
    let (sigma, ln_sigma, _) = sigma_of::<B>(rho, rule);
    kl_terms_sum::<B>(mu, sigma, ln_sigma, terms, prior)
}

/// `μ − μ₀`, with the per-weight `μ₀` under `prior`.
pub(crate) fn centred<B: Backend>(
    mu: FloatTensor<B>,
    terms: KlTerms,
    prior: &PerWeightPrior<B>,
) -> FloatTensor<B> {
    match prior {
        Some((mean, _)) => B::float_sub(mu, mean.clone()),
        None => B::float_sub_scalar(mu, Scalar::from(terms.mean)),
    }
}

/// [`kl_sum`] given `σ` and `ln σ`: `σ̃` and `ln σ̃` clamped when the terms say so.
pub(crate) fn kl_terms_sum<B: Backend>(
    mu: FloatTensor<B>,
    sigma: FloatTensor<B>,
    ln_sigma: FloatTensor<B>,
    terms: KlTerms,
    prior: PerWeightPrior<B>,
) -> FloatTensor<B> {
    let (sigma, ln_sigma) = if terms.is_clamped() {
        let ((low, high), (ln_low, ln_high)) = (terms.sigma_range, terms.ln_sigma_range);
        (
            B::float_clamp(sigma, Scalar::from(low), Scalar::from(high)),
            B::float_clamp(ln_sigma, Scalar::from(ln_low), Scalar::from(ln_high)),
        )
    } else {
        (sigma, ln_sigma)
    };
    let centred = centred::<B>(mu, terms, &prior);
    let quad = B::float_add(
        B::float_mul_scalar(
            B::float_mul(sigma.clone(), sigma),
            Scalar::from(terms.inv_var_sigma),
        ),
        B::float_mul_scalar(
            B::float_mul(centred.clone(), centred),
            Scalar::from(terms.inv_var_mu),
        ),
    );
    let quad = per_precision::<B>(quad, &prior);
    let mut t = B::float_sub(B::float_mul_scalar(quad, Scalar::from(0.5)), ln_sigma);
    if let Some((_, std)) = prior {
        t = B::float_add(t, B::float_log(std));
    }
    B::float_reshape(B::float_sum(t), Shape::from([1]))
}

/// `weight·∂KL/∂μ = weight·(μ − μ₀)/σ₀²` of the Gaussian KL terms ([`KlTerms`], per weight
/// under `prior`).
pub(crate) fn kl_mu_gradient<B: Backend>(
    mu: FloatTensor<B>,
    terms: KlTerms,
    weight: f32,
    prior: &PerWeightPrior<B>,
) -> FloatTensor<B> {
    let centred = centred::<B>(mu, terms, prior);
    let g = B::float_mul_scalar(centred, Scalar::from(terms.inv_var_mu * weight));
    per_precision::<B>(g, prior)
}

/// `∂KL/∂σ = σ·inv_var_sigma − 1/σ` of the Gaussian KL terms ([`KlTerms`]; `σ·inv_var_sigma/σ₀²`
/// under a per-weight `prior`), 0 where their clamp holds (as the CPU kernels).
pub(crate) fn kl_sigma_gradient<B: Backend>(
    sigma: FloatTensor<B>,
    terms: KlTerms,
    prior: &PerWeightPrior<B>,
) -> FloatTensor<B> {
    let scaled = B::float_mul_scalar(sigma.clone(), Scalar::from(terms.inv_var_sigma));
    let slope = B::float_sub(
        per_precision::<B>(scaled, prior),
        B::float_recip(sigma.clone()),
    );
    if !terms.is_clamped() {
        return slope;
    }
    let (low, high) = terms.sigma_range;
    let dtype = bool_dtype::<B>(&sigma.device());
    let below = B::float_lower_elem(sigma.clone(), Scalar::from(low), dtype);
    let above = B::float_greater_elem(sigma, Scalar::from(high), dtype);
    let slope = B::float_mask_fill(slope, below, Scalar::from(0.0));
    B::float_mask_fill(slope, above, Scalar::from(0.0))
}

/// `g·∇` of the KL terms ([`kl_sum`]) for a one-element `g`: `(g·∂KL/∂μ, g·∂KL/∂σ·dσ/dρ)`,
/// `σ` by `rule` (per weight under `prior`).
pub(crate) fn kl_backward<B: Backend>(
    g: FloatTensor<B>,
    mu: FloatTensor<B>,
    rho: FloatTensor<B>,
    rule: SigmaRule,
    terms: KlTerms,
    prior: PerWeightPrior<B>,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let g = B::float_expand(g, mu.shape());
    let (sigma, _, dsigma_drho) = sigma_of::<B>(rho, rule);
    let dmu = B::float_mul(kl_mu_gradient::<B>(mu, terms, 1.0, &prior), g.clone());
    let dsigma = kl_sigma_gradient::<B>(sigma, terms, &prior);
    (dmu, B::float_mul(B::float_mul(dsigma, dsigma_drho), g))
}

/// `(dμ + weight·∂KL/∂μ, (dσ + weight·∂KL/∂σ)·dσ/dρ)`, `σ` by `rule` (the KL per weight under
/// `prior`).
pub(crate) fn finish_backward<B: Backend>(
    dmu: FloatTensor<B>,
    dsigma: FloatTensor<B>,
    mu: FloatTensor<B>,
    rho: FloatTensor<B>,
    rule: SigmaRule,
    fold: Option<((KlTerms, PerWeightPrior<B>), f32)>,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let (sigma, _, dsigma_drho) = sigma_of::<B>(rho, rule);
    let Some(((terms, prior), weight)) = fold else {
        return (dmu, B::float_mul(dsigma, dsigma_drho));
    };
    let kl_mu = kl_mu_gradient::<B>(mu, terms, weight, &prior);
    let kl_sigma = kl_sigma_gradient::<B>(sigma, terms, &prior);
    let kl_sigma = B::float_mul_scalar(kl_sigma, Scalar::from(weight));
    (
        B::float_add(dmu, kl_mu),
        B::float_mul(B::float_add(dsigma, kl_sigma), dsigma_drho),
    )
}

/// `(ln p(w), d ln p/dw)` of a scale mixture elementwise by burn ops ([`MixtureTerms`]'s form):
/// `ln p = max(a₁, a₂) + ln(1 + e^{−|d|})`, `a_k = ln_weight_k − ½w²/σ_k²`, `d = a₁ − a₂`, and
/// `d ln p/dw = −w(r₁/σ₁² + r₂/σ₂²)`, `r₁ = sigmoid(d)`, `r₂ = sigmoid(−d)`.
pub(crate) fn mixture_log_density<B: Backend>(
    w: FloatTensor<B>,
    t: MixtureTerms,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let half_w2 = B::float_mul_scalar(B::float_mul(w.clone(), w.clone()), Scalar::from(0.5));
    let component = |ln_weight: f32, inv_var: f32| {
        B::float_add_scalar(
            B::float_mul_scalar(half_w2.clone(), Scalar::from(-inv_var)),
            Scalar::from(ln_weight),
        )
    };
    let (a1, a2) = (
        component(t.ln_weight1, t.inv_var1),
        component(t.ln_weight2, t.inv_var2),
    );
    let d = B::float_sub(a1.clone(), a2.clone());
    let first = B::float_greater(a1.clone(), a2.clone(), bool_dtype::<B>(&w.device()));
    let larger = B::float_mask_where(a2, first, a1);
    let lp = B::float_add(larger, log1p_exp_neg_abs::<B>(d.clone()));
    // Each responsibility by its own sigmoid: `1 − r₁` would lose `r₂` where it is small.
    let precision = B::float_add(
        B::float_mul_scalar(B::sigmoid(d.clone()), Scalar::from(t.inv_var1)),
        B::float_mul_scalar(B::sigmoid(B::float_neg(d)), Scalar::from(t.inv_var2)),
    );
    (lp, B::float_neg(B::float_mul(w, precision)))
}

/// The KL kernels, forward and backward (default bodies: the reference, wgpu's).
#[backend_extension(Flex: cfg(feature = "flex"), NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"))]
pub trait KlKernels: DrawKernels {
    /// `Σ` of `prior`'s KL terms, `Σ ½(σ̃²·inv_var_sigma + (μ − μ₀)²·inv_var_mu) − ln σ̃` (`[1]`,
    /// `σ` by `q`'s rule; `/σ₀²` and `+ ln σ₀` per weight, [`elementwise::kl`]).
    fn fused_kl(
        #[extension_type] q: LocScaleTensors<Self>,
        #[extension_type] prior: PriorTensors<Self>,
    ) -> FloatTensor<Self> {
        let LocScaleTensors { mu, rho, rule } = q;
        let (terms, prior) = prior.parts(&mu.shape()).expect("a KL needs a prior");
        kl_sum::<Self>(mu, rho, rule, terms, prior)
    }

    /// `g·∇` [`KlKernels::fused_kl`] for a one-element `g` ([`elementwise::kl_backward`]).
    fn fused_kl_backward(
        g: FloatTensor<Self>,
        #[extension_type] q: LocScaleTensors<Self>,
        #[extension_type] prior: PriorTensors<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let LocScaleTensors { mu, rho, rule } = q;
        let (terms, prior) = prior.parts(&mu.shape()).expect("a KL needs a prior");
        kl_backward::<Self>(g, mu, rho, rule, terms, prior)
    }

    /// `coef·Σ (w − center)²` (`[1]`): a Gaussian prior's quadratic term at a point.
    fn fused_quadratic(w: FloatTensor<Self>, center: f32, coef: f32) -> FloatTensor<Self> {
        let centred = Self::float_sub_scalar(w, Scalar::from(center));
        let sum = Self::float_sum(Self::float_mul(centred.clone(), centred));
        Self::float_mul_scalar(sum, Scalar::from(coef))
    }

    /// `g·∇ coef·Σ (w − center)² = 2·coef·g·(w − center)` for a one-element `g`.
    fn fused_quadratic_backward(
        g: FloatTensor<Self>,
        w: FloatTensor<Self>,
        center: f32,
        coef: f32,
    ) -> FloatTensor<Self> {
        let g = Self::float_expand(g, w.shape());
        let centred = Self::float_sub_scalar(w, Scalar::from(center));
        Self::float_mul(Self::float_mul_scalar(centred, Scalar::from(2.0 * coef)), g)
    }

    /// `KL(q ‖ p)`, `[1]`, of `q` with draws `μ + σ(ρ)·c_s·ε_s` from the scale mixture `p` of
    /// `kl` (`σ` by its rule, `c_s` its scales), less the constant of `−H[q]`: `−Σ ln σ` minus
    /// the mean of `Σ_i ln p(μ_i + σ_i c_s ε_si)` over the draws `ε_s`, sub-streams `0..S` of its
    /// key.
    fn fused_mixture_kl(
        mu: FloatTensor<Self>,
        rho: FloatTensor<Self>,
        kl: MixtureKl,
    ) -> FloatTensor<Self> {
        let n = mu.shape().num_elements();
        let flat = |x: FloatTensor<Self>| Self::float_reshape(x, Shape::from([1, n]));
        let m = flat(mu);
        let (sigma, ln_sigma, _) = sigma_of::<Self>(flat(rho), kl.rule);
        let mut total = Self::float_neg(Self::float_sum(ln_sigma));
        let per_draw = Scalar::from(1.0 / kl.scales.len() as f64);
        for (s, &c) in kl.scales.iter().enumerate() {
            let eps = scaled_normal::<Self>(&m, kl.key, s, c);
            let w = Self::float_add(m.clone(), Self::float_mul(sigma.clone(), eps));
            let (lp, _) = mixture_log_density::<Self>(w, kl.prior);
            total = Self::float_sub(total, Self::float_mul_scalar(Self::float_sum(lp), per_draw));
        }
        Self::float_reshape(total, Shape::from([1]))
    }

    /// `(dμ, dρ)` of [`KlKernels::fused_mixture_kl`] times its gradient `dvalue` (`[1]`):
    /// `dμ = −(g/S) Σ_s ψ_s`, `dρ = −σ'(g/σ + (g/S) Σ_s ψ_s c_s ε_s)`, `ψ = d ln p/dw` at `w_s`.
    fn fused_mixture_kl_backward(
        mu: FloatTensor<Self>,
        rho: FloatTensor<Self>,
        kl: MixtureKl,
        dvalue: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (mu_shape, rho_shape) = (mu.shape(), rho.shape());
        let n = mu_shape.num_elements();
        let flat = |x: FloatTensor<Self>| Self::float_reshape(x, Shape::from([1, n]));
        let m = flat(mu);
        let (sigma, _, dsigma) = sigma_of::<Self>(flat(rho), kl.rule);
        let mut psi = Self::float_zeros(Shape::from([1, n]), &m.device(), FloatDType::F32);
        let mut psi_eps = psi.clone();
        for (s, &c) in kl.scales.iter().enumerate() {
            let scaled = scaled_normal::<Self>(&m, kl.key, s, c);
            let w = Self::float_add(m.clone(), Self::float_mul(sigma.clone(), scaled.clone()));
            let (_, d) = mixture_log_density::<Self>(w, kl.prior);
            psi_eps = Self::float_add(psi_eps, Self::float_mul(d.clone(), scaled));
            psi = Self::float_add(psi, d);
        }
        let g = Self::float_reshape(dvalue, Shape::from([1, 1]));
        let per_draw =
            Self::float_mul_scalar(g.clone(), Scalar::from(1.0 / kl.scales.len() as f64));
        let dmu = Self::float_neg(Self::float_mul(psi, per_draw.clone()));
        let inner = Self::float_add(
            Self::float_div(g, sigma),
            Self::float_mul(psi_eps, per_draw),
        );
        let drho = Self::float_neg(Self::float_mul(dsigma, inner));
        (
            Self::float_reshape(dmu, mu_shape),
            Self::float_reshape(drho, rho_shape),
        )
    }

    /// The low-rank factor's share of the KL, `[1]`, and `A⁻¹` (`[k, k]`, row-major, on the
    /// host) for the backward pass: `½c² λ Σ_i ‖F_i‖²/σ₀ᵢ² − ½ ln det A`, `A = I + c² Fᵀ
    /// diag(1/v) F`, for the stored factor `F [n, k]`, its scale `c`, the variances `v = σ(ρ)²`
    /// of `ρ` (`n` elements, any shape; `σ` by `rule`), `λ` the prior terms' `inv_var_mu`
    /// and, under [`PriorTensors::PerWeight`], the prior's `σ₀ᵢ` per row (its `μ₀` does not
    /// enter the factor's share; a scalar prior has `λ = 1/σ₀²` and `σ₀ᵢ = 1`). The default
    /// body forms `G` and the weighted `‖F‖²` by burn ops and reads the `k × k` matrix `G` back
    /// for the Cholesky on the host.
    fn fused_factor_kl(
        factor: FloatTensor<Self>,
        rho: FloatTensor<Self>,
        rule: SigmaRule,
        scale: f64,
        #[extension_type] prior: PriorTensors<Self>,
    ) -> (FloatTensor<Self>, Vec<f32>) {
        let [n, k] = factor.shape().dims();
        let (terms, prior) = prior
            .parts(&Shape::from([n, 1]))
            .expect("the factor's KL needs a prior");
        let inv_prior_var = f64::from(terms.inv_var_mu);
        let (sigma, _, _) = sigma_of::<Self>(Self::float_reshape(rho, Shape::from([n, 1])), rule);
        let var = Self::float_mul(sigma.clone(), sigma);
        let scaled = Self::float_div(factor.clone(), var);
        let gram = Self::float_matmul(Self::float_transpose(factor.clone()), scaled);
        let gram: Vec<f64> = host::<Self>(gram).into_iter().map(f64::from).collect();
        let c2 = scale * scale;
        let (log_det, inv) = factor::capacitance_solve(&gram, k, c2);
        let squares = Self::float_mul(factor.clone(), factor);
        let sum_sq = Self::float_sum(per_precision::<Self>(squares, &prior));
        let value = Self::float_add_scalar(
            Self::float_mul_scalar(sum_sq, Scalar::from(0.5 * c2 * inv_prior_var)),
            Scalar::from(-0.5 * log_det),
        );
        (value, inv.into_iter().map(|x| x as f32).collect())
    }

    /// `(dF, dρ)` of [`KlKernels::fused_factor_kl`] for its gradient `dvalue` (`[1]`), with
    /// `B = A⁻¹`: `dF_i = g c² (λ F_i/σ₀ᵢ² − F_i B / v_i)`, `dv_i = ½ g c² (F_i B F_iᵀ) / v_i²`
    /// and `dρ_i = dv_i · 2σ_i dσ_i/dρ_i` (`dρ` shaped like `rho`).
    fn fused_factor_kl_backward(
        factor: FloatTensor<Self>,
        rho: FloatTensor<Self>,
        rule: SigmaRule,
        inv: Vec<f32>,
        scale: f64,
        #[extension_type] prior: PriorTensors<Self>,
        dvalue: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let rho_shape = rho.shape();
        let [n, k] = factor.shape().dims();
        let (terms, prior) = prior
            .parts(&Shape::from([n, 1]))
            .expect("the factor's KL needs a prior");
        let inv_prior_var = f64::from(terms.inv_var_mu);
        let device = factor.device();
        let c2 = scale * scale;
        let g = Self::float_reshape(dvalue, Shape::from([1, 1]));
        let (sigma, _, dsigma) =
            sigma_of::<Self>(Self::float_reshape(rho, Shape::from([n, 1])), rule);
        let var = Self::float_mul(sigma.clone(), sigma.clone());
        let inv = uploaded::<Self>(inv, Shape::from([k, k]), &device);
        let fb = Self::float_matmul(factor.clone(), inv);
        let quad = Self::float_sum_dim(Self::float_mul(factor.clone(), fb.clone()), 1);
        let df = Self::float_sub(
            Self::float_mul_scalar(
                per_precision::<Self>(factor, &prior),
                Scalar::from(c2 * inv_prior_var),
            ),
            Self::float_mul_scalar(Self::float_div(fb, var.clone()), Scalar::from(c2)),
        );
        // dv · 2σ dσ/dρ, dv = ½c² quad / v².
        let dv = Self::float_div(quad, Self::float_mul(var.clone(), var));
        let drho = Self::float_mul(
            Self::float_mul_scalar(dv, Scalar::from(c2)),
            Self::float_mul(sigma, dsigma),
        );
        (
            Self::float_mul(df, g.clone()),
            Self::float_reshape(Self::float_mul(drho, g), rho_shape),
        )
    }
}

#[cfg(feature = "wgpu")]
impl KlKernels for burn::backend::Cube {}

/// A factor's KL as the CPU kernels take it: the stored factor `[n, k]`, `ρ`, the `σ` rule,
/// the factor's scale and the prior's `1/σ₀²` (and per-weight `σ₀`), handed to `run`.
fn factor_view<B: Backend, R>(
    (factor, rho, rule, scale): (&FloatTensor<B>, &FloatTensor<B>, SigmaRule, f64),
    prior: &PriorTensors<B>,
    run: impl FnOnce(&factor::FactorKl<'_>) -> R,
) -> R
where
    FloatTensor<B>: CpuTensor,
{
    let (f, r) = (factor.values(), rho.values());
    let inv_prior_var = f64::from(prior.terms().expect("the factor's KL prior").inv_var_mu);
    let values = prior_values(prior);
    run(&factor::FactorKl {
        f: &f,
        rho: &r,
        rule,
        k: factor.shape()[1],
        scale,
        inv_prior_var,
        prior_std: values.as_ref().map(|(_, std)| &std[..]),
    })
}

/// The CPU backends' kernels: slices in, slices out.
macro_rules! cpu_kernels {
    ($backend:ty) => {
        impl KlKernels for $backend {
            fn fused_kl(q: LocScaleTensors<Self>, prior: PriorTensors<Self>) -> FloatTensor<Self> {
                let (mu, rho) = loc_scale_values(&q);
                let values = prior_values(&prior);
                let view = elementwise::LocScale {
                    mu: &mu,
                    rho: &rho,
                    rule: q.rule,
                };
                let prior = prior_of(&prior, &values).expect("a KL needs a prior");
                total(elementwise::kl(view, prior))
            }

            fn fused_kl_backward(
                g: FloatTensor<Self>,
                q: LocScaleTensors<Self>,
                prior: PriorTensors<Self>,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                let shape = q.mu.shape();
                let g = g.values()[0];
                let (mu, rho) = loc_scale_values(&q);
                let values = prior_values(&prior);
                let prior = prior_of(&prior, &values).expect("a KL needs a prior");
                let (dmu, drho) = written2(shape.num_elements(), |dm, dr| {
                    let view = elementwise::LocScale {
                        mu: &mu,
                        rho: &rho,
                        rule: q.rule,
                    };
                    elementwise::kl_backward(
                        g,
                        view,
                        prior,
                        elementwise::Grads { mu: dm, rho: dr },
                    );
                });
                (
                    <FloatTensor<Self>>::from_values(dmu, shape.clone()),
                    <FloatTensor<Self>>::from_values(drho, shape),
                )
            }

            fn fused_quadratic(w: FloatTensor<Self>, center: f32, coef: f32) -> FloatTensor<Self> {
                total(f64::from(coef) * elementwise::squared_distance(&w.values(), center))
            }

            fn fused_quadratic_backward(
                g: FloatTensor<Self>,
                w: FloatTensor<Self>,
                center: f32,
                coef: f32,
            ) -> FloatTensor<Self> {
                let shape = w.shape();
                let scale = 2.0 * coef * g.values()[0];
                let w = w.values();
                let dw = written(shape.num_elements(), |d| {
                    elementwise::scaled_offset(&w, center, scale, d)
                });
                <FloatTensor<Self>>::from_values(dw, shape)
            }

            fn fused_mixture_kl(
                mu: FloatTensor<Self>,
                rho: FloatTensor<Self>,
                kl: MixtureKl,
            ) -> FloatTensor<Self> {
                total(mixture::mixture_kl(&mu.values(), &rho.values(), &kl))
            }

            fn fused_mixture_kl_backward(
                mu: FloatTensor<Self>,
                rho: FloatTensor<Self>,
                kl: MixtureKl,
                dvalue: FloatTensor<Self>,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                let (mu_shape, rho_shape) = (mu.shape(), rho.shape());
                let (m, r) = (mu.values(), rho.values());
                let g = dvalue.values()[0];
                let (dmu, drho) = written2(m.len(), |dm, dr| {
                    mixture::mixture_kl_backward(&m, &r, &kl, g, dm, dr)
                });
                (
                    <FloatTensor<Self>>::from_values(dmu, mu_shape),
                    <FloatTensor<Self>>::from_values(drho, rho_shape),
                )
            }

            fn fused_factor_kl(
                factor: FloatTensor<Self>,
                rho: FloatTensor<Self>,
                rule: SigmaRule,
                scale: f64,
                prior: PriorTensors<Self>,
            ) -> (FloatTensor<Self>, Vec<f32>) {
                let view = (&factor, &rho, rule, scale);
                let (value, inv) = factor_view::<Self, _>(view, &prior, factor::factor_kl);
                let value = <FloatTensor<Self>>::from_values(vec![value as f32], Shape::from([1]));
                (value, inv)
            }

            fn fused_factor_kl_backward(
                factor: FloatTensor<Self>,
                rho: FloatTensor<Self>,
                rule: SigmaRule,
                inv: Vec<f32>,
                scale: f64,
                prior: PriorTensors<Self>,
                dvalue: FloatTensor<Self>,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                let (f_shape, r_shape) = (factor.shape(), rho.shape());
                let g = f64::from(dvalue.values()[0]);
                let view = (&factor, &rho, rule, scale);
                let (df, dr) = factor_view::<Self, _>(view, &prior, |kl| {
                    let mut dr = Vec::new();
                    let df = written(kl.f.len(), |df| {
                        dr = written(kl.rho.len(), |dr| {
                            factor::factor_kl_backward(kl, &inv, g, df, dr)
                        });
                    });
                    (df, dr)
                });
                (
                    <FloatTensor<Self>>::from_values(df, f_shape),
                    <FloatTensor<Self>>::from_values(dr, r_shape),
                )
            }
        }
    };
}

for_cpu_backends!(cpu_kernels);

fused_ops! {
    /// The KL terms as differentiable ops (the prior is a constant).
    pub trait KlOps for KlKernels {
        /// [`KlKernels::fused_kl`], differentiable in `μ` and `ρ` (the prior is a constant).
        fn kl_op(
            #[extension_type] q: LocScaleTensors<Self>,
            #[extension_type] prior: PriorTensors<Self>,
        ) -> FloatTensor<Self>;
        inner {
            Self::fused_kl(q, prior)
        }
        autodiff {
            let prior = inner_prior(prior);
            let inner = inner_q(&q);
            let value = B::fused_kl(inner.clone(), prior.clone());
            let state = || KlAdjoint { q: inner, prior };
            node::<B, C, _, 2>([q.mu.node(), q.rho.node()], value, state)
        }

        /// [`KlKernels::fused_quadratic`], differentiable in `w`.
        fn quadratic_op(w: FloatTensor<Self>, center: f32, coef: f32) -> FloatTensor<Self>;
        inner {
            Self::fused_quadratic(w, center, coef)
        }
        autodiff {
            let value = B::fused_quadratic(w.primitive().clone(), center, coef);
            let state = || QuadraticAdjoint {
                w: w.primitive().clone(),
                center,
                coef,
            };
            node::<B, C, _, 1>([w.node()], value, state)
        }

        /// [`KlKernels::fused_mixture_kl`], differentiable in `μ` and `ρ` (the draws are
        /// regenerated from the key in the backward pass).
        fn mixture_kl_op(
            mu: FloatTensor<Self>,
            rho: FloatTensor<Self>,
            kl: MixtureKl,
        ) -> FloatTensor<Self>;
        inner {
            Self::fused_mixture_kl(mu, rho, kl)
        }
        autodiff {
            let (m, r) = (mu.primitive().clone(), rho.primitive().clone());
            let value = B::fused_mixture_kl(m.clone(), r.clone(), kl.clone());
            let state = || MixtureKlAdjoint { mu: m, rho: r, kl };
            node::<B, C, _, 2>([mu.node(), rho.node()], value, state)
        }

        /// [`KlKernels::fused_factor_kl`]'s value, differentiable in the factor and `ρ` (the
        /// per-weight prior is a constant).
        fn factor_kl_op(
            factor: FloatTensor<Self>,
            rho: FloatTensor<Self>,
            rule: SigmaRule,
            scale: f64,
            #[extension_type] prior: PriorTensors<Self>,
        ) -> FloatTensor<Self>;
        inner {
            Self::fused_factor_kl(factor, rho, rule, scale, prior).0
        }
        autodiff {
            let prior = inner_prior(prior);
            let (f, r) = (factor.primitive().clone(), rho.primitive().clone());
            let (value, inv) = B::fused_factor_kl(f.clone(), r.clone(), rule, scale, prior.clone());
            let state = || FactorKlAdjoint {
                factor: f,
                rho: r,
                rule,
                inv,
                scale,
                prior,
            };
            node::<B, C, _, 2>([factor.node(), rho.node()], value, state)
        }
    }
}

/// [`KlOps::kl_op`]'s: the posterior and the prior.
#[derive(Debug, Clone)]
struct KlAdjoint<B: Backend> {
    q: LocScaleTensors<B>,
    prior: PriorTensors<B>,
}

impl<B: KlKernels> Adjoint<B, 2> for KlAdjoint<B> {
    fn grads(self, g: FloatTensor<B>, _: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let (dmu, drho) = B::fused_kl_backward(g, self.q, self.prior);
        [Some(dmu), Some(drho)]
    }
}

/// [`KlOps::quadratic_op`]'s: the point and the term's centre and coefficient.
#[derive(Debug, Clone)]
struct QuadraticAdjoint<B: Backend> {
    w: FloatTensor<B>,
    center: f32,
    coef: f32,
}

impl<B: KlKernels> Adjoint<B, 1> for QuadraticAdjoint<B> {
    fn grads(self, g: FloatTensor<B>, _: [bool; 1]) -> [Option<FloatTensor<B>>; 1] {
        [Some(B::fused_quadratic_backward(
            g,
            self.w,
            self.center,
            self.coef,
        ))]
    }
}

/// [`KlOps::mixture_kl_op`]'s: `μ`, `ρ` and the settings (the draws' key among them).
#[derive(Debug, Clone)]
struct MixtureKlAdjoint<B: Backend> {
    mu: FloatTensor<B>,
    rho: FloatTensor<B>,
    kl: MixtureKl,
}

impl<B: KlKernels> Adjoint<B, 2> for MixtureKlAdjoint<B> {
    fn grads(self, g: FloatTensor<B>, _: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let (dmu, drho) = B::fused_mixture_kl_backward(self.mu, self.rho, self.kl, g);
        [Some(dmu), Some(drho)]
    }
}

/// [`KlOps::factor_kl_op`]'s: the factor, `ρ`, the rule, `A⁻¹`, the scale and the prior.
#[derive(Debug, Clone)]
struct FactorKlAdjoint<B: Backend> {
    factor: FloatTensor<B>,
    rho: FloatTensor<B>,
    rule: SigmaRule,
    inv: Vec<f32>,
    scale: f64,
    prior: PriorTensors<B>,
}

impl<B: KlKernels> Adjoint<B, 2> for FactorKlAdjoint<B> {
    fn grads(self, g: FloatTensor<B>, _: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let Self {
            factor,
            rho,
            rule,
            inv,
            scale,
            prior,
        } = self;
        let (df, drho) = B::fused_factor_kl_backward(factor, rho, rule, inv, scale, prior, g);
        [Some(df), Some(drho)]
    }
}

/// `KL(q ‖ p)` less its constant, `[1]`, of a mean-field or radial `q` against a Gaussian prior:
/// `Σ ½(σ̃²·inv_var_sigma + (μ − μ₀)²·inv_var_mu) − ln σ̃` under scalar terms, and under a prior
/// with a mean and a standard deviation per weight (a posterior taken as the next task's prior,
/// [`crate::dist::WeightPrior::from_posterior`], or a MOPED-style prior) with
/// [`KlTerms::per_weight`]`(c)` for a marginal variance `σ²·c`,
/// `Σ ½(σ²·c + (μ − μ₀)²)/σ₀² − ln σ + ln σ₀` (`σ` clamped inside it when the terms are,
/// [`KlTerms::with_log_var_range`]); then `KL = value + n·½ ln 2π − (H[q] − Σ ln σ)`.
/// Differentiable in `μ` and `ρ` (one pass forward, one backward; the prior is a constant). A
/// pass that folds the KL's gradient into the draws' takes the same prior in [`sample`] or
/// [`moments`].
pub(crate) fn kl<const D: usize>(q: LocScale<D>, prior: FusedPrior) -> Tensor<1> {
    let prior = prior.dispatch(q.numel());
    Tensor::from_dispatch(<Dispatch as KlOps>::kl_op(q.dispatch(), prior))
}

/// `coef·Σ (w − center)²`, `[1]`, differentiable in `w` (one pass forward, one backward): a
/// Gaussian prior's quadratic term `Σ (w − μ₀)²/(2σ₀²)` at a point (MAP's penalty, Gal's dropout
/// KL).
pub(crate) fn quadratic<const D: usize>(w: Tensor<D>, center: f32, coef: f32) -> Tensor<1> {
    Tensor::from_dispatch(<Dispatch as KlOps>::quadratic_op(
        w.into_dispatch(),
        center,
        coef,
    ))
}

/// `KL(q ‖ p)` (one element) of a mean-field or radial `q` with scales `σ(ρ)` (`σ` by `rule`)
/// from the scale mixture `p(w) = π N(0, σ₁²) + (1 − π) N(0, σ₂²)` of Blundell et al. (2015,
/// eq. 7), whose cross-entropy has no closed form: `−H[q] = −Σ ln σ − entropy_constant` exactly
/// plus `E_q[−ln p(w)]` averaged over the reparameterised draws `w_s = μ + σ·c_s·ε_s`, one per
/// entry `c_s` of `scales` (1 for mean-field, `r_s/‖ε_s‖` for radial), `ε_s` sub-stream `s` of
/// `key` (regenerated in the backward pass). Differentiable in `μ` and `ρ`: one pass forward and
/// one backward on the CPU backends ([`mixture`]), burn ops with the same draws elsewhere. An
/// unbiased estimate with the distribution of the composition's (`WeightPrior::cross_entropy`
/// minus the entropy).
pub(crate) fn mixture_kl<const D: usize>(
    mu: Tensor<D>,
    rho: Tensor<D>,
    rule: SigmaRule,
    prior: MixtureTerms,
    key: u64,
    scales: Vec<f32>,
    entropy_constant: f64,
) -> Tensor<1> {
    assert!(!scales.is_empty(), "mixture_kl: at least one draw");
    let kl = MixtureKl {
        key,
        rule,
        prior,
        scales,
    };
    let value: Tensor<1> = Tensor::from_dispatch(<Dispatch as KlOps>::mixture_kl_op(
        mu.into_dispatch(),
        rho.into_dispatch(),
        kl,
    ));
    value - entropy_constant
}

/// The share of a low-rank Gaussian's KL from a diagonal Gaussian prior that its factor adds
/// to the diagonal Gaussian's (Brack 2022 §3; one element): with the factor `c·F` (`F [n, k]`
/// the stored factor, `c = scale`), the diagonal's variances `v = σ(ρ)²` (`ρ` of `n` elements,
/// `σ` by `rule`), `λ = inv_prior_var` and the prior's variances `σ₀ᵢ²`,
///
/// `KL_F = ½c² λ Σ_i ‖F_i‖²/σ₀ᵢ² − ½ ln det A`,  `A = I + c² Fᵀ diag(1/v) F`,
///
/// from `tr(Σ₀⁻¹Σ) = Σ_i (v_i + c²‖F_i‖²)/σ₀ᵢ²` and the determinant lemma `ln det Σ = Σ ln v +
/// ln det A`, `λ` the prior terms' `inv_var_mu`. A prior `N(μ₀, σ₀² I)` has `λ = 1/σ₀²` and
/// `σ₀ᵢ = 1`; a prior with a mean and a standard deviation per weight (a posterior as the next
/// prior) has `λ = 1` and its `σ₀ᵢ` (the mean does not enter the factor's share; [`sample`] and
/// [`moments`] take it in the diagonal's terms).
/// Differentiable in `F` and `ρ`: with `B = A⁻¹`, `∂F_i = c² (λ F_i/σ₀ᵢ² − F_i B / v_i)` and
/// `∂v_i = ½c² (F_i B F_iᵀ) / v_i²`. On the CPU backends `v`, the Gram part of `A` and the
/// weighted `‖F‖²` come from one pass over the rows (`f32` lanes over blocks of rows, the
/// blocks added in `f64`), the `k × k` Cholesky and inverse in `f64` on the host, and the
/// backward is one pass; elsewhere burn ops, with `A` read back for the same host Cholesky.
/// One graph node in place of the `O(k)` small ops of a Cholesky composed of burn ops.
pub(crate) fn factor_kl<const D: usize>(
    factor: Tensor<2>,
    rho: Tensor<D>,
    rule: SigmaRule,
    scale: f64,
    prior: FusedPrior,
) -> Tensor<1> {
    let prior = prior.dispatch(rho.shape().num_elements());
    Tensor::from_dispatch(<Dispatch as KlOps>::factor_kl_op(
        factor.into_dispatch(),
        rho.into_dispatch(),
        rule,
        scale,
        prior,
    ))
}
