"""Cartesian impedance of the tool about a target pose, on a gravity-compensated arm, with
a dynamically consistent null-space posture; pure math, no ROS.

    e  = [p_d − p;  log(q_d ⊗ q⁻¹)]            position and orientation error (base frame)
    ė  = [v_d − v;  ω_d − ω],  [v; ω] = J q̇    (v_d = ω_d = 0 without a target velocity)
    F  = K e + D ė  (+ Λ (a_d − J̇ q̇) with a target acceleration)
    τ  = Jᵀ F + g(q)  (+ C(q, q̇) q̇ with a target acceleration)  + N τ_n
    τ_n = K_n (q_n − q) − D_n q̇,   N = I − Jᵀ Λ J M⁻¹   (with a posture q_n or a D_n)

J the geometric Jacobian of the tool (rows [v; ω], base frame), M the joint-space inertia,
Λ = (J M⁻¹ Jᵀ)⁻¹ the operational-space inertia, computed damped near singularities:
with J M⁻¹ Jᵀ = U diag(s) Uᵀ, Λ = U diag(s / (s² + λ²)) Uᵀ (damped least squares, λ =
`singular_damping`; |Λ| ≤ 1 / (2λ), off singularities Λ within λ²/s² of the exact one).
The orientation error is the rotation vector of q_d ⊗ q⁻¹ taken the short way (the sign of
q_d flipped when q_d · q < 0), so K_rot acts in N m/rad about the error's axis.
Without a target acceleration the law is the passive impedance of Hogan (1985): the closed
loop stores ½ ẋᵀΛẋ-like kinetic plus ½ eᵀKe potential energy and dissipates through D. With
one it adds the operational-space feed-forward of Khatib (1987): the joint-space C(q, q̇) q̇
and Λ (a_d − J̇ q̇) make the task error obey Λ ë + D ė + K e = −F_ext (exact model, J full
row rank) — decoupled, but not passive under contact (Ott's passive μ ẋ_d form is not
implemented). D is given per axis, or D(q) = 2ζ (Λ(q) # K) (double diagonalisation: every
task mode frozen at q has the ratio ζ); D_n is given per joint or 2ζ_n (M(q) # K_n).

Sources: Hogan N. 1985, "Impedance Control: An Approach to Manipulation, Parts I–III", ASME
J. Dyn. Sys. Meas. Control 107(1):1–24; Khatib O. 1987, "A unified approach for motion and
force control of robot manipulators: The operational space formulation", IEEE J. Robotics
and Automation 3(1):43–53 (Λ, the dynamically consistent null-space projector, the
feed-forward); Ott C. 2008, "Cartesian Impedance Control of Redundant and Flexible-Joint
Robots", Springer STAR 49 (null-space stiffness, damping design, quaternion
orientation error); Albu-Schäffer A., Ott C., Hirzinger G. 2007, "A unified passivity-based
control framework for position, torque and impedance control of flexible joint robots",
Int. J. Robotics Research 26(1):23–39; Nakamura Y., Hanafusa H. 1986, "Inverse kinematic
solutions with singularity robustness for robot manipulator control", ASME J. Dyn. Sys.
Meas. Control 108(3):163–171 (damped least squares).
"""

import math
from typing import NamedTuple, Optional

import numpy as np

from robot_dynamics import dynamics
from robot_dynamics.dynamics import kinematics
from robot_dynamics.control._parameters import (damping_choice, finite_vector, number,
                                                per_axis, per_joint)
from robot_dynamics.control._terms import damping_from_ratio, velocity_product

QUATERNION_TOLERANCE = 1e-3     # |‖q‖ − 1| accepted in a target
DEFAULT_MAX_TARGET_STEP = (0.1, 0.5)        # m, rad
DEFAULT_SINGULAR_DAMPING = 1e-3


class CartesianTarget(NamedTuple):
    """A tool target in the base frame: position (3,) m, quaternion (4,) (x, y, z, w),
    velocity (6,) [v; ω] (m/s, rad/s) or None, acceleration (6,) [a; α] or None."""

    position: np.ndarray
    quaternion: np.ndarray
    velocity: Optional[np.ndarray] = None
    acceleration: Optional[np.ndarray] = None


def validate_target(position, quaternion, velocity=None, acceleration=None, prefix='target'):
    """A CartesianTarget of float arrays (the quaternion normalised), or ValueError naming
    the field: a non-finite value, a wrong length, a quaternion with |‖q‖ − 1| > 1e-3."""
    p = _field(f'{prefix}.position', position, 3)
    quat = _field(f'{prefix}.quaternion', quaternion, 4)
    norm = float(np.linalg.norm(quat))
    if abs(norm - 1.0) > QUATERNION_TOLERANCE:
        raise ValueError(f'{prefix}.quaternion: not a unit quaternion (norm {norm:.6g}), '
                         'expected (x, y, z, w) with norm 1')
    v = None if velocity is None else _field(f'{prefix}.velocity', velocity, 6)
    a = None if acceleration is None else _field(f'{prefix}.acceleration', acceleration, 6)
    return CartesianTarget(p, quat / norm, v, a)


def _field(name, values, n):
    try:
        array = np.array(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f'{name}: expected {n} numbers, got {values!r}') from None
    if array.shape != (n,):
        raise ValueError(f'{name}: expected {n} values, got shape {array.shape}')
    if not np.all(np.isfinite(array)):
        raise ValueError(f'{name}: not finite ({array.tolist()})')
    return array


# ---------------------------------------------------------------------- quaternions (x, y, z, w)


def quaternion_product(a, b):
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw,
                     aw * bw - ax * bx - ay * by - az * bz])


def orientation_error(q_target, q_current):
    """Rotation vector (3,) of q_d ⊗ q⁻¹ the short way: the rotation, in the base frame,
    that turns the current orientation into the target; |e| ≤ π."""
    conj = np.array([-q_current[0], -q_current[1], -q_current[2], q_current[3]])
    qe = quaternion_product(q_target, conj)
    if qe[3] < 0.0:                      # q_d · q < 0: the other of the two quaternions
        qe = -qe
    s = float(np.linalg.norm(qe[:3]))
    if s < 1e-12:
        return 2.0 * qe[:3]
    return (2.0 * math.atan2(s, qe[3]) / s) * qe[:3]


def quaternion_from_rotation_vector(r):
    angle = float(np.linalg.norm(r))
    if angle < 1e-12:
        return np.array([0.5 * r[0], 0.5 * r[1], 0.5 * r[2], 1.0])
    axis = np.asarray(r) / angle
    return np.concatenate([math.sin(0.5 * angle) * axis, [math.cos(0.5 * angle)]])


# ---------------------------------------------------------------------- the law


class CartesianImpedanceLaw:
    """τ = Jᵀ (K e + D ė [+ Λ (a_d − J̇ q̇)]) + g(q) [+ C q̇] + N τ_n (module docstring).

    stiffness: 6 values [x, y, z, rx, ry, rz], N/m and N m/rad, >= 0.
    damping: 6 values, N s/m and N m s/rad, >= 0; or damping_ratio ζ >= 0 (scalar),
        D(q) = 2ζ (Λ(q) # K); default ζ = 1 when neither.
    tool: a fixed 4x4 transform from the model's tip frame to the tool frame, or None.
    nullspace_posture: n joint positions q_n, or None (no null-space term).
    nullspace_stiffness: K_n, a scalar or n values, N m/rad, >= 0.
    nullspace_damping_ratio: ζ_n >= 0, D_n(q) = 2ζ_n (M(q) # K_n).
    nullspace_damping: D_n per joint (a scalar for all), N m s/rad, >= 0, instead of the
        ratio; it damps the self-motion also without a posture (τ_n = −D_n q̇).
    max_target_step: (m, rad) > 0 (inf allowed), or None: the target used lies within that
        distance and angle of the current tool pose.
    singular_damping: λ > 0 of the damped Λ.
    """

    def __init__(self, model, stiffness, damping=None, damping_ratio=None, tool=None,
                 nullspace_posture=None, nullspace_stiffness=0.0, nullspace_damping_ratio=1.0,
                 nullspace_damping=None, max_target_step=DEFAULT_MAX_TARGET_STEP,
                 singular_damping=DEFAULT_SINGULAR_DAMPING, prefix='cartesian'):
        self.model = model
        n = model.n
        if np.ndim(stiffness) == 0:
            raise ValueError(f'{prefix}.stiffness: expected 6 values [x, y, z, rx, ry, rz] '
                             f'(N/m, N m/rad), got {stiffness!r}')
        self.stiffness = per_axis(f'{prefix}.stiffness', stiffness, 6)
        if damping is not None and np.ndim(damping) == 0:
            raise ValueError(f'{prefix}.damping: expected 6 values (N s/m, N m s/rad), got '
                             f'{damping!r}')
        self.damping, self.damping_ratio = damping_choice(prefix, damping, damping_ratio, 6)
        self.tool = None if tool is None else _tool(f'{prefix}.tool', model, tool)
        self.nullspace_posture = None if nullspace_posture is None else \
            finite_vector(f'{prefix}.nullspace_posture', nullspace_posture, n)
        self.nullspace_stiffness = per_joint(f'{prefix}.nullspace_stiffness',
                                             nullspace_stiffness, n)
        self.nullspace_damping_ratio = number(f'{prefix}.nullspace_damping_ratio',
                                              nullspace_damping_ratio)
        self.nullspace_damping = None if nullspace_damping is None else \
            per_joint(f'{prefix}.nullspace_damping', nullspace_damping, n)
        if max_target_step is None:
            self.max_target_step = None
        else:
            step = per_axis(f'{prefix}.max_target_step', max_target_step, 2, positive=True,
                            allow_inf=True, what='values (m, rad)')
            self.max_target_step = (float(step[0]), float(step[1]))
        self.singular_damping = number(f'{prefix}.singular_damping', singular_damping,
                                       positive=True)

    validate_target = staticmethod(validate_target)

    # -------------------------------------------------------------- geometry

    def pose(self, q):
        """(position (3,), quaternion (4,) x, y, z, w) of the tool at q, base frame."""
        T = kinematics.tool_pose(self.model, q, self.tool)
        return T[:3, 3].copy(), kinematics.quaternion_from_matrix(T[:3, :3])

    def limited_target(self, q, target):
        """`target` with its position moved to within max_target_step[0] of the tool's and
        its orientation turned (about the error's axis) to within max_target_step[1]."""
        return self._limited(*self.pose(q), target)

    def _limited(self, p, quat, target):
        if self.max_target_step is None:
            return target
        max_distance, max_angle = self.max_target_step
        position, quaternion = target.position, target.quaternion
        dp = np.asarray(position, dtype=float) - p
        distance = float(np.linalg.norm(dp))
        if distance > max_distance:
            position = p + dp * (max_distance / distance)
        r = orientation_error(np.asarray(quaternion, dtype=float), quat)
        angle = float(np.linalg.norm(r))
        if angle > max_angle:
            quaternion = quaternion_product(
                quaternion_from_rotation_vector(r * (max_angle / angle)), quat)
        return target._replace(position=np.asarray(position, dtype=float),
                               quaternion=np.asarray(quaternion, dtype=float))

    def task_inertia(self, q, J=None, M=None):
        """(Λ (6, 6) damped, J (6, n), M (n, n), M⁻¹Jᵀ (n, 6)) at q."""
        J = kinematics.jacobian(self.model, q, self.tool) if J is None else J
        M = dynamics.mass_matrix(self.model, q) if M is None else M
        Minv_Jt = np.linalg.solve(M, J.T)
        inverse = J @ Minv_Jt
        s, U = np.linalg.eigh(0.5 * (inverse + inverse.T))
        s = np.maximum(s, 0.0)
        Lam = (U * (s / (s * s + self.singular_damping ** 2))) @ U.T
        return Lam, J, M, Minv_Jt

    # -------------------------------------------------------------- the effort

    def effort(self, q, qd, target):
        """τ (n,) toward `target` (a CartesianTarget, already validated)."""
        model = self.model
        q = np.asarray(q, dtype=float)
        qd = np.asarray(qd, dtype=float)
        T = kinematics.tool_pose(model, q, self.tool)
        p = T[:3, 3]
        quat = kinematics.quaternion_from_matrix(T[:3, :3])
        target = self._limited(p, quat, target)
        Lam, J, M, Minv_Jt = self.task_inertia(q)
        e = np.concatenate([target.position - p, orientation_error(target.quaternion, quat)])
        e_dot = -(J @ qd)
        if target.velocity is not None:
            e_dot = e_dot + target.velocity
        if self.damping is not None:
            F = self.stiffness * e + self.damping * e_dot
        else:
            F = self.stiffness * e + damping_from_ratio(Lam, self.stiffness,
                                                        self.damping_ratio) @ e_dot
        tau = dynamics.gravity_torques(model, q)
        if target.acceleration is not None:     # Khatib 1987: operational-space feed-forward
            Jdqd = kinematics.jacobian_dot_qd(model, q, qd, self.tool)
            F = F + Lam @ (target.acceleration - Jdqd)
            tau = tau + velocity_product(model, q, qd)
        tau = tau + J.T @ F
        if self.nullspace_posture is not None or self.nullspace_damping is not None:
            if self.nullspace_damping is not None:
                tau_n = -self.nullspace_damping * qd
            else:
                tau_n = -damping_from_ratio(M, self.nullspace_stiffness,
                                            self.nullspace_damping_ratio) @ qd
            if self.nullspace_posture is not None:
                tau_n = tau_n + self.nullspace_stiffness * (self.nullspace_posture - q)
            # N τ_n = τ_n − Jᵀ Λ J M⁻¹ τ_n (Khatib 1987: dynamically consistent)
            tau = tau + tau_n - J.T @ (Lam @ (Minv_Jt.T @ tau_n))
        return tau


def _tool(name, model, tool):
    try:
        kinematics.tool_pose(model, np.zeros(model.n), tool)
    except ValueError as error:
        raise ValueError(f'{name}: {error}'.replace(f'{name}: tool: ', f'{name}: ')) from None
    T = np.array(tool, dtype=float)
    T.setflags(write=False)
    return T
