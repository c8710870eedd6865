"""The spline maths of joint trajectories: pure numpy, no ROS, no sampler state.

Polynomial segments through knots (`quintic_coefficients`, `cubic_coefficients`, the C2
spline `clamped_spline_knots`), piecewise-polynomial plans evaluated at a time (`_Plan`,
`_StepPlan` for interpolation_method 'none'), the jerk-limited stop of a joint
(`stop_phases`, `stop_duration`, `deceleration_plan`) and the angle wraparound of
continuous joints (`shortest_angle`, `nearest_turn`). `JointTrajectorySampler`
(sampler.py) builds its references from these; the conventions are in its docstring and
doc/trajectories.md.
"""

import bisect
import math

import numpy as np

__all__ = ['quintic_coefficients', 'cubic_coefficients', 'clamped_spline_knots',
           'stop_phases', 'stop_duration', 'deceleration_plan', 'shortest_angle',
           'nearest_turn']


# The stop (`stop_phases`): the deceleration ramps to max_deceleration_on_cancel a in
# T_j = STOP_RAMP_SHARE |q̇0| / a, from q̈0 = 0: the stop then takes and covers
# 1 + STOP_RAMP_SHARE times JTC's |q̇0| / a and q̇0² / (2a). From a non-zero q̈0 at least
# STOP_RAMP_TIME |q̈0| / a: a joint at a velocity turning point ramps q̈0 to 0, not in a step.
STOP_RAMP_SHARE = 0.15
STOP_RAMP_TIME = 0.02   # s


# --- polynomial segments -------------------------------------------------------------------

def quintic_coefficients(p0, v0, a0, p1, v1, a1, h):
    """Coefficients c0..c5 (6, n) of the quintic on τ ∈ [0, h] with position, velocity and
    acceleration (p0, v0, a0) at τ = 0 and (p1, v1, a1) at τ = h; (K, 6, n) for K segments
    at once (arguments (K, n), h (K, 1))."""
    dp = p1 - p0
    c3 = (20.0 * dp - (8.0 * v1 + 12.0 * v0) * h - (3.0 * a0 - a1) * h**2) / (2.0 * h**3)
    c4 = (-30.0 * dp + (14.0 * v1 + 16.0 * v0) * h + (3.0 * a0 - 2.0 * a1) * h**2) / (2.0 * h**4)
    c5 = (12.0 * dp - 6.0 * (v1 + v0) * h - (a0 - a1) * h**2) / (2.0 * h**5)
    return np.stack([p0, v0, 0.5 * a0, c3, c4, c5], axis=-2)


def cubic_coefficients(p0, v0, p1, v1, h):
    """Coefficients c0..c5 (6, n; c4 = c5 = 0) of the cubic Hermite segment on τ ∈ [0, h]
    ((K, 6, n) for K segments at once, as `quintic_coefficients`)."""
    slope = (p1 - p0) / h
    c2 = (3.0 * slope - 2.0 * v0 - v1) / h
    c3 = (v0 + v1 - 2.0 * slope) / h**2
    zero = np.zeros_like(p0)
    return np.stack([p0, v0, c2, c3, zero, zero], axis=-2)


def clamped_spline_knots(times, positions, v_start, v_end):
    """Knot velocities and accelerations (m+1, n) of the C2 cubic spline through `positions`
    (m+1, n) at `times` (m+1,), clamped to v_start and v_end: the tridiagonal slope equations
    h_k v_{k−1} + 2(h_{k−1} + h_k) v_k + h_{k−1} v_{k+1} = 3(h_k δ_{k−1} + h_{k−1} δ_k),
    solved by the Thomas algorithm for all joints at once."""
    h = np.diff(times)[:, None]
    delta = np.diff(positions, axis=0) / h
    m = len(h)
    v = np.empty_like(positions)
    v[0], v[m] = v_start, v_end
    if m > 1:
        diag = 2.0 * (h[:-1] + h[1:]) * np.ones_like(delta[1:])
        lower, upper = h[1:], h[:-1]            # coefficients of v_{k−1} and v_{k+1}
        rhs = 3.0 * (h[1:] * delta[:-1] + h[:-1] * delta[1:])
        rhs[0] -= lower[0] * v[0]
        rhs[-1] -= upper[-1] * v[m]
        for k in range(1, m - 1):               # forward elimination
            w = lower[k] / diag[k - 1]
            diag[k] = diag[k] - w * upper[k - 1]
            rhs[k] = rhs[k] - w * rhs[k - 1]
        v[m - 1] = rhs[-1] / diag[-1]
        for k in range(m - 3, -1, -1):          # back substitution
            v[k + 1] = (rhs[k] - upper[k] * v[k + 2]) / diag[k]
    a = np.empty_like(positions)
    a[:m] = 2.0 * (3.0 * delta - 2.0 * v[:m] - v[1:]) / h          # cubic's q̈ at τ = 0
    a[m] = 2.0 * (2.0 * v[m] + v[m - 1] - 3.0 * delta[-1]) / h[-1]  # and at τ = h, last one
    return v, a


def _evaluate(c, tau):
    """q, q̇, q̈ of the polynomial with coefficients c (6, n) at τ: one (3, 6) @ (6, n)."""
    t2, t3 = tau * tau, tau * tau * tau
    powers = np.array([[1.0, tau, t2, t3, t2 * t2, t3 * t2],
                       [0.0, 1.0, 2.0 * tau, 3.0 * t2, 4.0 * t3, 5.0 * t2 * t2],
                       [0.0, 0.0, 2.0, 6.0 * tau, 12.0 * t2, 20.0 * t3]])
    return powers @ c


class _Plan:
    """A piecewise polynomial reference on [times[0], times[-1]] that holds `final` after it.
    Before times[0] it defers to `previous` (the plan it replaces), or to its start state.
    `effort` (K+1, n): feed-forward effort at the knots, linear between them, or None.
    `armed`: cmd_timeout applies after its end (an accepted trajectory not yet settled)."""

    def __init__(self, times, coefficients, final, previous=None, hold=False, effort=None):
        self.times = times                  # (K+1,) absolute knot times
        self._knots = [float(t) for t in times]
        self.coefficients = coefficients    # (K, 6, n)
        self.final = final                  # (n,) positions held after the end
        self.previous = previous
        self.hold = hold
        self.effort = effort
        self.armed = not hold

    @property
    def start(self):
        return self.times[0]

    @property
    def end(self):
        return self.times[-1]

    def sample(self, t):
        if t < self.times[0] and self.previous is not None:
            return self.previous.sample(t)
        if len(self.coefficients) == 0 or t > self.times[-1]:
            zero = np.zeros_like(self.final)
            return self.final.copy(), zero, zero.copy()
        k = min(max(bisect.bisect_right(self._knots, t) - 1, 0), len(self.coefficients) - 1)
        tau = min(max(t - self._knots[k], 0.0), self._knots[k + 1] - self._knots[k])
        return _evaluate(self.coefficients[k], tau)

    def effort_at(self, t):
        """The feed-forward effort (n,) at t, or None: linear between the knots."""
        if t < self.times[0] and self.previous is not None:
            return self.previous.effort_at(t)
        effort = self.effort
        if effort is None:
            return None
        if len(effort) == 1 or t >= self._knots[-1]:
            return effort[-1].copy()
        k = min(max(bisect.bisect_right(self._knots, t) - 1, 0), len(effort) - 2)
        h = self._knots[k + 1] - self._knots[k]
        s = min(max((t - self._knots[k]) / h, 0.0), 1.0)
        return effort[k] + s * (effort[k + 1] - effort[k])

    def prune(self, now):
        """Forget replaced plans that can no longer be sampled (their time has passed)."""
        plan = self
        while plan.previous is not None:
            if plan.start <= now:
                plan.previous = None
            else:
                plan = plan.previous


class _StepPlan(_Plan):
    """interpolation_method 'none' (JTC's): no interpolation. On [times[k], times[k+1]) the
    reference is knot k+1 as given; on the first segment it is knot 0 (the start state) when
    `from_start`, as JTC before the trajectory's first point. `values`: (p, q̇, q̈) (K+1, n)."""

    def __init__(self, times, values, final, previous, effort, from_start):
        super().__init__(times, np.zeros((len(times) - 1, 6, final.size)), final, previous,
                         effort=effort)
        self.values = values
        self.from_start = from_start

    def _index(self, t):
        k = bisect.bisect_right(self._knots, t) - 1
        if k >= len(self._knots) - 1:
            return None                     # at or after the last point
        return 0 if (k <= 0 and self.from_start) else max(k, 0) + 1

    def sample(self, t):
        if t < self.times[0] and self.previous is not None:
            return self.previous.sample(t)
        i = self._index(t)
        if i is None:
            zero = np.zeros_like(self.final)
            return self.final.copy(), zero, zero.copy()
        return tuple(v[i].copy() for v in self.values)

    def effort_at(self, t):
        if t < self.times[0] and self.previous is not None:
            return self.previous.effort_at(t)
        if self.effort is None:
            return None
        i = self._index(t)
        return self.effort[-1 if i is None else i].copy()


def _hold_plan(positions, now):
    positions = np.array(positions, dtype=float)
    return _Plan(np.array([now]), np.zeros((0, 6, positions.size)), positions, hold=True)


def stop_phases(v0, a0, max_deceleration):
    """The stop of one joint from velocity v0 and acceleration a0 to rest, as phases of
    constant jerk: [(duration, jerk)], empty for a joint at rest. With a = max_deceleration
    (> 0) and, for the motion in the direction of v0 (of a0 when v0 = 0), the jerk
    J = a / T_j, T_j = max(STOP_RAMP_SHARE |v0|, STOP_RAMP_TIME |a0|) / a:

    1. q̈ ramps at ±J from a0 to −P (P = a, or lower when v0 is too small to reach a),
    2. stays at −P while the velocity comes down,
    3. ramps at J from −P back to 0, reaching q̇ = 0 with it.

    A joint already braking so hard (a0 opposing v0) that a ramp of a0 to 0 at J would
    reverse it ramps a0 linearly to 0 over 2 |v0| / |a0| instead (one phase). |q̈| never
    exceeds max(a, |a0|) and q̈ is continuous. From a0 = 0 the stop takes (1 + k) |v0| / a
    and covers (1 + k) v0² / (2a), k = STOP_RAMP_SHARE: JTC's constant deceleration takes
    |v0| / a (plus a control cycle) for v0² / (2a). A stop that floating point cannot
    represent (a jerk, peak or duration that overflows or underflows: |v0| / a below
    ~1e-300 s, or a limit and velocity as far apart as 1e-300 and 1) is empty: the joint
    holds at once."""
    v0, a0, limit = float(v0), float(a0), float(max_deceleration)
    if v0 == 0.0 and a0 == 0.0:
        return []
    sign = 1.0 if v0 > 0.0 or (v0 == 0.0 and a0 > 0.0) else -1.0
    v, alpha = sign * v0, sign * a0         # moving forwards: v >= 0
    ramp = max(STOP_RAMP_SHARE * v, STOP_RAMP_TIME * abs(alpha)) / limit
    jerk = limit / ramp if ramp > 0.0 else math.inf
    if not 0.0 < jerk < math.inf:
        return []
    if alpha < 0.0 and alpha * alpha >= 2.0 * jerk * v:
        duration = 2.0 * v / -alpha         # braking already: a0 -> 0 reaches rest
        return _representable([(duration, sign * -alpha / duration)] if duration > 0.0
                              else [])
    peak = limit if alpha <= -limit else min(limit, math.sqrt(jerk * v + 0.5 * alpha * alpha))
    if not peak > 0.0:
        return []
    t1 = abs(alpha + peak) / jerk
    t3 = peak / jerk
    lost = 0.5 * (peak - alpha) * t1 + 0.5 * peak * t3      # velocity lost in the ramps
    t2 = max((v - lost) / peak, 0.0)
    j1 = -jerk if alpha > -peak else jerk
    return _representable([(t, sign * j) for t, j in ((t1, j1), (t2, 0.0), (t3, jerk))
                           if t > 0.0])


def _representable(phases):
    """`phases`, or [] when a duration is not finite or a ramp's jerk underflowed to 0."""
    if all(math.isfinite(h) and math.isfinite(j) for h, j in phases) and \
            any(j != 0.0 for _, j in phases):
        return phases
    return []


def stop_duration(v0, a0, max_deceleration):
    """The duration of `stop_phases`' stop of one joint (0 for a joint at rest)."""
    return math.fsum(t for t, _ in stop_phases(v0, a0, max_deceleration))


def _shifted(c, s):
    """Coefficients (6,) of P(s + τ) in τ for P with coefficients c (6,) in t."""
    out = np.zeros(6)
    for j in range(6):
        out[j] = sum(c[i] * math.comb(i, j) * s ** (i - j) for i in range(j, 6))
    return out


def deceleration_plan(positions, velocities, max_deceleration, now, accelerations=None):
    """Each joint from (q, q̇, q̈) at `now` to rest (JTC's decelerate_on_cancel) along
    `stop_phases`: q̈ ramps to −max_deceleration[i] and back (jerk-limited, a trapezoid in
    q̈), so |q̈| never exceeds it (or |q̈0|, where that is larger) and q̈ is continuous;
    unlike JTC's constant deceleration, a step in q̈_d at the start and at the end that a
    computed-torque law turns into torque steps. From q̈0 = 0 the stop takes 1.15 |q̇0| / a
    and covers 1.15 q̇0² / (2a) (JTC: |q̇0| / a, q̇0² / (2a)). A `_Plan` of cubic pieces
    between the joints' phase boundaries; a joint at rest holds at once."""
    p0 = np.array(positions, dtype=float)
    v0 = np.array(velocities, dtype=float)
    a0 = np.zeros_like(v0) if accelerations is None else np.array(accelerations, dtype=float)
    pieces, rest, knots = [], p0.copy(), {0.0}
    for i in range(p0.size):            # each joint's phases: (start, end, coefficients)
        p, v, a, t, joint = p0[i], v0[i], a0[i], 0.0, []
        for h, jerk in stop_phases(v0[i], a0[i], max_deceleration[i]):
            joint.append((t, t + h, np.array([p, v, 0.5 * a, jerk / 6.0, 0.0, 0.0])))
            p, v, a = (p + h * (v + h * (0.5 * a + h * jerk / 6.0)), v + h * (a + 0.5 * h * jerk),
                       a + h * jerk)
            t += h
            knots.add(t)
        pieces.append(joint)
        rest[i] = p
    times = np.array(sorted(knots))
    if times.size == 1:
        plan = _hold_plan(p0, now)
        plan.hold = False                   # a (trivial) stop trajectory, as JTC's
        plan.armed = False
        return plan
    coefficients = np.zeros((times.size - 1, 6, p0.size))
    for k, s in enumerate(times[:-1]):
        for i, joint in enumerate(pieces):
            phase = next((x for x in joint if x[0] <= s < x[1]), None)
            if phase is None:
                coefficients[k, 0, i] = rest[i]
            else:
                coefficients[k, :, i] = _shifted(phase[2], s - phase[0])
    plan = _Plan(now + times, coefficients, rest)
    plan.armed = False
    return plan


def shortest_angle(difference):
    """`difference` (rad, array or float) wrapped into (−π, π]: the shortest rotation
    between two angles."""
    wrapped = np.pi - np.mod(np.pi - np.asarray(difference, dtype=float), 2.0 * np.pi)
    return float(wrapped) if np.ndim(wrapped) == 0 else wrapped


def nearest_turn(start, target):
    """`start` moved by whole turns to within half a turn of `target` (per element): the
    start from which `target` is reached the short way; at exactly half a turn, the way
    of target − start (as JTC's wraparound)."""
    start = np.asarray(start, dtype=float)
    target = np.asarray(target, dtype=float)
    distance = shortest_angle(target - start)
    half = np.abs(np.abs(distance) - np.pi) < 1e-9
    distance = np.where(half, np.copysign(np.abs(distance), target - start), distance)
    return target - distance


def _segments(times, p, v, a, v_start, a_start):
    """Polynomial coefficients (K, 6, n) through the knots: quintic with (p, q̇, q̈), cubic
    with (p, q̇); with positions only, knot q̇ and q̈ come from the C2 spline clamped at
    q̇ = v_start and q̇ = 0, except q̈ at knot 0 (a_start, the current reference) and at the
    last knot (zero: the reference comes to rest), so q̈ is continuous at both ends too."""
    h = np.diff(times)[:, None]
    if len(h) == 0:
        return np.zeros((0, 6, p.shape[1]))
    if v is not None and a is None:
        return cubic_coefficients(p[:-1], v[:-1], p[1:], v[1:], h)
    if v is None:
        v, a = clamped_spline_knots(times, p, v_start, np.zeros_like(v_start))
        a[0], a[-1] = a_start, 0.0
    return quintic_coefficients(p[:-1], v[:-1], a[:-1], p[1:], v[1:], a[1:], h)
