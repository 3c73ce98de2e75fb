//! [`FusedKernels`] on the CPU backends: Flex and NdArray read their tensors as `f32` slices
//! (without a copy where the layout allows) and run the kernels of [`super::cpu`].

// burn marks its NdArray backend deprecated; the project still offers it as a feature.
#![allow(deprecated)]

use super::DropoutNoise;
use super::clark;
use super::conv::{self, ConvGeometry};
use super::elementwise::{self, AdamStep, Draws, Grads, LocScale, Prior, SigmaRule, Tape};
use super::ext::{DrawSpec, FusedKernels, LocScaleTensors, PriorTensors};
use super::factor;
use super::mixture::{self, MixtureKl};
use super::rectifier::{self, RectifierOutput, RectifierRule};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, TensorMetadata};
use burn::tensor::{Shape, Slice};
use std::borrow::Cow;
use std::mem::MaybeUninit;

/// How a CPU backend's float tensor is read and written as `f32`.
pub(crate) trait CpuTensor: Sized {
    /// The elements in row-major order (borrowed when contiguous).
    fn values(&self) -> Cow<'_, [f32]>;
    /// A tensor owning `values`.
    fn from_values(values: Vec<f32>, shape: Shape) -> Self;
    /// The tensor after `f` rewrote its elements: in place when its buffer is unshared and
    /// contiguous, on a copy otherwise.
    fn rewrite(self, f: impl FnOnce(&mut [f32])) -> Self;
    /// `op(a) · op(b)` of two matrices, or matrix by matrix of two equal batches `[batch, ·, ·]`,
    /// `op` the transpose (of each matrix) where `a_t`, `b_t` ask for it.
    fn product(a: &Self, a_t: bool, b: &Self, b_t: bool) -> Self;
}

/// `op(a) · op(b)` by the backend's own `matmul`.
#[cfg(feature = "ndarray")]
fn backend_product<B: Backend>(
    a: FloatTensor<B>,
    a_t: bool,
    b: FloatTensor<B>,
    b_t: bool,
) -> FloatTensor<B> {
    let op = |t: FloatTensor<B>, transposed: bool| {
        if transposed { B::float_transpose(t) } else { t }
    };
    B::float_matmul(op(a, a_t), op(b, b_t))
}

/// `[batch, m, k, n]` of `op(a) · op(b)` for two matrices (`batch` = 1) or two equal batches of
/// matrices `[batch, ·, ·]`, `op` transposing each matrix where asked.
fn product_dims(a: &Shape, a_t: bool, b: &Shape, b_t: bool) -> [usize; 4] {
    let rank = a.num_dims();
    assert!(
        (rank == 2 || rank == 3) && b.num_dims() == rank && (rank == 2 || a[0] == b[0]),
        "product: two matrices or two equal batches of them, got {a:?} by {b:?}"
    );
    let batch = if rank == 3 { a[0] } else { 1 };
    let (r, c) = (rank - 2, rank - 1);
    let (m, k) = if a_t { (a[c], a[r]) } else { (a[r], a[c]) };
    let (k_b, n) = if b_t { (b[c], b[r]) } else { (b[r], b[c]) };
    assert_eq!(
        k, k_b,
        "product: {a:?} (transposed: {a_t}) by {b:?} (transposed: {b_t})"
    );
    [batch, m, k, n]
}

/// A `Vec` of `n` elements written by `write`. The buffer starts zeroed (`alloc_zeroed`: fresh
/// pages from the system cost no extra pass), so `write` never sees uninitialised memory.
fn written(n: usize, write: impl FnOnce(&mut [f32])) -> Vec<f32> {
    let mut v = vec![0.0f32; n];
    write(&mut v);
    v
}

/// A `Vec` of `n` elements that `write` fills, not zeroed first (the kernels that take
/// `&mut [impl Out]` write every element of their outputs).
///
/// # Safety
/// `write` writes every element of its slice.
unsafe fn filled(n: usize, write: impl FnOnce(&mut [MaybeUninit<f32>])) -> Vec<f32> {
    let mut v = Vec::with_capacity(n);
    write(&mut v.spare_capacity_mut()[..n]);
    // SAFETY: every element was written (the caller's promise); a panic above leaves `v` empty.
    unsafe { v.set_len(n) };
    v
}

/// Two buffers of `n` elements written by `write` (see [`written`]).
fn written2(n: usize, write: impl FnOnce(&mut [f32], &mut [f32])) -> (Vec<f32>, Vec<f32>) {
    let mut b = Vec::new();
    let a = written(n, |a| {
        b = written(n, |b| write(a, b));
    });
    (a, b)
}

/// Two buffers of `n` and `m` elements that `write` fills (see [`filled`]).
///
/// # Safety
/// `write` writes every element of both slices.
unsafe fn filled2(
    n: usize,
    m: usize,
    write: impl FnOnce(&mut [MaybeUninit<f32>], &mut [MaybeUninit<f32>]),
) -> (Vec<f32>, Vec<f32>) {
    let mut b = Vec::new();
    // SAFETY: the caller's promise, for each buffer.
    let a = unsafe { filled(n, |a| b = filled(m, |b| write(a, b))) };
    (a, b)
}

/// Row `r` of a `[rows, n]` tensor as a tensor of `shape` (`n` elements): a view of its buffer.
fn row_of<B: Backend>(t: &FloatTensor<B>, r: usize, shape: Shape) -> FloatTensor<B> {
    let n = shape.num_elements();
    let rows = [Slice::from(r..r + 1), Slice::from(0..n)];
    B::float_reshape(B::float_slice(t.clone(), &rows), shape)
}

/// `t` reshaped (a view).
fn reshaped<B: Backend>(t: FloatTensor<B>, shape: Shape) -> FloatTensor<B> {
    B::float_reshape(t, shape)
}

/// The values of a per-weight prior's mean and standard deviation (both or neither).
type PriorValues<'a> = Option<(Cow<'a, [f32]>, Cow<'a, [f32]>)>;

/// The [`PriorValues`] of an op's prior.
fn prior_values<B: Backend>(prior: &PriorTensors<B>) -> PriorValues<'_>
where
    FloatTensor<B>: CpuTensor,
{
    match prior {
        PriorTensors::PerWeight { mean, std, .. } => Some((mean.values(), std.values())),
        _ => None,
    }
}

/// The kernels' view of [`PriorValues`].
fn per_weight<'a>(values: &'a PriorValues<'_>) -> Option<elementwise::PerWeight<'a>> {
    values
        .as_ref()
        .map(|(mean, std)| elementwise::PerWeight { mean, std })
}

/// The kernels' view of an op's prior, its per-weight values in `values` ([`prior_values`]);
/// `None` for [`PriorTensors::Off`].
fn prior_of<'a, B: Backend>(
    prior: &PriorTensors<B>,
    values: &'a PriorValues<'_>,
) -> Option<Prior<'a>> {
    prior.terms().map(|terms| Prior {
        terms,
        per_weight: per_weight(values),
    })
}

/// The host values of `μ` and `ρ`, for [`LocScale`] views.
fn loc_scale_values<B: Backend>(q: &LocScaleTensors<B>) -> (Cow<'_, [f32]>, Cow<'_, [f32]>)
where
    FloatTensor<B>: CpuTensor,
{
    (q.mu.values(), q.rho.values())
}

/// The sum of KL terms as a one-element tensor.
fn total<T: CpuTensor>(x: f64) -> T {
    T::from_values(vec![x as f32], Shape::from([1]))
}

/// How a convolution's images meet its kernels: one group of all `N` images for a kernel
/// `[O, C, kh, kw]`, or one group per sample, of `N/S` sample-major images each, for kernels
/// `[S, O, C, kh, kw]`. Groups are unfolded and multiplied a chunk at a time, each chunk's
/// windows holding at most [`KernelGroups::CHUNK_COLUMNS`] elements (at least one group), so
/// that a prediction with many draws does not hold every draw's windows at once; within a chunk
/// the groups' products are one batched product.
struct KernelGroups {
    /// Groups (`1` or `S`).
    count: usize,
    /// The geometry of one group's images, `[N/count, C, H, W]`.
    geometry: ConvGeometry,
    /// Output channels `O`.
    out: usize,
}

impl KernelGroups {
    /// The most elements of unfolded windows held at once: 64 MiB of `f32`; 16 KiB in this
    /// crate's unit tests, so that their small convolutions take several chunks.
    const CHUNK_COLUMNS: usize = if cfg!(test) { 1 << 12 } else { 1 << 24 };

    fn of(w: &Shape, g: &ConvGeometry) -> Self {
        let (count, out) = match w.num_dims() {
            5 => (w[0], w[1]),
            _ => (1, w[0]),
        };
        let mut geometry = *g;
        geometry.input[0] = g.input[0] / count;
        Self {
            count,
            geometry,
            out,
        }
    }

    /// Elements of one group's input images.
    fn input_len(&self) -> usize {
        self.geometry.input.iter().product()
    }

    /// Rows of one group's unfolded windows, `N/count · L`.
    fn rows(&self) -> usize {
        self.geometry.input[0] * self.geometry.cells()
    }

    /// The geometry of the images of groups `r` together.
    fn geometry_of(&self, r: &std::ops::Range<usize>) -> ConvGeometry {
        let mut g = self.geometry;
        g.input[0] *= r.len();
        g
    }

    /// The chunks of groups, as ranges.
    fn chunks(&self) -> impl Iterator<Item = std::ops::Range<usize>> {
        let per = (Self::CHUNK_COLUMNS / (self.rows() * self.geometry.columns()).max(1)).max(1);
        let count = self.count;
        (0..count)
            .step_by(per)
            .map(move |a| a..(a + per).min(count))
    }

    /// The `[rows, cols]` blocks of groups `r` in `t` (every group's block, stacked) as a tensor:
    /// `[rows, cols]` for one group, `[r.len(), rows, cols]` for per-sample groups (a copy, `t`
    /// itself reshaped when `r` covers every group).
    fn blocks<B: Backend>(
        &self,
        t: &FloatTensor<B>,
        r: std::ops::Range<usize>,
        [rows, cols]: [usize; 2],
    ) -> FloatTensor<B>
    where
        FloatTensor<B>: CpuTensor,
    {
        let shape = match self.count {
            1 => Shape::from([rows, cols]),
            _ => Shape::from([r.len(), rows, cols]),
        };
        if r.len() == self.count {
            return B::float_reshape(t.clone(), shape);
        }
        let len = rows * cols;
        <FloatTensor<B>>::from_values(t.values()[r.start * len..r.end * len].to_vec(), shape)
    }

    /// The unfolded windows of groups `r` of the images `x` (every group's), shaped as
    /// [`Self::blocks`]'s `[rows, C·kh·kw]`.
    fn columns<B: Backend>(&self, x: &[f32], r: std::ops::Range<usize>) -> FloatTensor<B>
    where
        FloatTensor<B>: CpuTensor,
    {
        let g = self.geometry_of(&r);
        let images = &x[r.start * self.input_len()..r.end * self.input_len()];
        // SAFETY: `im2col` writes every element of its columns.
        let cols = unsafe {
            filled(r.len() * self.rows() * g.columns(), |c| {
                conv::im2col(images, &g, c)
            })
        };
        let shape = match self.count {
            1 => Shape::from([self.rows(), g.columns()]),
            _ => Shape::from([r.len(), self.rows(), g.columns()]),
        };
        <FloatTensor<B>>::from_values(cols, shape)
    }

    /// The kernels `[O, C·kh·kw]` of groups `r` of `w`.
    fn kernels<B: Backend>(&self, w: &FloatTensor<B>, r: std::ops::Range<usize>) -> FloatTensor<B>
    where
        FloatTensor<B>: CpuTensor,
    {
        self.blocks::<B>(w, r, [self.out, self.geometry.columns()])
    }
}

/// [`FusedKernels::fused_conv`] on a CPU backend: `y = im2col(x) · Wᵀ` per kernel group (one
/// group, or one per sample with one kernel per sample; [`KernelGroups`]), moved from `[N·L, O]`
/// rows to `[N, O, H', W']`.
fn conv_forward<B: Backend>(x: FloatTensor<B>, w: FloatTensor<B>, g: ConvGeometry) -> FloatTensor<B>
where
    FloatTensor<B>: CpuTensor,
{
    let groups = KernelGroups::of(&w.shape(), &g);
    let (n, o, cells) = (groups.geometry.input[0], groups.out, g.cells());
    let xv = x.values();
    // SAFETY: the chunks cover every group, and `transpose_inner` writes every element of
    // each group's range.
    let y = unsafe {
        filled(g.input[0] * o * cells, |y| {
            for r in groups.chunks() {
                let cols = groups.columns::<B>(&xv, r.clone());
                let rows = <FloatTensor<B>>::product(
                    &cols,
                    false,
                    &groups.kernels::<B>(&w, r.clone()),
                    true,
                );
                let y = &mut y[r.start * n * o * cells..r.end * n * o * cells];
                conv::transpose_inner(&rows.values(), r.len() * n, cells, o, y);
            }
        })
    };
    let [ho, wo] = g.output();
    <FloatTensor<B>>::from_values(y, Shape::from([g.input[0], o, ho, wo]))
}

/// [`FusedKernels::fused_conv_backward`] on a CPU backend, per kernel group: with `∂y` as
/// `[N·L, O]` rows, `∂W = ∂yᵀ · im2col(x)` and `∂x = col2im(∂y · W)`.
fn conv_backward<B: Backend>(
    x: FloatTensor<B>,
    w: FloatTensor<B>,
    dy: FloatTensor<B>,
    g: ConvGeometry,
    wanted: [bool; 2],
) -> (Option<FloatTensor<B>>, Option<FloatTensor<B>>)
where
    FloatTensor<B>: CpuTensor,
{
    let groups = KernelGroups::of(&w.shape(), &g);
    let (n, o, cells) = (groups.geometry.input[0], groups.out, g.cells());
    // SAFETY: `transpose_inner` writes every element of its output.
    let dy_rows = unsafe {
        filled(g.input[0] * cells * o, |r| {
            conv::transpose_inner(&dy.values(), g.input[0], o, cells, r)
        })
    };
    let dy_rows = <FloatTensor<B>>::from_values(dy_rows, Shape::from([g.input[0] * cells, o]));
    let xv = x.values();
    let kernel_len = o * groups.geometry.columns();
    let dw = wanted[1].then(|| {
        let dw = written(w.shape().num_elements(), |dw| {
            for r in groups.chunks() {
                let cols = groups.columns::<B>(&xv, r.clone());
                let dy_r = groups.blocks::<B>(&dy_rows, r.clone(), [n * cells, o]);
                let dw_r = <FloatTensor<B>>::product(&dy_r, true, &cols, false);
                dw[r.start * kernel_len..r.end * kernel_len].copy_from_slice(&dw_r.values());
            }
        });
        <FloatTensor<B>>::from_values(dw, w.shape())
    });
    let dx = wanted[0].then(|| {
        let dx = written(x.shape().num_elements(), |dx| {
            for r in groups.chunks() {
                let dy_r = groups.blocks::<B>(&dy_rows, r.clone(), [n * cells, o]);
                let kernels = groups.kernels::<B>(&w, r.clone());
                let dcols = <FloatTensor<B>>::product(&dy_r, false, &kernels, false);
                let len = groups.input_len();
                let dx = &mut dx[r.start * len..r.end * len];
                conv::col2im(&dcols.values(), &groups.geometry_of(&r), dx);
            }
        });
        <FloatTensor<B>>::from_values(dx, x.shape())
    });
    (dx, dw)
}

macro_rules! cpu_fused_kernels {
    ($backend:ty) => {
        impl FusedKernels for $backend {
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
                        let view = LocScale {
                            mu: &mu,
                            rho: &rho,
                            rule: q.rule,
                        };
                        let d = Draws {
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
                    let view = LocScale {
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
                    let view = LocScale {
                        mu: &mu,
                        rho: &rho,
                        rule: q.rule,
                    };
                    let grads = Grads { mu: dm, rho: dg };
                    elementwise::sample_ratio_backward(key, view, prior, dw, dr, grads);
                });
                (
                    <FloatTensor<Self>>::from_values(dmu, shape.clone()),
                    <FloatTensor<Self>>::from_values(drho, shape),
                )
            }

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
                        let view = LocScale {
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
                    let view = LocScale {
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

            fn fused_kl(q: LocScaleTensors<Self>, prior: PriorTensors<Self>) -> FloatTensor<Self> {
                let (mu, rho) = loc_scale_values(&q);
                let values = prior_values(&prior);
                let view = LocScale {
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
                    let view = LocScale {
                        mu: &mu,
                        rho: &rho,
                        rule: q.rule,
                    };
                    elementwise::kl_backward(g, view, prior, Grads { mu: dm, rho: dr });
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
                let k = factor.shape()[1];
                let (f, r) = (factor.values(), rho.values());
                let inv_prior_var =
                    f64::from(prior.terms().expect("the factor's KL prior").inv_var_mu);
                let values = prior_values(&prior);
                let std = values.as_ref().map(|(_, std)| &std[..]);
                let kl = factor::FactorKl {
                    f: &f,
                    rho: &r,
                    rule,
                    k,
                    scale,
                    inv_prior_var,
                    prior_std: std,
                };
                let (value, inv) = factor::factor_kl(&kl);
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
                let k = f_shape[1];
                let (f, r) = (factor.values(), rho.values());
                let inv_prior_var =
                    f64::from(prior.terms().expect("the factor's KL prior").inv_var_mu);
                let values = prior_values(&prior);
                let std = values.as_ref().map(|(_, std)| &std[..]);
                let g = f64::from(dvalue.values()[0]);
                let mut dr = Vec::new();
                let df = written(f.len(), |df| {
                    dr = written(r.len(), |dr| {
                        let kl = factor::FactorKl {
                            f: &f,
                            rho: &r,
                            rule,
                            k,
                            scale,
                            inv_prior_var,
                            prior_std: std,
                        };
                        factor::factor_kl_backward(&kl, &inv, g, df, dr);
                    });
                });
                (
                    <FloatTensor<Self>>::from_values(df, f_shape),
                    <FloatTensor<Self>>::from_values(dr, r_shape),
                )
            }

            fn fused_flip(x: FloatTensor<Self>, key: u64, inner: usize) -> FloatTensor<Self> {
                let shape = x.shape();
                let x = x.values();
                let y = written(shape.num_elements(), |y| {
                    elementwise::flip(key, &x, inner, y)
                });
                <FloatTensor<Self>>::from_values(y, shape)
            }

            fn fused_dropout(
                x: FloatTensor<Self>,
                key: u64,
                p: f64,
                noise: DropoutNoise,
            ) -> FloatTensor<Self> {
                let shape = x.shape();
                let x = x.values();
                let y = written(shape.num_elements(), |y| {
                    elementwise::dropout(key, &x, p, noise, y)
                });
                <FloatTensor<Self>>::from_values(y, shape)
            }

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

            fn fused_conv(
                x: FloatTensor<Self>,
                w: FloatTensor<Self>,
                g: ConvGeometry,
            ) -> FloatTensor<Self> {
                conv_forward::<Self>(x, w, g)
            }

            fn fused_conv_backward(
                x: FloatTensor<Self>,
                w: FloatTensor<Self>,
                dy: FloatTensor<Self>,
                g: ConvGeometry,
                wanted: [bool; 2],
            ) -> (Option<FloatTensor<Self>>, Option<FloatTensor<Self>>) {
                conv_backward::<Self>(x, w, dy, g, wanted)
            }

            fn fused_matmul(x: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self> {
                <FloatTensor<Self>>::product(&x, false, &w, false)
            }

            fn fused_matmul_backward(
                x: FloatTensor<Self>,
                w: FloatTensor<Self>,
                dy: FloatTensor<Self>,
                wanted: [bool; 2],
            ) -> (Option<FloatTensor<Self>>, Option<FloatTensor<Self>>) {
                let dx = wanted[0].then(|| <FloatTensor<Self>>::product(&dy, false, &w, true));
                let dw = wanted[1].then(|| <FloatTensor<Self>>::product(&x, true, &dy, false));
                (dx, dw)
            }

            fn fused_adam(
                param: FloatTensor<Self>,
                grad: FloatTensor<Self>,
                moment_1: FloatTensor<Self>,
                moment_2: FloatTensor<Self>,
                step: AdamStep,
            ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
                let g = grad.values();
                let mut m_out = None;
                let mut v_out = None;
                let param = param.rewrite(|p| {
                    let m = moment_1.rewrite(|m| {
                        let v = moment_2.rewrite(|v| elementwise::adam(p, &g, m, v, step));
                        v_out = Some(v);
                    });
                    m_out = Some(m);
                });
                (param, m_out.expect("written"), v_out.expect("written"))
            }
        }
    };
}

#[cfg(feature = "flex")]
mod flex {
    use super::*;
    use burn::backend::Flex;
    use burn::backend::flex::{FlexTensor, Layout};
    use burn::tensor::{Bytes, DType};
    use rayon::prelude::*;

    impl CpuTensor for FlexTensor {
        fn values(&self) -> Cow<'_, [f32]> {
            assert_eq!(self.dtype(), DType::F32, "the fused kernels are f32-only");
            match self.as_slice::<f32>() {
                Some(s) => Cow::Borrowed(s),
                None => Cow::Owned(
                    self.to_contiguous()
                        .as_slice::<f32>()
                        .expect("contiguous")
                        .to_vec(),
                ),
            }
        }

        fn from_values(values: Vec<f32>, shape: Shape) -> Self {
            FlexTensor::new(
                Bytes::from_elems(values),
                Layout::contiguous(shape),
                DType::F32,
            )
        }

        fn rewrite(self, f: impl FnOnce(&mut [f32])) -> Self {
            let whole = self.layout().contiguous_offsets()
                == Some((0, self.shape().num_elements()))
                && self.storage::<f32>().len() == self.shape().num_elements();
            let mut t = if whole { self } else { self.to_contiguous() };
            // Copy-on-write when the buffer is shared.
            f(t.storage_mut::<f32>());
            t
        }

        /// gemm called directly: burn-flex's `matmul` allocates its output zeroed and copies it
        /// once more to align it (`Bytes::from_bytes_vec`); here gemm writes a fresh buffer
        /// once. Threads as burn-flex does: inside gemm for a product of `m·n·k ≥ 192³`, over
        /// the batch's matrices for four or more of them (or smaller ones) totalling `≥ 128³`.
        fn product(a: &Self, a_t: bool, b: &Self, b_t: bool) -> Self {
            let [batch, m, k, n] = product_dims(&a.shape(), a_t, &b.shape(), b_t);
            let (av, bv) = (a.values(), b.values());
            // Row-major `[m, k]` (or `[k, m]` when transposed): (column, row) strides.
            let strides = |t: bool, cols: usize| {
                if t {
                    (cols as isize, 1)
                } else {
                    (1, cols as isize)
                }
            };
            let (a_cs, a_rs) = strides(a_t, if a_t { m } else { k });
            let (b_cs, b_rs) = strides(b_t, if b_t { k } else { n });
            // The `i`-th product of the batch into `o` (`m·n` elements).
            let one = |o: &mut [MaybeUninit<f32>], i: usize, parallelism: gemm::Parallelism| {
                let (a_i, b_i) = (
                    &av[i * m * k..(i + 1) * m * k],
                    &bv[i * k * n..(i + 1) * k * n],
                );
                // SAFETY: `o` holds `m·n` elements, `a_i` `m·k` and `b_i` `k·n` (the slices
                // above, of buffers `product_dims` and `values` sized), addressed by the strides
                // above; with `read_dst = false` gemm writes every element of `o` and reads none.
                unsafe {
                    gemm::gemm(
                        m,
                        n,
                        k,
                        o.as_mut_ptr().cast::<f32>(),
                        1,
                        n as isize,
                        false,
                        a_i.as_ptr(),
                        a_cs,
                        a_rs,
                        b_i.as_ptr(),
                        b_cs,
                        b_rs,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        parallelism,
                    );
                }
            };
            // SAFETY: every element is written, by gemm (above) or as a zero.
            let out = unsafe {
                filled(batch * m * n, |o| {
                    if k == 0 || o.is_empty() {
                        for x in o.iter_mut() {
                            x.write(0.0);
                        }
                        return;
                    }
                    let (each, large) = (m * n * k, 192 * 192 * 192);
                    let by_matrix = batch > 1
                        && batch * each >= 128 * 128 * 128
                        && (batch >= 4 || each < large);
                    if by_matrix {
                        o.par_chunks_mut(m * n)
                            .enumerate()
                            .for_each(|(i, o)| one(o, i, gemm::Parallelism::None));
                    } else {
                        let parallelism = match each >= large {
                            true => gemm::Parallelism::Rayon(0),
                            false => gemm::Parallelism::None,
                        };
                        for (i, o) in o.chunks_mut(m * n).enumerate() {
                            one(o, i, parallelism);
                        }
                    }
                })
            };
            let shape = match a.shape().num_dims() {
                3 => Shape::from([batch, m, n]),
                _ => Shape::from([m, n]),
            };
            Self::from_values(out, shape)
        }
    }

    cpu_fused_kernels!(Flex);
}

#[cfg(feature = "ndarray")]
mod ndarray {
    use super::*;
    use burn::backend::NdArray;
    use burn::backend::ndarray::NdArrayTensor;
    use burn::tensor::TensorData;

    impl CpuTensor for NdArrayTensor {
        fn values(&self) -> Cow<'_, [f32]> {
            match self {
                NdArrayTensor::F32(s) => {
                    let v = s.view();
                    Cow::Owned(match v.as_slice() {
                        Some(sl) => sl.to_vec(),
                        None => v.iter().copied().collect(),
                    })
                }
                _ => panic!("the fused kernels are f32-only"),
            }
        }

        fn from_values(values: Vec<f32>, shape: Shape) -> Self {
            NdArrayTensor::from_data(TensorData::new(values, shape))
        }

        fn rewrite(self, f: impl FnOnce(&mut [f32])) -> Self {
            let shape = self.shape();
            let mut v = self.values().into_owned();
            f(&mut v);
            Self::from_values(v, shape)
        }

        fn product(a: &Self, a_t: bool, b: &Self, b_t: bool) -> Self {
            product_dims(&a.shape(), a_t, &b.shape(), b_t);
            backend_product::<NdArray>(a.clone(), a_t, b.clone(), b_t)
        }
    }

    cpu_fused_kernels!(NdArray);
}
