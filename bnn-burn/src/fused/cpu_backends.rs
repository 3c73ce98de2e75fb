//! [`FusedKernels`] on the CPU backends: Flex and NdArray read their tensors as `f32` slices
//! (without a copy where the layout allows) and run the kernels of [`super::cpu`].

// burn marks its NdArray backend deprecated; the project still offers it as a feature.
#![allow(deprecated)]

use super::cpu::{self, AdamStep, KlTerms};
use super::ext::FusedKernels;
use burn::backend::TensorMetadata;
use burn::backend::tensor::FloatTensor;
use burn::tensor::Shape;
use std::borrow::Cow;

/// How a CPU backend's float tensor is read and written as `f32`.
pub(crate) trait CpuTensor: Sized {
    /// The elements in row-major order (borrowed when contiguous).
    fn values(&self) -> Cow<'_, [f32]>;
    /// A tensor owning `values`.
    fn from_values(values: Vec<f32>, shape: Shape) -> Self;
    /// The tensor after `f` rewrote its elements: in place when its buffer is unshared and
    /// contiguous, on a copy otherwise.
    fn rewrite(self, f: impl FnOnce(&mut [f32])) -> Self;
}

/// A `Vec` of `n` elements that the caller overwrites entirely.
fn output(n: usize) -> Vec<f32> {
    vec![0.0; n]
}

/// The sum of KL terms as a one-element tensor.
fn total<T: CpuTensor>(x: f64) -> T {
    T::from_values(vec![x as f32], Shape::from([1]))
}

macro_rules! cpu_fused_kernels {
    ($backend:ty) => {
        impl FusedKernels for $backend {
            fn fused_normal(like: FloatTensor<Self>, key: u64, stream: u32) -> FloatTensor<Self> {
                let shape = like.shape();
                let mut out = output(shape.num_elements());
                cpu::normals(key, stream, &mut out);
                <FloatTensor<Self>>::from_values(out, shape)
            }

            fn fused_sample(
                mu: FloatTensor<Self>,
                rho: FloatTensor<Self>,
                key: u64,
                scales: Vec<f32>,
                center: bool,
                kl: Option<KlTerms>,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                let n = mu.shape().num_elements();
                let mut w = output(n * scales.len());
                let s = cpu::sample(
                    key,
                    &mu.values(),
                    &rho.values(),
                    &scales,
                    center,
                    &mut w,
                    kl,
                );
                let shape = Shape::from([scales.len(), n]);
                (<FloatTensor<Self>>::from_values(w, shape), total(s))
            }

            fn fused_sample_backward(
                dw: FloatTensor<Self>,
                mu: FloatTensor<Self>,
                rho: FloatTensor<Self>,
                key: u64,
                scales: Vec<f32>,
                center: bool,
                fold: Option<(KlTerms, f32)>,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                let shape = mu.shape();
                let n = shape.num_elements();
                let (mut dmu, mut drho) = (output(n), output(n));
                cpu::sample_backward(
                    key,
                    &dw.values(),
                    &scales,
                    center,
                    &mu.values(),
                    &rho.values(),
                    &mut dmu,
                    &mut drho,
                    fold,
                );
                (
                    <FloatTensor<Self>>::from_values(dmu, shape.clone()),
                    <FloatTensor<Self>>::from_values(drho, shape),
                )
            }

            fn fused_moments(
                mu: FloatTensor<Self>,
                rho: FloatTensor<Self>,
                var_scale: f32,
                kl: Option<KlTerms>,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                let shape = mu.shape();
                let mut var = output(shape.num_elements());
                let s = cpu::moments(&mu.values(), &rho.values(), var_scale, Some(&mut var), kl);
                (<FloatTensor<Self>>::from_values(var, shape), total(s))
            }

            fn fused_moments_backward(
                dvar: FloatTensor<Self>,
                mu: FloatTensor<Self>,
                rho: FloatTensor<Self>,
                var_scale: f32,
                fold: Option<(KlTerms, f32)>,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                let shape = mu.shape();
                let n = shape.num_elements();
                let (mut dmu, mut drho) = (output(n), output(n));
                cpu::moments_backward(
                    Some(&dvar.values()),
                    &mu.values(),
                    &rho.values(),
                    var_scale,
                    &mut dmu,
                    &mut drho,
                    fold,
                );
                (
                    <FloatTensor<Self>>::from_values(dmu, shape.clone()),
                    <FloatTensor<Self>>::from_values(drho, shape),
                )
            }

            fn fused_kl_backward(
                g: FloatTensor<Self>,
                mu: FloatTensor<Self>,
                rho: FloatTensor<Self>,
                terms: KlTerms,
            ) -> (FloatTensor<Self>, FloatTensor<Self>) {
                let shape = mu.shape();
                let n = shape.num_elements();
                let (mut dmu, mut drho) = (output(n), output(n));
                let g = g.values()[0];
                cpu::moments_backward(
                    None,
                    &mu.values(),
                    &rho.values(),
                    1.0,
                    &mut dmu,
                    &mut drho,
                    Some((terms, g)),
                );
                (
                    <FloatTensor<Self>>::from_values(dmu, shape.clone()),
                    <FloatTensor<Self>>::from_values(drho, shape),
                )
            }

            fn fused_noise(
                mean: FloatTensor<Self>,
                var: FloatTensor<Self>,
                key: u64,
            ) -> FloatTensor<Self> {
                let shape = mean.shape();
                let mut y = output(shape.num_elements());
                cpu::noise(key, &mean.values(), &var.values(), &mut y, false);
                <FloatTensor<Self>>::from_values(y, shape)
            }

            fn fused_noise_backward(
                dy: FloatTensor<Self>,
                var: FloatTensor<Self>,
                key: u64,
            ) -> FloatTensor<Self> {
                let shape = dy.shape();
                let mut dvar = output(shape.num_elements());
                cpu::noise(key, &dy.values(), &var.values(), &mut dvar, true);
                <FloatTensor<Self>>::from_values(dvar, shape)
            }

            fn fused_flip(x: FloatTensor<Self>, key: u64, inner: usize) -> FloatTensor<Self> {
                let shape = x.shape();
                let mut y = output(shape.num_elements());
                cpu::flip(key, &x.values(), inner, &mut y);
                <FloatTensor<Self>>::from_values(y, shape)
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
                        let v = moment_2.rewrite(|v| cpu::adam(p, &g, m, v, step));
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
    }

    cpu_fused_kernels!(NdArray);
}
