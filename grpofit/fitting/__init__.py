"""Fit the laws of the registry to one series, with honest uncertainties.

``fit_series(steps, values)`` fits every law of :data:`grpofit.laws.registry.MODELS` (the single
exponential and the damped oscillator, :mod:`grpofit.laws.models`) with a numpy Levenberg-Marquardt solver (:mod:`.lm`: MINPACK
``lmder``'s scaling and stopping rules; the fit path imports no scipy) and returns a
:class:`FitResult` whose ``summary()`` is one entry of the contract's ``fit`` runs list.

Modules: :mod:`.results` (the result objects), :mod:`.profile` (binning, variable projection,
profile), :mod:`.lm` (the Levenberg-Marquardt solver), :mod:`.solve` (the least-squares
solve with bounds), :mod:`.hac` (noise floor, HAC),
:mod:`.intervals` (delta-method and profile intervals), :mod:`.statespace_ci` (plateau and
timescale intervals from the state-space likelihood), :mod:`.regime` (regime, signal and
turn-over tests), :mod:`.turnover` (the turn-over test under the state-space likelihood),
:mod:`.assemble` (solution -> ModelFit), :mod:`.scaling` (values or steps
near the double limits), :mod:`.driver` (:func:`fit_series`).

Method (documented here once; the README links to it):

- **Time origin**: ``t = step - step[0]``; steps are used as logged.
- **Data reduction**: points after ``10 dt`` are pooled in log-spaced bins 12% of their time
  wide and the fits are weighted least squares on the bin means (exact up to ``3e-4`` of the
  gain for a relaxation curve of any timescale); SSR, R^2, AIC/BIC and all uncertainties
  are then computed on every point.
- **Starts and profile** (:mod:`.profile`): for a fixed damping ratio and timescale the law
  is linear in its two levels, solved in closed form (variable projection), vectorised over a
  fixed grid of 19 damping ratios (0.15 .. 12, plus infinity = inertia 0) x 9 timescales
  (x0.2 .. x5 around the data-driven guess :func:`grpofit.laws.models.guess_exponential`), then two
  parabolic steps in ``log Ts`` per row. The grid's best rows start the final fits; the same
  rows are the damping ratio's profile likelihood.
- **Solver** (:mod:`.solve`, :mod:`.lm`): one Levenberg-Marquardt solve per model with the
  analytic Jacobian, on the binned data: numpy, MINPACK ``lmder``'s Marquardt scaling and
  ftol/xtol/gtol tests, steps from an SVD of the scaled Jacobian (the augmented least-squares
  system, no normal equations); it typically converges in ~4 evaluations from the grid's
  start. ``tests/test_fitting.py`` checks it reaches MINPACK's optimum
  (``scipy.optimize.leastsq``, which stays the fallback, imported lazily, when the numpy solver
  reports failure). Bounds the cheap way: internal coordinates ``log timescale`` and
  ``sqrt inertia`` (inertia reaches its bound 0 as under lmfit's bound transform; a fit ending
  within ``1e-4`` timescales of 0 is re-solved with inertia held at 0); a solution outside the
  bounds is re-solved with the offending parameters held at their bounds (levels first) and
  checked for optimality there (KKT); only if that fails, lmfit's bounded
  ``Minimizer.leastsq`` (imported lazily). ``tests/test_fitting.py`` also checks that the
  direct solve and lmfit (:func:`grpofit.laws.models.lmfit_model`) reach the same optimum. Restarts
  only for a poor fit (the oscillator, which nests the exponential, fitting worse than it).
- **Bounds**: ``timescale`` in ``[dt/10, 10 spans]``, ``inertia`` in ``[0, 10 spans]``,
  ``plateau`` and ``initial`` within one data range of the observed range
  (:data:`grpofit.laws.models.LEVEL_MARGIN`): a plateau is never extrapolated further. Intervals
  that reach a bound are clipped to it and say so in ``note`` (not pinned down by the data).
- **Uncertainties** (:mod:`.hac`): training-curve residuals are autocorrelated and
  heteroscedastic, so the textbook covariance is far too narrow. grpofit uses the HAC
  (Newey-West, Bartlett kernel) sandwich ``B^-1 Omega B^-1`` from the Jacobian and residuals on
  every point (``B = J'J``, ``Omega = sum_j w_j sum_t s_t s_{t-j}'``, ``s_t = J_t r_t``, computed
  exactly as ``(1/L) sum_m S_m S_m'`` over sliding window sums). Bandwidth: the larger of
  Andrews' plug-in for a "white + AR(1)" fit of the residual autocorrelation and
  :data:`MIN_BANDWIDTH_FRACTION` of the series; the 95% critical value is the fixed-b one for
  Bartlett (Kiefer-Vogelsang 2005: ``1.96 + 2.9694 b + 0.4160 b^2 - 0.5324 b^3``, ``b = L/n``).
  Timescale and inertia intervals are widened by half the logging interval on each side.
  The timescale interval also covers its own profile likelihood on the grid (its likelihood
  is skewed towards long times when the gain is small against the noise).
- **Plateau and timescale intervals under forcing** (:mod:`.statespace_ci`): the forcing
  ``sqrt(D/G) xi`` moves a run off its curve for a whole relaxation (theory §6), which the HAC
  sandwich of a deterministic curve does not see. After the least-squares fit, each law's
  state-space likelihood (forcing + observation noise; the observation sd from the raw points'
  differences; levels and scale integrated out) is evaluated on a grid of timescale, inertia
  and forcing strength by one batched Kalman filter pass; the plateau's interval is the
  posterior mixture's 2.5/97.5% points (with the fast + slow law of theory §7 mixed in by its
  BIC weight), the timescale's its marginal posterior's. Both are joined with the
  least-squares intervals. ``stderr`` is the posterior sd, printed only where
  ``value ± 1.96 stderr`` agrees with the interval (``None`` and a note otherwise).
- **Damping ratio and inertia**: inertia sits at its bound 0 in overdamped runs, where the
  Jacobian is singular and delta-method intervals fail. Their 95% intervals come from the
  profile likelihood over the grid of damping ratios (:data:`ZETA_GRID`, 0.15 .. 12, plus
  infinity = inertia 0) and the fit itself: ``zeta`` is inside when
  ``dSSR(zeta) <= PROFILE_CALIBRATION * cv^2 * LRV(v r) / sum(v^2)`` (a sandwich-adjusted
  likelihood ratio; ``v`` is the constrained minus the best curve, ``LRV`` its HAC long-run
  variance, floored at the uncorrelated value). The ends are interpolated, then refined
  once by profiling at them. ``ci95`` of the damping ratio is ``[lo, None]`` when infinity
  (inertia 0) is inside. The levels' and timescale's intervals also cover the curves the
  profile accepts.
- **Signal** (:func:`.regime.signal_test`): a rise (or fall) is detected when the better law
  beats a constant by more than :data:`PREFER_DELTA_BIC` in BIC *and* the gain
  ``plateau - initial`` is outside ``cv`` HAC standard errors of 0. Without one (a dead run,
  pure noise) timescale, inertia and damping ratio get no interval ("not identifiable"), the
  regime is ``indeterminate`` ("no significant rise: the data cannot tell the dynamics") and
  the exponential is preferred. ``FitResult.signal`` / ``summary()["signal"]`` say why.
- **Regime** (:func:`regime_rule`): ``critical`` if the damping-ratio interval lies inside
  :data:`CRITICAL_BAND` ``[0.9, 1.1]``; ``overdamped`` if its lower end exceeds 1;
  ``underdamped`` if its upper end is below 1 *and the turn-over is in the data*
  (:func:`.regime.reversal_test`: the best curve of the law with no turning point inside the
  observed window, i.e. ``zeta >= 1`` or a first peak ``pi/w_d`` at or after the last step, is
  rejected by the same sandwich likelihood-ratio threshold, *and* by the state-space
  likelihood, :func:`.turnover.turnover_test`: under forcing a random excursion after the rise
  looks like an overshoot to least squares, while the law's own forcing explains it; the
  likelihood ratio of the best curve with no turning point in the window against the best
  curve, each maximised over timescale, inertia and forcing strength, must exceed the
  chi-square(1) 95% point 3.84); otherwise ``indeterminate``
  (straddles one, flat profile, no signal, turn-over not observed, or the fit failed). When
  the least-squares test finds the turn-over not observed, the plateau, timescale and
  damping-ratio intervals are widened to cover the accepted no-turn-over curves and the best
  overdamped/critical one; the state-space test changes the regime only (as the observed
  overshoot does, :mod:`grpofit.fitting.overshoot`) and notes it on the damping ratio.
- **Preferred model**: the oscillator when its BIC is lower than the exponential's by more
  than :data:`PREFER_DELTA_BIC` (= 2) and a signal is detected, else the exponential (the
  simpler law wins ties). With more laws in the registry, its order (simplest first) is walked
  the same way: a later law replaces the choice only when its BIC is lower by more than 2.
- **Other laws** (any registry row besides these two, none by default): fitted from the law's
  own ``guess`` by the same bounded solver on the binned data, HAC intervals on every point
  (:func:`.assemble.law_fit`); no profile, regime or state-space interval. ``AIC = n ln(SSR/n) + 2k``, ``BIC = n ln(SSR/n) + k ln n``.
- **Extreme magnitudes** (:mod:`.scaling`): values or steps whose spread is beyond
  ``1e100`` or below ``1e-100`` are fitted rescaled and mapped back exactly (the method is
  affine-invariant); numbers that do not fit in a double come back ``None`` with a note.
- **Noise floor** (``FitResult.noise``): ``noise_sd = 1.4826 MAD(diff(y)) / sqrt(2)``,
  ``residual_sd`` of the preferred model, ``r2_ceiling = 1 - noise_sd^2 / var(y)`` (an
  *estimate* of the best R^2 a smooth law can reach, not a bound: a good fit exceeds it about
  as often as not; ``r2_ceiling_se`` is its standard error, :mod:`grpofit.fitting.ceiling`), ``fit_vs_noise = residual_sd / noise_sd`` and the HAC
  bandwidth used.
"""

from grpofit.fitting.driver import MIN_POINTS, fit_series
from grpofit.fitting.hac import MIN_BANDWIDTH_FRACTION, noise_floor
from grpofit.fitting.intervals import PROFILE_CALIBRATION
from grpofit.fitting.profile import ZETA_GRID
from grpofit.fitting.regime import CRITICAL_BAND, PREFER_DELTA_BIC, regime_rule
from grpofit.fitting.results import Estimate, FitResult, ModelFit

__all__ = [
    "MIN_POINTS",
    "PREFER_DELTA_BIC",
    "CRITICAL_BAND",
    "ZETA_GRID",
    "PROFILE_CALIBRATION",
    "MIN_BANDWIDTH_FRACTION",
    "Estimate",
    "ModelFit",
    "FitResult",
    "fit_series",
    "regime_rule",
    "noise_floor",
]
