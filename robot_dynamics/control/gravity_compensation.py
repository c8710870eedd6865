"""Gravity compensation with joint damping: the arm floats, held against gravity and its own
friction, and can be moved by hand; pure math, no ROS.

    τ = g(q) + f̃(q̇) − D q̇

g(q) the model's gravity efforts, f̃ the model's friction with every sign(q̇) smoothed as
tanh(q̇ / v_ε) (continuous at rest, so the compensation does not chatter), D ≥ 0 a diagonal
joint damping. With the exact model the closed loop is M(q) q̈ + C(q, q̇) q̇ + D q̇ = τ_ext:
passive, the energy ½ q̇ᵀ M q̇ decays at the rate q̇ᵀ D q̇ once the push ends.

Source: the passivity-based regulator with gravity compensation of Takegaki M., Arimoto S.
1981, "A new feedback method for dynamic control of manipulators", ASME J. Dyn. Sys. Meas.
Control 103(2):119–125, with zero stiffness; the impedance view of Hogan N. 1985,
"Impedance Control: An Approach to Manipulation, Parts I–III", ASME J. Dyn. Sys. Meas.
Control 107(1):1–24 (doc/control-laws.md).
"""

import numpy as np

from robot_dynamics import dynamics
from robot_dynamics.control._parameters import number, per_joint
from robot_dynamics.control._terms import smoothed_friction

DEFAULT_FRICTION_SMOOTHING = 0.01      # rad/s (m/s for a prismatic joint)


class GravityCompensationLaw:
    """τ = g(q) + friction(q̇, sign → tanh(q̇ / v_ε)) − D q̇; the references are ignored.

    damping: D per joint (a scalar for all), N m s/rad (N s/m), >= 0.
    friction_smoothing: v_ε > 0, rad/s (m/s).
    """

    def __init__(self, model, damping=0.0, friction_smoothing=DEFAULT_FRICTION_SMOOTHING,
                 prefix='gravity_compensation'):
        self.model = model
        self.damping = per_joint(f'{prefix}.damping', damping, model.n)
        self.friction_smoothing = number(f'{prefix}.friction_smoothing', friction_smoothing,
                                         positive=True)

    def effort(self, q, qd, q_ref=None, qd_ref=None, qdd_ref=None):
        q = np.asarray(q, dtype=float)
        qd = np.asarray(qd, dtype=float)
        return (dynamics.gravity_torques(self.model, q)
                + smoothed_friction(self.model, qd, self.friction_smoothing)
                - self.damping * qd)
