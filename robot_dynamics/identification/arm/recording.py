"""Recording preparation: recordings split at gaps, put on a uniform grid, low-pass
filtered (q, q̇, τ and the friction columns alike), differentiated once and decimated."""

import math
from typing import NamedTuple

import numpy as np

from robot_dynamics.identification.arm.libraries import _require


class RecordingError(ValueError):
    """Recorded data that cannot be used for the estimate (one line saying why and what to
    do); any other exception from the estimator is a bug, not bad data."""


ACCELERATION_SOURCES = ('velocity', 'position')


class _Prepared(NamedTuple):
    q: np.ndarray        # (K, n) filtered, decimated
    qd: np.ndarray
    qdd: np.ndarray      # derivative of the filtered velocity
    tau: np.ndarray      # filtered with the same filter
    coulomb: np.ndarray  # the filtered sign(q̇): the Coulomb column, filtered like τ
    mask: np.ndarray     # (K, n) bool: joint row usable (moving faster than friction_velocity)
    raw_samples: int
    features: list = []  # `features` functions of the full-rate filtered q̇, filtered like τ
    qdd_position: np.ndarray = None   # (K, n) second derivative of the filtered q
    velocities_recorded: bool = True  # False: no run had velocities (q̇ from q throughout)
    feature: object = None  # feature(function, joints): one more feature, made like `features`

    def with_accelerations(self, source):
        """This data with q̈ from `source`: 'velocity' (the derivative of the filtered
        recorded q̇, as prepared) or 'position' (the second derivative of the filtered q)."""
        if source not in ACCELERATION_SOURCES:
            raise ValueError(f'accelerations: expected one of {ACCELERATION_SOURCES}, got '
                             f'{source!r}')
        if source == 'velocity' and not self.velocities_recorded:
            raise RecordingError('accelerations: velocity asked for, but the recording has '
                                 'no velocities (use the positions: --accelerations position '
                                 'or auto)')
        return self if source == 'velocity' else self._replace(qdd=self.qdd_position)


def velocities_absent(qd):
    """True when a recording's velocities were not recorded: None, or every value NaN."""
    if qd is None:
        return True
    values = np.asarray(qd, dtype=float)
    return values.size > 0 and bool(np.all(np.isnan(values)))


def _segments(t, q, qd, tau, n):
    """Split the input into recordings: a list of arrays (one per recording) or single
    arrays; each recording is split again where time does not increase or jumps. A
    recording without velocities (`velocities_absent`) has None for q̇."""
    if isinstance(t, (list, tuple)) and len(t) and np.ndim(t[0]) == 1:
        groups = list(zip(t, q, [None] * len(t) if qd is None else qd, tau))
    else:
        groups = [(t, q, qd, tau)]
    out = []
    for g, (tg, qg, qdg, taug) in enumerate(groups):
        tg = np.asarray(tg, dtype=float).reshape(-1)
        arrays = []
        for name, value in (('q', qg), ('qd', qdg), ('tau', taug)):
            if name == 'qd' and velocities_absent(value):
                arrays.append(None)
                continue
            value = np.asarray(value, dtype=float)
            if value.ndim != 2 or value.shape != (tg.size, n):
                raise RecordingError(f'{name}: expected shape ({tg.size}, {n}) (samples × '
                                     f'joints), got {value.shape}')
            if not np.all(np.isfinite(value)):
                raise RecordingError(f'{name}: non-finite values')
            arrays.append(value)
        if not np.all(np.isfinite(tg)):
            raise RecordingError('t: non-finite times')
        if tg.size < 2:
            continue
        dt = np.diff(tg)
        step = np.median(dt[dt > 0]) if np.any(dt > 0) else 0.0
        if not step > 0.0:
            continue
        breaks = np.flatnonzero((dt <= 0.0) | (dt > 5.0 * step)) + 1
        for piece in np.split(np.arange(tg.size), breaks):
            if piece.size >= 2:
                out.append((tg[piece], *(None if a is None else a[piece] for a in arrays)))
    return out


EFFORT_TIMINGS = ('instant', 'held_after', 'held_before')


def uniform_grid(t, arrays):
    """(step, resampled arrays): samples at times t (K,) (increasing, one run without
    gaps) on the uniform grid t[0] + k·step, step the median time step, k = 0.. while
    inside [t[0], t[-1]]. Arrays already on that grid (every stamp within 0.1 % of a step
    of its grid point) are returned as they are; otherwise each column is interpolated
    linearly (jittered stamps, a dropped message). The grid may hold one sample more or
    less than t."""
    t = np.asarray(t, dtype=float)
    step = float(np.median(np.diff(t)))
    count = int(math.floor((t[-1] - t[0]) / step + 1e-9)) + 1
    grid = t[0] + step * np.arange(count)
    if count == t.size and np.max(np.abs(t - grid)) <= 1e-3 * step:
        return step, tuple(arrays)
    return step, tuple(np.column_stack([np.interp(grid, t, a[:, j]) for j in range(a.shape[1])])
                       for a in arrays)


def _prepare(model, t, q, qd, tau, cutoff_frequency, sample_rate, friction_velocity,
             effort_timing='instant', features=(), accelerations=None):
    """Zero-phase Butterworth low-pass (order 4, `cutoff_frequency`) of q, q̇ and τ
    (parallel filtering: the same filter on both sides of τ = Y φ), q̈ from differences
    of the filtered q̇ (and, as ``qdd_position``, from second differences of the filtered
    q; `accelerations` 'position' puts that one in ``qdd``; None: 'velocity' when the
    velocities were recorded, else 'position'), edges of 1/cutoff s dropped,
    decimation to about `sample_rate`.
    Each gap-free run of samples is put on a uniform grid first (`uniform_grid`: its
    median step; linear interpolation where the stamps jitter or a message is missing;
    runs are cut where time does not increase or a step exceeds 5 median steps). The Coulomb
    column sign(q̇) is computed at the full rate and filtered with the same filter, as are
    the `features` ((function, joints): a function of the filtered full-rate q̇ of those
    joints (K, m) -> (K, m), the smooth friction laws' columns; zeros for other joints).

    A recording without velocities (q̇ None or all NaN, `velocities_absent`) takes q̇ as
    the derivative of its filtered q, and its q̈ is the positions' whatever
    `accelerations` says; ``velocities_recorded`` is False when no recording had them.

    effort_timing: what the effort of sample k is. 'instant': the effort at t_k (a
    measured effort); paired with the state at t_k and the central difference of q̇.
    'held_after': the effort applied from t_k to t_k+1 (a zero-order hold starting at the
    sample, as `simulation.simulate_closed_loop` records it); 'held_before': the effort
    applied from t_k−1 to t_k (the plant node's /joint_states: the state at the end of a
    step and the effort held over it). A held effort is paired with the mean state of
    its interval and the interval's mean acceleration (Δq̇/Δt), exact for a zero-order
    hold to O(Δt²); pairing it with the state at a sample instead is off by half a sample,
    which costs about 0.1–0.3 % of the efforts at 1 kHz."""
    if effort_timing not in EFFORT_TIMINGS:
        raise ValueError(f'effort_timing: expected one of {EFFORT_TIMINGS}, got '
                         f'{effort_timing!r}')
    signal = _require('scipy.signal')
    n = model.n
    pieces = []
    raw = 0
    longest = 0.0
    for tg, qg, qdg, taug in _segments(t, q, qd, tau, n):
        raw += tg.size
        longest = max(longest, float(tg[-1] - tg[0]))
        piece = _filter_run(signal, tg, (qg, qdg, taug), cutoff_frequency, sample_rate,
                            effort_timing, features)
        if piece is not None:
            pieces.append(piece)
    if not pieces:
        raise RecordingError(
            f'no recording long enough to filter: the longest run without a gap is '
            f'{longest:.3g} s, the filter needs more than {4.0 / cutoff_frequency:.3g} s '
            '(record a longer motion, without pauses or dropped stretches)')
    recorded = any(piece[0] for piece in pieces)
    qf, qdf, qddf, tauf, coulomb, qddp, *extra = (np.concatenate(parts)
                                                  for parts in zip(*(p[1] for p in pieces)))
    mask = np.abs(qdf) >= friction_velocity

    def feature(function, columns):
        return np.concatenate([piece[2](function, columns) for piece in pieces])
    data = _Prepared(qf, qdf, qddf, tauf, coulomb, mask, raw, list(extra), qddp, recorded,
                     feature)
    if accelerations is None:
        accelerations = 'velocity' if recorded else 'position'
    return data.with_accelerations(accelerations)


def _filter_run(signal, tg, arrays, cutoff_frequency, sample_rate, effort_timing, features):
    """One gap-free run of `_prepare`: (velocities recorded, (q, q̇, q̈, τ, Coulomb
    column, q̈ from q, *features), feature) filtered, edges dropped and decimated, or None
    when the run is too short to filter; feature(function, joints) makes one more feature
    the same way later (the velocity-scale search asks for scales off its grid). q̇ None:
    the derivative of the filtered q."""
    qg, qdg, taug = arrays
    recorded = qdg is not None
    step, (qg, qdg, taug) = uniform_grid(tg, (qg, qdg if recorded else qg, taug))
    rate = 1.0 / step
    cutoff = min(float(cutoff_frequency), 0.4 * rate)
    sos = signal.butter(4, cutoff, fs=rate, output='sos')
    edge = int(math.ceil(rate / cutoff))
    if qg.shape[0] <= 4 * edge + 20:
        return None                         # too short to filter
    qf, tauf = (signal.sosfiltfilt(sos, a, axis=0) for a in (qg, taug))
    qdp = np.gradient(qf, step, axis=0)
    qdf = signal.sosfiltfilt(sos, qdg, axis=0) if recorded else qdp
    # the Coulomb column, filtered like every other term of τ: filtering does not
    # commute with sign(), and sign(filtered q̇) would be a step where the filtered
    # effort has a ramp ~1/cutoff long at every reversal
    coulomb = signal.sosfiltfilt(sos, np.sign(qdf), axis=0)
    qd_full = qdf
    if effort_timing == 'instant':
        qddf = np.gradient(qdf, step, axis=0)
        qddp = np.gradient(qdp, step, axis=0)
    else:
        qddf = np.diff(qdf, axis=0) / step
        qddp = np.diff(qdp, axis=0) / step
        qf, qdf = 0.5 * (qf[1:] + qf[:-1]), 0.5 * (qdf[1:] + qdf[:-1])
        coulomb = 0.5 * (coulomb[1:] + coulomb[:-1])
        tauf = tauf[:-1] if effort_timing == 'held_after' else tauf[1:]
    keep = slice(edge, qf.shape[0] - edge, max(1, int(round(rate / sample_rate))))

    def feature(function, columns):
        """function(q̇ of `columns`) at the full rate, filtered like τ, paired and
        decimated like the other columns; zeros for the other joints."""
        column = np.zeros_like(qd_full)
        column[:, columns] = signal.sosfiltfilt(sos, function(qd_full[:, columns]), axis=0)
        if effort_timing != 'instant':
            column = 0.5 * (column[1:] + column[:-1])
        return column[keep]
    return recorded, (qf[keep], qdf[keep], qddf[keep], tauf[keep], coulomb[keep],
                      qddp[keep], *(feature(f, c) for f, c in features)), feature
