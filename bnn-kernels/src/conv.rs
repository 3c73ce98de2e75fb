//! A 2-D convolution (one group) as `im2col` and one matrix product, with a hand-written
//! backward pass: `y = cols · Wᵀ`, `∂W = ∂yᵀ · cols`, `∂x = col2im(∂y · W)`. Each gradient is one
//! product, where burn's convolution runs a transposed and a dilated convolution. The slice kernels
//! are parallel over images; the products are gemm's on Flex, the backend's `matmul` on NdArray.
//! More: the book's *Fused kernels* page.

use crate::simd::Out;
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// The geometry of a convolution of `[N, C, H, W]` images by `[O, C, kh, kw]` kernels: zero
/// padding on both sides, one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvGeometry {
    /// `[N, C, H, W]` of the input.
    pub input: [usize; 4],
    /// `(kh, kw)`.
    pub kernel: [usize; 2],
    /// Stride in (height, width), non-zero.
    pub stride: [usize; 2],
    /// Zero padding in (height, width), each side.
    pub padding: [usize; 2],
    /// Dilation in (height, width), non-zero.
    pub dilation: [usize; 2],
}

impl ConvGeometry {
    /// `(H', W')`: `⌊(H + 2p − d(k − 1) − 1)/s⌋ + 1` on each axis.
    ///
    /// # Panics
    /// If the dilated kernel does not fit the padded input, or a stride or dilation is 0.
    pub fn output(&self) -> [usize; 2] {
        [0, 1].map(|a| {
            let (size, k, s, p, d) = (
                self.input[2 + a],
                self.kernel[a],
                self.stride[a],
                self.padding[a],
                self.dilation[a],
            );
            assert!(s > 0 && d > 0, "conv: stride and dilation must be non-zero");
            let span = d * (k.max(1) - 1) + 1;
            assert!(
                k > 0 && size + 2 * p >= span,
                "conv: a kernel of {k} (dilation {d}) does not fit an axis of {size} padded by {p}"
            );
            (size + 2 * p - span) / s + 1
        })
    }

    /// `L = H'·W'`, output cells per image.
    pub fn cells(&self) -> usize {
        let [ho, wo] = self.output();
        ho * wo
    }

    /// `C·kh·kw`, the columns of `im2col`.
    pub fn columns(&self) -> usize {
        self.input[1] * self.kernel[0] * self.kernel[1]
    }

    /// Elements of one input image, `C·H·W`.
    fn image(&self) -> usize {
        self.input[1] * self.input[2] * self.input[3]
    }

    /// For output coordinate `o` and kernel offset `k` on axis `a`, the input coordinate, or
    /// `None` in the padding.
    fn source(&self, a: usize, o: usize, k: usize) -> Option<usize> {
        let at = o * self.stride[a] + k * self.dilation[a];
        at.checked_sub(self.padding[a])
            .filter(|&i| i < self.input[2 + a])
    }

    /// The windows' sources along axis `a`: for each output coordinate, the input coordinate
    /// of each kernel offset (`usize::MAX` in the padding), and whether all of them are inside
    /// and consecutive (dilation 1), so the window's row is one slice of the input.
    fn sources(&self, a: usize) -> (Vec<usize>, Vec<Option<usize>>) {
        let k = self.kernel[a];
        let out = self.output()[a];
        let mut at = Vec::with_capacity(out * k);
        let mut run = Vec::with_capacity(out);
        for o in 0..out {
            let row: Vec<Option<usize>> = (0..k).map(|j| self.source(a, o, j)).collect();
            let first = row[0];
            let consecutive = self.dilation[a] == 1 && row.iter().all(Option::is_some);
            run.push(if consecutive { first } else { None });
            at.extend(row.into_iter().map(|i| i.unwrap_or(usize::MAX)));
        }
        (at, run)
    }
}

/// The windows of one geometry, tabulated once per call.
struct Windows<'a> {
    g: &'a ConvGeometry,
    /// Per output row, the input row of each kernel row (`usize::MAX` in the padding).
    ys: Vec<usize>,
    /// Per output column, the input column of each kernel column (`usize::MAX` in the
    /// padding), and the first one when the window's columns are one inside run.
    xs: (Vec<usize>, Vec<Option<usize>>),
}

impl<'a> Windows<'a> {
    fn new(g: &'a ConvGeometry) -> Self {
        Self {
            g,
            ys: g.sources(0).0,
            xs: g.sources(1),
        }
    }

    /// Visits the kernel rows of output cell `(oy, ox)`'s window: `f(j, input, span)` with `j`
    /// the row's first column in `cols`, `input` the offset of its input row within the image
    /// (`[C, H, W]`; `None` in the padding), and `span` how its `kw` columns read that row:
    /// `Ok(ix)`, the consecutive run from `ix`, or `Err(xs)`, one input column per kernel
    /// column (`usize::MAX` in the padding).
    #[inline(always)]
    fn rows(
        &self,
        oy: usize,
        ox: usize,
        mut f: impl FnMut(usize, Option<usize>, Result<usize, &[usize]>),
    ) {
        let [_, c, h, w] = self.g.input;
        let [kh, kw] = self.g.kernel;
        let span = self.xs.1[ox].ok_or(&self.xs.0[ox * kw..(ox + 1) * kw]);
        for ch in 0..c {
            for ky in 0..kh {
                let iy = self.ys[oy * kh + ky];
                let input = (iy != usize::MAX).then(|| (ch * h + iy) * w);
                f((ch * kh + ky) * kw, input, span);
            }
        }
    }

    /// Writes the window of output cell `(oy, ox)` of image `x` (`[C, H, W]`) into `row`, every
    /// element of it.
    #[inline(always)]
    fn read(&self, x: &[f32], oy: usize, ox: usize, row: &mut [MaybeUninit<f32>]) {
        let [kw, w] = [self.g.kernel[1], self.g.input[3]];
        self.rows(oy, ox, |j, input, span| {
            let dst = &mut row[j..j + kw];
            let Some(at) = input else {
                for d in dst.iter_mut() {
                    d.write(0.0);
                }
                return;
            };
            let src = &x[at..at + w];
            match span {
                Ok(ix) => {
                    for (d, &v) in dst.iter_mut().zip(&src[ix..ix + kw]) {
                        d.write(v);
                    }
                }
                Err(xs) => {
                    for (d, &ix) in dst.iter_mut().zip(xs) {
                        d.write(if ix == usize::MAX { 0.0 } else { src[ix] });
                    }
                }
            }
        });
    }

    /// Adds `row` back into the window of output cell `(oy, ox)` of `dx` (`[C, H, W]`).
    #[inline(always)]
    fn add(&self, row: &[f32], oy: usize, ox: usize, dx: &mut [f32]) {
        let [kw, w] = [self.g.kernel[1], self.g.input[3]];
        self.rows(oy, ox, |j, input, span| {
            let Some(at) = input else {
                return;
            };
            let (src, dst) = (&row[j..j + kw], &mut dx[at..at + w]);
            match span {
                Ok(ix) => {
                    for (d, s) in dst[ix..ix + kw].iter_mut().zip(src) {
                        *d += s;
                    }
                }
                Err(xs) => {
                    for (&ix, s) in xs.iter().zip(src) {
                        if ix != usize::MAX {
                            dst[ix] += s;
                        }
                    }
                }
            }
        });
    }
}

/// `cols [N·L, C·kh·kw]` of `x [N, C, H, W]` (row-major slices).
///
/// # Panics
/// If `x` or `cols` do not have the geometry's sizes.
pub fn im2col(x: &[f32], g: &ConvGeometry, cols: &mut [impl Out]) {
    let cols = Out::as_uninit(cols);
    let (image, rows, width) = (g.image(), g.cells(), g.columns());
    assert_eq!(x.len(), g.input[0] * image, "im2col: input length");
    assert_eq!(cols.len(), g.input[0] * rows * width, "im2col: cols length");
    let [_, wo] = g.output();
    if rows * width == 0 {
        return;
    }
    let windows = Windows::new(g);
    cols.par_chunks_mut(rows * width)
        .zip(x.par_chunks(image.max(1)))
        .for_each(|(out, x)| {
            for (cell, row) in out.chunks_exact_mut(width).enumerate() {
                windows.read(x, cell / wo, cell % wo, row);
            }
        });
}

/// `dx [N, C, H, W]`, the adjoint of [`im2col`]: each row of `dcols [N·L, C·kh·kw]` added back
/// into its window (overwrites `dx`).
///
/// # Panics
/// If `dcols` or `dx` do not have the geometry's sizes.
pub fn col2im(dcols: &[f32], g: &ConvGeometry, dx: &mut [f32]) {
    let (image, rows, width) = (g.image(), g.cells(), g.columns());
    assert_eq!(dx.len(), g.input[0] * image, "col2im: input length");
    assert_eq!(
        dcols.len(),
        g.input[0] * rows * width,
        "col2im: cols length"
    );
    let [_, wo] = g.output();
    if image == 0 {
        return;
    }
    let windows = Windows::new(g);
    dx.par_chunks_mut(image)
        .zip(dcols.par_chunks((rows * width).max(1)))
        .for_each(|(dx, dcols)| {
            dx.fill(0.0);
            if width == 0 {
                return;
            }
            for (cell, row) in dcols.chunks_exact(width).enumerate() {
                windows.add(row, cell / wo, cell % wo, dx);
            }
        });
}

/// `[N, B, A]` from `[N, A, B]` (row-major), parallel over the leading axis: the move between
/// the products' `[N·L, O]` rows and the images' `[N, O, L]` channels.
///
/// # Panics
/// If the lengths are not `n·a·b`.
pub fn transpose_inner(x: &[f32], n: usize, a: usize, b: usize, out: &mut [impl Out]) {
    let out = Out::as_uninit(out);
    assert_eq!(x.len(), n * a * b, "transpose_inner: input length");
    assert_eq!(out.len(), n * a * b, "transpose_inner: output length");
    if a * b == 0 {
        return;
    }
    out.par_chunks_mut(a * b)
        .zip(x.par_chunks(a * b))
        .for_each(|(out, x)| {
            for (i, row) in x.chunks_exact(b).enumerate() {
                for (j, &v) in row.iter().enumerate() {
                    out[j * a + i].write(v);
                }
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry(
        input: [usize; 4],
        kernel: [usize; 2],
        s: usize,
        p: usize,
        d: usize,
    ) -> ConvGeometry {
        ConvGeometry {
            input,
            kernel,
            stride: [s, s + 1],
            padding: [p, p],
            dilation: [d, d],
        }
    }

    /// `⟨im2col(x), c⟩ = ⟨x, col2im(c)⟩` for arbitrary `x, c`, and im2col matches the
    /// definition element by element.
    #[test]
    fn col2im_is_the_adjoint_of_im2col_and_im2col_reads_each_window() {
        for g in [
            geometry([2, 3, 7, 6], [3, 2], 1, 0, 1),
            geometry([3, 2, 9, 8], [3, 3], 2, 1, 1),
            geometry([1, 1, 8, 9], [2, 3], 1, 2, 2),
        ] {
            let n = g.input.iter().product::<usize>();
            let x: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 101) as f32) * 0.1 - 5.0)
                .collect();
            let m = g.input[0] * g.cells() * g.columns();
            let c: Vec<f32> = (0..m)
                .map(|i| ((i * 53 % 89) as f32) * 0.05 - 2.0)
                .collect();
            let mut cols = vec![f32::NAN; m];
            im2col(&x, &g, &mut cols);
            let mut back = vec![f32::NAN; n];
            col2im(&c, &g, &mut back);
            let lhs: f64 = cols.iter().zip(&c).map(|(a, b)| (a * b) as f64).sum();
            let rhs: f64 = x.iter().zip(&back).map(|(a, b)| (a * b) as f64).sum();
            assert!(
                (lhs - rhs).abs() < 1e-3 * lhs.abs().max(1.0),
                "{g:?}: {lhs} vs {rhs}"
            );

            let [_, ch, h, w] = g.input;
            let [kh, kw] = g.kernel;
            let [ho, wo] = g.output();
            for b in 0..g.input[0] {
                for oy in 0..ho {
                    for ox in 0..wo {
                        for c0 in 0..ch {
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy = (oy * g.stride[0] + ky * g.dilation[0]) as isize
                                        - g.padding[0] as isize;
                                    let ix = (ox * g.stride[1] + kx * g.dilation[1]) as isize
                                        - g.padding[1] as isize;
                                    let want =
                                        if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize
                                        {
                                            0.0
                                        } else {
                                            x[((b * ch + c0) * h + iy as usize) * w + ix as usize]
                                        };
                                    let row = b * ho * wo + oy * wo + ox;
                                    let col = (c0 * kh + ky) * kw + kx;
                                    assert_eq!(cols[row * g.columns() + col], want);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn transpose_inner_swaps_the_two_inner_axes() {
        let x: Vec<f32> = (0..24).map(|i| i as f32).collect();
        let mut out = vec![0.0; 24];
        transpose_inner(&x, 2, 3, 4, &mut out);
        for n in 0..2 {
            for a in 0..3 {
                for b in 0..4 {
                    assert_eq!(out[n * 12 + b * 3 + a], x[n * 12 + a * 4 + b]);
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn a_kernel_larger_than_the_padded_input_is_refused() {
        geometry([1, 1, 3, 3], [5, 5], 1, 0, 1).output();
    }
}
