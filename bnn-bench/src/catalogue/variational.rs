//! The sampled families: point estimates, mean-field, radial, low-rank, dropout masks and
//! DropConnect, and the scale-mixture priors.

use super::*;

impl Method {
    /// A point estimate (MAP) under an N(0, σ₀²) prior.
    pub fn map(prior_std: f64) -> Self {
        let mut m = Self::new(
            "MAP",
            PosteriorConfig::point(),
            Estimator::Reparameterization,
        );
        m.weights.prior = Prior::gaussian(prior_std);
        m
    }

    /// `post` over MAP networks under an N(0, 1) prior.
    pub fn posthoc(name: &'static str, post: PostHoc) -> Self {
        Self {
            name,
            posthoc: Some(post),
            ..Self::map(1.0)
        }
    }

    /// SWAG of rank 20 (Maddox et al. 2019) over `members` MAP networks (MultiSWAG above one).
    pub fn swag(name: &'static str, members: usize) -> Self {
        Self::posthoc(name, PostHoc::Swag { rank: 20, members })
    }

    /// Mean-field Gaussian with the given estimator: MFVI, MFVI-LRT or MFVI-Flipout.
    pub fn mean_field(estimator: Estimator) -> Self {
        let name = match estimator {
            Estimator::Reparameterization => "MFVI",
            Estimator::LocalReparameterization => "MFVI-LRT",
            Estimator::Flipout => "MFVI-Flipout",
        };
        Self::new(name, PosteriorConfig::mean_field(), estimator)
    }

    /// Radial (reparameterisation).
    pub fn radial() -> Self {
        Self::new(
            "Radial",
            PosteriorConfig::radial(),
            Estimator::Reparameterization,
        )
    }

    /// Gal's MC dropout: drop rate `p` on every layer input (per-example masks), prior
    /// length-scale `l` (prior N(0, 1/l²)).
    pub fn mc_dropout(p: f64, length_scale: f64) -> Self {
        let mut m = Self::new(
            "MC dropout",
            PosteriorConfig::mc_dropout(p),
            Estimator::LocalReparameterization,
        );
        m.weights.prior = Prior::from_length_scale(length_scale);
        m
    }

    /// DropConnect: drop rate `p` on every weight, one mask per sample.
    pub fn drop_connect(p: f64, length_scale: f64) -> Self {
        let mut m = Self::new(
            "DropConnect",
            PosteriorConfig::drop_connect(p),
            Estimator::Reparameterization,
        );
        m.weights.prior = Prior::from_length_scale(length_scale);
        m
    }

    /// DropConnect with multiplicative Gaussian masks `z ~ N(1, p/(1−p))` on every weight (the
    /// Bernoulli mask's mean and variance; Gal 2016, §3.2), one mask per sample.
    pub fn gaussian_drop_connect(p: f64, length_scale: f64) -> Self {
        let mut m = Self::drop_connect(p, length_scale);
        m.name = "DropConnect, Gaussian masks";
        m.weights.posterior = PosteriorConfig::Dropout(
            DropoutConfig::new(p)
                .with_noise(DropoutNoise::Gaussian)
                .with_mask(DropoutMask::Weights),
        );
        m
    }

    /// MFVI (reparameterisation) under the scale-mixture prior of Blundell et al. (2015, eq. 7)
    /// with their `π = ½`, `σ₁ = 1`, `σ₂ = e⁻⁶`: a KL without closed form, one Monte Carlo draw
    /// of its cross-entropy per step.
    pub fn mean_field_scale_mixture() -> Self {
        Self::mean_field(Estimator::Reparameterization)
            .under_blundell_mixture("MFVI, scale-mixture prior")
    }

    /// Radial (reparameterisation) under Blundell's scale-mixture prior, as
    /// [`Self::mean_field_scale_mixture`] (Farquhar 2022, App. B.3, tried it for radial).
    pub fn radial_scale_mixture() -> Self {
        Self::radial().under_blundell_mixture("Radial, scale-mixture prior")
    }

    /// `self` named `name`, under the scale mixture `½ N(0, 1) + ½ N(0, e⁻¹²)` of Blundell et
    /// al. (2015).
    fn under_blundell_mixture(mut self, name: &'static str) -> Self {
        self.name = name;
        self.weights.prior = Prior::ScaleMixture {
            pi: 0.5,
            sigma1: 1.0,
            sigma2: (-6f64).exp(),
        };
        self
    }

    /// Low-rank plus diagonal Gaussian of rank `rank` per tensor (Brack 2022).
    pub fn low_rank(rank: usize) -> Self {
        Self::new(
            "Low-rank",
            PosteriorConfig::low_rank(rank),
            Estimator::Reparameterization,
        )
    }
}
