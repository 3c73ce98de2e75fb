//! RAL (Haußmann 2021 ch. 4, Alg. 1): a policy network, itself a CLT-BNN, learns by REINFORCE
//! which of the most uncertain pool rows to label, rewarded by how much retraining improves the
//! labelled row's likelihood and by the diversity of the labels asked for.

use super::ActiveError;
use super::learn::{Acquire, AcquireContext};
use super::score::clt_scores;
use super::select::Pick;
use crate::batch::Batch;
use crate::dist::Moments;
use crate::error::ConfigError;
use crate::host::{HostNormals, matrix, to_vec};
use crate::integrity::{open_json, seal_json, write_atomic};
use crate::layers::{MomentRule, Pass};
use crate::likelihood::MultiLabelProbit;
use crate::metrics::standard_normal_cdf;
use crate::nets::{Bnn, Body, MlpBody, MlpConfig};
use crate::posterior::KlDivergence;
use crate::special::normal_log_cdf;
use crate::train::{load_checkpoint, save_checkpoint};
use burn::module::Module;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{Device, Int, Tensor};
use std::path::Path;

/// RAL's settings (the thesis's in brackets).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RalConfig {
    /// Pool rows ranked by the predictive entropy (1 000).
    pub top: usize,
    /// Every `every`-th row of the ranking is a candidate (20).
    pub every: usize,
    /// Candidates, the policy's actions (50).
    pub candidates: usize,
    /// Hidden units of the policy (256).
    pub hidden: usize,
    /// Prior precision α of the policy's weights (100).
    pub prior_precision: f64,
    /// Discount of the returns (0.95).
    pub gamma: f64,
    /// Adam's learning rate, one step per episode (10⁻³).
    pub learning_rate: f64,
    /// Weight of the policy's `KL(q(φ) ‖ p(φ))` in its loss: one over the episodes of a run
    /// (70 for 50 → 400 labels by 5), each episode one observation of the policy.
    pub kl_weight: f64,
    /// `false`: the policy never learns (Table 4.2's RAL_nograd).
    pub learn: bool,
    /// `true`: the policy is re-initialised every episode (Table 4.2's Reinit RAL).
    pub reinit: bool,
    /// Seed of the policy's initial weights.
    pub seed: u64,
}

impl Default for RalConfig {
    fn default() -> Self {
        Self {
            top: 1000,
            every: 20,
            candidates: 50,
            hidden: 256,
            prior_precision: 100.0,
            gamma: 0.95,
            learning_rate: 1e-3,
            kl_weight: 1.0 / 70.0,
            learn: true,
            reinit: false,
            seed: 0,
        }
    }
}

/// One step of an episode: the state's candidate rows, the action taken, and the picked row's
/// logit moments under the model that picked it.
#[derive(Debug, Clone)]
struct Step {
    state: Vec<f64>,
    action: usize,
    row: usize,
    old: (Vec<f64>, Vec<f64>),
}

/// What one episode's update saw.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Episode {
    /// `R_improv + R_div` per step (R_div on the last).
    pub rewards: Vec<f64>,
    /// The discounted returns `G_t`.
    pub returns: Vec<f64>,
    /// The baseline subtracted.
    pub baseline: f64,
}

/// What RAL keeps between rounds besides its policy.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Memory {
    reward_sum: f64,
    reward_count: usize,
    episodes: Vec<Episode>,
}

/// The policy network: `[C·candidates] → hidden → candidates`, CLT moments, a probit per
/// action.
type Policy = Bnn<MlpBody, MultiLabelProbit>;

/// RAL over a CLT-BNN classifier `Bnn<B, MultiLabelProbit>` of `classes` classes
/// ([`Acquire`]): the state is the pre-probit means of `candidates` rows thinned from the
/// `top` most uncertain (the reference code feeds means only), the policy's action
/// probabilities `a_m ∝ Φ(μ_m/√(1 + v_m))` (eq. 4.5), and after each round's retraining one
/// REINFORCE step on `−Σ_t (G_t − b) ln π(A_t | S_t) + w·KL`.
pub struct Ral {
    config: RalConfig,
    classes: usize,
    labels: Vec<usize>,
    device: Device,
    policy: Policy,
    optim: ModuleOptimizer,
    memory: Memory,
    episode: Vec<Step>,
}

impl Ral {
    /// RAL for a classifier of `classes` classes; `labels` are the data's labels, of which it
    /// reads only those of rows it picked, after they are labelled (the rewards need them).
    ///
    /// # Errors
    /// Sizes of 0, or `γ`, the learning rate or the prior precision out of range.
    pub fn new(
        config: RalConfig,
        classes: usize,
        labels: Vec<usize>,
        device: &Device,
    ) -> Result<Self, ActiveError> {
        let bad = |field, value: String, expected| ConfigError {
            config: "RalConfig",
            field,
            value,
            expected,
        };
        for (field, v) in [
            ("top", config.top),
            ("every", config.every),
            ("candidates", config.candidates),
            ("hidden", config.hidden),
            ("classes", classes),
        ] {
            if v == 0 {
                return Err(bad(field, "0".into(), "at least 1").into());
            }
        }
        if !(0.0..=1.0).contains(&config.gamma) {
            return Err(bad("gamma", config.gamma.to_string(), "in [0, 1]").into());
        }
        for (field, v) in [
            ("learning_rate", config.learning_rate),
            ("prior_precision", config.prior_precision),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(bad(field, v.to_string(), "a finite number > 0").into());
            }
        }
        if !(config.kl_weight.is_finite() && config.kl_weight >= 0.0) {
            return Err(bad("kl_weight", config.kl_weight.to_string(), "finite, ≥ 0").into());
        }
        let device = device.clone().autodiff();
        let policy = Self::init_policy(&config, classes, &device, config.seed)?;
        Ok(Self {
            optim: AdamConfig::new().init(),
            config,
            classes,
            labels,
            device,
            policy,
            memory: Memory::default(),
            episode: Vec::new(),
        })
    }

    fn init_policy(
        config: &RalConfig,
        classes: usize,
        device: &Device,
        seed: u64,
    ) -> Result<Policy, ActiveError> {
        crate::device::uses_generator();
        device.seed(seed);
        Ok(MlpConfig::new(
            classes * config.candidates,
            vec![config.hidden],
            config.candidates,
        )
        .with_weights(crate::recipes::moment_weights(config.prior_precision))
        .init(MultiLabelProbit, device)?)
    }

    /// The episodes learned from so far.
    pub fn episodes(&self) -> &[Episode] {
        &self.memory.episodes
    }

    /// `ln π(· | S)` of the policy for states `[n, C·candidates]`, `[n, candidates]`.
    fn log_policy(policy: &Policy, states: Tensor<2>) -> Result<Tensor<2>, ActiveError> {
        let m = policy.output_moments(states, &mut Pass::moments(MomentRule::Clt))?;
        let [_, n, k] = m.mean.dims();
        let z = m.mean.reshape([n, k]) / (m.var.reshape([n, k]).clamp_min(0.0) + 1.0).sqrt();
        let log_phi = normal_log_cdf(z);
        let norm = crate::special::logsumexp(log_phi.clone(), 1);
        Ok(log_phi - norm)
    }

    /// The candidates of a state: every `every`-th of `ranking` (rows of the data, most
    /// uncertain first), topped up from the ranking's next rows when the thinned list is short.
    fn candidates(&self, ranking: &[usize]) -> Result<Vec<usize>, ActiveError> {
        let k = self.config.candidates;
        let top = &ranking[..ranking.len().min(self.config.top)];
        let mut out: Vec<usize> = top
            .iter()
            .step_by(self.config.every)
            .take(k)
            .copied()
            .collect();
        for r in ranking {
            if out.len() >= k {
                break;
            }
            if !out.contains(r) {
                out.push(*r);
            }
        }
        if out.len() < k {
            return Err(ConfigError {
                config: "RalConfig",
                field: "candidates",
                value: format!("{k} from a pool of {}", ranking.len()),
                expected: "at most the rows left in the pool",
            }
            .into());
        }
        Ok(out)
    }

    /// `Π_c p(y_c | x)` under the multi-label probit of logit moments `(g, h)` for label `y`.
    fn joint(&self, (g, h): &(Vec<f64>, Vec<f64>), y: usize) -> f64 {
        (0..self.classes)
            .map(|c| {
                let z = g[c] / (1.0 + h[c].max(0.0)).sqrt();
                standard_normal_cdf(if c == y { z } else { -z })
            })
            .product()
    }

    /// One REINFORCE step on the episode's steps with returns `g` and baseline `b`.
    fn update(&mut self, steps: &[Step], g: &[f64], b: f64) -> Result<(), ActiveError> {
        let width = steps[0].state.len();
        let states: Vec<f64> = steps.iter().flat_map(|s| s.state.clone()).collect();
        let x = matrix(&states, width, &self.device);
        let logp = Self::log_policy(&self.policy, x)?;
        let n = steps.len();
        let actions: Vec<i64> = steps.iter().map(|s| s.action as i64).collect();
        let idx = Tensor::<1, Int>::from_data(actions.as_slice(), &self.device).reshape([n, 1]);
        let chosen = logp.gather(1, idx).reshape([n]);
        let advantage: Vec<f64> = g.iter().map(|g| g - b).collect();
        let adv = Tensor::<1>::from_data(
            advantage
                .iter()
                .map(|a| *a as f32)
                .collect::<Vec<_>>()
                .as_slice(),
            &self.device,
        );
        let loss = (chosen * adv).sum().neg() + self.policy.kl() * self.config.kl_weight;
        let grads = GradientsParams::from_grads(loss.backward(), &self.policy);
        let policy = self.policy.clone();
        self.policy = self.optim.step(self.config.learning_rate, policy, grads);
        Ok(())
    }
}

impl<B: Body> Acquire<Bnn<B, MultiLabelProbit>> for Ral
where
    B::Input: Batch,
{
    fn name(&self) -> String {
        let c = &self.config;
        let variant = match (c.learn, c.reinit) {
            (false, _) => ", no gradient",
            (true, true) => ", re-initialised",
            (true, false) => "",
        };
        format!(
            "RAL ({} of every {} of the top {}{variant})",
            c.candidates, c.every, c.top
        )
    }

    fn acquire(
        &mut self,
        ctx: &AcquireContext<'_, Bnn<B, MultiLabelProbit>>,
        k: usize,
        rng: &mut HostNormals,
    ) -> Result<Vec<Pick>, ActiveError> {
        if self.config.reinit {
            let seed = self.config.seed ^ (self.memory.episodes.len() as u64 + 1);
            self.policy = Self::init_policy(&self.config, self.classes, &self.device, seed)?;
            self.optim = AdamConfig::new().init();
        }
        // Logit moments of every row left, and its entropy Σ_c H_b(Φ(g_c/√(1 + h_c))).
        let (mut g, mut h) = (Vec::new(), Vec::new());
        let mut entropy = Vec::new();
        for chunk in ctx.left.chunks(1024) {
            let m = ctx.model.predictive_moments(ctx.rows(chunk))?;
            entropy.extend(to_vec(clt_scores(
                Moments::new(m.mean.clone(), m.var.clone()),
                false,
                1,
            )));
            g.extend(to_vec(m.mean));
            h.extend(to_vec(m.var));
        }
        let c = self.classes;
        if g.len() != ctx.left.len() * c {
            return Err(ConfigError {
                config: "Ral",
                field: "classes",
                value: format!(
                    "{c} for a model of {} outputs",
                    g.len() / ctx.left.len().max(1)
                ),
                expected: "the classifier's class count",
            }
            .into());
        }
        let mut order: Vec<usize> = (0..ctx.left.len()).collect();
        order.sort_by(|a, b| entropy[*b].total_cmp(&entropy[*a]));
        let plain = self.device.clone().inner();
        let mut picks = Vec::with_capacity(k);
        for _ in 0..k {
            let cands = self.candidates(&order)?;
            let state: Vec<f64> = cands
                .iter()
                .flat_map(|&i| g[i * c..(i + 1) * c].to_vec())
                .collect();
            let probs: Vec<f64> = to_vec(
                Self::log_policy(&self.policy.valid(), matrix(&state, state.len(), &plain))?.exp(),
            );
            let u = rng.uniform();
            let mut acc = 0.0;
            let mut action = probs.len() - 1;
            for (j, p) in probs.iter().enumerate() {
                acc += p;
                if u < acc {
                    action = j;
                    break;
                }
            }
            let i = cands[action];
            let row = ctx.left[i];
            picks.push(Pick {
                row,
                q: probs[action].clamp(f64::MIN_POSITIVE, 1.0),
                score: Some(entropy[i]),
            });
            self.episode.push(Step {
                state,
                action,
                row,
                old: (
                    g[i * c..(i + 1) * c].to_vec(),
                    h[i * c..(i + 1) * c].to_vec(),
                ),
            });
            order.retain(|&j| j != i);
        }
        Ok(picks)
    }

    fn learn(
        &mut self,
        model: &Bnn<B, MultiLabelProbit>,
        data: &B::Input,
        picks: &[Pick],
    ) -> Result<(), ActiveError> {
        let steps = std::mem::take(&mut self.episode);
        if steps.is_empty() || steps.iter().map(|s| s.row).ne(picks.iter().map(|p| p.row)) {
            return Ok(());
        }
        // R_improv per step: the labelled row's Π_c p(y_c | x) after retraining minus before.
        let rows: Vec<i64> = steps.iter().map(|s| s.row as i64).collect();
        let x = data
            .clone()
            .rows(Tensor::<1, Int>::from_data(rows.as_slice(), &data.device()));
        let m = model.predictive_moments(x)?;
        let (g, h) = (to_vec(m.mean), to_vec(m.var));
        let c = self.classes;
        let mut rewards: Vec<f64> = steps
            .iter()
            .enumerate()
            .map(|(t, s)| {
                let y = self.labels[s.row];
                let new = (
                    g[t * c..(t + 1) * c].to_vec(),
                    h[t * c..(t + 1) * c].to_vec(),
                );
                self.joint(&new, y) - self.joint(&s.old, y)
            })
            .collect();
        // R_div on the last step: distinct labels over requests.
        let mut asked: Vec<usize> = steps.iter().map(|s| self.labels[s.row]).collect();
        asked.sort_unstable();
        asked.dedup();
        *rewards.last_mut().expect("a step") += asked.len() as f64 / steps.len() as f64;
        let mut returns = vec![0.0; rewards.len()];
        let mut acc = 0.0;
        for t in (0..rewards.len()).rev() {
            acc = rewards[t] + self.config.gamma * acc;
            returns[t] = acc;
        }
        let mem = &mut self.memory;
        let baseline = match mem.reward_count {
            0 => 0.0,
            n => mem.reward_sum / n as f64,
        };
        if self.config.learn {
            self.update(&steps, &returns, baseline)?;
        }
        let mem = &mut self.memory;
        mem.reward_sum += rewards.iter().sum::<f64>();
        mem.reward_count += rewards.len();
        mem.episodes.push(Episode {
            rewards,
            returns,
            baseline,
        });
        Ok(())
    }

    fn save(&self, dir: &Path) -> Result<(), ActiveError> {
        save_checkpoint(&self.policy, dir.join(POLICY))?;
        let path = dir.join(MEMORY);
        let value = serde_json::to_value(&self.memory).map_err(|e| state(&path, e))?;
        write_atomic(&path, seal_json(&value).as_bytes()).map_err(|e| state(&path, e))
    }

    fn load(&mut self, dir: &Path) -> Result<(), ActiveError> {
        let path = dir.join(MEMORY);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            // No acquired round was saved yet: nothing learned.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(state(&path, e)),
        };
        let value = open_json(&text).map_err(|e| state(&path, e))?;
        self.memory = serde_json::from_value(value).map_err(|e| state(&path, e))?;
        self.policy = load_checkpoint(self.policy.clone(), dir.join(POLICY))?;
        Ok(())
    }
}

/// The policy's file in a state folder.
const POLICY: &str = "ral-policy.bpk";
/// The baseline and episodes' file.
const MEMORY: &str = "ral.json";

fn state(path: &Path, e: impl std::fmt::Display) -> ActiveError {
    ActiveError::State {
        path: path.display().to_string(),
        problem: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::active::{ActiveConfig, ActiveLearning, ActiveTask, Retrain};
    use crate::host::host_normals;
    use crate::likelihood::LogitRule;
    use crate::nets::MomentConfig;
    use crate::testing::{seeded, test_device};
    use crate::train::{Inference, TrainConfig, train};
    use std::collections::BTreeMap;

    /// Three Gaussian blobs in 2-D, `n` rows, label `i % 3`.
    fn blobs(n: usize) -> (Vec<f64>, Vec<usize>) {
        let noise = host_normals(2 * n, 5);
        let centres = [(-2.0, 0.0), (2.0, 0.0), (0.0, 2.5)];
        let mut x = Vec::with_capacity(2 * n);
        let labels: Vec<usize> = (0..n).map(|i| i % 3).collect();
        for (i, y) in labels.iter().enumerate() {
            x.extend([
                centres[*y].0 + noise[2 * i],
                centres[*y].1 + noise[2 * i + 1],
            ]);
        }
        (x, labels)
    }

    struct Clt {
        x: Vec<f64>,
        labels: Vec<usize>,
    }

    impl ActiveTask<Bnn<MlpBody, MultiLabelProbit>> for Clt {
        fn fit(
            &mut self,
            round: usize,
            rows: &[usize],
            _: Option<&[f64]>,
            warm: Option<Bnn<MlpBody, MultiLabelProbit>>,
        ) -> Result<Bnn<MlpBody, MultiLabelProbit>, ActiveError> {
            let device = test_device().autodiff();
            let net = match warm {
                Some(n) => n,
                None => MlpConfig::new(2, vec![16], 3)
                    .init(MultiLabelProbit, &device)?
                    .with_moments(MomentConfig::clt().with_train_logits(LogitRule::Probit))?,
            };
            let x: Vec<f64> = rows
                .iter()
                .flat_map(|&r| [self.x[2 * r], self.x[2 * r + 1]])
                .collect();
            let y: Vec<usize> = rows.iter().map(|&r| self.labels[r]).collect();
            let config = TrainConfig::new(20)
                .with_inference(Inference::Moments)
                .with_batch_size(16)
                .with_learning_rate(0.02)
                .with_seed(round as u64)
                .with_progress(false);
            let data = (matrix(&x, 2, &device), crate::host::labels(&y, &device));
            Ok(train(net, data, &config)?.0)
        }

        fn evaluate(
            &mut self,
            _: &Bnn<MlpBody, MultiLabelProbit>,
            _: &crate::active::ActiveHistory,
        ) -> Result<BTreeMap<String, f64>, ActiveError> {
            Ok(BTreeMap::new())
        }
    }

    #[test]
    fn ral_picks_among_the_most_uncertain_and_learns_once_per_round() {
        let device = test_device();
        let _guard = seeded(&device, 11);
        let n = 240;
        let (x, labels) = blobs(n);
        let config = RalConfig {
            top: 60,
            every: 3,
            candidates: 12,
            hidden: 16,
            ..RalConfig::default()
        };
        let mut ral = Ral::new(config, 3, labels.clone(), &device).unwrap();
        let mut task = Clt {
            x: x.clone(),
            labels,
        };
        let active = ActiveConfig::new(9, 4, 25)
            .with_retrain(Retrain::Warm)
            .with_seed(2);
        let (_, h) = ActiveLearning::new(active)
            .run(&mut ral, matrix(&x, 2, &device), &mut task)
            .unwrap();
        assert_eq!(h.rows().len(), 25);
        assert!(h.acquisition.starts_with("RAL"));
        // Every acquired row has its policy probability and an entropy score.
        for r in &h.rounds[1..] {
            assert!(
                r.picks
                    .iter()
                    .all(|p| p.q > 0.0 && p.q <= 1.0 && p.score.is_some())
            );
        }
        // One episode per acquired round (25 − 9 = 16 rows in rounds of 4).
        assert_eq!(ral.episodes().len(), 4);
        for e in ral.episodes() {
            assert_eq!(e.rewards.len(), 4);
            for t in 0..3 {
                let want = e.rewards[t] + 0.95 * e.returns[t + 1];
                assert!((e.returns[t] - want).abs() < 1e-12);
            }
            // R_improv is a difference of probabilities; R_div in (0, 1] on the last step.
            assert!(e.rewards[..3].iter().all(|r| r.abs() <= 1.0));
            assert!(e.rewards[3] > 0.0 && e.rewards[3] <= 2.0);
        }
        let baselines: Vec<f64> = ral.episodes().iter().map(|e| e.baseline).collect();
        assert_eq!(baselines[0], 0.0);
        let first = &ral.episodes()[0].rewards;
        assert!((baselines[1] - first.iter().sum::<f64>() / 4.0).abs() < 1e-12);
    }

    #[test]
    fn a_reinforce_step_raises_the_probability_of_an_action_with_positive_advantage() {
        let device = test_device();
        let _guard = seeded(&device, 3);
        let config = RalConfig {
            candidates: 5,
            hidden: 8,
            learning_rate: 0.01,
            kl_weight: 0.0,
            ..RalConfig::default()
        };
        let mut ral = Ral::new(config.clone(), 2, Vec::new(), &device).unwrap();
        let state: Vec<f64> = host_normals(10, 1);
        let step = |action| Step {
            state: state.clone(),
            action,
            row: 0,
            old: (Vec::new(), Vec::new()),
        };
        let p = |ral: &Ral| {
            let x = matrix(&state, 10, &device);
            to_vec(Ral::log_policy(&ral.policy.valid(), x).unwrap().exp())
        };
        let before = p(&ral);
        assert!((before.iter().sum::<f64>() - 1.0).abs() < 1e-5);
        for _ in 0..5 {
            ral.update(&[step(2)], &[1.0], 0.0).unwrap();
        }
        let after = p(&ral);
        assert!(after[2] > before[2] + 0.01, "{before:?} → {after:?}");
        // From the same start, a negative advantage lowers the likeliest action's probability.
        let mut ral = Ral::new(config, 2, Vec::new(), &device).unwrap();
        assert_eq!(p(&ral), before);
        let best = (0..5)
            .max_by(|a, b| before[*a].total_cmp(&before[*b]))
            .unwrap();
        for _ in 0..5 {
            ral.update(&[step(best)], &[-1.0], 0.0).unwrap();
        }
        assert!(
            p(&ral)[best] < before[best] - 0.01,
            "{before:?} → {:?}",
            p(&ral)
        );
    }
}
