"""Users' own NumPyro models: ``sample_tall`` with its defaults against NumPyro's NUTS on the same data.

The models of the 2026-11-29 audit that say the most about the default path
(``docs/sample_tall.md``, "When the posterior is far from its Laplace
approximation"), written as a user would:

* ``poisson``: Poisson regression, log link, 5 features and an exposure offset;
* ``student``: Student-t regression with unknown degrees of freedom and scale, 4 coefficients;
* ``lkj``: a bivariate normal with an ``LKJCholesky`` correlation (its Cholesky factor's unit corner never moves:
  the diagnosis's r̂ once read NaN there and fell silent);
* ``laplace``: ``dist.Laplace`` observations, a likelihood that is not smooth (the Laplace approximation is the
  prior's: the chains were frozen before the random-walk fallback);
* ``rare``: logistic regression with 2% positives (the 2026-11-29 second audit: from the exact origin, where
  NumPyro's ``Bernoulli(logits=…)`` gradient is off by ½ for every datum, the mode search never moved and the path
  took the random walk; ``docs/mode.md``, "A start on a kink");
* ``centred`` and ``noncentred``: a hierarchical logistic regression, 30 groups of ~1,700 rows, with group effects
  ``Normal(mu, tau)`` or ``mu + tau * z`` (the non-centred one lies on a curved ridge that no proposal built on the
  Laplace approximation follows: expected to fail, and to say so).
* ``zero_inflation``: a zero-inflated Poisson (logistic gate, log rate, two covariates each) fitted to pure Poisson
  data (the 2026-11-30 audit): the gate's intercept has a long left tail bounded only by its prior, which the
  Laplace approximation misses. With the plain proxy-HMC move its sd came out about 25% narrow against NUTS, with a
  near-silent diagnosis; the path now tempers the move's momentum there (λ = 3), which gets it right at N = 20,000
  but, on this benchmark's N = 50,000, only to about 20% narrow (r̂ above 1.01 says so; ``docs/sample_tall.md``,
  "Tails wider than the Laplace approximation").

Four more of the likelihoods users write most, none of which the path had seen (the 2026-12-01 audit; each with a
constrained or structured parameter that ``from_numpyro`` must carry):

* ``ordinal``: ordinal logistic regression, four categories, ``dist.OrderedLogistic`` with cutpoints under an
  ``OrderedTransform`` (an ordered vector: the constraint is a transform of the unconstrained draws);
* ``negbin``: negative-binomial regression (``dist.NegativeBinomial2``, log link) with its concentration unknown
  (positive, ``Exponential`` prior);
* ``multinomial``: multinomial (softmax) logistic regression, three classes, the first's logits fixed at 0
  (``dist.Categorical(logits=…)``, a 3 × 2 coefficient matrix);
* ``gamma``: gamma regression, log link, its shape unknown (positive, ``HalfNormal`` prior).

Seven more from the 2026-12-02 twelfth audit:

* ``probit``: probit regression written ``dist.Bernoulli(probs=norm.cdf(a + X @ beta))``, its coefficients large
  (|η| up to 29.6 at the true ones) and 1% of the labels flipped. In float32 that likelihood's second derivative is NaN at rows with
  y = 0 and η < −9.0 (xlogy's 0/p², p² underflowing), so the full-data Hessian is NaN: the mode search stops, the
  path takes the random walk and warns, naming the rows and the fix (``docs/sample_tall.md``, "Second derivatives
  that are not finite");
* ``probit_ndtr``: the same data and model with the fix, the log-likelihood through ``log_ndtr`` in a
  ``numpyro.factor``;
* ``tobit`` and ``tobit_ndtr``: a censored-normal (Tobit) regression, left-censored at 0, its censored rows' term
  written ``log(norm.cdf(−μ/σ))`` inside ``jnp.where`` (NaN second derivatives at 288 rows: warned, the random walk)
  or through ``log_ndtr``;
* ``heteroscedastic``: a linear regression whose noise scale is log-linear in the covariates (8 coefficients);
* ``beta``: beta regression (logit mean, precision ``phi`` unknown);
* ``glmm``: logistic regression with 100 random intercepts (Normal(0, τ), τ unknown; 104 parameters).

Six more from the 2026-12-02 thirteenth audit:

* ``weibull``: Weibull survival regression, right-censored at t = 3 (a censored row's term log S(t) = −(t/λ)ᵏ in a
  ``numpyro.factor``), its shape unknown;
* ``vonmises``: circular regression, ``dist.VonMises`` with a mean direction 0.3 + 2·atan(x·β) and its
  concentration unknown (Bessel functions in the normaliser);
* ``mixture``: a two-component normal mixture regression (``dist.MixtureSameFamily``), locations ordered, the
  weight and both scales learned;
* ``betabinomial``: overdispersed binomial regression (``dist.BetaBinomial``, 20 trials), its concentration unknown;
* ``ar1``: an AR(1) with a covariate, conditional on the first value (rows y_t, y_{t−1}, x_t), φ ∈ (−1, 1) under a
  ``Uniform`` prior;
* ``quantile``: Bayesian quantile regression at q = 0.9 (``dist.AsymmetricLaplaceQuantile``, its scale learned): a
  kink at every datum, so no Laplace approximation; the path takes the exact random walk and says why
  (``tallmcmc.tall_diagnosis.kinked_coordinates``).

Per model: ``sample_tall(model, seed=0)`` (4 × 2,000 draws, 200 warm-up, the defaults) and NumPyro NUTS (2 × 1,000
draws after 1,000 warm-up, sequential), both timed with compilation; then over every coordinate on the constrained
scale z = (mean − mean_NUTS)/√(MCSE² + MCSE_NUTS²) and the sd ratio, with the coordinate whose ratio is furthest
from 1 in its standard errors (each sd's relative error 1/√(2·ESS of the sd), on both sides); the decision, the data per kept step, and the
warnings ``sample_tall`` gave (their first words).

    python benchmarks/bench_user_models.py                       # all twenty-five, N = 50,000 (lkj: 10,000)
    python benchmarks/bench_user_models.py --only laplace noncentred
    python benchmarks/bench_user_models.py --num-data 1000000 --only poisson rare centred --reference-precision highest

On a GPU, JAX's default precision runs a float32 matrix product such as ``X @ beta`` at TF32 (about 10 mantissa
bits), which biases NUTS's gradients and log densities (docs/precision.md; HMCECS was 13.7 MCSE off for that
reason); ``--reference-precision highest`` runs NUTS, the reference, at full float32 precision. ``sample_tall``
always runs at JAX's default, as a user's would: ``from_numpyro`` evaluates the model's products at full float32
precision itself.
"""

from __future__ import annotations

import argparse
import time
import warnings

import arviz as az
import jax
import numpy as np
import numpyro
import numpyro.distributions as dist
from _timing import cpu_probe_ms
from jax.scipy.special import log_ndtr
from jax.scipy.stats import norm
from numpyro.infer import MCMC, NUTS

import tallmcmc
from tallmcmc.examples import zero_inflated_poisson


def poisson(n: int, rng):
    X = rng.normal(size=(n, 5)).astype(np.float32)
    exposure = rng.uniform(0.5, 3.0, n).astype(np.float32)
    y = rng.poisson(exposure * np.exp(1.5 + X @ np.array([0.4, -0.3, 0.2, 0.1, -0.2]))).astype(np.float32)

    def model(X, exposure, y=None):
        a = numpyro.sample("a", dist.Normal(0, 5))
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([5]).to_event(1))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Poisson(jax.numpy.exp(a + X @ beta + jax.numpy.log(exposure))), obs=y)

    return model, (X, exposure), {"y": y}


def student(n: int, rng):
    X = rng.normal(size=(n, 4)).astype(np.float32)
    y = (X @ np.array([1.0, -0.5, 0.3, 0.0]) + 0.7 * rng.standard_t(3, n)).astype(np.float32)

    def model(X, y=None):
        beta = numpyro.sample("beta", dist.Normal(0, 2).expand([4]).to_event(1))
        nu = numpyro.sample("nu", dist.Gamma(2.0, 0.1))
        sigma = numpyro.sample("sigma", dist.HalfNormal(2.0))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.StudentT(nu, X @ beta, sigma), obs=y)

    return model, (X,), {"y": y}


def lkj(n: int, rng):
    n = min(n, 10_000)
    covariance = np.array([[1.5**2, 0.6 * 1.5 * 0.5], [0.6 * 1.5 * 0.5, 0.5**2]])
    Y = rng.multivariate_normal([1.0, -1.0], covariance, n).astype(np.float32)

    def model(Y):
        L = numpyro.sample("L", dist.LKJCholesky(2, 2.0))
        mu = numpyro.sample("mu", dist.Normal(0, 5).expand([2]).to_event(1))
        sigma = numpyro.sample("sigma", dist.HalfNormal(3.0).expand([2]).to_event(1))
        with numpyro.plate("data", Y.shape[0]):
            numpyro.sample("Y", dist.MultivariateNormal(mu, scale_tril=sigma[:, None] * L), obs=Y)

    return model, (Y,), {}


def laplace(n: int, rng):
    X = rng.normal(size=(n, 3)).astype(np.float32)
    y = (0.5 + X @ np.array([1.0, -0.5, 0.3]) + rng.laplace(scale=0.6, size=n)).astype(np.float32)

    def model(X, y=None):
        a = numpyro.sample("a", dist.Normal(0, 5))
        beta = numpyro.sample("beta", dist.Normal(0, 2).expand([3]).to_event(1))
        b = numpyro.sample("b", dist.HalfNormal(2.0))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Laplace(a + X @ beta, b), obs=y)

    return model, (X,), {"y": y}


def rare(n: int, rng):
    X = rng.normal(size=(n, 2)).astype(np.float32)
    y = (rng.random(n) < 1 / (1 + np.exp(4.0 - X @ np.array([0.5, -0.3])))).astype(np.int32)

    def model(X, y=None):
        a = numpyro.sample("a", dist.Normal(0, 5))
        beta = numpyro.sample("beta", dist.Normal(0, 2.5).expand([2]).to_event(1))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=a + X @ beta), obs=y)

    return model, (X,), {"y": y}


def hierarchical(n: int, rng, centred: bool, groups: int = 30):
    group = rng.integers(0, groups, n).astype(np.int32)
    X = rng.normal(size=(n, 3)).astype(np.float32)
    effects = rng.normal(0, 0.8, groups) - 0.5
    y = (rng.random(n) < 1 / (1 + np.exp(-(effects[group] + X @ np.array([0.7, -0.4, 0.2]))))).astype(np.int32)

    def model(X, group, y=None):
        mu = numpyro.sample("mu", dist.Normal(0, 2))
        tau = numpyro.sample("tau", dist.HalfNormal(1.0))
        beta = numpyro.sample("beta", dist.Normal(0, 2).expand([3]).to_event(1))
        with numpyro.plate("groups", groups):
            if centred:
                a = numpyro.sample("a", dist.Normal(mu, tau))
            else:
                a = mu + tau * numpyro.sample("z", dist.Normal(0, 1))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=a[group] + X @ beta), obs=y)

    return model, (X, group), {"y": y}


def zero_inflation(n: int, rng):
    X = rng.normal(size=(n, 2)).astype(np.float32)
    Z = rng.normal(size=(n, 2)).astype(np.float32)
    y = rng.poisson(np.exp(1.0 + X @ np.array([0.4, -0.3]))).astype(np.int32)  # pure Poisson: no zeros inflated
    return zero_inflated_poisson.numpyro_model, (X, Z), {"y": y}  # the example's model (as a user would write it)


def ordinal(n: int, rng):
    X = rng.normal(size=(n, 3)).astype(np.float32)
    latent = X @ np.array([0.8, -0.5, 0.3]) + rng.logistic(size=n)
    y = np.sum(latent[:, None] > np.array([-1.0, 0.2, 1.5]), axis=1).astype(np.int32)

    def model(X, y=None):
        beta = numpyro.sample("beta", dist.Normal(0, 2).expand([3]).to_event(1))
        ordered = dist.transforms.OrderedTransform()
        cutpoints = numpyro.sample(
            "cutpoints", dist.TransformedDistribution(dist.Normal(0, 5).expand([3]).to_event(1), ordered)
        )
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.OrderedLogistic(X @ beta, cutpoints), obs=y)

    return model, (X,), {"y": y}


def negbin(n: int, rng):
    X = rng.normal(size=(n, 3)).astype(np.float32)
    mean, concentration = np.exp(0.5 + X @ np.array([0.3, -0.2, 0.1])), 2.0
    y = rng.negative_binomial(concentration, concentration / (concentration + mean)).astype(np.int32)

    def model(X, y=None):
        a = numpyro.sample("a", dist.Normal(0, 5))
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([3]).to_event(1))
        phi = numpyro.sample("phi", dist.Exponential(0.5))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.NegativeBinomial2(jax.numpy.exp(a + X @ beta), phi), obs=y)

    return model, (X,), {"y": y}


def multinomial(n: int, rng):
    X = rng.normal(size=(n, 3)).astype(np.float32)
    logits = np.column_stack([np.zeros(n), X @ np.array([[0.5, -0.3], [0.2, 0.4], [-0.6, 0.1]]) + [0.3, -0.2]])
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    y = (rng.random(n)[:, None] > np.cumsum(probabilities, axis=1)).sum(axis=1).astype(np.int32)

    def model(X, y=None):
        a = numpyro.sample("a", dist.Normal(0, 5).expand([2]).to_event(1))
        B = numpyro.sample("B", dist.Normal(0, 2).expand([3, 2]).to_event(2))
        logits = jax.numpy.concatenate([jax.numpy.zeros((X.shape[0], 1)), X @ B + a], axis=1)
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Categorical(logits=logits), obs=y)

    return model, (X,), {"y": y}


def gamma(n: int, rng):
    X = rng.normal(size=(n, 2)).astype(np.float32)
    mean, shape = np.exp(1.0 + X @ np.array([0.4, -0.2])), 3.0
    y = rng.gamma(shape, mean / shape).astype(np.float32)

    def model(X, y=None):
        a = numpyro.sample("a", dist.Normal(0, 5))
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([2]).to_event(1))
        k = numpyro.sample("shape", dist.HalfNormal(5.0))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Gamma(k, k / jax.numpy.exp(a + X @ beta)), obs=y)

    return model, (X,), {"y": y}


def probit(n: int, rng, stable: bool = False):
    X = rng.normal(size=(n, 3)).astype(np.float32)
    eta = 0.3 + X @ np.array([6.0, -4.0, 3.0])
    y = (rng.random(n) < norm.cdf(eta)).astype(np.int32)
    y = np.where(rng.random(n) < 0.01, 1 - y, y).astype(np.int32)  # 1% of the labels flipped

    def model(X, y=None):
        a = numpyro.sample("a", dist.Normal(0, 5))
        beta = numpyro.sample("beta", dist.Normal(0, 2).expand([3]).to_event(1))
        eta = a + X @ beta
        with numpyro.plate("data", X.shape[0]):
            if stable:  # the fix the warning gives
                numpyro.factor("y", jax.numpy.where(y == 1, log_ndtr(eta), log_ndtr(-eta)))
            else:
                numpyro.sample("y", dist.Bernoulli(probs=norm.cdf(eta)), obs=y)

    return model, (X,), {"y": y}


def tobit(n: int, rng, stable: bool = False):
    X = rng.normal(size=(n, 3)).astype(np.float32)
    latent = 0.5 + X @ np.array([2.0, -1.5, 1.0]) + 0.5 * rng.normal(size=n)
    y, censored = np.maximum(latent, 0.0).astype(np.float32), (latent <= 0).astype(np.int32)

    def model(X, censored, y=None):
        a = numpyro.sample("a", dist.Normal(0, 5))
        beta = numpyro.sample("beta", dist.Normal(0, 2).expand([3]).to_event(1))
        sigma = numpyro.sample("sigma", dist.HalfNormal(2.0))
        mu = a + X @ beta
        # a censored row's term, log P(latent ≤ 0); the fix the warning gives, or log(Φ) as often written
        below = log_ndtr(-mu / sigma) if stable else jax.numpy.log(norm.cdf(-mu / sigma))
        with numpyro.plate("data", X.shape[0]):
            numpyro.factor("y", jax.numpy.where(censored == 1, below, dist.Normal(mu, sigma).log_prob(y)))

    return model, (X, censored), {"y": y}


def heteroscedastic(n: int, rng):
    X = rng.normal(size=(n, 3)).astype(np.float32)
    scale = np.exp(-0.5 + X @ np.array([0.4, 0.0, -0.3]))
    y = (1.0 + X @ np.array([0.5, -0.3, 0.2]) + scale * rng.normal(size=n)).astype(np.float32)

    def model(X, y=None):
        a = numpyro.sample("a", dist.Normal(0, 5))
        beta = numpyro.sample("beta", dist.Normal(0, 2).expand([3]).to_event(1))
        c = numpyro.sample("c", dist.Normal(0, 5))
        gamma = numpyro.sample("gamma", dist.Normal(0, 2).expand([3]).to_event(1))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Normal(a + X @ beta, jax.numpy.exp(c + X @ gamma)), obs=y)

    return model, (X,), {"y": y}


def beta(n: int, rng):
    X = rng.normal(size=(n, 2)).astype(np.float32)
    mean, precision = 1 / (1 + np.exp(-(0.2 + X @ np.array([0.6, -0.4])))), 8.0
    y = np.clip(rng.beta(mean * precision, (1 - mean) * precision), 1e-4, 1 - 1e-4).astype(np.float32)

    def model(X, y=None):
        a = numpyro.sample("a", dist.Normal(0, 5))
        beta = numpyro.sample("beta", dist.Normal(0, 2).expand([2]).to_event(1))
        phi = numpyro.sample("phi", dist.Gamma(2.0, 0.1))
        mean = jax.nn.sigmoid(a + X @ beta)
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Beta(mean * phi, (1 - mean) * phi), obs=y)

    return model, (X,), {"y": y}


def glmm(n: int, rng, groups: int = 100):
    group = rng.integers(0, groups, size=n).astype(np.int32)
    X = rng.normal(size=(n, 2)).astype(np.float32)
    effects = rng.normal(0, 0.7, size=groups)
    logits = -0.5 + X @ np.array([0.8, -0.4]) + effects[group]
    y = (rng.random(n) < 1 / (1 + np.exp(-logits))).astype(np.int32)

    def model(X, group, y=None):
        a = numpyro.sample("a", dist.Normal(0, 5))
        beta = numpyro.sample("beta", dist.Normal(0, 2).expand([2]).to_event(1))
        tau = numpyro.sample("tau", dist.HalfNormal(1.0))
        with numpyro.plate("groups", groups):
            u = numpyro.sample("u", dist.Normal(0, tau))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=a + X @ beta + u[group]), obs=y)

    return model, (X, group), {"y": y}


def weibull(n: int, rng):
    """Weibull survival regression, right-censored (administrative censoring at t = 3): log S(t) for censored rows."""
    X = rng.normal(size=(n, 3)).astype(np.float32)
    k_true, scale = 1.5, np.exp(0.5 + X @ np.array([0.4, -0.3, 0.2]))
    t = scale * rng.weibull(k_true, size=n)
    censored = (t > 3.0).astype(np.int32)
    t = np.minimum(t, 3.0).astype(np.float32)

    def model(X, censored, t=None):
        a = numpyro.sample("a", dist.Normal(0, 5))
        beta = numpyro.sample("beta", dist.Normal(0, 2).expand([3]).to_event(1))
        k = numpyro.sample("k", dist.Gamma(2.0, 1.0))
        lam = jax.numpy.exp(a + X @ beta)
        with numpyro.plate("data", X.shape[0]):
            observed = dist.Weibull(lam, k).log_prob(t)
            survival = -((t / lam) ** k)
            numpyro.factor("t", jax.numpy.where(censored == 1, survival, observed))

    return model, (X, censored), {"t": t}


def vonmises(n: int, rng):
    """Circular regression: an angle about a mean direction linear in x through 2·atan, concentration unknown."""
    X = rng.normal(size=(n, 2)).astype(np.float32)
    mu = 0.3 + 2 * np.arctan(X @ np.array([0.5, -0.3]))
    y = rng.vonmises(mu, 4.0).astype(np.float32)

    def model(X, y=None):
        a = numpyro.sample("a", dist.Normal(0, 1))
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([2]).to_event(1))
        kappa = numpyro.sample("kappa", dist.Gamma(2.0, 0.2))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.VonMises(a + 2 * jax.numpy.arctan(X @ beta), kappa), obs=y)

    return model, (X,), {"y": y}


def mixture(n: int, rng):
    """Two-component normal mixture regression (MixtureSameFamily), locations ordered, weight and scales learned."""
    X = rng.normal(size=(n, 1)).astype(np.float32)
    z = rng.random(n) < 0.3
    y = np.where(
        z, -1.0 + 0.5 * X[:, 0] + 0.5 * rng.normal(size=n), 2.0 + 0.5 * X[:, 0] + 1.0 * rng.normal(size=n)
    ).astype(np.float32)

    def model(X, y=None):
        w = numpyro.sample("w", dist.Beta(2.0, 2.0))
        loc = numpyro.sample(
            "loc",
            dist.TransformedDistribution(dist.Normal(0, 5).expand([2]).to_event(1), dist.transforms.OrderedTransform()),
        )
        slope = numpyro.sample("slope", dist.Normal(0, 2))
        sigma = numpyro.sample("sigma", dist.HalfNormal(2.0).expand([2]).to_event(1))
        with numpyro.plate("data", X.shape[0]):
            mean = loc + slope * X  # (n, 2)
            mix = dist.MixtureSameFamily(dist.Categorical(probs=jax.numpy.stack([w, 1 - w])), dist.Normal(mean, sigma))
            numpyro.sample("y", mix, obs=y)

    return model, (X,), {"y": y}


def betabinomial(n: int, rng):
    """Overdispersed binomial regression (BetaBinomial, 20 trials), logit mean, concentration unknown."""
    X = rng.normal(size=(n, 2)).astype(np.float32)
    p = 1 / (1 + np.exp(-(-0.4 + X @ np.array([0.5, -0.3]))))
    conc = 10.0
    y = rng.binomial(20, rng.beta(p * conc, (1 - p) * conc)).astype(np.int32)

    def model(X, y=None):
        a = numpyro.sample("a", dist.Normal(0, 5))
        beta = numpyro.sample("beta", dist.Normal(0, 2).expand([2]).to_event(1))
        phi = numpyro.sample("phi", dist.Gamma(2.0, 0.1))
        p = jax.nn.sigmoid(a + X @ beta)
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.BetaBinomial(p * phi, (1 - p) * phi, total_count=20), obs=y)

    return model, (X,), {"y": y}


def ar1(n: int, rng):
    """AR(1) with a covariate, conditional on the first value: rows (y_t, y_{t-1}, x_t); φ ∈ (−1, 1) via Uniform."""
    x = rng.normal(size=n + 1).astype(np.float32)
    y = np.zeros(n + 1)
    for t in range(1, n + 1):
        y[t] = 0.2 + 0.8 * y[t - 1] + 0.5 * x[t] + 0.7 * rng.normal()
    previous, current, covariate = y[:-1].astype(np.float32), y[1:].astype(np.float32), x[1:]

    def model(previous, covariate, y=None):
        c = numpyro.sample("c", dist.Normal(0, 5))
        phi = numpyro.sample("phi", dist.Uniform(-1.0, 1.0))
        b = numpyro.sample("b", dist.Normal(0, 2))
        sigma = numpyro.sample("sigma", dist.HalfNormal(2.0))
        with numpyro.plate("data", previous.shape[0]):
            numpyro.sample("y", dist.Normal(c + phi * previous + b * covariate, sigma), obs=y)

    return model, (previous, covariate), {"y": current}


def quantile(n: int, rng):
    """Bayesian quantile regression at q = 0.9 (AsymmetricLaplaceQuantile): a likelihood with a kink at every row."""
    X = rng.normal(size=(n, 2)).astype(np.float32)
    y = (1.0 + X @ np.array([0.5, -0.4]) + (1 + 0.3 * np.abs(X[:, 0])) * rng.normal(size=n)).astype(np.float32)

    def model(X, y=None):
        a = numpyro.sample("a", dist.Normal(0, 5))
        beta = numpyro.sample("beta", dist.Normal(0, 2).expand([2]).to_event(1))
        s = numpyro.sample("s", dist.HalfNormal(2.0))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.AsymmetricLaplaceQuantile(a + X @ beta, s, quantile=0.9), obs=y)

    return model, (X,), {"y": y}


MODELS = {
    "poisson": poisson,
    "student": student,
    "lkj": lkj,
    "laplace": laplace,
    "rare": rare,
    "centred": lambda n, rng: hierarchical(n, rng, centred=True),
    "noncentred": lambda n, rng: hierarchical(n, rng, centred=False),
    "zero_inflation": zero_inflation,
    "ordinal": ordinal,
    "negbin": negbin,
    "multinomial": multinomial,
    "gamma": gamma,
    "probit": probit,
    "probit_ndtr": lambda n, rng: probit(n, rng, stable=True),
    "tobit": tobit,
    "tobit_ndtr": lambda n, rng: tobit(n, rng, stable=True),
    "heteroscedastic": heteroscedastic,
    "beta": beta,
    "glmm": glmm,
    "weibull": weibull,
    "vonmises": vonmises,
    "mixture": mixture,
    "betabinomial": betabinomial,
    "ar1": ar1,
    "quantile": quantile,
}


def coordinates(draws: dict) -> dict[str, np.ndarray]:
    """(chain, draw) arrays by coordinate name, e.g. ``beta[1]``."""
    out = {}
    for name, value in draws.items():
        value = np.asarray(value, np.float64)
        for index in np.ndindex(*value.shape[2:]):
            out[name + (str(list(index)) if index else "")] = value[(slice(None), slice(None), *index)]
    return out


def _scalar(value) -> float:
    """ArviZ's one-variable answer as a float (a 0-d array, or a one-element one, by version)."""
    return float(np.ravel(np.asarray(value))[0])


def compare(ours: dict, theirs: dict) -> tuple[float, float, float, float, str, str, float]:
    """max |z| of the means, the sd ratios' range, the smallest bulk ESS of ours, the worst mean's coordinate, and
    the coordinate whose sd ratio is furthest from 1 in its standard errors with that z (each sd's relative error
    1/√(2·ESS of the sd), ArviZ's ``method="sd"``, on both sides)."""
    reference, rows = coordinates(theirs), []
    for name, x in coordinates(ours).items():
        if name not in reference or x.std() == 0:
            continue
        y = reference[name]
        z = (x.mean() - y.mean()) / np.hypot(_scalar(az.mcse(x)), _scalar(az.mcse(y)))
        ratio = x.std() / y.std()
        error = ratio * np.sqrt(0.5 / _scalar(az.ess(x, method="sd")) + 0.5 / _scalar(az.ess(y, method="sd")))
        rows.append((abs(z), ratio, _scalar(az.ess(x)), name, (ratio - 1) / error))
    worst = max(rows)
    sd_worst = max(rows, key=lambda row: abs(row[4]))
    return (
        worst[0],
        min(r[1] for r in rows),
        max(r[1] for r in rows),
        min(r[2] for r in rows),
        worst[3],
        sd_worst[3],
        float(sd_worst[4]),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=tuple(MODELS), default=list(MODELS))
    parser.add_argument("--num-data", type=int, default=50_000)
    parser.add_argument(
        "--reference-precision",
        choices=("default", "high", "highest"),
        default="default",
        help="JAX's matmul precision for NUTS, the reference (a GPU's default is TF32)",
    )
    args = parser.parse_args()
    print(
        "| model | N | decision | data per kept step | max \\|z\\| (worst) | sd ratio (furthest from 1) | bulk ESS min | "
        "sample_tall s | NUTS s | sample_tall's warnings |\n|---|---:|---|---:|---|---|---:|---:|---:|---|",
        flush=True,
    )
    for name in args.only:
        model_fn, positional, keywords = MODELS[name](args.num_data, np.random.default_rng(5))
        model = tallmcmc.from_numpyro(model_fn, *positional, **keywords)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            began = time.perf_counter()
            result = tallmcmc.sample_tall(model, seed=0, progress=False)
            ours_seconds = time.perf_counter() - began
        said = "; ".join(
            " ".join(str(warning.message).split()[:7]) + " …"
            for warning in caught
            if "sample_tall" in str(warning.message)
        )
        began = time.perf_counter()
        mcmc = MCMC(
            NUTS(model_fn),
            num_warmup=1000,
            num_samples=1000,
            num_chains=2,
            chain_method="sequential",
            progress_bar=False,
        )
        with jax.default_matmul_precision(None if args.reference_precision == "default" else args.reference_precision):
            mcmc.run(jax.random.key(1), *positional, **keywords)
        nuts_seconds = time.perf_counter() - began
        theirs = {key: value for key, value in mcmc.get_samples(group_by_chain=True).items() if key in result.positions}
        z, low, high, ess, worst, sd_worst, sd_z = compare(result.positions, theirs)
        diagnosis = result.diagnosis
        print(
            f"| {name} | {model.num_data:,} | {diagnosis.decision} | {100 * diagnosis.data_fraction:.3g}% | "
            f"{z:.2f} ({worst}) | {low:.3f}–{high:.3f} ({sd_worst}: {sd_z:+.1f} se) | {ess:,.0f} | {ours_seconds:.1f} | {nuts_seconds:.1f} | "
            f"{said or 'none'} |",
            flush=True,
        )
    print(
        f"\nCPU probe {cpu_probe_ms():.1f} ms; JAX {jax.__version__}, NumPyro {numpyro.__version__}, "
        f"{jax.devices()[0].device_kind}; NUTS at matmul precision {args.reference_precision}"
    )


if __name__ == "__main__":
    main()
