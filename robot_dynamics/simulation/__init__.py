"""Closed-loop simulation of a digital joint controller around the arm: pure math, no ROS.

The loop of [LEE] §5 (Fig. 2): every control period T_c the controller samples the state
(q, q̇) and computes an effort; a zero-order hold applies that effort unchanged until the
next sample; between samples the plant q̈ = forward_dynamics(q, q̇, τ) is integrated with
classical RK4 ([TML] §7) at a fixed step h that divides T_c. [LEE] gives only
T_c = 0.01 s; the integrator and h are the project's choice (doc/reproductions.md).

    controller(t, q, qd) -> tau            called at t = 0, T_c, 2 T_c, ...
    reference(t) -> (q_d, qd_d, qdd_d)     the desired motion (recorded, and used by the
                                           controllers built here)

`computed_torque`, `pd` and `pd_gravity` build the three controllers of the [LEE]
comparison; any callable with the same signature works.

The package's modules: `integration` (RK4 and Euler steps, joint stops), `engines` (the
plant's engines), `engine_frames` (external wrench frames), `mujoco_engine` (MuJoCo),
`mjcf_model` (the robot model of an MJCF arm).
"""

import math
from typing import NamedTuple

import numpy as np

from robot_dynamics import dynamics
from robot_dynamics.control import ComputedTorqueLaw
from robot_dynamics.simulation.integration import rk4_step

__all__ = ['ClosedLoopRun', 'simulate_closed_loop', 'computed_torque', 'pd', 'pd_gravity',
           'effort_gains', 'hold', 'max_tracking_error']


class ClosedLoopRun(NamedTuple):
    """Samples at every plant step, t[k] = k·h, k = 0..K.

    t: (K+1,) s; q, qd: (K+1, n) plant state; q_ref: (K+1, n) reference position;
    tau: (K+1, n) effort held by the zero-order hold on [t[k], t[k] + h) (the last row
    repeats the effort held over the last step).
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    q_ref: np.ndarray
    tau: np.ndarray

    @property
    def error(self):
        """Tracking error e = q_ref − q, (K+1, n)."""
        return self.q_ref - self.q


def max_tracking_error(run, t_from=0.0, t_to=math.inf):
    """max |q_ref − q| per joint over t_from ≤ t ≤ t_to, (n,)."""
    window = (run.t >= t_from) & (run.t <= t_to)
    return np.max(np.abs(run.error[window]), axis=0)


def simulate_closed_loop(plant_model, controller, reference, duration, control_period,
                         plant_step, q0, qd0, measurement=None, effort_limits=None):
    """Simulate `duration` seconds of the sampled loop and return a `ClosedLoopRun`.

    plant_model: the RobotModel integrated as the arm (it may differ from the
        controller's model: model-error studies).
    controller: (t, q, qd) -> tau, sampled every `control_period`, output held (ZOH).
    reference: t -> (q_d, qd_d, qdd_d); only q_d is recorded here.
    plant_step: RK4 step h; control_period must be a whole multiple of it, and
        duration a whole multiple of control_period.
    measurement: optional (q, qd) -> (q_meas, qd_meas) applied to what the controller
        sees (e.g. encoder quantisation); the plant state itself is exact.
    effort_limits: optional (n,) symmetric limits; the held effort is clipped to them.
    """
    n = plant_model.n
    q = _state('q0', q0, n)
    qd = _state('qd0', qd0, n)
    steps_per_sample = _ratio('control_period', control_period, 'plant_step', plant_step)
    samples = _ratio('duration', duration, 'control_period', control_period)
    limits = None if effort_limits is None else _state('effort_limits', effort_limits, n)
    total = samples * steps_per_sample
    t = np.arange(total + 1) * float(plant_step)
    qs, qds, taus = (np.empty((total + 1, n)) for _ in range(3))
    qs[0], qds[0] = q, qd
    for k in range(samples):
        t_k = k * steps_per_sample * float(plant_step)
        q_meas, qd_meas = (q, qd) if measurement is None else measurement(q, qd)
        tau = _effort(controller(t_k, q_meas, qd_meas), n, t_k, limits)
        for j in range(k * steps_per_sample, (k + 1) * steps_per_sample):
            # Zero-order hold: the same τ over every RK4 step of this control period.
            q, qd = rk4_step(plant_model, q, qd, tau, float(plant_step))
            qs[j + 1], qds[j + 1], taus[j] = q, qd, tau
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(qd))):
            raise FloatingPointError(f'plant state became non-finite by t = '
                                     f'{t[(k + 1) * steps_per_sample]:.6g} s')
    taus[total] = taus[total - 1]
    q_ref = np.array([np.asarray(reference(ti)[0], dtype=float) for ti in t])
    return ClosedLoopRun(t=t, q=qs, qd=qds, q_ref=q_ref, tau=taus)


# ---------------------------------------------------------------------- controllers


def computed_torque(model, kp, kd, reference):
    """[LEE] eq. 4.1/4.4: τ = RNEA(q, q̇, q̈_d + Kd ė + Kp e) with the controller's model
    (acceleration-level gains kp [1/s²], kd [1/s])."""
    law = ComputedTorqueLaw(model, kp, kd)

    def controller(t, q, qd):
        q_d, qd_d, qdd_d = reference(t)
        return law.effort(q, qd, q_d, qd_d, qdd_d)
    return controller


def pd(kp_effort, kd_effort, reference):
    """Independent joint PD: τ = Kp (q_d − q) + Kd (q̇_d − q̇), effort-level gains
    (N·m/rad, N·m·s/rad)."""
    kp_effort = np.asarray(kp_effort, dtype=float)
    kd_effort = np.asarray(kd_effort, dtype=float)

    def controller(t, q, qd):
        q_d, qd_d, _ = reference(t)
        return kp_effort * (np.asarray(q_d) - q) + kd_effort * (np.asarray(qd_d) - qd)
    return controller


def pd_gravity(model, kp_effort, kd_effort, reference):
    """PD plus gravity compensation g(q) from the controller's model."""
    feedback = pd(kp_effort, kd_effort, reference)

    def controller(t, q, qd):
        return feedback(t, q, qd) + dynamics.gravity_torques(model, q)
    return controller


def effort_gains(model, q, kp, kd):
    """Acceleration-level gains turned into effort-level ones with the diagonal of the
    mass matrix at q: Kp_τ = kp·M_ii(q), Kd_τ = kd·M_ii(q). A decoupled joint of inertia
    M_ii then has the same natural frequency √kp and damping as the computed-torque loop."""
    m_diag = np.diag(dynamics.mass_matrix(model, np.asarray(q, dtype=float)))
    return np.asarray(kp, dtype=float) * m_diag, np.asarray(kd, dtype=float) * m_diag


def hold(q_final):
    """A reference that stays at q_final (zero velocity and acceleration)."""
    q_final = np.asarray(q_final, dtype=float)
    zero = np.zeros_like(q_final)
    return lambda t: (q_final, zero, zero)


# ---------------------------------------------------------------------- checks


def _state(name, value, n):
    array = np.asarray(value, dtype=float)
    if array.shape != (n,):
        raise ValueError(f'{name}: expected shape ({n},), got {array.shape}')
    if not np.all(np.isfinite(array)):
        raise ValueError(f'{name}: non-finite value in {array}')
    return array


def _ratio(name, value, unit_name, unit):
    """value / unit as a positive whole number (to 1e-9 relative), else ValueError."""
    for label, x in ((name, value), (unit_name, unit)):
        if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) \
                or not math.isfinite(x) or x <= 0.0:
            raise ValueError(f'{label}: expected a positive finite number of seconds, '
                             f'got {x!r}')
    count = round(value / unit)
    if count < 1 or abs(count * unit - value) > 1e-9 * value:
        raise ValueError(f'{name} ({value} s) must be a whole multiple of {unit_name} '
                         f'({unit} s)')
    return int(count)


def _effort(tau, n, t, limits):
    tau = np.asarray(tau, dtype=float)
    if tau.shape != (n,):
        raise ValueError(f'controller: effort at t = {t:.6g} s has shape {tau.shape}, '
                         f'expected ({n},)')
    if not np.all(np.isfinite(tau)):
        raise ValueError(f'controller: non-finite effort at t = {t:.6g} s: {tau}')
    return tau if limits is None else np.clip(tau, -limits, limits)
