"""Point-to-point joint motion profiles with exact q, q̇, q̈: pure math, no ROS.

Each profile maps (t, q_start, q_goal, duration) to (q, q̇, q̈), vectorised over joints and
over times: `t` scalar gives (n,) arrays, `t` of shape (N,) gives (N, n). Before t = 0 the
profile rests at q_start, after t = duration at q_goal.

- `trapezoid`: [SAS] §4 Fig. 6, trapezoidal velocity in three equal thirds,
  a = 9Δθ/(2T²), peak velocity 3Δθ/(2T); q̈ jumps at 0, T/3, 2T/3 and T.
- `quintic`: q = q_start + Δθ (10s³ − 15s⁴ + 6s⁵), s = t/T: zero velocity and acceleration at
  both ends (our documented choice for [LEE]'s unspecified point-to-point move,
  doc/reproductions.md).
"""

import numpy as np

from robot_dynamics.trajectories.sampler import TrajectoryCommand, TrajectoryPoint

__all__ = ['trapezoid', 'quintic', 'PROFILES', 'sample_profile']


def _prepare(t, q_start, q_goal, duration):
    duration = float(duration)
    if not np.isfinite(duration) or duration <= 0.0:
        raise ValueError(f'duration: must be finite and > 0, got {duration}')
    q_start = np.asarray(q_start, dtype=float)
    q_goal = np.asarray(q_goal, dtype=float)
    if q_start.shape != q_goal.shape or q_start.ndim != 1:
        raise ValueError(f'q_start {q_start.shape} and q_goal {q_goal.shape} must be equal '
                         '(n,) vectors')
    t = np.asarray(t, dtype=float)
    return t[..., None], q_start, q_goal - q_start, duration


def trapezoid(t, q_start, q_goal, duration):
    """[SAS] §4: q̈ = a on [0, T/3), 0 on [T/3, 2T/3), −a on [2T/3, T], a = 9Δθ/(2T²);
    q − q_start = ½at² (I), aT(6t − T)/18 (II), −a(t − T)²/2 + 2aT²/9 (III)."""
    t, q0, dq, T = _prepare(t, q_start, q_goal, duration)
    a = 9.0 * dq / (2.0 * T**2)
    region_1 = (t >= 0.0) & (t < T / 3.0)
    region_2 = (t >= T / 3.0) & (t < 2.0 * T / 3.0)
    region_3 = (t >= 2.0 * T / 3.0) & (t <= T)
    after = t > T
    q = np.where(region_1, 0.5 * a * t**2, 0.0)
    q = np.where(region_2, a * T * (6.0 * t - T) / 18.0, q)
    q = np.where(region_3, -0.5 * a * (t - T)**2 + 2.0 * a * T**2 / 9.0, q)
    q = np.where(after, dq, q)
    qd = np.where(region_1, a * t, 0.0)
    qd = np.where(region_2, a * T / 3.0, qd)
    qd = np.where(region_3, -a * (t - T), qd)
    qdd = np.where(region_1, a, 0.0)
    qdd = np.where(region_3, -a, qdd)
    return q0 + q, qd, qdd


def quintic(t, q_start, q_goal, duration):
    """q = q_start + Δθ s(t/T), s = 10s³ − 15s⁴ + 6s⁵: rest to rest, peak velocity 15Δθ/(8T)."""
    t, q0, dq, T = _prepare(t, q_start, q_goal, duration)
    s = np.clip(t / T, 0.0, 1.0)
    inside = (t >= 0.0) & (t <= T)
    shape = s**3 * (10.0 - 15.0 * s + 6.0 * s**2)
    rate = np.where(inside, 30.0 * s**2 * (1.0 - s)**2 / T, 0.0)
    curvature = np.where(inside, 60.0 * s * (1.0 - s) * (1.0 - 2.0 * s) / T**2, 0.0)
    return q0 + dq * shape, dq * rate, dq * curvature


PROFILES = {'quintic': quintic, 'trapezoid': trapezoid}


def sample_profile(profile, q_start, q_goal, duration, points, joint_names, start_time=0.0):
    """A TrajectoryCommand of `points` samples at t = T k/points, k = 1..points, each with
    exact positions, velocities and accelerations of `profile` (a name in PROFILES or a
    function). No point at t = 0: the controller starts from its current reference."""
    function = PROFILES[profile] if isinstance(profile, str) else profile
    points = int(points)
    if points < 1:
        raise ValueError(f'points: need at least 1, got {points}')
    joint_names = tuple(joint_names)
    if len(joint_names) != len(q_start):
        raise ValueError(f'joint_names: {len(joint_names)} names for {len(q_start)} joints')
    times = float(duration) * np.arange(1, points + 1) / points
    times[-1] = float(duration)
    q, qd, qdd = function(times, q_start, q_goal, duration)
    samples = tuple(TrajectoryPoint(float(t), tuple(map(float, p)), tuple(map(float, v)),
                                    tuple(map(float, a)))
                    for t, p, v, a in zip(times, q, qd, qdd))
    return TrajectoryCommand(joint_names, samples, float(start_time))
