//! Marginal moments for local reparameterisation and moment propagation: `Var[w] = c·σ(ρ)²` with
//! the KL folded as in `draws` (`moments`), and the pre-activations' draw
//! `mean + √var·ε` with `ε` regenerated in the backward pass (`noise`).

// burn marks its NdArray backend deprecated; the project still offers it as a feature.
#![allow(deprecated)]

use super::prelude::*;

/// The moments' forward and backward kernels (default bodies: the reference, wgpu's).
#[backend_extension(Flex: cfg(feature = "flex"), NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"))]
pub trait MomentKernels: DrawKernels {
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

    /// `(dμ, dρ)` of [`MomentKernels::fused_moments`] given `dvar`, plus `weight × ∇KL` of
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

    /// `mean + √(var + floor)·ε` (`ε`: sub-stream 0 of `key`, shaped like `mean`).
    fn fused_noise(mean: FloatTensor<Self>, var: FloatTensor<Self>, key: u64) -> FloatTensor<Self> {
        let eps = Self::fused_normal(mean.clone(), key, 0);
        let sd = Self::float_sqrt(Self::float_add_scalar(var, Scalar::from(VAR_FLOOR)));
        Self::float_add(mean, Self::float_mul(sd, eps))
    }

    /// `dvar = dy·ε/(2√(var + floor))` of [`MomentKernels::fused_noise`] (`dmean = dy`).
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
}

#[cfg(feature = "wgpu")]
impl MomentKernels for burn::backend::Cube {}

/// The CPU backends' kernels: slices in, slices out.
macro_rules! cpu_kernels {
    ($backend:ty) => {
        impl MomentKernels for $backend {
            fn fused_moments(
                q: LocScaleTensors<Self>,
                var_scale: f32,
                prior: PriorTensors<Self>,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                let shape = q.mu.shape();
                let (mu, rho) = loc_scale_values(&q);
                let values = prior_values(&prior);
                let mut s = 0.0;
                // SAFETY: `moments` writes every element of the variances it is given.
                let var = unsafe {
                    filled(shape.num_elements(), |v| {
                        let view = elementwise::LocScale {
                            mu: &mu,
                            rho: &rho,
                            rule: q.rule,
                        };
                        let prior = prior_of(&prior, &values);
                        s = elementwise::moments(view, var_scale, Some(v), prior);
                    })
                };
                (<FloatTensor<Self>>::from_values(var, shape), total(s))
            }

            fn fused_moments_backward(
                dvar: FloatTensor<Self>,
                q: LocScaleTensors<Self>,
                var_scale: f32,
                fold: Option<f32>,
                prior: PriorTensors<Self>,
            ) -> (Option<FloatTensor<Self>>, FloatTensor<Self>) {
                let shape = q.mu.shape();
                let n = shape.num_elements();
                let dvar = dvar.values();
                let (mu, rho) = loc_scale_values(&q);
                let values = prior_values(&prior);
                let backward = |dm: Option<&mut [MaybeUninit<f32>]>,
                                dr: &mut [MaybeUninit<f32>]| {
                    let view = elementwise::LocScale {
                        mu: &mu,
                        rho: &rho,
                        rule: q.rule,
                    };
                    let fold = fold.map(|w| {
                        let prior = prior_of(&prior, &values).expect("a folded KL's prior");
                        (prior, w)
                    });
                    elementwise::moments_backward(Some(&dvar), view, var_scale, fold, dm, dr)
                };
                // `dμ` only with the folded KL: the variance does not depend on `μ`.
                // SAFETY: `moments_backward` writes every element of the outputs it is given.
                let (dmu, drho) = unsafe {
                    match fold {
                        Some(_) => {
                            let (dm, dr) = filled2(n, n, |dm, dr| backward(Some(dm), dr));
                            (Some(dm), dr)
                        }
                        None => (None, filled(n, |dr| backward(None, dr))),
                    }
                };
                (
                    dmu.map(|d| <FloatTensor<Self>>::from_values(d, shape.clone())),
                    <FloatTensor<Self>>::from_values(drho, shape),
                )
            }

            fn fused_noise(
                mean: FloatTensor<Self>,
                var: FloatTensor<Self>,
                key: u64,
            ) -> FloatTensor<Self> {
                let shape = mean.shape();
                let (mean, var) = (mean.values(), var.values());
                let y = written(shape.num_elements(), |y| {
                    elementwise::noise(key, &mean, &var, y, false)
                });
                <FloatTensor<Self>>::from_values(y, shape)
            }

            fn fused_noise_backward(
                dy: FloatTensor<Self>,
                var: FloatTensor<Self>,
                key: u64,
            ) -> FloatTensor<Self> {
                let shape = dy.shape();
                let (dy, var) = (dy.values(), var.values());
                let dvar = written(shape.num_elements(), |d| {
                    elementwise::noise(key, &dy, &var, d, true)
                });
                <FloatTensor<Self>>::from_values(dvar, shape)
            }
        }
    };
}

for_cpu_backends!(cpu_kernels);

fused_ops! {
    /// The moments as differentiable ops.
    pub trait MomentOps for MomentKernels {
        /// `(var, kl)` of [`MomentKernels::fused_moments`], `kl` a constant as in
        /// [`DrawOps::sample_op`].
        fn moments_op(
            #[extension_type] q: LocScaleTensors<Self>,
            var_scale: f32,
            #[extension_type] prior: PriorTensors<Self>,
            fold: Option<f32>,
        ) -> (FloatTensor<Self>, FloatTensor<Self>);
        inner {
            Self::fused_moments(q, var_scale, prior)
        }
        autodiff {
            let prior = inner_prior(prior);
            let inner = inner_q(&q);
            let (var, value) = B::fused_moments(inner.clone(), var_scale, prior.clone());
            let fold = fold.filter(|_| prior.terms().is_some());
            let state = || MomentsAdjoint {
                q: inner,
                var_scale,
                fold,
                // The backward pass reads the prior only for a folded KL.
                prior: if fold.is_some() {
                    prior
                } else {
                    PriorTensors::Off
                },
            };
            let var = node::<B, C, _, 2>([q.mu.node(), q.rho.node()], var, state);
            (var, Self::from_inner(value))
        }

        /// [`MomentKernels::fused_noise`].
        fn noise_op(mean: FloatTensor<Self>, var: FloatTensor<Self>, key: u64) -> FloatTensor<Self>;
        inner {
            Self::fused_noise(mean, var, key)
        }
        autodiff {
            let y = B::fused_noise(mean.primitive().clone(), var.primitive().clone(), key);
            let state = || NoiseAdjoint {
                var: var.primitive().clone(),
                key,
            };
            node::<B, C, _, 2>([mean.node(), var.node()], y, state)
        }
    }
}

/// [`MomentOps::moments_op`]'s: the posterior, the variance's scale, the fold's weight and the
/// prior.
#[derive(Debug, Clone)]
struct MomentsAdjoint<B: Backend> {
    q: LocScaleTensors<B>,
    var_scale: f32,
    fold: Option<f32>,
    prior: PriorTensors<B>,
}

impl<B: MomentKernels> Adjoint<B, 2> for MomentsAdjoint<B> {
    fn grads(self, dvar: FloatTensor<B>, _: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let (dmu, drho) =
            B::fused_moments_backward(dvar, self.q, self.var_scale, self.fold, self.prior);
        [dmu, Some(drho)]
    }
}

/// [`MomentOps::noise_op`]'s: the variance and the key (the mean's gradient is `dy`).
#[derive(Debug, Clone)]
struct NoiseAdjoint<B: Backend> {
    var: FloatTensor<B>,
    key: u64,
}

impl<B: MomentKernels> Adjoint<B, 2> for NoiseAdjoint<B> {
    fn grads(self, dy: FloatTensor<B>, [_, var]: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let dvar = var.then(|| B::fused_noise_backward(dy.clone(), self.var, self.key));
        [Some(dy), dvar]
    }
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
    let (var, value) = <Dispatch as MomentOps>::moments_op(q.dispatch(), var_scale, prior, fold);
    (Tensor::from_dispatch(var), Tensor::from_dispatch(value))
}

/// `mean + √(var + 10⁻¹⁶)·ε` with `ε` of `key` (local reparameterisation's draw).
pub(crate) fn noise<const D: usize>(mean: Tensor<D>, var: Tensor<D>, key: u64) -> Tensor<D> {
    Tensor::from_dispatch(<Dispatch as MomentOps>::noise_op(
        mean.into_dispatch(),
        var.into_dispatch(),
        key,
    ))
}
