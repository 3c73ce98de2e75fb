//! The sampling-free family of Haußmann (2021) ch. 3–4: trained and predicted by moment
//! propagation.

use super::*;

impl Method {
    /// VBP (Haußmann 2021 ch. 3): mean-field weights, the identity–Heaviside gate (C = 100),
    /// trained by moments (the regression noise refit after every epoch), prior precision `α`
    /// (10 for regression, 100 for classification in the thesis).
    pub fn vbp(alpha: f64) -> Self {
        Self::moment_method("VBP", MomentConfig::vbp(), alpha)
    }

    /// The CLT-BNN (Haußmann 2021 ch. 4): exact Gaussian ReLU moments, trained by moments, prior
    /// precision `α`. A regressor refits its noise like VBP's; a classifier uses the multi-label
    /// probit likelihood, trained with the reference code's plug-in loss and predicting by the
    /// exact per-class marginals `Φ(g/√(1 + h))` (eq. 4.4).
    pub fn clt(alpha: f64) -> Self {
        let moments = MomentConfig::clt()
            .with_train_logits(LogitRule::Probit)
            .with_predict_logits(LogitRule::Probit);
        let mut m = Self::moment_method("CLT", moments, alpha);
        m.class_likelihood = ClassLikelihood::MultiLabelProbit;
        m
    }

    /// DVI, diagonal (Wu et al. 2019): CLT moments and, for regression, the heteroscedastic
    /// log-variance head `y ~ N(μ(x), e^{ℓ(x)})` with its closed-form expected log-likelihood;
    /// trained by moments, prior precision `α`.
    pub fn dvi(alpha: f64) -> Self {
        let mut m = Self::moment_method("DVI", MomentConfig::clt(), alpha);
        m.noise = NoiseModel::LogVarianceHead;
        m
    }

    /// DVI as Haußmann (2021) Table 5.2 trains it (the thesis code's `DVINet`, §5.8): the
    /// diagonal DVI of [`Method::dvi`], its classifier trained by the sampled softmax
    /// `(1/S) Σ_s ln softmax(m + s∘ε_s)_y` over `S = 20` draws of the logits' moments
    /// ([`LogitRule::Sampled`]) in place of the Taylor loss, prior precision `α` (10 there).
    /// §5.8 says five draws for every sampling step; the code draws 20 here, as for BEDL.
    pub fn dvi_sampled(alpha: f64) -> Self {
        let mut m = Self::dvi(alpha);
        m.name = "DVI-sampled";
        m.moments = m
            .moments
            .map(|c| c.with_train_logits(LogitRule::Sampled { samples: 20 }));
        m
    }
}
