//! The autodiff side every op family shares: one graph node type, [`Node`], whose state is the
//! op's [`Adjoint`] (what it keeps of the forward pass, and how it turns its output's gradient
//! into its parents'). Most ops regenerate their `ε` from the key in the backward pass; the draws
//! of `sample_op` keep a tape of `ε·dσ/dρ` instead.

use super::args::{LocScaleTensors, PriorTensors};
use burn::backend::Backend;
use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, NodeGuard, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use std::marker::PhantomData;

/// The inner primitives of a prior (a constant: its graph nodes are not followed).
pub(super) fn inner_prior<B: Backend, C: CheckpointStrategy>(
    prior: PriorTensors<Autodiff<B, C>>,
) -> PriorTensors<B> {
    match prior {
        PriorTensors::Off => PriorTensors::Off,
        PriorTensors::Scalar(terms) => PriorTensors::Scalar(terms),
        PriorTensors::PerWeight { terms, mean, std } => PriorTensors::PerWeight {
            terms,
            mean: mean.into_primitive(),
            std: std.into_primitive(),
        },
    }
}

/// The inner primitives of a location-scale argument (clones: the graph keeps the originals).
pub(super) fn inner_q<B: Backend, C: CheckpointStrategy>(
    q: &LocScaleTensors<Autodiff<B, C>>,
) -> LocScaleTensors<B> {
    LocScaleTensors {
        mu: q.mu.primitive().clone(),
        rho: q.rho.primitive().clone(),
        rule: q.rule,
    }
}

/// A fused op's backward pass as data: what it keeps of the forward pass, and how the gradient
/// `g` of its output becomes its `N` parents' (`wanted[i]`: parent `i` is tracked; the others'
/// entries may be `None`).
pub(super) trait Adjoint<B: Backend, const N: usize>:
    Clone + Send + std::fmt::Debug + 'static
{
    fn grads(self, g: FloatTensor<B>, wanted: [bool; N]) -> [Option<FloatTensor<B>>; N];
}

/// The one autodiff node of the fused ops: its state is the op's [`Adjoint`].
#[derive(Debug)]
pub(super) struct Node<S>(PhantomData<fn() -> S>);

impl<S> Node<S> {
    /// The node of an op whose state is `S`.
    pub(super) fn new() -> Self {
        Self(PhantomData)
    }
}

impl<B: Backend, S: Adjoint<B, N>, const N: usize> Backward<B, N> for Node<S> {
    type State = S;

    fn backward(self, ops: Ops<S, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let parents = ops.parents.map(|p| p.map(|node| node.id));
        let g = grads.consume::<B>(&ops.node);
        let values = ops.state.grads(g, parents.map(|p| p.is_some()));
        for (id, value) in parents.into_iter().zip(values) {
            if let (Some(id), Some(value)) = (id, value) {
                grads.register::<B>(id, value);
            }
        }
    }
}

/// `out` as one graph node over `parents` whose backward pass is `state()` (built only when a
/// parent is tracked).
pub(super) fn node<B, C, S, const N: usize>(
    parents: [NodeGuard; N],
    out: FloatTensor<B>,
    state: impl FnOnce() -> S,
) -> FloatTensor<Autodiff<B, C>>
where
    B: Backend,
    C: CheckpointStrategy,
    S: Adjoint<B, N>,
{
    match Node::<S>::new()
        .prepare::<C>(parents)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(state(), out),
        OpsKind::UnTracked(prep) => prep.finish(out),
    }
}
