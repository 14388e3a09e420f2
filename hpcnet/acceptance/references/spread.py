"""The tolerance of a reference from a metric's samples (hpcnet baseline).

Per metric of a case key:

0. Outlying sessions.  A session whose median is far from the other
   sessions' (a noisy night, a neighbour's job) is left out whole and named,
   or, where more than one is, the metric is refused
   (hpcnet.acceptance.references.outlying_sessions states the rule).

1. Outliers.  A sample farther from the median than OUTLIER_Z robust standard
   deviations (sigma = MAD x 1.4826, scipy's scale='normal') is left out and
   named in the provenance (metric, value, session, run): the Iglewicz-Hoaglin
   modified z-score rule, |0.6745 (x - median) / MAD| > 3.5.  It is the
   published rule for small samples, the MAD is not moved by the outlier it
   judges, and with at most half the samples able to be out it cannot eat a
   bimodal metric.  A sample within FLOOR of the median is never an outlier
   (the reference accepts it anyway: with MAD 0 every other value would be),
   nor, with several sessions, one within WORST_MARGIN x the largest drift
   of a session median: that is the drift between sessions, which the
   tolerance is there to cover.

1b. Slower modes.  An outlier on the worse side (a slower bandwidth, a
   longer time) is a mode the metric visits: seen in k of n samples, it
   comes back in about k/n of the runs after, so no bound that leaves it out
   keeps a clean run's chance of failing near alpha, and one that takes it
   in accepts it.  Such a metric is recorded and compared, not asserted, and
   the mode is named.  A group (test, partition, unit) whose samples fell to
   a slower mode more often than EXCURSION_LIMIT has modes: none of its
   metrics is asserted (hpcnet.acceptance.references.baseline).

2. Tolerance, of the samples kept: the largest of FLOOR; QUANTA steps of
   the printed figure (IMB prints two decimals); WORST_MARGIN x the largest
   deviation of a kept sample; and the half-width of a one-sided prediction
   interval for the next session's one value::

       expm1(t(dof, 1 - alpha) x sqrt(1 + 1/m) x s)

   s is the standard deviation of log(value) over the metric's m
   observations: its session medians (never less than that of all its
   samples), or the runs of its one session.  The session medians carry the
   drift between sessions (a machine's state, placement, clocks), which the
   runs of one session never show; one session cannot show it, and the
   provenance says so.  A metric has few observations, and three that
   happened to agree say its spread is 0: its variance is moderated by the
   metrics of its group (same test, partition and unit), which drift alike,
   with Smyth's empirical Bayes (limma's squeezeVar: a prior variance and its
   degrees of freedom fitted to the group's log variances, the metric's own
   variance weighted by its dof against the prior's); dof is the sum.
   alpha = RUN_ALPHA / (values the baseline asserts): every asserted value
   of a run is one more chance to fail by chance, so the chance is shared
   out over them (Bonferroni; hpcnet.acceptance.references.baseline.shared_estimates)
   and a clean run fails none with probability 1 - RUN_ALPHA.

Above TOLERANCE_CAP a metric gets no reference (Estimate.asserted is False):
it is too noisy to judge, and hpcnet.acceptance.references.baseline records
it as not asserted with the reason, and says so (a finding, exit 3).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from hpcnet.acceptance.references.outlying_sessions import MIN_SESSIONS, screen
from hpcnet.constants import TOLERANCE_CAP, TOLERANCE_FLOOR

#: Modified z-score above which a sample is an outlier (Iglewicz-Hoaglin).
OUTLIER_Z = 3.5
#: Chance that a clean run right after the baseline fails any of its values
#: (shared out over the values asserted: alpha = RUN_ALPHA / asserted).
RUN_ALPHA = 0.01
#: A tolerance is never tighter than this many steps of the printed figure.
QUANTA = 2
#: Values needed to tell the print step from values round by chance.
MIN_STEP_SAMPLES = 3
#: Metrics of a group needed to say anything of a metric's spread before
#: its own samples do.
MIN_PRIOR_METRICS = 5
#: A group (test, partition, unit) whose samples fell to a slower mode more
#: often than this has modes: none of its metrics is asserted.
EXCURSION_LIMIT = 0.01
#: A prediction interval wider than exp(this) times the median says nothing.
MAX_LOG_WIDTH = 20.0
#: Margin over the largest deviation of a kept sample.
WORST_MARGIN = 1.5

@dataclass
class Estimate:
    """A metric's reference, or why it gets none."""
    median: float
    tolerance: float        #: fraction of the median (absolute for a zero median)
    reason: str             #: which term set the tolerance
    left_out: list          #: [(value, session, run)] outliers
    samples: int            #: kept
    sessions: int           #: distinct sessions among the kept samples
    excursions: int = 0     #: outliers on the worse side (a slower mode)
    #: (session, its median, the other sessions' median) of an outlying
    #: session left out (outlying_sessions), else None
    left_out_session: tuple | None = None

    @property
    def asserted(self) -> bool:
        return self.median == 0 or self.tolerance <= TOLERANCE_CAP


#: scipy.stats.median_abs_deviation's scale='normal': the MAD of a normal
#: distribution in standard deviations (special.ndtri(0.75)).
_NORMAL_MAD = 0.6744897501960817


def median_of(x: np.ndarray) -> float:
    """np.median of a 1-D float array, without its argument handling (the
    searches of `hpcnet history` ask it at every step of every series): the
    same operations (the middle value; the middle two summed and halved, as
    np.mean takes them), so the same float."""
    k = len(x) // 2
    if len(x) % 2:
        return float(np.partition(x, k)[k])
    part = np.partition(x, (k - 1, k))
    return float((part[k - 1] + part[k]) / 2)


def robust_sigma(values) -> float:
    """Robust standard deviation: scipy.stats.median_abs_deviation(values,
    scale='normal'), the same operations without its argument handling
    (`hpcnet history` asks it at every step of every series' search)."""
    if len(values) < 2:
        return 0.0
    x = np.asarray(values, dtype=float)
    return median_of(np.abs(x - median_of(x))) / _NORMAL_MAD


@functools.lru_cache(maxsize=4096)
def prediction_factor(dof: float, observations: int, alpha: float = RUN_ALPHA) -> float:
    """t(dof, 1 - alpha) x sqrt(1 + 1/observations): the half-width, in
    standard deviations, of a one-sided prediction interval for one new
    value; infinite without a degree of freedom."""
    if dof <= 0:
        return math.inf
    return float(stats.t.ppf(1 - alpha, dof)) * math.sqrt(1 + 1 / max(observations, 1))


def print_step(values) -> float:
    """The step of the printed figures: the largest power of ten of which
    every value is a whole multiple (0.01 for IMB's 0.24, 0.25; 0.0001 for
    the kernels' four decimals); 0 for fewer than MIN_STEP_SAMPLES values,
    which may be round by chance."""
    if len(values) < MIN_STEP_SAMPLES:
        return 0.0
    for digits in range(0, 7):
        if all(abs(round(v, digits) - v) <= 1e-9 * max(1.0, abs(v)) for v in values):
            return 10.0 ** -digits
    return 0.0


@dataclass(frozen=True)
class Prior:
    """What the metrics of one group (test, partition, unit) say of a metric's
    spread before its own samples do: a prior variance of log(value) and its
    weight in degrees of freedom (Smyth's empirical Bayes, limma's
    ``squeezeVar``); ``dof`` is infinite where the group's metrics vary alike."""
    variance: float
    dof: float


def _trigamma_inverse(y: float) -> float:
    """x with trigamma(x) = y (Smyth 2004, limma's trigammaInverse: Newton's
    method on 1/trigamma, which is nearly linear)."""
    if y > 1e7:
        return 1 / math.sqrt(y)
    if y < 1e-6:
        return 1 / y
    x = 0.5 + 1 / y
    for _ in range(50):
        tri = float(special.polygamma(1, x))
        step = tri * (1 - tri / y) / float(special.polygamma(2, x))
        x += step
        if -step / x < 1e-8:
            break
    return x


def fit_prior(variances: list, dofs: list) -> Prior | None:
    """The prior of a group from its metrics' sample variances (each with its
    degrees of freedom): the moments of log(variance) (limma's ``fitFDist``).
    None with fewer than MIN_PRIOR_METRICS metrics that vary at all."""
    pairs = [(v, d) for v, d in zip(variances, dofs) if v > 0 and d > 0]
    if len(pairs) < MIN_PRIOR_METRICS:
        return None
    var, dof = (np.array(x, dtype=float) for x in zip(*pairs))
    e = np.log(var) - special.digamma(dof / 2) + np.log(dof / 2)
    excess = float(np.var(e, ddof=1) - np.mean(special.polygamma(1, dof / 2)))
    if excess <= 0:
        return Prior(float(np.exp(np.mean(e))), math.inf)
    d0 = 2 * _trigamma_inverse(excess)
    return Prior(float(np.exp(np.mean(e) + special.digamma(d0 / 2) - np.log(d0 / 2))), d0)


def outliers(values: list, floor: float = TOLERANCE_FLOOR, sessions: list | None = None) -> list:
    """Indices of the samples outside median +/- OUTLIER_Z x sigma, outside
    the floor and, with several sessions, farther than WORST_MARGIN x the
    largest drift of a session median (a value no farther out than a whole
    session moved is drift the tolerance must cover, not a bad repeat) and
    far from its own session's other samples, where it has any; none with
    fewer than 3 samples."""
    if len(values) < 3:
        return []
    x = np.asarray(values, dtype=float)
    median = median_of(x)
    distance = np.abs(x - median)
    # robust_sigma(x), of the distances taken once.
    limit = max(OUTLIER_Z * (median_of(distance) / _NORMAL_MAD), floor * abs(median))
    by_session: dict = {}
    if sessions is not None and len(set(sessions)) > 1:
        for v, s in zip(values, sessions):
            by_session.setdefault(s, []).append(v)
        # A session of one sample shows no drift, only itself: one bad
        # repeat that is a session of its own must stay an outlier.
        drift = [abs(float(np.median(v)) - median) for v in by_session.values() if len(v) > 1]
        limit = max(limit, WORST_MARGIN * max(drift, default=0.0))

    def near_its_session(i: int) -> bool:
        # Far from the whole but close to its own session's other samples:
        # the session drifted, the sample is not bad.
        own = by_session.get(sessions[i]) if by_session else None
        if not own or len(own) < 2:
            return False
        centre = float(np.median(own))
        return abs(x[i] - centre) <= max(OUTLIER_Z * robust_sigma(own), floor * abs(centre))

    return [int(i) for i in np.flatnonzero(distance > limit) if not near_its_session(int(i))]


def _session_medians(values: list, sessions: list) -> list:
    by_session: dict = {}
    for v, s in zip(values, sessions):
        by_session.setdefault(s, []).append(v)
    return [float(np.median(v)) for v in by_session.values()]


@dataclass(frozen=True)
class Spread:
    """A metric's own spread: the sample variance of log(value) over its
    observations (the session medians, or the runs of its one session),
    never below that of all its samples, with its degrees of freedom."""
    variance: float
    dof: int
    observations: int


def own_spread(values: list, sessions: list) -> Spread:
    positive = [v for v in values if v > 0]
    if len(positive) < 2:
        return Spread(0.0, 0, len(positive))
    logs = np.log(positive)
    variance = float(np.var(logs, ddof=1))
    medians = _session_medians(values, sessions)
    if len(medians) > 1 and min(medians) > 0:
        variance = max(variance, float(np.var(np.log(medians), ddof=1)))
        return Spread(variance, len(medians) - 1, len(medians))
    return Spread(variance, len(positive) - 1, len(positive))


def estimate(values: list, sessions: list | None = None, floor: float = TOLERANCE_FLOOR,
             runs: list | None = None, alpha: float = RUN_ALPHA,
             prior: Prior | None = None, higher_is_better: bool | None = None) -> Estimate:
    """Median and tolerance of one metric (the module docstring's rule).
    ``sessions[i]`` is the session of ``values[i]`` (default: all one);
    ``alpha`` the chance of a false failure this value may take;
    ``prior`` what its group says of its spread; ``higher_is_better``
    which side is worse (None: both)."""
    sessions = list(sessions) if sessions is not None else ['?'] * len(values)
    runs = list(runs) if runs is not None else list(range(len(values)))
    screened = screen(values, sessions, floor)
    if screened.refused:
        return Estimate(float(np.median(values)), math.inf, screened.refused, [], len(values),
                        screened.sessions)
    values, sessions, runs = ([x[i] for i in screened.kept] for x in (values, sessions, runs))
    est = _estimate_kept(values, sessions, floor, runs, alpha, prior, higher_is_better)
    if not est.asserted and math.isfinite(est.tolerance) and screened.sessions < MIN_SESSIONS:
        est.reason += (f'; {screened.sessions} session(s): too few to tell an outlying session '
                       f'from a noisy metric ({MIN_SESSIONS} or more do)')
    est.left_out_session = screened.left_out
    return est


def screened_samples(values: list, sessions: list, floor: float = TOLERANCE_FLOOR) -> tuple:
    """(values, sessions) of a metric without an outlying session
    (outlying_sessions.screen); both empty where the screen refuses it."""
    screened = screen(values, sessions, floor)
    if screened.refused:
        return [], []
    return [values[i] for i in screened.kept], [sessions[i] for i in screened.kept]


def _estimate_kept(values: list, sessions: list, floor: float, runs: list, alpha: float,
                   prior: Prior | None, higher_is_better: bool | None) -> Estimate:
    """estimate() of the samples its session screen kept."""
    out = set(outliers(values, floor, sessions))
    left_out = [(values[i], sessions[i], runs[i]) for i in sorted(out)]
    kept = [v for i, v in enumerate(values) if i not in out]
    kept_sessions = [s for i, s in enumerate(sessions) if i not in out]
    n_sessions = len(set(kept_sessions))
    median = float(np.median(kept))
    worst = max(abs(v - median) for v in kept)
    if median == 0:
        tol = max(floor, WORST_MARGIN * worst)
        return Estimate(median, tol, 'zero median: absolute bounds', left_out, len(kept),
                        n_sessions)
    worse = [v for v, _, _ in left_out
             if higher_is_better is None or (v < median if higher_is_better else v > median)]
    if worse:
        # A slower mode seen in k of n samples comes back in about k/n of
        # the runs after: no bound that leaves it out keeps a clean run's
        # chance of failing near alpha, and one that takes it in accepts it.
        return Estimate(median, math.inf, f'{len(worse)} of {len(values)} samples fell to a '
                        f'slower mode ({", ".join(f"{v:g}" for v in worse)} against a median of '
                        f'{median:g}, left out as outliers): a clean run visits it as often',
                        left_out, len(kept), n_sessions, len(worse))
    step = print_step(kept)
    terms = [(floor, f'the {floor:.0%} floor'),
             (QUANTA * step / abs(median), f'{QUANTA} print steps of {step:g}'),
             (WORST_MARGIN * worst / abs(median),
              f'largest deviation {worst / abs(median):.1%} x {WORST_MARGIN:g}')]
    own = own_spread(kept, kept_sessions)
    if prior is not None:
        dof = prior.dof + own.dof
        variance = (prior.variance if math.isinf(prior.dof) else
                    (prior.dof * prior.variance + own.dof * own.variance) / dof)
        said = (f'spread {math.sqrt(own.variance):.2%} ({own.dof} dof) moderated by its group\'s '
                f'{math.sqrt(prior.variance):.2%} ({prior.dof:.3g} dof)')
    else:
        dof, variance = own.dof, own.variance
        said = f'spread {math.sqrt(own.variance):.2%} ({own.dof} dof)'
    if dof > 0:
        k = prediction_factor(dof, own.observations, alpha)
        log_width = k * math.sqrt(variance)
        terms.append((math.expm1(log_width) if log_width < MAX_LOG_WIDTH else math.inf,
                      f'{said} x {k:.1f} over {own.observations} observations'))
    else:
        # One sample and no group with repeats: nothing says how far the
        # next run may fall, and a floor would be a guess.
        terms.append((math.inf, 'one sample and no metric of its group repeated: its spread is '
                                'unknown (a baseline of 2 or more sessions measures it)'))
    tol, why = max(terms, key=lambda t: t[0])
    return Estimate(median, tol, why, left_out, len(kept), n_sessions)


def tolerance(values: list, floor: float = TOLERANCE_FLOOR, sessions: list | None = None) -> float:
    """The relative tolerance of a metric from its samples (module docstring),
    before the cap."""
    return estimate(values, sessions, floor).tolerance
