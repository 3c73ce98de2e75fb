//! Draws of a location-scale tensor: `w_s = [μ] + σ(ρ)·c_s·ε_s` in one pass, with the KL's
//! terms summed on the way and folded into the backward pass when asked (`sample`); the same draws
//! with their `ln q − ln p` (`sample_log_ratio`, black-box α); a low-rank factor's share `F z_s`
//! (`add_factor_draws`); and the counter-based normals themselves.

// burn marks its NdArray backend deprecated; the project still offers it as a feature.
#![allow(deprecated)]

use super::prelude::*;

/// `c·ε_s`, `ε_s` the normals of sub-stream `s` of `key` shaped like `like` (no product when
/// `c = 1`: mean-field draws).
pub(crate) fn scaled_normal<B: DrawKernels>(
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

/// The draws' forward and backward kernels (default bodies: the reference, wgpu's).
#[backend_extension(Flex: cfg(feature = "flex"), NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"))]
pub trait DrawKernels: Backend {
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

    /// `(dμ, dρ)` of [`DrawKernels::fused_sample`] given `dw [S, n]` and its tape, plus
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

    /// `(dμ, dρ)` of [`DrawKernels::fused_sample_ratio`] given `dout` (`[S·n + S]`), as
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

    /// `dF = dyᵀ z`, `[n, k]`, of [`DrawKernels::fused_add_factor_draws`] (the base's
    /// gradient is `dy`).
    fn fused_factor_draws_backward(dy: FloatTensor<Self>, z: Vec<f32>) -> FloatTensor<Self> {
        let draws = dy.shape()[0];
        let k = z.len() / draws;
        let z = uploaded::<Self>(z, Shape::from([draws, k]), &dy.device());
        Self::float_matmul(Self::float_transpose(dy), z)
    }
}

#[cfg(feature = "wgpu")]
impl DrawKernels for burn::backend::Cube {}

/// The CPU backends' kernels: slices in, slices out.
macro_rules! cpu_kernels {
    ($backend:ty) => {
        impl DrawKernels for $backend {
            fn fused_normal(like: FloatTensor<Self>, key: u64, stream: u32) -> FloatTensor<Self> {
                let shape = like.shape();
                let out = written(shape.num_elements(), |o| {
                    elementwise::normals(key, stream, o)
                });
                <FloatTensor<Self>>::from_values(out, shape)
            }

            fn fused_squared_norms(
                like: FloatTensor<Self>,
                key: u64,
                draws: usize,
            ) -> FloatTensor<Self> {
                let n = like.shape().num_elements();
                let norms = (0..draws)
                    .map(|s| elementwise::squared_norm(key, s as u32, n) as f32)
                    .collect();
                <FloatTensor<Self>>::from_values(norms, Shape::from([draws]))
            }

            #[allow(clippy::type_complexity)]
            fn fused_sample(
                q: LocScaleTensors<Self>,
                draws: DrawSpec,
                prior: PriorTensors<Self>,
                keep: Tape,
            ) -> (
                FloatTensor<Self>,
                FloatTensor<Self>,
                Option<FloatTensor<Self>>,
            ) {
                let n = q.mu.shape().num_elements();
                let count = draws.scales.len();
                let (mu, rho) = loc_scale_values(&q);
                let values = prior_values(&prior);
                let mut s = 0.0;
                let rows = keep.rows(count);
                // SAFETY: `sample` writes every element of its draws and of its tape.
                let (w, tape) = unsafe {
                    filled2(n * count, n * rows, |w, t| {
                        let view = elementwise::LocScale {
                            mu: &mu,
                            rho: &rho,
                            rule: q.rule,
                        };
                        let d = elementwise::Draws {
                            key: draws.key,
                            scales: &draws.scales,
                            center: draws.center,
                        };
                        let prior = prior_of(&prior, &values);
                        s = elementwise::sample(view, d, prior, keep, w, t);
                    })
                };
                let shape = Shape::from([count, n]);
                let tape = (rows > 0)
                    .then(|| <FloatTensor<Self>>::from_values(tape, Shape::from([rows, n])));
                (<FloatTensor<Self>>::from_values(w, shape), total(s), tape)
            }

            /// In place: `dρ` over the tape's first row and `dμ` over its KL row (two views of
            /// the one buffer), or `dμ = dw` for one uncentred draw without a KL.
            fn fused_sample_backward(
                dw: FloatTensor<Self>,
                tape: FloatTensor<Self>,
                mu: FloatTensor<Self>,
                center: bool,
                fold: Option<f32>,
                prior: PriorTensors<Self>,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                let shape = mu.shape();
                let n = shape.num_elements();
                let draws = dw.shape().num_elements() / n;
                let (mu_values, dw_values) = (mu.values(), dw.values());
                let values = prior_values(&prior);
                // One uncentred draw without a KL: dμ is dw itself.
                let dw_is_dmu = draws == 1 && !center && fold.is_none();
                let mut dmu = Vec::new();
                let tape = tape.rewrite(|t| {
                    let dm_len = if fold.is_some() || dw_is_dmu { 0 } else { n };
                    dmu = written(dm_len, |dm| {
                        let fold = fold.map(|w| {
                            let prior = prior_of(&prior, &values).expect("a folded KL's prior");
                            (prior, w)
                        });
                        elementwise::sample_backward(
                            &dw_values, draws, center, &mu_values, fold, t, dm,
                        );
                    });
                });
                drop(dw_values);
                let dmu = match fold {
                    Some(_) => row_of::<Self>(&tape, draws, shape.clone()),
                    None if dw_is_dmu => reshaped::<Self>(dw, shape.clone()),
                    None => <FloatTensor<Self>>::from_values(dmu, shape.clone()),
                };
                (dmu, row_of::<Self>(&tape, 0, shape))
            }

            fn fused_sample_ratio(
                q: LocScaleTensors<Self>,
                key: u64,
                draws: usize,
                prior: PriorTensors<Self>,
                kl: bool,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                let n = q.mu.shape().num_elements();
                let (mu, rho) = loc_scale_values(&q);
                let values = prior_values(&prior);
                let prior = prior_of(&prior, &values).expect("the log-ratio needs a prior");
                let mut s = 0.0;
                let out = written(draws * (n + 1), |o| {
                    let view = elementwise::LocScale {
                        mu: &mu,
                        rho: &rho,
                        rule: q.rule,
                    };
                    s = elementwise::sample_ratio(key, view, draws, prior, o, kl);
                });
                let shape = Shape::from([draws * (n + 1)]);
                (<FloatTensor<Self>>::from_values(out, shape), total(s))
            }

            fn fused_sample_ratio_backward(
                dout: FloatTensor<Self>,
                q: LocScaleTensors<Self>,
                key: u64,
                draws: usize,
                prior: PriorTensors<Self>,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                let shape = q.mu.shape();
                let n = shape.num_elements();
                let dout = dout.values();
                let (mu, rho) = loc_scale_values(&q);
                let values = prior_values(&prior);
                let prior = prior_of(&prior, &values).expect("the log-ratio needs a prior");
                let (dw, dr) = dout.split_at(draws * n);
                let (dmu, drho) = written2(n, |dm, dg| {
                    let view = elementwise::LocScale {
                        mu: &mu,
                        rho: &rho,
                        rule: q.rule,
                    };
                    let grads = elementwise::Grads { mu: dm, rho: dg };
                    elementwise::sample_ratio_backward(key, view, prior, dw, dr, grads);
                });
                (
                    <FloatTensor<Self>>::from_values(dmu, shape.clone()),
                    <FloatTensor<Self>>::from_values(drho, shape),
                )
            }

            fn fused_add_factor_draws(
                base: FloatTensor<Self>,
                factor: FloatTensor<Self>,
                z: Vec<f32>,
            ) -> FloatTensor<Self> {
                let k = factor.shape()[1];
                let f = factor.values();
                base.rewrite(|w| factor::add_factor_draws(&f, &z, k, w))
            }

            fn fused_factor_draws_backward(
                dy: FloatTensor<Self>,
                z: Vec<f32>,
            ) -> FloatTensor<Self> {
                let [draws, n] = dy.shape().dims();
                let k = z.len() / draws;
                let dy = dy.values();
                let df = written(n * k, |d| factor::factor_draws_backward(&dy, &z, k, d));
                <FloatTensor<Self>>::from_values(df, Shape::from([n, k]))
            }
        }
    };
}

for_cpu_backends!(cpu_kernels);

fused_ops! {
    /// The draws as differentiable ops.
    pub trait DrawOps for DrawKernels {
        /// `(w, kl)` of [`DrawKernels::fused_sample`]; `kl` is a constant (its gradient reaches
        /// `μ, ρ` only through `fold`, added in the backward pass of `w`). The prior is a constant.
        fn sample_op(
            #[extension_type] q: LocScaleTensors<Self>,
            draws: DrawSpec,
            #[extension_type] prior: PriorTensors<Self>,
            fold: Option<f32>,
        ) -> (FloatTensor<Self>, FloatTensor<Self>);
        inner {
            let (w, value, ..) = Self::fused_sample(q, draws, prior, Tape::Off);
            (w, value)
        }
        autodiff {
            let prior = inner_prior(prior);
            let fold = fold.filter(|_| prior.terms().is_some());
            let parents = [q.mu.node(), q.rho.node()];
            // The forward pass keeps a tape only when the backward pass will run.
            match Node::<SampleAdjoint<B>>::new()
                .prepare::<C>(parents)
                .compute_bound()
                .stateful()
            {
                OpsKind::Tracked(prep) => {
                    let keep = if fold.is_some() {
                        Tape::DrawsAndKl
                    } else {
                        Tape::Draws
                    };
                    let center = draws.center;
                    let (w, value, tape) = B::fused_sample(inner_q(&q), draws, prior.clone(), keep);
                    let state = SampleAdjoint {
                        mu: q.mu.into_primitive(),
                        tape: tape.expect("a tape was asked for"),
                        center,
                        fold,
                        // The backward pass reads the prior only for a folded KL.
                        prior: if fold.is_some() {
                            prior
                        } else {
                            PriorTensors::Off
                        },
                    };
                    (prep.finish(state, w), Self::from_inner(value))
                }
                OpsKind::UnTracked(prep) => {
                    let (w, value, ..) = B::fused_sample(inner_q(&q), draws, prior, Tape::Off);
                    (prep.finish(w), Self::from_inner(value))
                }
            }
        }

        /// `(out, kl)` of [`DrawKernels::fused_sample_ratio`]: draws and their log-ratios in one
        /// differentiable output; `kl` is a constant (so is the prior).
        fn sample_ratio_op(
            #[extension_type] q: LocScaleTensors<Self>,
            key: u64,
            draws: usize,
            #[extension_type] prior: PriorTensors<Self>,
            kl: bool,
        ) -> (FloatTensor<Self>, FloatTensor<Self>);
        inner {
            Self::fused_sample_ratio(q, key, draws, prior, kl)
        }
        autodiff {
            let prior = inner_prior(prior);
            let inner = inner_q(&q);
            let (out, value) = B::fused_sample_ratio(inner.clone(), key, draws, prior.clone(), kl);
            let state = || SampleRatioAdjoint {
                q: inner,
                key,
                draws,
                prior,
            };
            let out = node::<B, C, _, 2>([q.mu.node(), q.rho.node()], out, state);
            (out, Self::from_inner(value))
        }

        /// [`DrawKernels::fused_add_factor_draws`], differentiable in the base and the factor (`z`
        /// is a constant).
        fn add_factor_draws_op(
            base: FloatTensor<Self>,
            factor: FloatTensor<Self>,
            z: Vec<f32>,
        ) -> FloatTensor<Self>;
        inner {
            Self::fused_add_factor_draws(base, factor, z)
        }
        autodiff {
            let parents = [base.node(), factor.node()];
            // The backward pass needs neither tensor's values: the base's buffer is written in
            // place where it is not shared.
            let (base, factor) = (base.into_primitive(), factor.into_primitive());
            let y = B::fused_add_factor_draws(base, factor, z.clone());
            node::<B, C, _, 2>(parents, y, || FactorDrawsAdjoint { z })
        }
    }
}

/// [`DrawOps::sample_op`]'s: `μ`, the forward pass's tape ([`Tape`]), `center`, the fold's
/// weight and the prior.
#[derive(Debug, Clone)]
struct SampleAdjoint<B: Backend> {
    mu: FloatTensor<B>,
    tape: FloatTensor<B>,
    center: bool,
    fold: Option<f32>,
    prior: PriorTensors<B>,
}

impl<B: DrawKernels> Adjoint<B, 2> for SampleAdjoint<B> {
    fn grads(self, dw: FloatTensor<B>, _: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let Self {
            mu,
            tape,
            center,
            fold,
            prior,
        } = self;
        let (dmu, drho) = B::fused_sample_backward(dw, tape, mu, center, fold, prior);
        [Some(dmu), Some(drho)]
    }
}

/// [`DrawOps::sample_ratio_op`]'s: the posterior, the key, the number of draws and the prior.
#[derive(Debug, Clone)]
struct SampleRatioAdjoint<B: Backend> {
    q: LocScaleTensors<B>,
    key: u64,
    draws: usize,
    prior: PriorTensors<B>,
}

impl<B: DrawKernels> Adjoint<B, 2> for SampleRatioAdjoint<B> {
    fn grads(self, dout: FloatTensor<B>, _: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let (dmu, drho) =
            B::fused_sample_ratio_backward(dout, self.q, self.key, self.draws, self.prior);
        [Some(dmu), Some(drho)]
    }
}

/// [`DrawOps::add_factor_draws_op`]'s: the draws' `z` (the base's gradient is `dy`).
#[derive(Debug, Clone)]
struct FactorDrawsAdjoint {
    z: Vec<f32>,
}

impl<B: DrawKernels> Adjoint<B, 2> for FactorDrawsAdjoint {
    fn grads(self, dy: FloatTensor<B>, [_, factor]: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let df = factor.then(|| B::fused_factor_draws_backward(dy.clone(), self.z));
        [Some(dy), df]
    }
}

#[cfg(test)]
/// Standard normals shaped like `like`, sub-stream `stream` of `key`: the `ε` the fused ops use
/// (for reference compositions).
pub(crate) fn normal_like<const D: usize>(like: &Tensor<D>, key: u64, stream: u32) -> Tensor<D> {
    let eps: Tensor<D> = Tensor::from_dispatch(<Dispatch as DrawKernels>::fused_normal(
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
    let norms: Tensor<1> = Tensor::from_dispatch(<Dispatch as DrawKernels>::fused_squared_norms(
        inner_dispatch(like),
        key,
        draws,
    ));
    norms
        .into_data()
        .try_into_vec_as::<f32>()
        .expect("f32 norms")
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
    let (w, value) = <Dispatch as DrawOps>::sample_op(q.dispatch(), draws, prior, fold);
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
    let (out, value) = <Dispatch as DrawOps>::sample_ratio_op(q.dispatch(), key, draws, prior, kl);
    let out: Tensor<1> = Tensor::from_dispatch(out);
    let w = out.clone().slice(0..draws * n).reshape([draws, n]);
    let r = out.slice(draws * n..draws * (n + 1));
    (w, r, Tensor::from_dispatch(value))
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
    Tensor::from_dispatch(<Dispatch as DrawOps>::add_factor_draws_op(
        base.into_dispatch(),
        factor.into_dispatch(),
        z,
    ))
}
