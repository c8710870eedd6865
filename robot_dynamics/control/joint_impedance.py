"""Joint impedance: a spring K and damper D per joint about the reference, on top of
gravity compensation, with an optional model feed-forward; pure math, no ROS.

    τ = K (q_d − q) + D (q̇_d − q̇) + g(q) + τ_ff

    τ_ff = 0                                      feedforward='none'
    τ_ff = C(q, q̇) q̇_d                            feedforward='coriolis'
    τ_ff = M(q) q̈_d + C(q, q̇) q̇_d + f̃(q̇_d)       feedforward='inverse_dynamics'

C is the Christoffel factorisation (Ṁ − 2C skew-symmetric). With 'inverse_dynamics' and the
exact model the closed loop in e = q − q_d is M ë + (C + D) ė + K e = τ_ext (plus the
plant's friction f(q̇) − f̃(q̇_d)): passive with the storage ½ ėᵀ M ė + ½ eᵀ K e. With
'none' or 'coriolis' the same holds for a reference at rest (q̇_d = q̈_d = 0).
Damping: D given per joint, or D(q) = 2ζ (M(q) # K) from a damping ratio ζ (the double
diagonalisation, evaluated at every call: every mode of M ë + D ė + K e = 0 frozen at q has
the ratio ζ).

Sources: Hogan N. 1985, "Impedance Control: An Approach to Manipulation, Parts I–III", ASME
J. Dyn. Sys. Meas. Control 107(1):1–24; Albu-Schäffer A., Ott C., Hirzinger G. 2007, "A
unified passivity-based control framework for position, torque and impedance control of
flexible joint robots", Int. J. Robotics Research 26(1):23–39 (joint impedance on a
gravity-compensated arm, its passivity); Ott C. 2008, "Cartesian Impedance Control of
Redundant and Flexible-Joint Robots", Springer STAR 49 (damping design); Slotine
J.-J. E., Li W. 1987, "On the adaptive control of robot manipulators", Int. J. Robotics
Research 6(3):49–59 (the C(q, q̇) q̇_d feed-forward).
"""

import numpy as np

from robot_dynamics import dynamics
from robot_dynamics.control._parameters import damping_choice, number, one_of, per_joint
from robot_dynamics.control._terms import (coriolis_product, damping_from_ratio,
                                           smoothed_friction)
from robot_dynamics.control.gravity_compensation import DEFAULT_FRICTION_SMOOTHING

FEEDFORWARDS = ('none', 'coriolis', 'inverse_dynamics')


class JointImpedanceLaw:
    """τ = K (q_d − q) + D (q̇_d − q̇) + g(q) + τ_ff (module docstring).

    stiffness: K per joint (a scalar for all), N m/rad (N/m), >= 0.
    damping: D per joint, N m s/rad (N s/m), >= 0; or
    damping_ratio: ζ >= 0 (a scalar), D(q) = 2ζ (M(q) # K); default ζ = 1 when neither.
    feedforward: 'none', 'coriolis' or 'inverse_dynamics'.
    friction_smoothing: v_ε of the reference's friction in 'inverse_dynamics', rad/s.
    """

    def __init__(self, model, stiffness, damping=None, damping_ratio=None, feedforward='none',
                 friction_smoothing=DEFAULT_FRICTION_SMOOTHING, prefix='joint_impedance'):
        self.model = model
        self.stiffness = per_joint(f'{prefix}.stiffness', stiffness, model.n)
        self.damping, self.damping_ratio = damping_choice(prefix, damping, damping_ratio,
                                                          model.n)
        self.feedforward = one_of(f'{prefix}.feedforward', feedforward, FEEDFORWARDS)
        self.friction_smoothing = number(f'{prefix}.friction_smoothing', friction_smoothing,
                                         positive=True)

    def damping_matrix(self, q, M=None):
        """D (n, n) at q: diag(damping), or 2ζ (M(q) # K)."""
        if self.damping is not None:
            return np.diag(self.damping)
        M = dynamics.mass_matrix(self.model, q) if M is None else M
        return damping_from_ratio(M, self.stiffness, self.damping_ratio)

    def effort(self, q, qd, q_ref, qd_ref, qdd_ref):
        q = np.asarray(q, dtype=float)
        qd = np.asarray(qd, dtype=float)
        q_ref = np.asarray(q_ref, dtype=float)
        qd_error = np.asarray(qd_ref, dtype=float) - qd
        tau = self.stiffness * (q_ref - q) + dynamics.gravity_torques(self.model, q)
        M = None
        if self.damping is not None:
            tau = tau + self.damping * qd_error
        else:
            M = dynamics.mass_matrix(self.model, q)
            tau = tau + damping_from_ratio(M, self.stiffness, self.damping_ratio) @ qd_error
        if self.feedforward != 'none':
            tau = tau + coriolis_product(self.model, q, qd, qd_ref)
        if self.feedforward == 'inverse_dynamics':
            M = dynamics.mass_matrix(self.model, q) if M is None else M
            tau = (tau + M @ np.asarray(qdd_ref, dtype=float)
                   + smoothed_friction(self.model, qd_ref, self.friction_smoothing))
        return tau
