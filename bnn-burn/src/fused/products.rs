//! The weight operations: matrix products (`matmul`, `batched_matmul`) and convolutions with one
//! kernel or one kernel per sample (`conv2d`, `conv2d_per_sample`). The CPU backends unfold
//! windows (`im2col`) a chunk of kernel groups at a time and multiply.

// burn marks its NdArray backend deprecated; the project still offers it as a feature.
#![allow(deprecated)]

use super::prelude::*;

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

/// The products' forward and backward kernels (default bodies: burn's own ops, wgpu's).
#[backend_extension(Flex: cfg(feature = "flex"), NdArray: cfg(feature = "ndarray"), Cube: cfg(feature = "wgpu"))]
pub trait ProductKernels: Backend {
    /// `y = x · w`, `x [rows, k]`, `w [k, n]`; or matrix by matrix over a batch, `x [S, rows, k]`,
    /// `w [S, k, n]` into `[S, rows, n]`. The default body is the backend's `matmul`.
    fn fused_matmul(x: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::float_matmul(x, w)
    }

    /// `(dx, dw) = (dy · wᵀ, xᵀ · dy)`, the gradients of `Σ dy ⊙ y` over
    /// [`ProductKernels::fused_matmul`]'s output, each computed only when `wanted` (`[x, w]`).
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

    /// `(dx, dw)`, the gradients of `Σ dy ⊙ y` over [`ProductKernels::fused_conv`]'s output,
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
}

#[cfg(feature = "wgpu")]
impl ProductKernels for burn::backend::Cube {}

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

/// [`ProductKernels::fused_conv`] on a CPU backend: `y = im2col(x) · Wᵀ` per kernel group (one
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

/// [`ProductKernels::fused_conv_backward`] on a CPU backend, per kernel group: with `∂y` as
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

/// The CPU backends' kernels: slices in, slices out.
macro_rules! cpu_kernels {
    ($backend:ty) => {
        impl ProductKernels for $backend {
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
        }
    };
}

for_cpu_backends!(cpu_kernels);

fused_ops! {
    /// The products as differentiable ops.
    pub trait ProductOps for ProductKernels {
        /// [`ProductKernels::fused_matmul`], differentiable in `x` and `w`.
        fn matmul_op(x: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self>;
        inner {
            Self::fused_matmul(x, w)
        }
        autodiff {
            let y = B::fused_matmul(x.primitive().clone(), w.primitive().clone());
            let parents = [x.node(), w.node()];
            let state = || MatmulAdjoint {
                x: x.into_primitive(),
                w: w.into_primitive(),
            };
            node::<B, C, _, 2>(parents, y, state)
        }

        /// [`ProductKernels::fused_conv`], differentiable in `x` and `w`.
        fn conv_op(x: FloatTensor<Self>, w: FloatTensor<Self>, g: ConvGeometry)
            -> FloatTensor<Self>;
        inner {
            Self::fused_conv(x, w, g)
        }
        autodiff {
            let y = B::fused_conv(x.primitive().clone(), w.primitive().clone(), g);
            let parents = [x.node(), w.node()];
            let state = || ConvAdjoint {
                x: x.into_primitive(),
                w: w.into_primitive(),
                g,
            };
            node::<B, C, _, 2>(parents, y, state)
        }
    }
}

/// [`ProductOps::matmul_op`]'s: the two factors.
#[derive(Debug, Clone)]
struct MatmulAdjoint<B: Backend> {
    x: FloatTensor<B>,
    w: FloatTensor<B>,
}

impl<B: ProductKernels> Adjoint<B, 2> for MatmulAdjoint<B> {
    fn grads(self, dy: FloatTensor<B>, wanted: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let (dx, dw) = B::fused_matmul_backward(self.x, self.w, dy, wanted);
        [dx, dw]
    }
}

/// [`ProductOps::conv_op`]'s: the images, the kernel and the geometry.
#[derive(Debug, Clone)]
struct ConvAdjoint<B: Backend> {
    x: FloatTensor<B>,
    w: FloatTensor<B>,
    g: ConvGeometry,
}

impl<B: ProductKernels> Adjoint<B, 2> for ConvAdjoint<B> {
    fn grads(self, dy: FloatTensor<B>, wanted: [bool; 2]) -> [Option<FloatTensor<B>>; 2] {
        let (dx, dw) = B::fused_conv_backward(self.x, self.w, dy, self.g, wanted);
        [dx, dw]
    }
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
    let y: Tensor<2> = Tensor::from_dispatch(<Dispatch as ProductOps>::matmul_op(
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
    Tensor::from_dispatch(<Dispatch as ProductOps>::matmul_op(
        x.into_dispatch(),
        w.into_dispatch(),
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
    Tensor::from_dispatch(<Dispatch as ProductOps>::conv_op(
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
    let y: Tensor<4> = Tensor::from_dispatch(<Dispatch as ProductOps>::conv_op(
        x.reshape([s * b, c, h, wd]).into_dispatch(),
        w.into_dispatch(),
        g,
    ));
    y.reshape([s, b, o, ho, wo])
}
