"""Payload identification: the arm's own motion and efforts give the load it carries.

Pure numpy, no ROS. The rigid-body inverse dynamics are linear in the ten inertial
parameters of a body (Atkeson, An & Hollerbach 1986), so the efforts a payload adds are

    τ = τ_0(q, q̇, q̈) + Y(q, q̇, q̈) π

with τ_0 the inverse dynamics of the model without the payload (its friction and armature
included) and π the payload's parameters (`payload_parameters`):

    π = [m, m c_x, m c_y, m c_z, I_xx, I_xy, I_xz, I_yy, I_yz, I_zz]

c the centre of mass and I the inertia **about the origin of the payload frame** (the last
DH link frame, where `RobotModel.with_payload` puts a payload; for a URDF model the tip
link's frame), all in that frame's axes. `payload_regressor` computes Y, `PayloadEstimator`
fits π to a stream of measured states and applied efforts, `exciting_trajectory` makes a
motion that determines π. The theory, the choices and the measured limits are in
doc/payload-identification.md.

The same regressor identifies the model's own last link: a model whose last link has zero
mass and inertia, with the link's parameters as the "payload" (its centre of mass and
inertia are then given in the last link frame, as for any payload).

References:
    C. G. Atkeson, C. H. An, J. M. Hollerbach, "Estimation of inertial parameters of
    manipulator loads and links", Int. J. Robotics Research 5(3), 101–119, 1986.
"""

import math
import warnings
from typing import NamedTuple

import numpy as np

from robot_dynamics import algorithms, dynamics

__all__ = ['payload_regressor', 'payload_parameters', 'payload_from_parameters',
           'PARAMETER_NAMES']

PARAMETER_NAMES = ('m', 'm*c_x', 'm*c_y', 'm*c_z', 'I_xx', 'I_xy', 'I_xz', 'I_yy', 'I_yz',
                   'I_zz')
_Z = np.array([0.0, 0.0, 1.0])


# ---------------------------------------------------------------------- parameters


def payload_parameters(mass, com, inertia):
    """π (10,) of a body: mass [kg], centre of mass `com` (3,) [m] and inertia about the
    centre of mass (URDF order ixx, ixy, ixz, iyy, iyz, izz, or 3×3) [kg m²], both in the
    payload frame. The inertia in π is about the frame's origin (parallel-axis theorem)."""
    mass = float(mass)
    com = np.asarray(com, dtype=float).reshape(3)
    inertia = _inertia_matrix(inertia)
    about_origin = inertia + algorithms.steiner(mass, com)
    return np.concatenate(([mass], mass * com, _urdf6(about_origin)))


def payload_from_parameters(pi):
    """(mass, com (3,), inertia (6,) about the centre of mass in URDF order) from π.

    The inverse of `payload_parameters`. A zero mass gives a zero centre of mass (the first
    moment then carries no position); a negative mass is returned as it is (see
    `physical_consistency`)."""
    pi = np.asarray(pi, dtype=float).reshape(10)
    mass = float(pi[0])
    com = pi[1:4] / mass if mass != 0.0 else np.zeros(3)
    about_origin = _inertia_matrix(pi[4:])
    centroidal = about_origin - algorithms.steiner(mass, com)
    return mass, com, np.array(_urdf6(centroidal))


def _inertia_matrix(values):
    values = np.asarray(values, dtype=float)
    if values.shape == (3, 3):
        return values
    ixx, ixy, ixz, iyy, iyz, izz = values.reshape(6)
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


def _urdf6(inertia):
    return [inertia[0, 0], inertia[0, 1], inertia[0, 2], inertia[1, 1], inertia[1, 2],
            inertia[2, 2]]


# ---------------------------------------------------------------------- regressor


def payload_regressor(model, q, qd, qdd):
    """Y (n, 10) for one state, (B, n, 10) for a batch: the efforts that the payload's
    parameters π (`payload_parameters`, inertia about the payload frame's origin) add,

        inverse_dynamics(model.with_payload(mass, com, inertia), q, q̇, q̈)
            = inverse_dynamics(model.with_payload(), q, q̇, q̈) + Y @ π.

    The payload frame is the last DH link frame (the tip link of a URDF model). Y does not
    depend on the model's masses, friction, armature or payload, only on its kinematics
    and gravity.

    Method: the Newton–Euler forward pass (as `algorithms.rnea`) gives the payload frame's
    angular velocity ω, angular acceleration ω̇ and origin acceleration a (gravity as a
    base acceleration −g); the wrench the last link exerts on the payload is linear in π
    (Atkeson, An & Hollerbach 1986, eq. 6–8, moments about the frame origin):

        f = m a + ω̇ × (m c) + ω × (ω × (m c))
        n = I ω̇ + ω × (I ω) + (m c) × a

    and the backward pass carries each of its ten columns down the chain to the joints.
    """
    (q_b, qd_b, qdd_b), single = dynamics._states(model, ('q', q), ('qd', qd), ('qdd', qdd))
    ch = model.chain
    B, n = q_b.shape
    R, p = algorithms.joint_transforms(ch, q_b)
    # forward pass: velocities and accelerations of body i in its own frame
    w = np.zeros((B, 3))
    wd = np.zeros((B, 3))
    vd = np.broadcast_to(-np.asarray(model.gravity, dtype=float), (B, 3))
    for i in range(n):
        Ri, pi = R[:, i], p[:, i]
        vd_origin = vd + algorithms.cross(wd, pi) + algorithms.cross(w, algorithms.cross(w, pi))
        w_new = algorithms.rotate_t(Ri, w)
        wd_new = algorithms.rotate_t(Ri, wd)
        vd_new = algorithms.rotate_t(Ri, vd_origin)
        qd_z = qd_b[:, i, None] * _Z
        qdd_z = qdd_b[:, i, None] * _Z
        if ch.prismatic[i]:
            vd_new = vd_new + qdd_z + 2.0 * algorithms.cross(w_new, qd_z)
        else:
            wd_new = wd_new + algorithms.cross(w_new, qd_z) + qdd_z
            w_new = w_new + qd_z
        w, wd, vd = w_new, wd_new, vd_new
    # the payload frame (R_tip, p_tip in the last body): its motion in its own axes
    p_tip = np.broadcast_to(ch.p_tip, (B, 3))
    a_tip = vd + algorithms.cross(wd, p_tip) + algorithms.cross(w, algorithms.cross(w, p_tip))
    w_t = w @ ch.R_tip
    wd_t = wd @ ch.R_tip
    a_t = a_tip @ ch.R_tip
    # wrench on the payload per parameter: force F (B, 3, 10), moment N about the origin
    F = np.zeros((B, 3, 10))
    N = np.zeros((B, 3, 10))
    w_skew = algorithms.skew(w_t)
    F[:, :, 0] = a_t
    F[:, :, 1:4] = algorithms.skew(wd_t) + w_skew @ w_skew
    N[:, :, 1:4] = -algorithms.skew(a_t)                  # (m c) × a = −a × (m c)
    N[:, :, 4:] = _inertia_operator(wd_t) + w_skew @ _inertia_operator(w_t)
    # into the last body's axes, moment about its origin (as algorithms.tip_wrench_in_body)
    f = np.einsum('ij,bjk->bik', ch.R_tip, F)
    nm = np.einsum('ij,bjk->bik', ch.R_tip, N) + algorithms.skew(p_tip) @ f
    # backward pass (algorithms.rnea): joint i takes the z component of f or n
    Y = np.empty((B, n, 10))
    for i in range(n - 1, -1, -1):
        Y[:, i] = f[:, 2] if ch.prismatic[i] else nm[:, 2]
        if i > 0:
            f = R[:, i] @ f
            nm = R[:, i] @ nm + algorithms.skew(p[:, i]) @ f
    return Y[0] if single else Y


def _inertia_operator(v):
    """L(v) (B, 3, 6) with I v = L(v) [I_xx, I_xy, I_xz, I_yy, I_yz, I_zz] for symmetric I."""
    x, y, z = v[:, 0], v[:, 1], v[:, 2]
    out = np.zeros(v.shape[:1] + (3, 6))
    out[:, 0, 0], out[:, 0, 1], out[:, 0, 2] = x, y, z
    out[:, 1, 1], out[:, 1, 3], out[:, 1, 4] = x, y, z
    out[:, 2, 2], out[:, 2, 4], out[:, 2, 5] = x, y, z
    return out
