"""Model terms the compliant laws share: damping from a damping ratio (double
diagonalisation), the Coriolis/centrifugal product C(q, q̇) v with Christoffel symbols, and
the model's friction with its sign smoothed near zero velocity.

Sources: the damping design of Albu-Schäffer A., Ott C., Frese U., Hirzinger G. 2003,
"Cartesian impedance control of redundant robots: recent results with the DLR-light-weight-
arms", Proc. IEEE ICRA 2003, pp. 3704–3709, and Ott C. 2008, "Cartesian Impedance Control of
Redundant and Flexible-Joint Robots", Springer Tracts in Advanced Robotics 49; the
Christoffel factorisation of C with Ṁ − 2C skew-symmetric: Slotine J.-J. E., Li W. 1987,
"On the adaptive control of robot manipulators", Int. J. Robotics Research 6(3):49–59.
"""

import numpy as np

from robot_dynamics import dynamics


def damping_from_ratio(inertia, stiffness, ratio):
    """D = 2ζ (A # K), the matrix geometric mean of the inertia A (n, n, symmetric positive
    semi-definite) and the diagonal stiffness K = diag(`stiffness`) >= 0.

    Double diagonalisation: with A = L Lᵀ, y = Lᵀ x, the system A ẍ + D ẋ + K x = 0 becomes
    ÿ + 2ζ K̃^{1/2} ẏ + K̃ y = 0, K̃ = L⁻¹ K L⁻ᵀ, so every mode has the damping ratio ζ at the
    configuration where A is evaluated. D = 2ζ L K̃^{1/2} Lᵀ is symmetric positive
    semi-definite whatever A and K. L is the symmetric square root of A with its
    eigenvalues floored at 1e-12 of the largest (A may be nearly singular: Λ near a
    singularity); a direction of zero stiffness gets no damping."""
    A = 0.5 * (inertia + inertia.T)
    w, U = np.linalg.eigh(A)
    w = np.maximum(w, 1e-12 * max(float(w[-1]), 1e-300))
    root = np.sqrt(w)
    L = U * root                              # L Lᵀ = A
    Linv = U.T / root[:, None]                # L⁻¹ = diag(1/√w) Uᵀ ... (L = U diag √w)
    Kt = (Linv * stiffness) @ Linv.T
    s, V = np.linalg.eigh(0.5 * (Kt + Kt.T))
    Kt_root = (V * np.sqrt(np.maximum(s, 0.0))) @ V.T
    D = 2.0 * ratio * (L @ Kt_root @ L.T)
    return 0.5 * (D + D.T)


def coriolis_product(model, q, qd, v):
    """C(q, q̇) v with C from the Christoffel symbols of the first kind (Ṁ − 2C is
    skew-symmetric). Those symbols are symmetric in their two velocity indices, so C(q, q̇) v
    is the polarisation of h(x) = C(q, x) x: C(q, q̇) v = ¼ [h(q̇ + v) − h(q̇ − v)], h from
    two Newton–Euler calls (gravity cancels in the difference, friction is taken out)."""
    qd = np.asarray(qd, dtype=float)
    v = np.asarray(v, dtype=float)
    plus, minus = qd + v, qd - v
    return 0.25 * ((dynamics.bias_forces(model, q, plus) - dynamics.friction_laws(model, plus))
                   - (dynamics.bias_forces(model, q, minus)
                      - dynamics.friction_laws(model, minus)))


def velocity_product(model, q, qd):
    """C(q, q̇) q̇: the Coriolis and centrifugal efforts (Newton–Euler at zero acceleration,
    gravity and friction taken out)."""
    return (dynamics.bias_forces(model, q, qd) - dynamics.gravity_torques(model, q)
            - dynamics.friction_laws(model, qd))


def smoothed_friction(model, qd, smoothing):
    """The model's friction (`dynamics.friction_laws`) with every sign(q̇) replaced by
    tanh(q̇ / v_ε), v_ε = `smoothing` (rad/s or m/s, per joint): continuous at q̇ = 0, equal
    to the model's law for |q̇| ≫ v_ε. Joints whose law is already `tanh` keep it."""
    qd = np.asarray(qd, dtype=float)
    tau = qd * model.viscous_friction
    if not model.has_friction:
        return tau
    own = np.array([m == 'tanh' for m in model.friction_model])
    with np.errstate(over='ignore', under='ignore'):
        s_eps = np.tanh(qd / smoothing)
        s = np.where(own, np.tanh(qd / model.stribeck_velocity), s_eps)
        tau = (tau + np.maximum(s, 0.0) * model.coulomb_friction
               + np.minimum(s, 0.0) * model.coulomb_friction_negative)
        if np.any(model.stribeck_friction):
            tau = tau + (model.stribeck_friction
                         * np.exp(-(qd / model.stribeck_velocity) ** 2) * s_eps)
    return tau
