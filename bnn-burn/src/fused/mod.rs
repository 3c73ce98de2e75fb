//! Fused kernels: the elementwise work of a stochastic layer's training step in one pass per
//! tensor, with hand-written backward passes, through burn's backend extensions (`FusedKernels`).
//!
//! The noise is counter-based (Philox4x32-10 and Box–Muller, `rng`), so a backward pass
//! regenerates it; `sample` keeps a `Tape` instead. An objective linear in the KL may fold
//! `λ∇KL` into the draws' backward pass ([`crate::layers::Pass::fold_kl`]). Flex and NdArray run the
//! slice kernels of `bnn-kernels`; wgpu runs the default bodies. [`Kernels::Reference`] keeps the
//! composition of burn ops. Every op, its backward pass and why: the book's *Fused kernels* page.

mod adam;
mod autodiff;
mod cpu_backends;
mod ext;

pub(crate) use bnn_kernels::{clark, conv, elementwise, factor, mixture, rectifier, rng};

pub(crate) use adam::{FusedAdam, FusedAdamW};
pub(crate) use autodiff::FusedOps;
pub use conv::ConvGeometry;
pub(crate) use elementwise::{KlTerms, SigmaRule};
pub(crate) use ext::{DrawSpec, FusedKernels, LocScaleTensors, PriorTensors};
pub(crate) use mixture::{MixtureKl, MixtureTerms};
pub(crate) use rectifier::RectifierRule;

use burn::backend::Dispatch;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Device, Distribution, Tensor};

/// Which implementation a training step uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Kernels {
    /// The fused ops and the fused optimiser.
    #[default]
    Fused,
    /// The composition of burn ops and burn's optimisers: the reference the fused path is tested
    /// against.
    Reference,
}

pub use bnn_kernels::DropoutNoise;

/// Stream keys for one pass: a base key drawn from burn's device generator on first use, then a
/// new key per op.
#[derive(Debug, Default, Clone)]
pub(crate) struct KeySource {
    base: Option<u64>,
    next: u64,
}

impl KeySource {
    /// Keys derived from `base` instead of the device's generator.
    pub fn keyed(base: u64) -> Self {
        Self {
            base: Some(rng::mix(base)),
            next: 0,
        }
    }

    /// The next key.
    pub fn next(&mut self, device: &Device) -> u64 {
        let base = *self.base.get_or_insert_with(|| {
            crate::device::uses_generator();
            let bits = Tensor::<1>::random([2], Distribution::Default, device)
                .into_data()
                .try_into_vec_as::<f32>()
                .expect("f32 draws");
            rng::mix(((bits[0].to_bits() as u64) << 32) | bits[1].to_bits() as u64)
        });
        self.next += 1;
        rng::mix(base ^ rng::mix(self.next))
    }
}

/// The inner (non-autodiff) version of `t` for the kernels that take no gradient.
fn inner_dispatch<const D: usize>(t: &Tensor<D>) -> burn::backend::DispatchTensor {
    t.clone().inner().into_dispatch()
}

#[cfg(test)]
/// Standard normals shaped like `like`, sub-stream `stream` of `key`: the `ε` the fused ops use
/// (for reference compositions).
pub(crate) fn normal_like<const D: usize>(like: &Tensor<D>, key: u64, stream: u32) -> Tensor<D> {
    let eps: Tensor<D> = Tensor::from_dispatch(<Dispatch as FusedKernels>::fused_normal(
        inner_dispatch(like),
        key,
        stream,
    ));
    if like.is_autodiff() {
        Tensor::from_inner(eps)
    } else {
        eps
    }
}

/// `‖ε_s‖²` of the sub-streams `s = 0..draws` of `key`, each as long as `like` (radial's norms):
/// one generation pass per draw, one read back for all of them.
pub(crate) fn squared_norms<const D: usize>(like: &Tensor<D>, key: u64, draws: usize) -> Vec<f32> {
    let norms: Tensor<1> = Tensor::from_dispatch(<Dispatch as FusedKernels>::fused_squared_norms(
        inner_dispatch(like),
        key,
        draws,
    ));
    norms
        .into_data()
        .try_into_vec_as::<f32>()
        .expect("f32 norms")
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
    fn dispatch(self) -> LocScaleTensors<Dispatch> {
        LocScaleTensors {
            mu: self.mu.into_dispatch(),
            rho: self.rho.into_dispatch(),
            rule: self.rule,
        }
    }

    fn numel(&self) -> usize {
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
    fn dispatch(self, n: usize) -> PriorTensors<Dispatch> {
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
fn prior_dispatch(prior: Option<FusedPrior>, n: usize) -> PriorTensors<Dispatch> {
    prior.map_or(PriorTensors::Off, |p| p.dispatch(n))
}

/// `(w, kl)`: draws `w [S, n]`, `w_s = [μ] + σ(ρ)·scales[s]·ε_s` ([`DrawSpec`]: `ε_s` sub-stream
/// `s` of its key, `μ` left out when `center`), and the summed KL terms of `kl` (`[1]`, 0
/// without), as a constant. With `fold = Some(λ)`, the backward pass of `w` adds `λ∇KL` to
/// `dμ, dρ`. When `μ` or `ρ` is tracked, the forward pass keeps a tape of `S` rows (`S + 1`
/// with a folded KL) the size of `μ` until the backward pass ([`Tape`]), which then costs a
/// product and a sum per weight and draw. A per-weight prior folds like a scalar one: a trained
/// posterior as the next prior costs no pass of its own.
pub(crate) fn sample<const D: usize>(
    q: LocScale<D>,
    draws: DrawSpec,
    kl: Option<FusedPrior>,
    fold: Option<f32>,
) -> (Tensor<2>, Tensor<1>) {
    let prior = prior_dispatch(kl, q.numel());
    let (w, value) = <Dispatch as FusedOps>::sample_op(q.dispatch(), draws, prior, fold);
    (Tensor::from_dispatch(w), Tensor::from_dispatch(value))
}

/// `(w, r, kl)`: mean-field draws `w [S, n]`, `w_s = μ + σ(ρ)·ε_s` (`ε_s` sub-stream `s` of
/// `key`, `s < draws`), their log-ratios to the Gaussian prior `N(μ₀, σ₀²)` of `prior`,
/// `r_s = ln q(w_s) − ln p(w_s) = Σ_i [½((w_si − μ₀)²/σ₀² − ε_si²) − ln σ_i + ln σ₀]` (`[S]`,
/// black-box α's per-draw ratio, Depeweg 2019 eq. 3.15), both differentiable through one graph
/// node, and the summed KL terms `Σ ½(σ²/σ₀² + (μ − μ₀)²/σ₀²) − ln σ` as a constant (0 unless
/// `kl`). A per-weight prior takes [`KlTerms::per_weight`]`(1)`'s terms.
pub(crate) fn sample_log_ratio<const D: usize>(
    q: LocScale<D>,
    key: u64,
    draws: usize,
    prior: FusedPrior,
    kl: bool,
) -> (Tensor<2>, Tensor<1>, Tensor<1>) {
    let n = q.numel();
    let prior = prior.dispatch(n);
    let (out, value) = <Dispatch as FusedOps>::sample_ratio_op(q.dispatch(), key, draws, prior, kl);
    let out: Tensor<1> = Tensor::from_dispatch(out);
    let w = out.clone().slice(0..draws * n).reshape([draws, n]);
    let r = out.slice(draws * n..draws * (n + 1));
    (w, r, Tensor::from_dispatch(value))
}

/// `(var, kl)`: a location-scale tensor's marginal variance `var = σ(ρ)²·var_scale`
/// (`var_scale` is 1 for mean-field, `1/n` for radial) and the summed KL terms of `kl` (a
/// constant; `fold` as in [`sample`]).
pub(crate) fn moments<const D: usize>(
    q: LocScale<D>,
    var_scale: f32,
    kl: Option<FusedPrior>,
    fold: Option<f32>,
) -> (Tensor<D>, Tensor<1>) {
    let prior = prior_dispatch(kl, q.numel());
    let (var, value) = <Dispatch as FusedOps>::moments_op(q.dispatch(), var_scale, prior, fold);
    (Tensor::from_dispatch(var), Tensor::from_dispatch(value))
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
    Tensor::from_dispatch(<Dispatch as FusedOps>::kl_op(q.dispatch(), prior))
}

/// `coef·Σ (w − center)²`, `[1]`, differentiable in `w` (one pass forward, one backward): a
/// Gaussian prior's quadratic term `Σ (w − μ₀)²/(2σ₀²)` at a point (MAP's penalty, Gal's dropout
/// KL).
pub(crate) fn quadratic<const D: usize>(w: Tensor<D>, center: f32, coef: f32) -> Tensor<1> {
    Tensor::from_dispatch(<Dispatch as FusedOps>::quadratic_op(
        w.into_dispatch(),
        center,
        coef,
    ))
}

/// `mean + √(var + 10⁻¹⁶)·ε` with `ε` of `key` (local reparameterisation's draw).
pub(crate) fn noise<const D: usize>(mean: Tensor<D>, var: Tensor<D>, key: u64) -> Tensor<D> {
    Tensor::from_dispatch(<Dispatch as FusedOps>::noise_op(
        mean.into_dispatch(),
        var.into_dispatch(),
        key,
    ))
}

/// `x ⊙ s`: a random sign of `key` per group of `inner` consecutive elements (Flipout).
pub(crate) fn flip<const D: usize>(x: Tensor<D>, key: u64, inner: usize) -> Tensor<D> {
    Tensor::from_dispatch(<Dispatch as FusedOps>::flip_op(
        x.into_dispatch(),
        key,
        inner,
    ))
}

/// `x ⊙ z`: dropout noise of rate `p` per element from `key` (MC dropout's and DropConnect's
/// masks; the backward regenerates them): inverted Bernoulli, `z ∈ {0, 1/(1−p)}` kept with
/// probability `1 − p`, or Gaussian, `z ~ N(1, p/(1−p))` (Gal 2016, §3.2).
pub(crate) fn dropout<const D: usize>(
    x: Tensor<D>,
    key: u64,
    p: f64,
    noise: DropoutNoise,
) -> Tensor<D> {
    Tensor::from_dispatch(<Dispatch as FusedOps>::dropout_op(
        x.into_dispatch(),
        key,
        p,
        noise,
    ))
}

/// `(E h, Var h)` of `h = relu(f)` for `f ~ N(mean, var)` elementwise, by `rule` (the
/// Gaussian moments or VBP's gate; [`rectifier`]): one pass forward, one per output backward.
pub(crate) fn rectifier_moments<const D: usize>(
    mean: Tensor<D>,
    var: Tensor<D>,
    rule: RectifierRule,
) -> (Tensor<D>, Tensor<D>) {
    let (m, v) =
        <Dispatch as FusedOps>::rectifier_op(mean.into_dispatch(), var.into_dispatch(), rule);
    (Tensor::from_dispatch(m), Tensor::from_dispatch(v))
}

/// `[n, numel]` draws `w_s = base_s + c·F z_s` of a low-rank Gaussian: the diagonal's draws
/// `base [n, numel]` (`μ + σ⊙ε_s`) plus the factor's share, for a factor `F [numel, k]` scaled by
/// `c`, `z_s ~ N(0, I_k)` from sub-stream `stream` of `key` (generated on the host). One pass
/// forward, which adds into the base's buffer where it is not shared, and `dF = c·dyᵀ z` in one
/// pass backward (the base's gradient is `dy`) on the CPU backends; burn's `matmul` elsewhere. A
/// matrix product with an inner dimension of `k` would waste most of gemm's tiles.
pub(crate) fn add_factor_draws(
    base: Tensor<2>,
    factor: Tensor<2>,
    scale: f64,
    key: u64,
    stream: u32,
) -> Tensor<2> {
    let ([n, numel], [rows, k]) = (base.dims(), factor.dims());
    assert_eq!(
        numel, rows,
        "add_factor_draws: draws of {numel} by a factor of {rows} rows"
    );
    let mut z = vec![0f32; n * k];
    elementwise::normals(key, stream, &mut z);
    for v in z.iter_mut() {
        *v *= scale as f32;
    }
    Tensor::from_dispatch(<Dispatch as FusedOps>::add_factor_draws_op(
        base.into_dispatch(),
        factor.into_dispatch(),
        z,
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
    let value: Tensor<1> = Tensor::from_dispatch(<Dispatch as FusedOps>::mixture_kl_op(
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
    Tensor::from_dispatch(<Dispatch as FusedOps>::factor_kl_op(
        factor.into_dispatch(),
        rho.into_dispatch(),
        rule,
        scale,
        prior,
    ))
}

/// `y = x ∗ w`: `x [N, C, H, W]` convolved with `w [O, C, kh, kw]` (one group, no bias) as
/// `im2col` and one matrix product, `y = im2col(x) · Wᵀ`, with a hand-written backward pass
/// (`∂W = ∂yᵀ · im2col(x)`, `∂x = col2im(∂y · W)`; [`conv`]): burn's `conv2d`, to rounding,
/// on the CPU backends' faster path. Cube (wgpu) runs burn's own convolution.
///
/// # Panics
/// If `x` does not have `w`'s input channels, `options` has groups or asymmetric padding, or
/// the kernel does not fit the padded input.
pub(crate) fn conv2d(x: Tensor<4>, w: Tensor<4>, options: &ConvOptions<2>) -> Tensor<4> {
    let [_, c, kh, kw] = w.dims();
    let input = x.dims();
    assert_eq!(
        input[1],
        c,
        "conv2d: input {input:?} has {} channels, the kernel {:?} expects {c}",
        input[1],
        w.dims()
    );
    assert!(
        options.groups == 1 && !options.is_asymmetric(),
        "conv2d: one group and symmetric padding only (got {options:?})"
    );
    let g = ConvGeometry {
        input,
        kernel: [kh, kw],
        stride: options.stride,
        padding: options.padding_begin(),
        dilation: options.dilation,
    };
    g.output(); // refuses a kernel that does not fit before any work is queued
    Tensor::from_dispatch(<Dispatch as FusedOps>::conv_op(
        x.into_dispatch(),
        w.into_dispatch(),
        g,
    ))
}

/// `y_s = x_s ∗ w_s`: `x [S, B, C, H, W]` convolved sample by sample with one kernel per sample,
/// `w [S, O, C, kh, kw]` (one group, no bias), into `[S, B, O, H', W']`, with the hand-written
/// backward pass of [`conv2d`] per sample: burn's convolution grouped by sample, to rounding. On
/// the CPU backends the samples' windows are unfolded and multiplied a chunk of samples at a
/// time (at most 64 MiB of windows), one batched product ([`batched_matmul`]'s kernel) per
/// chunk; Cube (wgpu) runs burn's grouped convolution.
///
/// # Panics
/// If the sample counts or channels of `x` and `w` differ, `options` has groups or asymmetric
/// padding, or the kernel does not fit the padded input.
pub(crate) fn conv2d_per_sample(x: Tensor<5>, w: Tensor<5>, options: &ConvOptions<2>) -> Tensor<5> {
    let [s, b, c, h, wd] = x.dims();
    let [s_w, o, c_w, kh, kw] = w.dims();
    assert!(
        s == s_w && c == c_w,
        "conv2d_per_sample: input {:?} ({s} samples of {c} channels) by kernels {:?} ({s_w} \
         samples of {c_w} channels): the sample counts and the channels must agree",
        x.dims(),
        w.dims()
    );
    assert!(
        options.groups == 1 && !options.is_asymmetric(),
        "conv2d_per_sample: one group and symmetric padding only (got {options:?})"
    );
    let g = ConvGeometry {
        input: [s * b, c, h, wd],
        kernel: [kh, kw],
        stride: options.stride,
        padding: options.padding_begin(),
        dilation: options.dilation,
    };
    let [ho, wo] = g.output(); // refuses a kernel that does not fit before any work is queued
    let y: Tensor<4> = Tensor::from_dispatch(<Dispatch as FusedOps>::conv_op(
        x.reshape([s * b, c, h, wd]).into_dispatch(),
        w.into_dispatch(),
        g,
    ));
    y.reshape([s, b, o, ho, wo])
}

/// `y = x · w`: `x [..., k]` by `w [k, n]` into `[..., n]`, one matrix product over all leading
/// axes, with a hand-written backward pass (`∂x = ∂y · wᵀ`, `∂w = xᵀ · ∂y`, each only when
/// tracked): burn's `matmul` to rounding. On Flex it calls gemm directly (burn-flex's own
/// `matmul` copies each output buffer once more to align it); the other backends run their
/// `matmul`.
///
/// # Panics
/// If `x`'s last axis is not `w`'s first.
pub(crate) fn matmul<const D: usize>(x: Tensor<D>, w: Tensor<2>) -> Tensor<D> {
    let mut dims = x.dims();
    let [k, n] = w.dims();
    assert_eq!(
        dims[D - 1],
        k,
        "matmul: input {dims:?} has {} features, the weight {:?} expects {k}",
        dims[D - 1],
        w.dims()
    );
    let rows = dims[..D - 1].iter().product::<usize>();
    let flat = x.reshape([rows, k]);
    let y: Tensor<2> = Tensor::from_dispatch(<Dispatch as FusedOps>::matmul_op(
        flat.into_dispatch(),
        w.into_dispatch(),
    ));
    dims[D - 1] = n;
    y.reshape(dims)
}

/// `y_s = x_s · w_s`: `x [S, rows, k]` by one weight matrix per sample, `w [S, k, n]`, into
/// `[S, rows, n]`, with the hand-written backward pass of [`matmul`] (`∂x_s = ∂y_s · w_sᵀ`,
/// `∂w_s = x_sᵀ · ∂y_s`, each only when tracked): burn's batched `matmul` to rounding. On Flex
/// each product is one gemm call into a buffer written once, threaded over the samples as
/// burn-flex does; the other backends run their `matmul`.
///
/// # Panics
/// If the sample counts differ, or `x`'s last axis is not `w`'s second.
pub(crate) fn batched_matmul(x: Tensor<3>, w: Tensor<3>) -> Tensor<3> {
    let ([s, _, k], [s_w, k_w, _]) = (x.dims(), w.dims());
    assert!(
        s == s_w && k == k_w,
        "batched_matmul: input {:?} ({s} samples of {k} features) by weights {:?} ({s_w} \
         samples of [{k_w}, n]): the sample counts and the feature counts must agree",
        x.dims(),
        w.dims()
    );
    Tensor::from_dispatch(<Dispatch as FusedOps>::matmul_op(
        x.into_dispatch(),
        w.into_dispatch(),
    ))
}

/// `(E m, Var m)` `[rows, H', W']` of the maximum `m` of each `kernel × kernel` window, every
/// `stride` cells, of `[rows, H, W]` maps of independent Gaussian units: Clark's (1961)
/// recursion over each window's entries sorted by mean, read from the maps in place
/// ([`clark`]), one pass forward and one backward for both outputs (Haußmann 2021 §3.5).
///
/// # Panics
/// If `means` and `vars` differ in shape, or the window does not fit the maps.
pub(crate) fn max_pool_moments(
    means: Tensor<3>,
    vars: Tensor<3>,
    kernel: usize,
    stride: usize,
) -> (Tensor<3>, Tensor<3>) {
    assert_eq!(
        means.dims(),
        vars.dims(),
        "max_pool_moments: means and variances differ in shape"
    );
    // Refuses a window that does not fit before any work is queued.
    clark::PoolMaps::of(&means.dims(), kernel, stride);
    let both: Tensor<4> = Tensor::from_dispatch(<Dispatch as FusedOps>::max_pool_op(
        means.into_dispatch(),
        vars.into_dispatch(),
        kernel,
        stride,
    ));
    let [_, rows, ho, wo] = both.dims();
    let half = |i: usize| both.clone().narrow(0, i, 1).reshape([rows, ho, wo]);
    (half(0), half(1))
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
