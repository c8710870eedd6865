"""Is a trajectory within the arm's limits? Checked when it is accepted: pure math, no ROS.

joint_trajectory_controller follows whatever it gets, also a reference no motor can follow
(its limits are not checked: ros-controls/ros2_controllers#1567). A computed-torque
controller knows the torque a reference needs: τ = ID(q_d, q̇_d, q̈_d), the model's inverse
dynamics along the reference (a perfect tracking; the feedback terms add to it). So an
accepted trajectory's reference is sampled (every GRID s of its time and at every point,
one batched inverse-dynamics call) and checked against

- the joints' velocity limits |q̇_d| ≤ `robot.velocity_max` (inf where none is given), and
- the effort limits |τ| ≤ `effort_limits` (the clip of the controller's output),

and refused, naming the joint, the time and the excess; or, with time scaling allowed, run
slower: stretching a trajectory's time by k ≥ 1 divides q̇_d by k and q̈_d by k², and
since τ = M(q)q̈ + C(q, q̇)q̇ + g(q) the dynamic part τ − g(q) by k² (`required_scale`).
A reference whose gravity torque alone exceeds a limit cannot be slowed into the limits.
"""

from dataclasses import dataclass

import numpy as np

from robot_dynamics import dynamics

__all__ = ['GRID', 'MAX_SAMPLES', 'Excess', 'sample_reference', 'check_reference',
           'required_scale', 'scaled_command']

GRID = 0.01             # s of trajectory time between samples (also every point is sampled)
MAX_SAMPLES = 2000      # a longer trajectory is sampled on a coarser grid (duration / this)


@dataclass(frozen=True)
class Excess:
    """The worst excess of one kind: `kind` 'velocity' or 'effort', joint index and name,
    time [s from the trajectory's start], the value and the limit."""
    kind: str
    joint: int
    name: str
    time: float
    value: float
    limit: float

    def text(self):
        unit = 'rad/s|m/s' if self.kind == 'velocity' else 'N m|N'
        limit = 'robot.velocity_max' if self.kind == 'velocity' else 'effort_limits'
        need = 'reaches' if self.kind == 'velocity' else 'needs'
        return (f'joint {self.name!r} {need} {self.value:.4g} {unit} at t = {self.time:.3f} s '
                f'of the trajectory, beyond {limit}[{self.joint}] = {self.limit:.4g} (by '
                f'{abs(self.value) - self.limit:.3g})')


def _grid(start, end, knots):
    """Sample times on [start, end]: every GRID s (coarser beyond MAX_SAMPLES) and the
    knots."""
    duration = max(end - start, 0.0)
    step = max(GRID, duration / MAX_SAMPLES)
    count = int(np.ceil(duration / step)) + 1
    times = np.concatenate([start + np.arange(count) * step, knots, [end]])
    times = np.unique(times[(times >= start) & (times <= end)])
    return times


def sample_reference(times, coefficients, t):
    """q, q̇, q̈ (len(t), n) of the piecewise polynomial with knot `times` (K+1,) and
    `coefficients` (K, 6, n) (trajectory.quintic_coefficients' layout) at the times t,
    vectorised: one segment index per sample, one (3, 6) power row set per sample."""
    t = np.asarray(t, dtype=float)
    k = np.clip(np.searchsorted(times, t, side='right') - 1, 0, len(coefficients) - 1)
    tau = np.clip(t - times[k], 0.0, times[k + 1] - times[k])
    one, zero = np.ones_like(tau), np.zeros_like(tau)
    t2, t3 = tau * tau, tau * tau * tau
    powers = np.stack([
        np.stack([one, tau, t2, t3, t2 * t2, t3 * t2], axis=-1),
        np.stack([zero, one, 2.0 * tau, 3.0 * t2, 4.0 * t3, 5.0 * t2 * t2], axis=-1),
        np.stack([zero, zero, 2.0 * one, 6.0 * tau, 12.0 * t2, 20.0 * t3], axis=-1)])
    values = np.einsum('dgj,gjn->dgn', powers, coefficients[k])
    return values[0], values[1], values[2]


def plan_samples(plan):
    """(t (G,), q, q̇, q̈ (G, n), effort (G, n) or None) of a sampler plan: its polynomial
    segments on the grid, or for a plan without interpolation (interpolation_method 'none')
    its held points."""
    values = getattr(plan, 'values', None)
    times = np.asarray(plan.times, dtype=float)
    if values is not None:                      # steps: the points themselves
        q, qd, qdd = (np.asarray(v, dtype=float) for v in values)
        effort = None if plan.effort is None else np.asarray(plan.effort, dtype=float)
        return times, q, qd, qdd, effort
    if len(plan.coefficients) == 0:
        return times[:0], None, None, None, None
    t = _grid(times[0], times[-1], times)
    q, qd, qdd = sample_reference(times, np.asarray(plan.coefficients), t)
    effort = None
    if plan.effort is not None:
        e = np.asarray(plan.effort, dtype=float)
        effort = np.stack([np.interp(t, times, e[:, j]) for j in range(e.shape[1])], axis=1)
    return t, q, qd, qdd, effort


def _worst(kind, ratio, values, limits, t, joints, start):
    """The Excess of the largest ratio > 1, else None."""
    if ratio.size == 0 or not ratio.max() > 1.0:
        return None
    g, j = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    return Excess(kind, int(j), joints[j], float(t[g] - start), float(values[g, j]),
                  float(limits[j]))


def check_reference(model, plan, joints, velocity_limits, effort_limits):
    """(velocity Excess or None, effort Excess or None, scale) for a sampler plan: the worst
    |q̇_d| / velocity limit and |τ| / effort limit beyond 1, τ = ID(q_d, q̇_d, q̈_d) (+ the
    points' effort feed-forward); `scale` the time stretch k ≥ 1 that brings both within
    the limits (`required_scale`; inf when gravity alone exceeds a limit)."""
    t, q, qd, qdd, effort = plan_samples(plan)
    if q is None or len(t) == 0:
        return None, None, 1.0
    velocity_limits = np.asarray(velocity_limits, dtype=float)
    effort_limits = np.asarray(effort_limits, dtype=float)
    start = float(plan.times[0])
    with np.errstate(divide='ignore', invalid='ignore'):
        v_ratio = np.abs(qd) / velocity_limits
    tau = dynamics.inverse_dynamics(model, q, qd, qdd)
    if effort is not None:
        tau = tau + effort
    with np.errstate(divide='ignore', invalid='ignore'):
        e_ratio = np.abs(tau) / effort_limits
    velocity = _worst('velocity', np.nan_to_num(v_ratio, nan=0.0), qd, velocity_limits, t,
                      joints, start)
    effort_excess = _worst('effort', np.nan_to_num(e_ratio, nan=0.0), tau, effort_limits, t,
                           joints, start)
    if velocity is None and effort_excess is None:
        return None, None, 1.0
    gravity = tau                   # only needed for the stretch, when efforts exceed
    if effort_excess is not None:
        gravity = dynamics.inverse_dynamics(model, q, np.zeros_like(qd), np.zeros_like(qdd))
        if effort is not None:
            gravity = gravity + effort
    scale = required_scale(qd, tau, gravity, velocity_limits, effort_limits)
    return velocity, effort_excess, scale


def required_scale(qd, tau, gravity, velocity_limits, effort_limits):
    """The smallest k ≥ 1 with |q̇|/k ≤ v_max and |g + (τ − g)/k²| ≤ τ_max at every sample
    (bounded by |g| + |τ − g|/k² ≤ τ_max); inf when |g| ≥ τ_max somewhere the reference
    needs more than g (no slowing helps)."""
    with np.errstate(divide='ignore', invalid='ignore'):
        k_v = np.max(np.where(np.isfinite(velocity_limits), np.abs(qd) / velocity_limits, 0.0),
                     initial=0.0)
        dynamic = np.abs(tau - gravity)
        room = effort_limits - np.abs(gravity)
        needs = np.abs(tau) > effort_limits
        if np.any(needs & (room <= 0.0)):
            return float('inf')
        k_e = np.sqrt(np.max(np.where(needs, dynamic / np.where(room > 0.0, room, 1.0), 0.0),
                             initial=0.0))
    return float(max(1.0, k_v, k_e))


def scaled_command(command, k):
    """A TrajectoryCommand `k` ≥ 1 times slower: time_from_start × k, velocities / k,
    accelerations / k² (positions and effort as they are)."""
    from robot_dynamics.trajectories.sampler import TrajectoryCommand, TrajectoryPoint
    points = tuple(TrajectoryPoint(
        p.time_from_start * k, tuple(p.positions),
        tuple(v / k for v in p.velocities), tuple(a / (k * k) for a in p.accelerations),
        tuple(p.effort)) for p in command.points)
    return TrajectoryCommand(command.joint_names, points, command.start_time)
