"""Lagrange–Euler reference dynamics: the 4×4 trace formulation of [LEE] §3.1 / [TML] §2.

Slow (O(n⁴)) and exact, for one state at a time: it exists to check the Newton–Euler code.
It reads the model's DH columns and inertial data directly and never touches
``model.chain``, so it also checks the chain construction in `robot_dynamics.model`.

    τ = D(q) q̈ + h(q, q̇) + G(q)                                  [LEE] (3.6)–(3.7)
    D_ik  = Σ_{p ≥ max(i,k)} Tr{ U_pk J_p U_piᵀ }                    [LEE] (3.8) corrected
    C^i_jk = Σ_{p ≥ max(i,j,k)} Tr{ U_pjk J_p U_piᵀ },  h_i = q̇ᵀ C^i q̇   [TML] (2.11)
    G_i   = −Σ_{p ≥ i} gᵀ U_pi m_p r̄_p                               [LEE] (3.10), sign fixed
    U_pj  = ∂T_0^p/∂q_j,  U_pjk = ∂²T_0^p/∂q_j∂q_k

doc/references.md lists the corrections to [TML] §2 and [LEE] §2–3 (the printed ones have
index and dot typos, and (2.21) misses m_i). Indices here are 0-based: link p is the
(p+1)-th row of the DH table, T_0^p the pose of its link frame in the base.

Each link transform is split around its joint, ``T_{i-1,i} = B_i · Z_i(q_i) · A_i``, with
``Z_i = Rz(θ_i) Tz(d_i)`` the only factor that depends on q_i:

* standard DH: ``B = E``, ``A = Tx(a_i) Rx(α_i)``;
* modified DH: ``B = Rx(α_i) Tx(a_i)``, ``A = E``.

Q (below) commutes with Z, and ∂Z/∂q = Q Z, so ``∂^k T_{i-1,i}/∂q_i^k = B Q^k Z A``; in
standard DH this is the papers' ``T_0^{j-1} Q T_{j-1}^p`` construction.

Beyond rigid bodies, the same model terms as `robot_dynamics.dynamics` are added, so the
two can be compared with them on: armature in `mass_matrix`, viscous and Coulomb friction
and the tip wrench in `inverse_dynamics`. `coriolis_centrifugal` and `gravity` are rigid.
"""

import math

import numpy as np

__all__ = ['link_transforms', 'forward_kinematics', 'pseudo_inertia', 'mass_matrix',
           'coriolis_tensor', 'coriolis_centrifugal', 'gravity', 'potential_energy',
           'kinetic_energy', 'inverse_dynamics']

# [TML] (1.5) / [LEE] (2.7), 4×4 form: ∂Rz(θ)/∂θ = Q Rz(θ)
Q_REVOLUTE = np.array([[0.0, -1.0, 0.0, 0.0],
                       [1.0, 0.0, 0.0, 0.0],
                       [0.0, 0.0, 0.0, 0.0],
                       [0.0, 0.0, 0.0, 0.0]])
# prismatic analogue (derived here, not printed in [LEE]): ∂Tz(d)/∂d = Q Tz(d)
Q_PRISMATIC = np.array([[0.0, 0.0, 0.0, 0.0],
                        [0.0, 0.0, 0.0, 0.0],
                        [0.0, 0.0, 0.0, 1.0],
                        [0.0, 0.0, 0.0, 0.0]])


def _rot_x(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1.0, 0.0, 0.0, 0.0], [0.0, c, -s, 0.0],
                     [0.0, s, c, 0.0], [0.0, 0.0, 0.0, 1.0]])


def _rot_z(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0, 0.0], [s, c, 0.0, 0.0],
                     [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]])


def _trans(x=0.0, z=0.0):
    out = np.eye(4)
    out[0, 3], out[2, 3] = x, z
    return out


def _joint_factors(model, i, qi):
    """(B, Z, A, Q) with T_{i-1,i} = B Z A and ∂Z/∂q_i = Q Z (module docstring).

    Revolute: θ = theta[i] + q_i, d = d[i]; prismatic: θ = theta[i], d = d[i] + q_i."""
    prismatic = model.joint_types[i] == 'prismatic'
    theta = model.theta[i] + (0.0 if prismatic else qi)
    d = model.d[i] + (qi if prismatic else 0.0)
    Z = _rot_z(theta) @ _trans(z=d)
    placement = _rot_x(model.alpha[i]) @ _trans(x=model.a[i])   # = Tx(a) Rx(α)
    if model.dh_convention == 'modified':
        B, A = placement, np.eye(4)
    else:
        B, A = np.eye(4), placement
    return B, Z, A, (Q_PRISMATIC if prismatic else Q_REVOLUTE)


def link_transforms(model, q):
    """T_{i-1,i} and its first and second derivatives by q_i: three lists of n 4×4."""
    if model.dh_convention is None:
        raise ValueError('lagrange: the Lagrange–Euler reference needs a DH model '
                         '(robot.source: dh); this model has no DH table')
    T, dT, ddT = [], [], []
    for i in range(model.n):
        B, Z, A, Q = _joint_factors(model, i, q[i])
        T.append(B @ Z @ A)
        dT.append(B @ Q @ Z @ A)
        ddT.append(B @ Q @ Q @ Z @ A)
    return T, dT, ddT


def _product(factors):
    out = np.eye(4)
    for factor in factors:
        out = out @ factor
    return out


def forward_kinematics(model, q):
    """T_0^p for p = 1..n: the DH link frames in the base frame, (n, 4, 4)."""
    T, _, _ = link_transforms(model, _state(model, q, 'q'))
    return np.array([_product(T[:p + 1]) for p in range(model.n)])


def pseudo_inertia(mass, com, inertia):
    """[LEE] (2.20)–(2.22), general (non-diagonal) form: J = ∫ r̃ r̃ᵀ dm about the frame
    origin, r̃ = (r, 1); J^r = ½Tr(I_c)E − I_c + m r̄ r̄ᵀ ([LEE] (2.21) with m_i
    restored)."""
    com = np.asarray(com, dtype=float)
    inertia = np.asarray(inertia, dtype=float)
    J = np.zeros((4, 4))
    J[:3, :3] = 0.5 * np.trace(inertia) * np.eye(3) - inertia + mass * np.outer(com, com)
    J[:3, 3] = J[3, :3] = mass * com
    J[3, 3] = mass
    return J


def _pseudo_inertias(model):
    """J_p of every link in its own link frame; the payload (in the last link frame) adds
    to the last one — second moments of mass simply add up."""
    J = [pseudo_inertia(model.mass[p], model.com[p], model.inertia[p]) for p in range(model.n)]
    pl = model.payload
    J[-1] = J[-1] + pseudo_inertia(pl.mass, pl.com, pl.inertia)
    return J


def _first_partials(T, dT):
    """U[p][j] = ∂T_0^p/∂q_j (zero for j > p): T_0^{j-1} ∂T_{j-1,j} T_j^p."""
    n = len(T)
    U = [[np.zeros((4, 4)) for _ in range(n)] for _ in range(n)]
    for p in range(n):
        for j in range(p + 1):
            factors = list(T[:p + 1])
            factors[j] = dT[j]
            U[p][j] = _product(factors)
    return U


def _second_partial(T, dT, ddT, p, j, k):
    """∂²T_0^p/∂q_j∂q_k ([LEE] (2.10)), j, k ≤ p."""
    factors = list(T[:p + 1])
    if j == k:
        factors[j] = ddT[j]
    else:
        factors[j], factors[k] = dT[j], dT[k]
    return _product(factors)


def mass_matrix(model, q):
    """D(q), [LEE] (3.8), plus the armature on the diagonal (as `dynamics.mass_matrix`)."""
    q = _state(model, q, 'q')
    T, dT, _ = link_transforms(model, q)
    U = _first_partials(T, dT)
    J = _pseudo_inertias(model)
    n = model.n
    D = np.zeros((n, n))
    for i in range(n):
        for k in range(n):
            for p in range(max(i, k), n):
                D[i, k] += np.trace(U[p][k] @ J[p] @ U[p][i].T)
    return D + np.diag(model.armature)


def coriolis_tensor(model, q):
    """C[i, j, k] = C^i_jk of [TML] (2.11): h_i = Σ_jk C^i_jk q̇_j q̇_k."""
    q = _state(model, q, 'q')
    T, dT, ddT = link_transforms(model, q)
    U = _first_partials(T, dT)
    J = _pseudo_inertias(model)
    n = model.n
    C = np.zeros((n, n, n))
    for p in range(n):
        for j in range(p + 1):
            for k in range(j, p + 1):
                W = _second_partial(T, dT, ddT, p, j, k) @ J[p]
                for i in range(p + 1):
                    value = np.trace(W @ U[p][i].T)
                    C[i, j, k] += value
                    if k != j:
                        C[i, k, j] += value
    return C


def coriolis_centrifugal(model, q, qd):
    """h(q, q̇) = [q̇ᵀ C^i q̇]_i, [LEE] (3.9): Coriolis and centrifugal efforts."""
    qd = _state(model, qd, 'qd')
    return np.einsum('ijk,j,k->i', coriolis_tensor(model, q), qd, qd)


def gravity(model, q):
    """G(q) = ∂PE/∂q with PE = −Σ m_p gᵀ c_p: [LEE] (3.10) with its sign restored
    ([LEE] prints it with both signs; see doc/references.md); gᵀ is the model's gravity
    vector (x, y, z, 0)."""
    q = _state(model, q, 'q')
    T, dT, _ = link_transforms(model, q)
    U = _first_partials(T, dT)
    J = _pseudo_inertias(model)
    g = np.append(model.gravity, 0.0)
    n = model.n
    # J_p[:, 3] = (m r̄, m): the mass-weighted centre of mass, homogeneous
    return np.array([-sum(g @ U[p][i] @ J[p][:, 3] for p in range(i, n)) for i in range(n)])


def potential_energy(model, q):
    """PE = −Σ m_p gᵀ T_0^p r̄_p ([LEE] (3.5)), payload included [J]."""
    q = _state(model, q, 'q')
    T, _, _ = link_transforms(model, q)
    J = _pseudo_inertias(model)
    g = np.append(model.gravity, 0.0)
    return float(-sum(g @ _product(T[:p + 1]) @ J[p][:, 3] for p in range(model.n)))


def kinetic_energy(model, q, qd):
    """KE = ½ Σ_p Tr{ Ṫ_0^p J_p (Ṫ_0^p)ᵀ } ([LEE] (3.4)) plus ½ armature q̇² [J]."""
    q = _state(model, q, 'q')
    qd = _state(model, qd, 'qd')
    T, dT, _ = link_transforms(model, q)
    U = _first_partials(T, dT)
    J = _pseudo_inertias(model)
    total = 0.0
    for p in range(model.n):
        Td = sum(U[p][j] * qd[j] for j in range(p + 1))
        total += 0.5 * np.trace(Td @ J[p] @ Td.T)
    return float(total + 0.5 * np.sum(model.armature * qd ** 2))


def _wrench_efforts(model, q, wrench):
    """Jᵀ W of a tip wrench [f; n] (last link frame, moment about its origin), with the
    Jacobian columns read off ∂T_0^n/∂q_j: v_j = ∂p/∂q_j, skew(ω_j) = ∂R/∂q_j Rᵀ."""
    T, dT, _ = link_transforms(model, q)
    U = _first_partials(T, dT)
    tip = _product(T)
    R = tip[:3, :3]
    f, n_moment = R @ wrench[:3], R @ wrench[3:]
    tau = np.zeros(model.n)
    for j in range(model.n):
        dR = U[-1][j][:3, :3] @ R.T
        omega = np.array([dR[2, 1], dR[0, 2], dR[1, 0]])
        tau[j] = U[-1][j][:3, 3] @ f + omega @ n_moment
    return tau


def _friction(model, qd):
    """Each joint's friction law written out on its own (dynamics.friction_torques)."""
    tau = np.zeros(model.n)
    for i, law in enumerate(model.friction_model):
        v, b = model.stribeck_velocity[i], model.viscous_friction[i]
        if law == 'tanh':
            tau[i] = b * qd[i] + model.coulomb_friction[i] * math.tanh(qd[i] / v)
        elif law == 'asymmetric':
            level = model.coulomb_friction[i] if qd[i] > 0 else \
                model.coulomb_friction_negative[i] if qd[i] < 0 else 0.0
            tau[i] = b * qd[i] + level * np.sign(qd[i])
        else:
            extra = model.stribeck_friction[i] * math.exp(-(qd[i] / v) ** 2) \
                if law == 'stribeck' else 0.0
            tau[i] = b * qd[i] + (model.coulomb_friction[i] + extra) * np.sign(qd[i])
    return tau


def inverse_dynamics(model, q, qd, qdd, wrench=None):
    """τ = D(q) q̈ + h(q, q̇) + G(q) ([LEE] (3.6)), with the armature (in D), viscous and
    Coulomb friction b q̇ + f_c sign(q̇) ([SAS] (2.39)) and the tip wrench Jᵀ W: the same
    terms and conventions as `dynamics.inverse_dynamics`. One state (n,) only."""
    q = _state(model, q, 'q')
    qd = _state(model, qd, 'qd')
    qdd = _state(model, qdd, 'qdd')
    tau = mass_matrix(model, q) @ qdd + coriolis_centrifugal(model, q, qd) + gravity(model, q)
    tau = tau + _friction(model, qd)
    if wrench is not None:
        wrench = np.asarray(wrench, dtype=float)
        if wrench.shape != (6,):
            raise ValueError(f'wrench: expected shape (6,), got {wrench.shape}')
        tau = tau + _wrench_efforts(model, q, wrench)
    return tau


def _state(model, value, name):
    array = np.asarray(value, dtype=float)
    if array.shape != (model.n,):
        raise ValueError(f'{name}: expected shape ({model.n},) (one state; the '
                         f'Lagrange reference does not batch), got {array.shape}')
    return array
