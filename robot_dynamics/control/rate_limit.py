"""A slew-rate limit on the commanded efforts: each joint's effort changes by at most
r·T per control period T; pure math, no ROS.

    τ_k = τ_{k−1} + clip(τ_cmd − τ_{k−1}, −r T, r T)        (r = 0: no limit on that joint)

It bounds the jerk a law switch, a target jump or a new gain sends to the drives (the
"effort rate limit" of drive commissioning); it adds at most a ramp of |Δτ| / r seconds.

Source: the rate limiter of sampled control, e.g. Åström K. J., Wittenmark B. 1997,
"Computer-Controlled Systems: Theory and Design", 3rd ed., Prentice Hall (actuator
saturation and rate limits in sampled loops).
"""

import numpy as np

from robot_dynamics.control._parameters import number, per_joint


class EffortRateLimiter:
    """limit(τ) -> τ changed from the last output by at most rate·period per joint.

    rate: per joint (a scalar for all), N m/s (N/s), >= 0; 0 means no limit.
    period: the control period T, s, > 0.
    The first call after construction or `reset()` passes τ through unchanged.
    """

    def __init__(self, rate, period, n=None, prefix='effort_rate_limit'):
        values = np.atleast_1d(np.asarray(rate, dtype=float)) if n is None else rate
        size = np.size(values) if n is None else n
        self.rate = per_joint(prefix, values, size)
        self.period = number(f'{prefix}: period', period, positive=True)
        self._step = np.where(self.rate > 0.0, self.rate * self.period, np.inf)
        self._last = None

    def reset(self, tau=None):
        """Start again from `tau` (the effort now applied), or from nothing (None)."""
        self._last = None if tau is None else np.array(tau, dtype=float)

    @property
    def last(self):
        return None if self._last is None else self._last.copy()

    def limit(self, tau, dt=None):
        """τ moved from the last output by at most rate·period per joint (rate·dt when `dt`,
        the time since the last output in s, is given: a cycle that came late)."""
        tau = np.asarray(tau, dtype=float)
        if self._last is None:
            out = tau.copy()
        else:
            if self._step.size not in (1, tau.size):
                raise ValueError(f'effort_rate_limit: {self._step.size} rates for '
                                 f'{tau.size} efforts')
            step = self._step if dt is None else np.where(
                self.rate > 0.0, self.rate * max(float(dt), 0.0), np.inf)
            out = self._last + np.clip(tau - self._last, -step, step)
        self._last = out
        return out.copy()
