//! The backend extension: [`FusedKernels`], the forward and backward kernels of the fused ops
//! on a backend's own tensors (no autodiff). The default bodies compose burn primitives: they
//! define what every op computes, and wgpu runs them; Flex and NdArray replace them with the
//! one-pass slice kernels of [`super::cpu`]. The noise is the counter-based stream of
//! [`super::rng`], generated on the host for the default bodies, so every backend draws the same
//! numbers. More: the book's *Fused kernels* page.

// burn marks its NdArray backend deprecated; the project still offers it as a feature.
#![allow(deprecated)]

use super::DropoutNoise;
use super::clark;
use super::conv::ConvGeometry;
use super::elementwise::{self, AdamStep, KlTerms, SigmaRule, Tape, VAR_FLOOR};
use super::factor;
use super::mixture::{MixtureKl, MixtureTerms};
use super::rectifier::{RectifierOutput, RectifierRule};
use burn::backend::tensor::FloatTensor;
use burn::backend::{
    Backend, BoolDType, ExtensionType, FloatDType, Scalar, TensorMetadata, backend_extension,
    try_read_sync,
};
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Shape, Slice, TensorData};

/// A tensor of `shape` from host values of the CPU kernels' counter-based streams.
fn uploaded<B: Backend>(values: Vec<f32>, shape: Shape, device: &B::Device) -> FloatTensor<B> {
    B::float_from_data(TensorData::new(values, shape), device)
}

/// The elements of `t` on the host, in row-major order.
fn host<B: Backend>(t: FloatTensor<B>) -> Vec<f32> {
    try_read_sync(B::float_into_data(t))
        .expect("a synchronous read of the backend's tensor")
        .expect("the backend's tensor data")
        .into_vec::<f32>()
        .expect("f32 tensor data")
}

/// `c·ε_s`, `ε_s` the normals of sub-stream `s` of `key` shaped like `like` (no product when
/// `c = 1`: mean-field draws).
fn scaled_normal<B: FusedKernels>(
    like: &FloatTensor<B>,
    key: u64,
    s: usize,
    c: f32,
) -> FloatTensor<B> {
    let eps = B::fused_normal(like.clone(), key, s as u32);
    if c == 1.0 {
        eps
    } else {
        B::float_mul_scalar(eps, Scalar::from(c))
    }
}

/// A one-element tensor holding `x`.
fn scalar<B: Backend>(x: f64, device: &B::Device) -> FloatTensor<B> {
    B::float_from_data(TensorData::from([x as f32]), device)
}

/// Forward and backward kernels of the fused ops. All tensors are `f32`.
#[backend_extension(Flex: cfg(feature = "flex"), NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"))]
pub trait FusedKernels: Backend {
    /// Standard normals shaped like `like`, sub-stream `stream` of `key`.
    fn fused_normal(like: FloatTensor<Self>, key: u64, stream: u32) -> FloatTensor<Self> {
        let shape = like.shape();
        let mut eps = vec![0f32; shape.num_elements()];
        elementwise::normals(key, stream, &mut eps);
        uploaded::<Self>(eps, shape, &like.device())
    }

    /// `[Σ_i ε_{s,i}²]` for the sub-streams `s = 0..draws` of `key` over as many elements as
    /// `like` has (radial's norms), `[draws]`.
    fn fused_squared_norms(like: FloatTensor<Self>, key: u64, draws: usize) -> FloatTensor<Self> {
        let n = like.shape().num_elements();
        let row = Self::float_reshape(like, Shape::from([1, n]));
        let norms = (0..draws)
            .map(|s| {
                let eps = Self::fused_normal(row.clone(), key, s as u32);
                Self::float_sum_dim(Self::float_mul(eps.clone(), eps), 1)
            })
            .collect();
        Self::float_reshape(Self::float_cat(norms, 0), Shape::from([draws]))
    }

    /// `(w, kl, tape)`: draws `w [S, n]` with `w_s = [μ] + σ(ρ)·scales[s]·ε_s` ([`DrawSpec`];
    /// `σ` by `q`'s rule; `ε_s` is sub-stream `s`), `Σ` of `prior`'s KL terms (`[1]`; 0 for
    /// [`PriorTensors::Off`]), and what the backward pass needs, `[Tape::rows, n]` (`None` for
    /// [`Tape::Off`]; [`Tape::DrawsAndKl`] needs a prior): the draws' rows
    /// `scales[s]·ε_s·dσ/dρ`, then the KL's `(σ·inv_var_sigma − 1/σ)·dσ/dρ` (0 where a clamp of
    /// the KL holds).
    #[allow(clippy::type_complexity)]
    fn fused_sample(
        #[extension_type] q: LocScaleTensors<Self>,
        draws: DrawSpec,
        #[extension_type] prior: PriorTensors<Self>,
        keep: Tape,
    ) -> (
        FloatTensor<Self>,
        FloatTensor<Self>,
        Option<FloatTensor<Self>>,
    ) {
        let LocScaleTensors { mu, rho, rule } = q;
        assert!(
            keep != Tape::DrawsAndKl || prior.terms().is_some(),
            "the KL's tape row needs the KL's terms"
        );
        let n = mu.shape().num_elements();
        let flat = |t: FloatTensor<Self>| Self::float_reshape(t, Shape::from([1, n]));
        let (m, r) = (flat(mu.clone()), flat(rho.clone()));
        let kl = prior.parts(&Shape::from([1, n]));
        let (sigma, _, dsigma) = sigma_of::<Self>(r, rule);
        let mut rows = Vec::new();
        let w = draws
            .scales
            .iter()
            .enumerate()
            .map(|(s, &scale)| {
                let eps = scaled_normal::<Self>(&m, draws.key, s, scale);
                if keep != Tape::Off {
                    rows.push(Self::float_mul(eps.clone(), dsigma.clone()));
                }
                let spread = Self::float_mul(sigma.clone(), eps);
                if draws.center {
                    spread
                } else {
                    Self::float_add(m.clone(), spread)
                }
            })
            .collect();
        let value = match kl {
            Some((terms, prior)) => {
                if keep == Tape::DrawsAndKl {
                    let slope = kl_sigma_gradient::<Self>(sigma, terms, &prior);
                    rows.push(Self::float_mul(slope, dsigma));
                }
                kl_sum::<Self>(m, flat(rho), rule, terms, prior)
            }
            None => scalar::<Self>(0.0, &mu.device()),
        };
        let tape = (keep != Tape::Off).then(|| Self::float_cat(rows, 0));
        (Self::float_cat(w, 0), value, tape)
    }

    /// `(dμ, dρ)` of [`FusedKernels::fused_sample`] given `dw [S, n]` and its tape, plus
    /// `weight × ∇KL` of `prior` when `fold` is `Some(weight)` (the tape then
    /// [`Tape::DrawsAndKl`]): `dμ = Σ_s dw_s + w(μ − μ₀)/σ₀²` (without the sum when `center`),
    /// `dρ = Σ_s dw_s·t_s + w·t_KL`.
    fn fused_sample_backward(
        dw: FloatTensor<Self>,
        tape: FloatTensor<Self>,
        mu: FloatTensor<Self>,
        center: bool,
        fold: Option<f32>,
        #[extension_type] prior: PriorTensors<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let shape = mu.shape();
        let fold = fold.map(|w| (prior.parts(&shape).expect("a folded KL has a prior"), w));
        let n = shape.num_elements();
        let draws = dw.shape().num_elements() / n;
        let rows = |a: usize, b: usize| {
            Self::float_slice(tape.clone(), &[Slice::from(a..b), Slice::from(0..n)])
        };
        let sum_rows =
            |t: FloatTensor<Self>| Self::float_reshape(Self::float_sum_dim(t, 0), shape.clone());
        let mut drho = sum_rows(Self::float_mul(dw.clone(), rows(0, draws)));
        let mut dmu = if center {
            Self::float_zeros(shape.clone(), &mu.device(), FloatDType::F32)
        } else {
            sum_rows(dw)
        };
        if let Some(((terms, prior), weight)) = fold {
            let t_kl = Self::float_reshape(rows(draws, draws + 1), shape.clone());
            drho = Self::float_add(drho, Self::float_mul_scalar(t_kl, Scalar::from(weight)));
            dmu = Self::float_add(dmu, kl_mu_gradient::<Self>(mu, terms, weight, &prior));
        }
        (dmu, drho)
    }

    /// `(out, kl)` of [`elementwise::sample_ratio`]: `out` (`[S·n + S]`) holds the `draws`
    /// mean-field draws `w_s = μ + σ(ρ)·ε_s` row by row, then their log-ratios to the prior
    /// `r_s = Σ_i [½((w_si − μ₀)²/σ₀² − ε_si²) − ln σ_i + ln σ₀]` (`μ₀, σ₀` per weight under
    /// [`PriorTensors::PerWeight`]); `kl` (`[1]`) is the sum of the KL terms (0 unless `kl`).
    fn fused_sample_ratio(
        #[extension_type] q: LocScaleTensors<Self>,
        key: u64,
        draws: usize,
        #[extension_type] prior: PriorTensors<Self>,
        kl: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let LocScaleTensors { mu, rho, rule } = q;
        let n = mu.shape().num_elements();
        let flat = |t: FloatTensor<Self>| Self::float_reshape(t, Shape::from([1, n]));
        let m = flat(mu.clone());
        let (prior, per_weight) = prior
            .parts(&Shape::from([1, n]))
            .expect("the log-ratio needs a prior");
        let (sigma, ln_sigma, _) = sigma_of::<Self>(flat(rho), rule);
        let ln_sigma0 = -0.5 * (prior.inv_var_mu as f64).ln();
        let mut rows = Vec::with_capacity(draws);
        let mut ratios = Vec::with_capacity(draws);
        for s in 0..draws {
            let eps = Self::fused_normal(m.clone(), key, s as u32);
            let w = Self::float_add(m.clone(), Self::float_mul(sigma.clone(), eps.clone()));
            let c = centred::<Self>(w.clone(), prior, &per_weight);
            let quad = Self::float_mul_scalar(
                Self::float_mul(c.clone(), c),
                Scalar::from(prior.inv_var_mu),
            );
            let quad = Self::float_sub(
                per_precision::<Self>(quad, &per_weight),
                Self::float_mul(eps.clone(), eps),
            );
            let mut t = Self::float_sub(
                Self::float_mul_scalar(quad, Scalar::from(0.5)),
                ln_sigma.clone(),
            );
            if let Some((_, std)) = &per_weight {
                t = Self::float_add(t, Self::float_log(std.clone()));
            }
            let r = Self::float_add_scalar(Self::float_sum(t), Scalar::from(n as f64 * ln_sigma0));
            rows.push(Self::float_reshape(w, Shape::from([n])));
            ratios.push(Self::float_reshape(r, Shape::from([1])));
        }
        rows.extend(ratios);
        let kl = if kl {
            kl_terms_sum::<Self>(m, sigma, ln_sigma, prior, per_weight)
        } else {
            scalar::<Self>(0.0, &mu.device())
        };
        (Self::float_cat(rows, 0), kl)
    }

    /// `(dμ, dρ)` of [`FusedKernels::fused_sample_ratio`] given `dout` (`[S·n + S]`), as
    /// [`elementwise::sample_ratio_backward`].
    fn fused_sample_ratio_backward(
        dout: FloatTensor<Self>,
        #[extension_type] q: LocScaleTensors<Self>,
        key: u64,
        draws: usize,
        #[extension_type] prior: PriorTensors<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let LocScaleTensors { mu, rho, rule } = q;
        let shape = mu.shape();
        let n = shape.num_elements();
        let flat = |t: FloatTensor<Self>| Self::float_reshape(t, Shape::from([1, n]));
        let m = flat(mu);
        let (prior, per_weight) = prior
            .parts(&Shape::from([1, n]))
            .expect("the log-ratio needs a prior");
        let (sigma, _, dsigma) = sigma_of::<Self>(flat(rho), rule);
        let dr = Self::float_slice(dout.clone(), &[Slice::from(draws * n..draws * (n + 1))]);
        let dr_total = Self::float_reshape(Self::float_sum(dr.clone()), Shape::from([1, 1]));
        let mut g_mu = None;
        let mut g_sigma = None;
        for s in 0..draws {
            let dw = Self::float_reshape(
                Self::float_slice(dout.clone(), &[Slice::from(s * n..(s + 1) * n)]),
                Shape::from([1, n]),
            );
            let g = Self::float_reshape(
                Self::float_slice(dr.clone(), &[Slice::from(s..s + 1)]),
                Shape::from([1, 1]),
            );
            let eps = Self::fused_normal(m.clone(), key, s as u32);
            let w = Self::float_add(m.clone(), Self::float_mul(sigma.clone(), eps.clone()));
            let c = Self::float_mul_scalar(
                centred::<Self>(w, prior, &per_weight),
                Scalar::from(prior.inv_var_mu),
            );
            let c = per_precision::<Self>(c, &per_weight);
            let total = Self::float_add(
                dw,
                Self::float_mul(c, Self::float_expand(g, Shape::from([1, n]))),
            );
            let spread = Self::float_mul(total.clone(), eps);
            g_mu = Some(g_mu.map_or(total.clone(), |a| Self::float_add(a, total)));
            g_sigma = Some(g_sigma.map_or(spread.clone(), |a| Self::float_add(a, spread)));
        }
        let g_mu = g_mu.expect("at least one draw");
        let g_sigma = Self::float_sub(
            g_sigma.expect("at least one draw"),
            Self::float_div(Self::float_expand(dr_total, Shape::from([1, n])), sigma),
        );
        (
            Self::float_reshape(g_mu, shape.clone()),
            Self::float_reshape(Self::float_mul(g_sigma, dsigma), shape),
        )
    }

    /// `(var, kl)`: `var = σ(ρ)²·var_scale` (`σ` by `q`'s rule) and `Σ` of `prior`'s KL terms
    /// (`[1]`; 0 for [`PriorTensors::Off`]).
    fn fused_moments(
        #[extension_type] q: LocScaleTensors<Self>,
        var_scale: f32,
        #[extension_type] prior: PriorTensors<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let LocScaleTensors { mu, rho, rule } = q;
        let (sigma, _, _) = sigma_of::<Self>(rho.clone(), rule);
        let var = Self::float_mul_scalar(
            Self::float_mul(sigma.clone(), sigma),
            Scalar::from(var_scale),
        );
        let kl = match prior.parts(&mu.shape()) {
            Some((terms, prior)) => kl_sum::<Self>(mu, rho, rule, terms, prior),
            None => scalar::<Self>(0.0, &mu.device()),
        };
        (var, kl)
    }

    /// `(dμ, dρ)` of [`FusedKernels::fused_moments`] given `dvar`, plus `weight × ∇KL` of
    /// `prior` when `fold` is `Some(weight)`; `dμ` only with `fold` (the variance does not
    /// depend on `μ`).
    fn fused_moments_backward(
        dvar: FloatTensor<Self>,
        #[extension_type] q: LocScaleTensors<Self>,
        var_scale: f32,
        fold: Option<f32>,
        #[extension_type] prior: PriorTensors<Self>,
    ) -> (Option<FloatTensor<Self>>, FloatTensor<Self>) {
        let LocScaleTensors { mu, rho, rule } = q;
        let (sigma, _, _) = sigma_of::<Self>(rho.clone(), rule);
        let dsigma =
            Self::float_mul_scalar(Self::float_mul(dvar, sigma), Scalar::from(2.0 * var_scale));
        let dmu = Self::float_zeros(mu.shape(), &mu.device(), FloatDType::F32);
        let has_fold = fold.is_some();
        let fold = fold.map(|w| {
            (
                prior.parts(&mu.shape()).expect("a folded KL has a prior"),
                w,
            )
        });
        let (dmu, drho) = finish_backward::<Self>(dmu, dsigma, mu, rho, rule, fold);
        (has_fold.then_some(dmu), drho)
    }

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

    /// `g·∇` [`FusedKernels::fused_kl`] for a one-element `g` ([`elementwise::kl_backward`]).
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

    /// `mean + √(var + floor)·ε` (`ε`: sub-stream 0 of `key`, shaped like `mean`).
    fn fused_noise(mean: FloatTensor<Self>, var: FloatTensor<Self>, key: u64) -> FloatTensor<Self> {
        let eps = Self::fused_normal(mean.clone(), key, 0);
        let sd = Self::float_sqrt(Self::float_add_scalar(var, Scalar::from(VAR_FLOOR)));
        Self::float_add(mean, Self::float_mul(sd, eps))
    }

    /// `dvar = dy·ε/(2√(var + floor))` of [`FusedKernels::fused_noise`] (`dmean = dy`).
    fn fused_noise_backward(
        dy: FloatTensor<Self>,
        var: FloatTensor<Self>,
        key: u64,
    ) -> FloatTensor<Self> {
        let eps = Self::fused_normal(dy.clone(), key, 0);
        let sd = Self::float_sqrt(Self::float_add_scalar(var, Scalar::from(VAR_FLOOR)));
        Self::float_div(
            Self::float_mul_scalar(Self::float_mul(dy, eps), Scalar::from(0.5)),
            sd,
        )
    }

    /// `x ⊙ s`, `s` random ±1 per group of `inner` consecutive elements (its own adjoint).
    fn fused_flip(x: FloatTensor<Self>, key: u64, inner: usize) -> FloatTensor<Self> {
        let shape = x.shape();
        let n = shape.num_elements();
        let mut signs = vec![0f32; n];
        elementwise::flip(key, &vec![1.0; n], inner, &mut signs);
        let signs = uploaded::<Self>(signs, shape, &x.device());
        Self::float_mul(x, signs)
    }

    /// `x ⊙ z`, unit-mean noise `z` of variance `p/(1−p)` per element, Bernoulli
    /// (`z ∈ {0, 1/(1−p)}`) or Gaussian (its own adjoint; [`elementwise::dropout`]).
    fn fused_dropout(
        x: FloatTensor<Self>,
        key: u64,
        p: f64,
        noise: DropoutNoise,
    ) -> FloatTensor<Self> {
        let shape = x.shape();
        let n = shape.num_elements();
        let mut mask = vec![0f32; n];
        elementwise::dropout(key, &vec![1.0; n], p, noise, &mut mask);
        let mask = uploaded::<Self>(mask, shape, &x.device());
        Self::float_mul(x, mask)
    }

    /// `(E h, Var h)` of `h = relu(f)`, `f ~ N(mean, var)` elementwise, by `rule`
    /// ([`super::rectifier`]'s formulas).
    fn fused_rectifier(
        mean: FloatTensor<Self>,
        var: FloatTensor<Self>,
        rule: RectifierRule,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        match rule {
            RectifierRule::Gaussian => {
                let z = Standardised::<Self>::new(mean.clone(), var);
                let m = z.mean(mean);
                let (a, c, q, p) = (z.a.clone(), z.cdf.clone(), z.cdf_neg.clone(), z.pdf.clone());
                // g = Φ + a²ΦΦ̄ + aφ(1 − 2Φ) − φ².
                let g = Self::float_add(
                    Self::float_add(
                        c.clone(),
                        Self::float_mul(
                            Self::float_mul(Self::float_mul(a.clone(), a.clone()), c.clone()),
                            q,
                        ),
                    ),
                    Self::float_sub(
                        Self::float_mul(
                            Self::float_mul(a, p.clone()),
                            Self::float_add_scalar(
                                Self::float_mul_scalar(c, Scalar::from(-2.0)),
                                Scalar::from(1.0),
                            ),
                        ),
                        Self::float_mul(p.clone(), p),
                    ),
                );
                let s2 = Self::float_mul(z.s.clone(), z.s);
                (
                    m,
                    Self::float_mul(s2, Self::float_clamp_min(g, Scalar::from(0.0))),
                )
            }
            RectifierRule::Gate(gate) => {
                let p = gate_probability::<Self>(mean.clone(), gate);
                let pq = Self::float_mul(p.clone(), one_minus::<Self>(p.clone()));
                let m2 = Self::float_mul(mean.clone(), mean.clone());
                let v = Self::float_add(Self::float_mul(p.clone(), var), Self::float_mul(pq, m2));
                (Self::float_mul(p, mean), v)
            }
        }
    }

    /// `(dmean, dvar) = grad·∂output/∂(mean, var)` of [`FusedKernels::fused_rectifier`].
    fn fused_rectifier_backward(
        mean: FloatTensor<Self>,
        var: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        rule: RectifierRule,
        output: RectifierOutput,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let mul = Self::float_mul;
        match rule {
            RectifierRule::Gaussian => {
                let device = var.device();
                let negative = Self::float_lower_elem(
                    var.clone(),
                    Scalar::from(0.0),
                    bool_dtype::<Self>(&device),
                );
                let z = Standardised::<Self>::new(mean.clone(), var);
                let (dmu, ds) = match output {
                    RectifierOutput::Mean => {
                        (mul(grad.clone(), z.cdf.clone()), mul(grad, z.pdf.clone()))
                    }
                    RectifierOutput::Var => {
                        // ∂V/∂μ = 2mΦ̄, ∂V/∂s = 2(sΦ − mφ).
                        let m = z.mean(mean);
                        let g2 = Self::float_mul_scalar(grad, Scalar::from(2.0));
                        let ds = Self::float_sub(
                            mul(z.s.clone(), z.cdf.clone()),
                            mul(m.clone(), z.pdf.clone()),
                        );
                        (mul(g2.clone(), mul(m, z.cdf_neg.clone())), mul(g2, ds))
                    }
                };
                let dv = Self::float_div(Self::float_mul_scalar(ds, Scalar::from(0.5)), z.s);
                (dmu, Self::float_mask_fill(dv, negative, Scalar::from(0.0)))
            }
            RectifierRule::Gate(gate) => {
                let p = gate_probability::<Self>(mean.clone(), gate);
                let pq = mul(p.clone(), one_minus::<Self>(p.clone()));
                let dp = Self::float_mul_scalar(pq.clone(), Scalar::from(gate));
                match output {
                    RectifierOutput::Mean => {
                        let d = Self::float_add(p, mul(mean, dp));
                        let zeros = Self::float_zeros(d.shape(), &d.device(), FloatDType::F32);
                        (mul(grad, d), zeros)
                    }
                    RectifierOutput::Var => {
                        // ∂V/∂μ = v·p' + p'(1 − 2p)μ² + 2p(1 − p)μ, ∂V/∂v = p.
                        let m2 = mul(mean.clone(), mean.clone());
                        let one_minus_2p = Self::float_add_scalar(
                            Self::float_mul_scalar(p.clone(), Scalar::from(-2.0)),
                            Scalar::from(1.0),
                        );
                        let d = Self::float_add(
                            Self::float_add(mul(var, dp.clone()), mul(mul(dp, one_minus_2p), m2)),
                            Self::float_mul_scalar(mul(pq, mean), Scalar::from(2.0)),
                        );
                        (mul(grad.clone(), d), mul(grad, p))
                    }
                }
            }
        }
    }

    /// `[2, rows, H', W']`: the mean (first) and variance (second) of each window's maximum by
    /// Clark's recursion over its entries sorted by mean ([`super::clark`]), read from
    /// `[rows, H, W]` maps of independent Gaussians in place (`kernel × kernel` windows every
    /// `stride` cells). One tensor, so that one backward pass serves both.
    ///
    /// The default body runs the CPU kernel on the host: burn 0.22's Cube backend sorts on the
    /// host too (its `argsort` reads the tensor back), so the composition it replaces already
    /// synchronised there, and the kernel saves the forty-odd dispatches per entry that the
    /// composition's fold takes forward and backward.
    fn fused_max_pool(
        means: FloatTensor<Self>,
        vars: FloatTensor<Self>,
        kernel: usize,
        stride: usize,
    ) -> FloatTensor<Self> {
        let device = means.device();
        let maps = clark::PoolMaps::of(&means.shape(), kernel, stride);
        let (means, vars) = (host::<Self>(means), host::<Self>(vars));
        let mut out = vec![0f32; 2 * maps.windows()];
        let (m, v) = out.split_at_mut(maps.windows());
        clark::max_pool(maps, &means, &vars, m, v);
        let [rows, ho, wo] = maps.out_dims();
        uploaded::<Self>(out, Shape::from([2, rows, ho, wo]), &device)
    }

    /// `(dmeans, dvars)` `[rows, H, W]`: the gradients of `Σ grad ⊙ output` over
    /// [`FusedKernels::fused_max_pool`]'s `[2, rows, H', W']` output.
    fn fused_max_pool_backward(
        means: FloatTensor<Self>,
        vars: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        kernel: usize,
        stride: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let device = means.device();
        let shape = means.shape();
        let maps = clark::PoolMaps::of(&shape, kernel, stride);
        let (means, vars, grad) = (host::<Self>(means), host::<Self>(vars), host::<Self>(grad));
        let (grad_mean, grad_var) = grad.split_at(maps.windows());
        let (mut dm, mut dv) = (vec![0f32; means.len()], vec![0f32; means.len()]);
        clark::max_pool_backward(maps, &means, &vars, grad_mean, grad_var, &mut dm, &mut dv);
        (
            uploaded::<Self>(dm, shape.clone(), &device),
            uploaded::<Self>(dv, shape, &device),
        )
    }

    /// `y [N, O, H', W']`: `x [N, C, H, W]` convolved with `w [O, C, kh, kw]` (no bias, one
    /// group; [`super::conv`]); or, with one kernel per sample, `w [S, O, C, kh, kw]`, the
    /// sample-major images `x [S·B, C, H, W]` of sample `s` convolved with `w_s`. The default
    /// body is the backend's own convolution (grouped by sample for per-sample kernels).
    fn fused_conv(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        g: ConvGeometry,
    ) -> FloatTensor<Self> {
        match samples_of::<Self>(&w) {
            None => Self::conv2d(x, w, None, conv_options(&g)),
            Some(s) => {
                let y = Self::conv2d(by_group::<Self>(x, s), by_group_kernel::<Self>(w), None, {
                    let mut o = conv_options(&g);
                    o.groups = s;
                    o
                });
                by_sample::<Self>(y, s)
            }
        }
    }

    /// `(dx, dw)`, the gradients of `Σ dy ⊙ y` over [`FusedKernels::fused_conv`]'s output,
    /// each computed only when `wanted` (`[x, w]`). The default body is the backend's own
    /// convolution backward.
    fn fused_conv_backward(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        dy: FloatTensor<Self>,
        g: ConvGeometry,
        wanted: [bool; 2],
    ) -> (Option<FloatTensor<Self>>, Option<FloatTensor<Self>>) {
        let mut options = conv_options(&g);
        let Some(s) = samples_of::<Self>(&w) else {
            let dx = wanted[0].then(|| {
                Self::conv2d_x_backward(x.clone(), w.clone(), dy.clone(), options.clone())
            });
            let dw = wanted[1].then(|| Self::conv2d_weight_backward(x, w, dy, options));
            return (dx, dw);
        };
        options.groups = s;
        let w_shape = w.shape();
        let (x, w, dy) = (
            by_group::<Self>(x, s),
            by_group_kernel::<Self>(w),
            by_group::<Self>(dy, s),
        );
        let dx = wanted[0].then(|| {
            let dx = Self::conv2d_x_backward(x.clone(), w.clone(), dy.clone(), options.clone());
            by_sample::<Self>(dx, s)
        });
        let dw = wanted[1]
            .then(|| Self::float_reshape(Self::conv2d_weight_backward(x, w, dy, options), w_shape));
        (dx, dw)
    }

    /// `y = x · w`, `x [rows, k]`, `w [k, n]`; or matrix by matrix over a batch, `x [S, rows, k]`,
    /// `w [S, k, n]` into `[S, rows, n]`. The default body is the backend's `matmul`.
    fn fused_matmul(x: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::float_matmul(x, w)
    }

    /// `(dx, dw) = (dy · wᵀ, xᵀ · dy)`, the gradients of `Σ dy ⊙ y` over
    /// [`FusedKernels::fused_matmul`]'s output, each computed only when `wanted` (`[x, w]`).
    fn fused_matmul_backward(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        dy: FloatTensor<Self>,
        wanted: [bool; 2],
    ) -> (Option<FloatTensor<Self>>, Option<FloatTensor<Self>>) {
        let dx = wanted[0].then(|| Self::float_matmul(dy.clone(), Self::float_transpose(w)));
        let dw = wanted[1].then(|| Self::float_matmul(Self::float_transpose(x), dy));
        (dx, dw)
    }

    /// `[S, n]` draws of a low-rank Gaussian: `out_s = base_s + F z_s` for the diagonal's draws
    /// `base [S, n]`, the factor `F [n, k]` and the host values `z [S, k]` (row-major).
    fn fused_add_factor_draws(
        base: FloatTensor<Self>,
        factor: FloatTensor<Self>,
        z: Vec<f32>,
    ) -> FloatTensor<Self> {
        let k = factor.shape()[1];
        let draws = z.len() / k;
        let z = uploaded::<Self>(z, Shape::from([draws, k]), &factor.device());
        Self::float_add(base, Self::float_matmul(z, Self::float_transpose(factor)))
    }

    /// `dF = dyᵀ z`, `[n, k]`, of [`FusedKernels::fused_add_factor_draws`] (the base's
    /// gradient is `dy`).
    fn fused_factor_draws_backward(dy: FloatTensor<Self>, z: Vec<f32>) -> FloatTensor<Self> {
        let draws = dy.shape()[0];
        let k = z.len() / draws;
        let z = uploaded::<Self>(z, Shape::from([draws, k]), &dy.device());
        Self::float_matmul(Self::float_transpose(dy), z)
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

    /// `(dμ, dρ)` of [`FusedKernels::fused_mixture_kl`] times its gradient `dvalue` (`[1]`):
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

    /// `(dF, dρ)` of [`FusedKernels::fused_factor_kl`] for its gradient `dvalue` (`[1]`), with
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

    /// One Adam or AdamW step: `(param, moment_1, moment_2)` after it.
    fn fused_adam(
        param: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        moment_1: FloatTensor<Self>,
        moment_2: FloatTensor<Self>,
        step: AdamStep,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let (b1, b2) = (step.beta_1, step.beta_2);
        let m = Self::float_add(
            Self::float_mul_scalar(moment_1, Scalar::from(b1)),
            Self::float_mul_scalar(grad.clone(), Scalar::from(1.0 - b1)),
        );
        let g2 = Self::float_mul(grad.clone(), grad);
        let v = Self::float_add(
            Self::float_mul_scalar(moment_2, Scalar::from(b2)),
            Self::float_mul_scalar(g2, Scalar::from(1.0 - b2)),
        );
        let elementwise::AdamCoefficients {
            step_size,
            denom_scale,
            eps,
            keep,
        } = step.coefficients();
        let denom = Self::float_add_scalar(
            Self::float_sqrt(Self::float_mul_scalar(v.clone(), Scalar::from(denom_scale))),
            Scalar::from(eps),
        );
        let update = Self::float_div(
            Self::float_mul_scalar(m.clone(), Scalar::from(step_size)),
            denom,
        );
        let kept = Self::float_mul_scalar(param, Scalar::from(keep));
        (Self::float_sub(kept, update), m, v)
    }
}

// The Cube (wgpu) backend runs the default bodies. `burn::backend::Cube` names
// `Fusion<CubeBackend>` when burn's `fusion` feature is on (the `wgpu` feature turns it on, and a
// user's own burn dependency may too): the composed ops are then fused lazily by burn.
#[cfg(feature = "wgpu")]
impl FusedKernels for burn::backend::Cube {}

/// burn's options for a convolution of geometry `g`.
pub(crate) fn conv_options(g: &ConvGeometry) -> ConvOptions<2> {
    ConvOptions::new(g.stride, g.padding, g.dilation, 1)
}

/// `S` when `w` holds one kernel per sample, `[S, O, C, kh, kw]`.
fn samples_of<B: Backend>(w: &FloatTensor<B>) -> Option<usize> {
    let shape = w.shape();
    (shape.num_dims() == 5).then(|| shape[0])
}

/// Sample-major images `[S·B, C, H, W]` as `[B, S·C, H, W]`, for a convolution grouped by
/// sample.
fn by_group<B: Backend>(x: FloatTensor<B>, s: usize) -> FloatTensor<B> {
    let d = x.shape();
    let (b, c, h, w) = (d[0] / s, d[1], d[2], d[3]);
    let x = B::float_swap_dims(B::float_reshape(x, Shape::from([s, b, c, h, w])), 0, 1);
    B::float_reshape(x, Shape::from([b, s * c, h, w]))
}

/// The inverse of [`by_group`]: `[B, S·C, H, W]` as `[S·B, C, H, W]`.
fn by_sample<B: Backend>(y: FloatTensor<B>, s: usize) -> FloatTensor<B> {
    let d = y.shape();
    let (b, c, h, w) = (d[0], d[1] / s, d[2], d[3]);
    let y = B::float_swap_dims(B::float_reshape(y, Shape::from([b, s, c, h, w])), 0, 1);
    B::float_reshape(y, Shape::from([s * b, c, h, w]))
}

/// Per-sample kernels `[S, O, C, kh, kw]` as the grouped kernel `[S·O, C, kh, kw]`.
fn by_group_kernel<B: Backend>(w: FloatTensor<B>) -> FloatTensor<B> {
    let d = w.shape();
    B::float_reshape(w, Shape::from([d[0] * d[1], d[2], d[3], d[4]]))
}

/// The device's boolean type (as burn's tensor API picks it; wgpu has no native `bool` buffers).
fn bool_dtype<B: Backend>(device: &B::Device) -> BoolDType {
    burn::backend::get_device_settings::<B>(device).bool_dtype
}

/// `1 − x`.
fn one_minus<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_add_scalar(B::float_neg(x), Scalar::from(1.0))
}

/// VBP's gate `σ(C·μ)`, its logit clamped to `±40` as in the CPU kernel.
fn gate_probability<B: Backend>(mean: FloatTensor<B>, gate: f32) -> FloatTensor<B> {
    let x = B::float_clamp(
        B::float_mul_scalar(mean, Scalar::from(gate)),
        Scalar::from(-40.0),
        Scalar::from(40.0),
    );
    B::sigmoid(x)
}

/// The standardised pre-activation of the Gaussian rectifier rule from burn primitives:
/// `s = √(max(v, 0) + 10⁻⁸)`, `a = μ/s` clamped to `±40`, `Φ(a)`, `Φ(−a)` and `φ(a)` from one
/// exponential (the tail `½ erfc(|a|/√2)` by Numerical Recipes' fit, as the CPU kernel).
struct Standardised<B: Backend> {
    s: FloatTensor<B>,
    a: FloatTensor<B>,
    cdf: FloatTensor<B>,
    cdf_neg: FloatTensor<B>,
    pdf: FloatTensor<B>,
}

impl<B: Backend> Standardised<B> {
    fn new(mean: FloatTensor<B>, var: FloatTensor<B>) -> Self {
        let v = B::float_add_scalar(
            B::float_clamp_min(var, Scalar::from(0.0)),
            Scalar::from(1e-8),
        );
        let s = B::float_sqrt(v);
        let a = B::float_clamp(
            B::float_div(mean, s.clone()),
            Scalar::from(-40.0),
            Scalar::from(40.0),
        );
        let abs = B::float_abs(a.clone());
        let half_a2 =
            B::float_mul_scalar(B::float_mul(abs.clone(), abs.clone()), Scalar::from(0.5));
        let t = B::float_recip(B::float_add_scalar(
            B::float_mul_scalar(abs, Scalar::from(std::f64::consts::FRAC_1_SQRT_2 * 0.5)),
            Scalar::from(1.0),
        ));
        let c = super::rectifier::ERFC;
        let mut poly = B::float_mul_scalar(t.clone(), Scalar::from(c[9]));
        for k in (1..9).rev() {
            poly = B::float_mul(B::float_add_scalar(poly, Scalar::from(c[k])), t.clone());
        }
        let poly = B::float_add_scalar(poly, Scalar::from(c[0]));
        let e = B::float_exp(B::float_neg(half_a2));
        let tail = B::float_mul(
            B::float_mul_scalar(B::float_mul(t, B::float_exp(poly)), Scalar::from(0.5)),
            e.clone(),
        );
        let pdf = B::float_mul_scalar(e, Scalar::from(0.398_942_280_401_432_7));
        // Φ(a) is the tail below zero and one minus it above; Φ(−a) the other way round.
        let negative =
            B::float_lower_elem(a.clone(), Scalar::from(0.0), bool_dtype::<B>(&a.device()));
        let body = one_minus::<B>(tail.clone());
        let cdf = B::float_mask_where(body.clone(), negative.clone(), tail.clone());
        let cdf_neg = B::float_mask_where(tail, negative, body);
        Self {
            s,
            a,
            cdf,
            cdf_neg,
            pdf,
        }
    }

    /// `E[relu f] = μΦ(a) + sφ(a)`.
    fn mean(&self, mean: FloatTensor<B>) -> FloatTensor<B> {
        B::float_add(
            B::float_mul(mean, self.cdf.clone()),
            B::float_mul(self.s.clone(), self.pdf.clone()),
        )
    }
}

/// `softplus(x) = max(x, 0) + ln(1 + t)`, `t = e^{−|x|}`, from burn primitives, with
/// `ln(1 + t) = 2 atanh(t/(2 + t))` by its series (`t/(2+t) ≤ 1/3`): only multiplications and
/// additions, so it keeps full relative accuracy where a GPU's `ln` near 1 does not.
pub(crate) fn softplus<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_add(B::relu(x.clone()), log1p_exp_neg_abs::<B>(x))
}

/// `ln(1 + e^{−|x|})`: the softplus of `x` less `max(x, 0)`, by `2 atanh(t/(2 + t))`,
/// `t = e^{−|x|}`.
fn log1p_exp_neg_abs<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
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
    fn parts(self, shape: &Shape) -> Option<(KlTerms, PerWeightPrior<B>)> {
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
fn per_precision<B: Backend>(x: FloatTensor<B>, prior: &PerWeightPrior<B>) -> FloatTensor<B> {
    match prior {
        Some((_, std)) => B::float_div(x, B::float_mul(std.clone(), std.clone())),
        None => x,
    }
}

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
fn centred<B: Backend>(
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
fn kl_terms_sum<B: Backend>(
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
fn kl_mu_gradient<B: Backend>(
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
fn kl_sigma_gradient<B: Backend>(
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
fn kl_backward<B: Backend>(
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
fn finish_backward<B: Backend>(
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
fn mixture_log_density<B: Backend>(
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

/// `(σ, ln σ, dσ/dρ)` of `ρ` under `rule`, from burn primitives.
fn sigma_of<B: Backend>(
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
