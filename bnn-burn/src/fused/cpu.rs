//! What the op families' CPU kernels share: Flex and NdArray read their tensors as `f32`
//! slices ([`CpuTensor`], without a copy where the layout allows), and write fresh buffers.

// burn marks its NdArray backend deprecated; the project still offers it as a feature.
#![allow(deprecated)]

use super::args::{LocScaleTensors, PriorTensors};
use super::elementwise::{self, Prior};
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
pub(crate) fn backend_product<B: Backend>(
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
pub(crate) fn product_dims(a: &Shape, a_t: bool, b: &Shape, b_t: bool) -> [usize; 4] {
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
pub(crate) fn written(n: usize, write: impl FnOnce(&mut [f32])) -> Vec<f32> {
    let mut v = vec![0.0f32; n];
    write(&mut v);
    v
}

/// A `Vec` of `n` elements that `write` fills, not zeroed first (the kernels that take
/// `&mut [impl Out]` write every element of their outputs).
///
/// # Safety
/// `write` writes every element of its slice.
pub(crate) unsafe fn filled(n: usize, write: impl FnOnce(&mut [MaybeUninit<f32>])) -> Vec<f32> {
    let mut v = Vec::with_capacity(n);
    write(&mut v.spare_capacity_mut()[..n]);
    // SAFETY: every element was written (the caller's promise); a panic above leaves `v` empty.
    unsafe { v.set_len(n) };
    v
}

/// Two buffers of `n` elements written by `write` (see [`written`]).
pub(crate) fn written2(
    n: usize,
    write: impl FnOnce(&mut [f32], &mut [f32]),
) -> (Vec<f32>, Vec<f32>) {
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
pub(crate) unsafe fn filled2(
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
pub(crate) fn row_of<B: Backend>(t: &FloatTensor<B>, r: usize, shape: Shape) -> FloatTensor<B> {
    let n = shape.num_elements();
    let rows = [Slice::from(r..r + 1), Slice::from(0..n)];
    B::float_reshape(B::float_slice(t.clone(), &rows), shape)
}

/// `t` reshaped (a view).
pub(crate) fn reshaped<B: Backend>(t: FloatTensor<B>, shape: Shape) -> FloatTensor<B> {
    B::float_reshape(t, shape)
}

/// The values of a per-weight prior's mean and standard deviation (both or neither).
pub(crate) type PriorValues<'a> = Option<(Cow<'a, [f32]>, Cow<'a, [f32]>)>;

/// The [`PriorValues`] of an op's prior.
pub(crate) fn prior_values<B: Backend>(prior: &PriorTensors<B>) -> PriorValues<'_>
where
    FloatTensor<B>: CpuTensor,
{
    match prior {
        PriorTensors::PerWeight { mean, std, .. } => Some((mean.values(), std.values())),
        _ => None,
    }
}

/// The kernels' view of [`PriorValues`].
pub(crate) fn per_weight<'a>(values: &'a PriorValues<'_>) -> Option<elementwise::PerWeight<'a>> {
    values
        .as_ref()
        .map(|(mean, std)| elementwise::PerWeight { mean, std })
}

/// The kernels' view of an op's prior, its per-weight values in `values` ([`prior_values`]);
/// `None` for [`PriorTensors::Off`].
pub(crate) fn prior_of<'a, B: Backend>(
    prior: &PriorTensors<B>,
    values: &'a PriorValues<'_>,
) -> Option<Prior<'a>> {
    prior.terms().map(|terms| Prior {
        terms,
        per_weight: per_weight(values),
    })
}

/// The host values of `μ` and `ρ`, for [`LocScale`] views.
pub(crate) fn loc_scale_values<B: Backend>(
    q: &LocScaleTensors<B>,
) -> (Cow<'_, [f32]>, Cow<'_, [f32]>)
where
    FloatTensor<B>: CpuTensor,
{
    (q.mu.values(), q.rho.values())
}

/// The sum of KL terms as a one-element tensor.
pub(crate) fn total<T: CpuTensor>(x: f64) -> T {
    T::from_values(vec![x as f32], Shape::from([1]))
}

#[cfg(feature = "flex")]
mod flex {
    use super::*;
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
}
