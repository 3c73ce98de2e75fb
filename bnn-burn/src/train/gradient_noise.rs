//! The noise of a sampled gradient: `E‖g − ḡ‖² / ‖ḡ‖²` of the expected NLL's gradient over
//! weight draws on one fixed batch, for a group of parameters (Farquhar 2022 §4.2: mean-field's
//! gradient variance grows with σ, the radial posterior's does not). As a function, and as a
//! training callback that records it every few epochs.

use super::{Callback, EpochStats, Flow, TrainError};
use crate::batch::Batch;
use crate::host::to_vec;
use crate::layers::Pass;
use crate::likelihood::Likelihood;
use crate::nets::{Bnn, Body};
use burn::module::{Module, ModuleVisitor, Param, ParamGroup};
use burn::tensor::Tensor;
use std::sync::{Arc, Mutex};

/// One measurement.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GradientNoiseRecord {
    /// The epoch after which it was taken (the callback), or 0.
    pub epoch: usize,
    /// `Σ_j Var_s[g_j]`: the gradient's total variance over the draws.
    pub noise: f64,
    /// `Σ_j ḡ_j²`: the squared norm of the mean gradient.
    pub signal: f64,
    /// `noise / signal`; with `S` draws it cannot exceed about `S` (`ḡ` is then noise itself).
    pub ratio: f64,
}

/// The gradient noise of `model`'s mean NLL on `(input, target)` over `draws` weight draws (one
/// per pass, as prediction draws them), for the parameters `group` selects (all when `None`;
/// matched by id or by module path, as [`super::LrGroup`] matches). `model` must be on an
/// autodiff device.
///
/// # Panics
/// If `draws < 2`, or the group selects no parameter with a gradient.
pub fn gradient_noise<B: Body, L: Likelihood>(
    model: &Bnn<B, L>,
    input: &B::Input,
    target: &L::Target,
    draws: usize,
    group: Option<&ParamGroup>,
) -> GradientNoiseRecord {
    assert!(draws >= 2, "gradient noise needs at least 2 draws");
    let mut grads: Vec<Vec<f64>> = Vec::with_capacity(draws);
    for _ in 0..draws {
        let out = model.forward(input.clone(), &mut Pass::predict(1));
        let nll = model
            .likelihood
            .log_likelihood(out, target.clone())
            .mean()
            .neg();
        let g = nll.backward();
        let mut collect = Gradients {
            grads: &g,
            group,
            path: Vec::new(),
            values: Vec::new(),
        };
        model.visit(&mut collect);
        grads.push(collect.values);
    }
    let k = grads[0].len();
    assert!(k > 0, "the group selects no parameter with a gradient");
    let (mut noise, mut signal) = (0.0, 0.0);
    for j in 0..k {
        let mean = grads.iter().map(|g| g[j]).sum::<f64>() / draws as f64;
        noise += grads.iter().map(|g| (g[j] - mean).powi(2)).sum::<f64>() / (draws - 1) as f64;
        signal += mean * mean;
    }
    GradientNoiseRecord {
        epoch: 0,
        noise,
        signal,
        ratio: noise / signal,
    }
}

/// Collects the flattened gradients of the selected parameters.
struct Gradients<'a> {
    grads: &'a burn::tensor::Gradients,
    group: Option<&'a ParamGroup>,
    path: Vec<String>,
    values: Vec<f64>,
}

impl ModuleVisitor for Gradients<'_> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let selected = self
            .group
            .is_none_or(|g| g.matches(&param.id, Some(&self.path.join("."))));
        if selected && let Some(g) = param.val().grad(self.grads) {
            self.values.extend(to_vec(g));
        }
    }
}

/// A callback that measures [`gradient_noise`] on a fixed batch after every `every` epochs;
/// read the records through [`GradientNoiseMonitor::handle`].
pub struct GradientNoiseMonitor<I, T> {
    input: I,
    target: T,
    draws: usize,
    every: usize,
    group: Option<ParamGroup>,
    records: Arc<Mutex<Vec<GradientNoiseRecord>>>,
}

impl<I: Batch, T: Batch> GradientNoiseMonitor<I, T> {
    /// Measures on `(input, target)` (moved to the model's device when measured) with `draws`
    /// draws after every `every` epochs.
    ///
    /// # Panics
    /// If `draws < 2` or `every == 0`.
    pub fn new(input: I, target: T, draws: usize, every: usize) -> Self {
        assert!(draws >= 2 && every >= 1, "draws ≥ 2 and every ≥ 1");
        Self {
            input,
            target,
            draws,
            every,
            group: None,
            records: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Only the parameters `group` selects.
    pub fn with_group(mut self, group: ParamGroup) -> Self {
        self.group = Some(group);
        self
    }

    /// The records, shared with the callback the trainer owns.
    pub fn handle(&self) -> Arc<Mutex<Vec<GradientNoiseRecord>>> {
        self.records.clone()
    }
}

impl<B: Body, L: Likelihood> Callback<Bnn<B, L>> for GradientNoiseMonitor<B::Input, L::Target> {
    fn on_epoch_end(&mut self, model: &Bnn<B, L>, stats: &EpochStats) -> Result<Flow, TrainError> {
        if (stats.epoch + 1).is_multiple_of(self.every) {
            let device = model
                .devices()
                .first()
                .cloned()
                .unwrap_or_else(crate::training_device);
            let input = self.input.clone().to(&device);
            let target = self.target.clone().to(&device);
            let mut record =
                gradient_noise(model, &input, &target, self.draws, self.group.as_ref());
            record.epoch = stats.epoch;
            self.records
                .lock()
                .expect("the gradient-noise records' lock")
                .push(record);
        }
        Ok(Flow::Continue)
    }
}
