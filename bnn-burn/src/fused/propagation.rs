//! Moment propagation through nonlinearities: the rectifier's output moments under a Gaussian
//! input (`rectifier_moments`, VBP's and CLT's rules) and Clark's max-pooling moments
//! (`max_pool_moments`), each with its hand-written backward pass.

// burn marks its NdArray backend deprecated; the project still offers it as a feature.
#![allow(deprecated)]

use super::prelude::*;

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

/// The propagation kernels, forward and backward (default bodies: the reference, wgpu's).
#[backend_extension(Flex: cfg(feature = "flex"), NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"))]
pub trait PropagationKernels: Backend {
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

    /// `(dmean, dvar) = grad·∂output/∂(mean, var)` of [`PropagationKernels::fused_rectifier`].
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
    /// [`PropagationKernels::fused_max_pool`]'s `[2, rows, H', W']` output.
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
}

#[cfg(feature = "wgpu")]
impl PropagationKernels for burn::backend::Cube {}

/// The CPU backends' kernels: slices in, slices out.
macro_rules! cpu_kernels {
    ($backend:ty) => {
        impl PropagationKernels for $backend {
            fn fused_rectifier(
                mean: FloatTensor<Self>,
                var: FloatTensor<Self>,
                rule: RectifierRule,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                let shape = mean.shape();
                let (mean, var) = (mean.values(), var.values());
                let (m, v) = written2(shape.num_elements(), |m, v| {
                    rectifier::rectifier(rule, &mean, &var, m, v)
                });
                (
                    <FloatTensor<Self>>::from_values(m, shape.clone()),
                    <FloatTensor<Self>>::from_values(v, shape),
                )
            }

            fn fused_rectifier_backward(
                mean: FloatTensor<Self>,
                var: FloatTensor<Self>,
                grad: FloatTensor<Self>,
                rule: RectifierRule,
                output: RectifierOutput,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                let shape = mean.shape();
                let (mean, var, grad) = (mean.values(), var.values(), grad.values());
                let (dm, dv) = written2(shape.num_elements(), |dm, dv| {
                    rectifier::rectifier_backward(rule, output, &mean, &var, &grad, dm, dv)
                });
                (
                    <FloatTensor<Self>>::from_values(dm, shape.clone()),
                    <FloatTensor<Self>>::from_values(dv, shape),
                )
            }

            fn fused_max_pool(
                means: FloatTensor<Self>,
                vars: FloatTensor<Self>,
                kernel: usize,
                stride: usize,
            ) -> FloatTensor<Self> {
                let maps = clark::PoolMaps::of(&means.shape(), kernel, stride);
                let (means, vars) = (means.values(), vars.values());
                let out = written(2 * maps.windows(), |out| {
                    let (m, v) = out.split_at_mut(maps.windows());
                    clark::max_pool(maps, &means, &vars, m, v)
                });
                let [rows, ho, wo] = maps.out_dims();
                <FloatTensor<Self>>::from_values(out, Shape::from([2, rows, ho, wo]))
            }

            fn fused_max_pool_backward(
                means: FloatTensor<Self>,
                vars: FloatTensor<Self>,
                grad: FloatTensor<Self>,
                kernel: usize,
                stride: usize,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                let shape = means.shape();
                let maps = clark::PoolMaps::of(&shape, kernel, stride);
                let (means, vars, grad) = (means.values(), vars.values(), grad.values());
                let (grad_mean, grad_var) = grad.split_at(maps.windows());
                let (dm, dv) = written2(shape.num_elements(), |dm, dv| {
                    clark::max_pool_backward(maps, &means, &vars, grad_mean, grad_var, dm, dv)
                });
                (
                    <FloatTensor<Self>>::from_values(dm, shape.clone()),
                    <FloatTensor<Self>>::from_values(dv, shape),
                )
            }
        }
    };
}

for_cpu_backends!(cpu_kernels);

fused_ops! {
    /// The propagation rules as differentiable ops.
    pub trait PropagationOps for PropagationKernels {
        /// `(E h, Var h)` of [`PropagationKernels::fused_rectifier`], both differentiable (two
        /// graph nodes, each with its own backward pass).
        fn rectifier_op(
            mean: FloatTensor<Self>,
            var: FloatTensor<Self>,
            rule: RectifierRule,
        ) -> (FloatTensor<Self>, FloatTensor<Self>);
        inner {
            Self::fused_rectifier(mean, var, rule)
        }
        autodiff {
            let (m, v) = (mean.primitive().clone(), var.primitive().clone());
            let (m, v) = B::fused_rectifier(m, v, rule);
            let output = |output: RectifierOutput, y: FloatTensor<B>| {
                let state = || MomentsAdjoint {
                    mean: mean.primitive().clone(),
                    var: var.primitive().clone(),
                    settings: (rule, output),
                };
                node::<B, C, _, 2>([mean.node(), var.node()], y, state)
            };
            (
                output(RectifierOutput::Mean, m),
                output(RectifierOutput::Var, v),
            )
        }

        /// [`PropagationKernels::fused_max_pool`]'s `[2, rows, H', W']` moments, differentiable
        /// (one graph node, one backward pass for both).
        fn max_pool_op(
            means: FloatTensor<Self>,
            vars: FloatTensor<Self>,
            kernel: usize,
            stride: usize,
        ) -> FloatTensor<Self>;
        inner {
            Self::fused_max_pool(means, vars, kernel, stride)
        }
        autodiff {
            let (m, v) = (means.primitive().clone(), vars.primitive().clone());
            let y = B::fused_max_pool(m.clone(), v.clone(), kernel, stride);
            let state = || MomentsAdjoint {
                mean: m,
                var: v,
                settings: [kernel, stride],
            };
            node::<B, C, _, 2>([means.node(), vars.node()], y, state)
        }
    }
}

/// The state of an op on Gaussian moments: the input means and variances and the op's settings
/// `P` (the rectifier's rule and output, or the pool's window and stride).
#[derive(Debug, Clone)]
struct MomentsAdjoint<B: Backend, P> {
    mean: FloatTensor<B>,
    var: FloatTensor<B>,
    settings: P,
}

impl<B: PropagationKernels> Adjoint<B, 2> for MomentsAdjoint<B, (RectifierRule, RectifierOutput)> {
    fn grads(self, g: FloatTensor<B>, _: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let (rule, output) = self.settings;
        let (dmean, dvar) = B::fused_rectifier_backward(self.mean, self.var, g, rule, output);
        [Some(dmean), Some(dvar)]
    }
}

impl<B: PropagationKernels> Adjoint<B, 2> for MomentsAdjoint<B, [usize; 2]> {
    fn grads(self, g: FloatTensor<B>, _: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let [kernel, stride] = self.settings;
        let (dmean, dvar) = B::fused_max_pool_backward(self.mean, self.var, g, kernel, stride);
        [Some(dmean), Some(dvar)]
    }
}

/// `(E h, Var h)` of `h = relu(f)` for `f ~ N(mean, var)` elementwise, by `rule` (the
/// Gaussian moments or VBP's gate; [`rectifier`]): one pass forward, one per output backward.
pub(crate) fn rectifier_moments<const D: usize>(
    mean: Tensor<D>,
    var: Tensor<D>,
    rule: RectifierRule,
) -> (Tensor<D>, Tensor<D>) {
    let (m, v) =
        <Dispatch as PropagationOps>::rectifier_op(mean.into_dispatch(), var.into_dispatch(), rule);
    (Tensor::from_dispatch(m), Tensor::from_dispatch(v))
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
    let both: Tensor<4> = Tensor::from_dispatch(<Dispatch as PropagationOps>::max_pool_op(
        means.into_dispatch(),
        vars.into_dispatch(),
        kernel,
        stride,
    ));
    let [_, rows, ho, wo] = both.dims();
    let half = |i: usize| both.clone().narrow(0, i, 1).reshape([rows, ho, wo]);
    (half(0), half(1))
}
