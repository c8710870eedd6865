"""The computed-torque law ([LEE] §4) and effort saturation: pure math, no ROS."""

import numpy as np

from robot_dynamics import dynamics


def servo_acceleration(q, qd, q_ref, qd_ref, qdd_ref, kp, kd):
    """q̈_d + Kd (q̇_d − q̇) + Kp (q_d − q): [LEE] eq. 4.4 with diagonal gains
    (kp in 1/s², kd in 1/s, per joint)."""
    return qdd_ref + kd * (qd_ref - qd) + kp * (q_ref - q)


class ComputedTorqueLaw:
    """τ = inverse_dynamics(q, q̇, q̈_d + Kd(q̇_d − q̇) + Kp(q_d − q)): one Newton–Euler call
    per evaluation ([LEE] eq. 4.4). Gains are acceleration-level and per joint."""

    def __init__(self, model, kp, kd):
        self.model = model
        self.kp = _gains('kp', kp, model.n, strictly_positive=True)
        self.kd = _gains('kd', kd, model.n, strictly_positive=False)

    def effort(self, q, qd, q_ref, qd_ref, qdd_ref):
        u = servo_acceleration(np.asarray(q, float), np.asarray(qd, float), q_ref, qd_ref,
                               qdd_ref, self.kp, self.kd)
        return dynamics.inverse_dynamics(self.model, q, qd, u)


def _gains(name, values, n, strictly_positive):
    array = np.asarray(values, dtype=float)
    if array.ndim == 0:
        array = np.full(n, float(array))
    if array.shape != (n,):
        raise ValueError(f'gains.{name}: expected {n} values, got shape {array.shape}')
    for i, v in enumerate(array):
        if not np.isfinite(v) or (v <= 0.0 if strictly_positive else v < 0.0):
            bound = '> 0' if strictly_positive else '>= 0'
            raise ValueError(f'gains.{name}[{i}]: must be finite and {bound}, got {v}')
    return array


def saturate(tau, limits):
    """Clip efforts to ±limits; returns (clipped efforts, number of joints clipped)."""
    tau = np.asarray(tau, dtype=float)
    clipped = np.clip(tau, -limits, limits)
    return clipped, int(np.count_nonzero(clipped != tau))
