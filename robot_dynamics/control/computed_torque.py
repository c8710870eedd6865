"""The computed-torque law and effort saturation: pure math, no ROS.

Source: [LEE] C. S. G. Lee, M. J. Chung, T. N. Mudge, J. L. Turney, "On the Control of
Mechanical Manipulators", The University of Michigan, Ann Arbor (undated, c. 1981–82), §4,
eq. 4.4: the computed-torque law in joint space, its effort by the recursive Newton–Euler
algorithm of [LWP] J. Y. S. Luh, M. W. Walker, R. P. C. Paul, "On-Line Computational Scheme
for Mechanical Manipulators", Trans. ASME, J. Dyn. Sys. Meas. Control 102:69–76, 1980.
"""

import numpy as np

from robot_dynamics import dynamics
from robot_dynamics.control._parameters import per_joint


def servo_acceleration(q, qd, q_ref, qd_ref, qdd_ref, kp, kd):
    """q̈_d + Kd (q̇_d − q̇) + Kp (q_d − q): [LEE] eq. 4.4 with diagonal gains
    (kp in 1/s², kd in 1/s, per joint)."""
    return qdd_ref + kd * (qd_ref - qd) + kp * (q_ref - q)


class ComputedTorqueLaw:
    """τ = inverse_dynamics(q, q̇, q̈_d + Kd(q̇_d − q̇) + Kp(q_d − q)): one Newton–Euler call
    per evaluation ([LEE] eq. 4.4). Gains are acceleration-level and per joint."""

    def __init__(self, model, kp, kd):
        self.model = model
        self.kp = per_joint('gains.kp', kp, model.n, positive=True)
        self.kd = per_joint('gains.kd', kd, model.n)

    def effort(self, q, qd, q_ref, qd_ref, qdd_ref):
        u = servo_acceleration(np.asarray(q, float), np.asarray(qd, float), q_ref, qd_ref,
                               qdd_ref, self.kp, self.kd)
        return dynamics.inverse_dynamics(self.model, q, qd, u)


def saturate(tau, limits):
    """Clip efforts to ±limits; returns (clipped efforts, number of joints clipped)."""
    tau = np.asarray(tau, dtype=float)
    clipped = np.clip(tau, -limits, limits)
    return clipped, int(np.count_nonzero(clipped != tau))
