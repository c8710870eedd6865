"""Speed scaling of a trajectory's time, as joint_trajectory_controller's (JTC's): pure math.

The trajectory's own time s advances at a factor f ∈ [0, 1] of the controller's time t,
ds/dt = f (1: normal speed, 0: pause). The reference followed is the trajectory's q_d at s,
with its time derivatives taken along t:

    q_d(s(t)),   q̇_d = f·q_d'(s),   q̈_d = f²·q_d''(s) + ḟ·q_d'(s)

(' is d/ds). JTC advances s the same way but keeps the unscaled q_d' and q_d'' (its effort
and velocity interfaces refuse scaling); a computed-torque law feeds q̇_d and q̈_d forward, so
both are scaled here. The ḟ·q_d' term is kept: without it q̈_d would not be the derivative of
q̇_d while f changes, and the feed-forward would miss ḟ·q_d' (a tracking error of about
ḟ·q_d'/Kp). For that term to stay bounded, f never jumps: a new factor is approached at
|ḟ| = `rate_limit` (a linear ramp; ḟ is then 0 or ±rate_limit, so q̈_d has steps of at most
rate_limit·|q_d'| where a ramp starts or ends, and |q̈_d| ≤ |q_d''| + rate_limit·|q_d'|).
f = 0 holds q_d(s) with q̇_d = q̈_d = 0.

`ScaledTime` keeps f(t) as a list of ramps (one per change of the requested factor) and
answers s(t), f(t), ḟ(t) for any t in closed form, without state changing on the way: a
control cycle, a query of a past or future time and the trajectory's acceptance all see the
same mapping. While f is 1 and has always been, s is t exactly (bit for bit).
"""

import bisect
import math

__all__ = ['DEFAULT_RATE_LIMIT', 'FACTOR_TOLERANCE', 'ScaledTime', 'check_factor',
           'scale_derivatives']

DEFAULT_RATE_LIMIT = 2.0    # 1/s: from 1 to 0 (or back) in 0.5 s
MAX_RAMPS = 4096            # ramps kept for past times; older ones are forgotten
FACTOR_TOLERANCE = 1e-6     # a factor up to 1 + this is taken as 1 (rounding of a bridge)


def check_factor(value):
    """`value` as a float in [0, 1], or ValueError naming it (NaN, inf, negative, above
    1 + FACTOR_TOLERANCE, or not a number). A factor within FACTOR_TOLERANCE above 1 (a
    bridge's 1 + ε after a pause) is 1."""
    try:
        factor = float(value)
    except (TypeError, ValueError):
        raise ValueError(f'{value!r} is not a number') from None
    if 1.0 < factor <= 1.0 + FACTOR_TOLERANCE:
        return 1.0
    if not 0.0 <= factor <= 1.0:                    # NaN fails too
        raise ValueError(f'{factor!r} is not a finite number in [0, 1] (up to '
                         f'1 + {FACTOR_TOLERANCE:g} taken as 1)')
    return factor


class _Ramp:
    """From time t0 on: f goes from f0 towards `target` at |ḟ| = rate, then stays;
    `lag` = t0 − s(t0), the trajectory time lost before t0."""

    __slots__ = ('t0', 'lag', 'f0', 'target', 'slope', 't_end')

    def __init__(self, t0, lag, f0, target, rate):
        self.t0, self.lag, self.f0, self.target = t0, lag, f0, target
        if target == f0:
            self.slope, self.t_end = 0.0, t0
        else:
            self.slope = rate if target > f0 else -rate
            self.t_end = t0 + (target - f0) / self.slope

    def at(self, t):
        """(lag(t), f(t), ḟ(t)); before t0 the factor f0, constant."""
        dt = t - self.t0
        if self.slope == 0.0 or dt < 0.0:
            # (1 − f)·dt is exactly 0 for f = 1: the lag, and s = t − lag, stay exact
            return self.lag + (1.0 - self.f0) * dt, self.f0, 0.0
        if t < self.t_end:
            f = self.f0 + self.slope * dt
            return self.lag + dt * (1.0 - 0.5 * (self.f0 + f)), f, self.slope
        h = self.t_end - self.t0                # the ramp, then flat at the target
        ramp_lag = h * (1.0 - 0.5 * (self.f0 + self.target))
        return self.lag + ramp_lag + (1.0 - self.target) * (t - self.t_end), self.target, 0.0


class ScaledTime:
    """The trajectory time s(t) under a speed scaling factor (see the module docstring).

    factor: the initial factor; rate_limit: |ḟ| [1/s] while the factor moves to a new one.
    `start(t)` once (the first time the mapping is used); before it s = t."""

    def __init__(self, factor=1.0, rate_limit=DEFAULT_RATE_LIMIT):
        self.initial = check_factor(factor)
        rate = float(rate_limit)
        if not (rate > 0.0 and math.isfinite(rate)):
            raise ValueError(f'rate_limit: {rate_limit!r} is not a finite number > 0')
        self.rate_limit = rate
        self._ramps = []            # in time order; appended to (atomic), or replaced whole

    def start(self, t):
        """Begin the mapping at t (s = t there, f = the initial factor); a no-op once
        started."""
        if not self._ramps:
            self._ramps = [_Ramp(float(t), 0.0, self.initial, self.initial, self.rate_limit)]

    def _ramp(self, t):
        ramps = self._ramps         # one read: a concurrent request appends or replaces
        if not ramps:
            return None
        if t >= ramps[-1].t0:       # the control cycle's case
            return ramps[-1]
        k = bisect.bisect_right(ramps, t, key=lambda ramp: ramp.t0) - 1
        return ramps[max(k, 0)]     # before the first ramp: its constant factor backwards

    def at(self, t):
        """(s, f, ḟ) at controller time t."""
        ramp = self._ramp(t)
        if ramp is None:
            return t, self.initial, 0.0
        lag, f, rate = ramp.at(t)
        return t - lag, f, rate

    def factor(self, t):
        """f at t (the factor in effect, on its way to the requested one)."""
        return self.at(t)[1]

    @property
    def requested(self):
        """The factor f is at or moving to."""
        ramps = self._ramps
        return ramps[-1].target if ramps else self.initial

    def request(self, factor, t):
        """Move f from its value at time t (None: the last change) towards `factor` (checked
        as `check_factor`: ValueError, and nothing changes, if it is refused). Ramps after t
        (a clock that went back) are dropped."""
        factor = check_factor(factor)
        if not self._ramps:
            self.initial = factor
            return
        ramps = self._ramps
        t = ramps[-1].t0 if t is None else float(t)
        if t >= ramps[-1].t0:
            last = ramps[-1]
            if factor == last.target:
                return              # already there or on the way
            lag, f, _ = last.at(t)
            new = _Ramp(t, lag, f, factor, self.rate_limit)
            if len(ramps) >= MAX_RAMPS:
                self._ramps = ramps[-(MAX_RAMPS // 2):] + [new]
            else:
                ramps.append(new)
            return
        kept = [r for r in ramps if r.t0 <= t]          # the clock went back
        lag, f, _ = (kept or ramps)[-1 if kept else 0].at(t)
        self._ramps = kept + [_Ramp(t, lag, f, factor, self.rate_limit)]

    def forget_before(self, t):
        """Drop the ramps that ended before t (times before t will not be asked for)."""
        ramps = self._ramps
        k = bisect.bisect_right(ramps, t, key=lambda ramp: ramp.t0) - 1
        if k > 0:
            self._ramps = ramps[k:]


def scale_derivatives(ds, dds, f, fdot):
    """(q̇_d, q̈_d) = (f·q_d', f²·q_d'' + ḟ·q_d') from the derivatives along s; the arrays
    themselves when f = 1 and ḟ = 0."""
    if f == 1.0 and fdot == 0.0:
        return ds, dds
    return f * ds, (f * f) * dds + fdot * ds
