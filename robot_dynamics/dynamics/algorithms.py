"""Reference rigid-body algorithms on a `Chain`, vectorised over a batch.

Readable implementations that follow the papers line by line; the public entry points with
shape checks, friction and armature are in `robot_dynamics.dynamics`. Every array here has a
leading batch axis B: joint vectors are (B, n), 3-vectors (B, 3), rotations (B, 3, 3).

Notation ([CRA] ch. 6 / [CSDN], in each body's own frame, joint i along the local z axis):
w, wd   angular velocity and acceleration of body i         [rad/s, rad/s²]
vd      linear acceleration of the origin of body i          [m/s²]
F, N    inertial force and moment of body i at its centre of mass
f, nm   force and moment exerted on body i by body i-1, moment about body i's origin
"""

import numpy as np

_Z = np.array([0.0, 0.0, 1.0])


def cross(a, b):
    """Batched 3-vector cross product (faster than np.cross on small arrays)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), axis=-1)


def rotate(R, v):
    """R v for batched rotations (B, 3, 3) and vectors (B, 3)."""
    return np.einsum('bij,bj->bi', R, v)


def rotate_t(R, v):
    """Rᵀ v for batched rotations (B, 3, 3) and vectors (B, 3)."""
    return np.einsum('bji,bj->bi', R, v)


def joint_transforms(chain, q):
    """Rotation R[:, i] (body i -> body i-1) and origin p[:, i] of body i in body i-1.

    Revolute: θ = theta0 + q, d = d0.  Prismatic: θ = theta0, d = d0 + q (doc/conventions.md).
    """
    theta = chain.theta0 + np.where(chain.prismatic, 0.0, q)
    d = chain.d0 + np.where(chain.prismatic, q, 0.0)
    c, s = np.cos(theta), np.sin(theta)
    Rz = np.zeros(q.shape + (3, 3))
    Rz[..., 0, 0] = c
    Rz[..., 0, 1] = -s
    Rz[..., 1, 0] = s
    Rz[..., 1, 1] = c
    Rz[..., 2, 2] = 1.0
    R = np.matmul(chain.R0, Rz)
    p = chain.p0 + chain.R0[:, :, 2] * d[..., None]
    return R, p


def tip_wrench_in_body(chain, wrench):
    """(f, n) of a tip wrench [fx fy fz nx ny nz] given in the last DH link frame, moment
    about that frame's origin, as force and moment about the origin of body n."""
    f = wrench[:, :3] @ chain.R_tip.T
    nm = wrench[:, 3:] @ chain.R_tip.T + cross(np.broadcast_to(chain.p_tip, f.shape), f)
    return f, nm


def rnea(chain, q, qd, qdd, gravity, wrench=None):
    """Recursive Newton–Euler inverse dynamics, rigid bodies only: τ (B, n).

    [CSDN] §2.1–2.3 (Craig's iterative form [CRA]) with the per-joint revolute/prismatic
    switch and N_i, n_i computed for every link ([CSDN] §2.3 omits them for prismatic joints:
    an erratum, see doc/references.md); gravity as the base acceleration −g ([CSDN] §2.4).
    `wrench` (B, 6) is what the last link exerts on its environment,
    [f; n] in the last DH link frame ([CSDN] eq. 2-4/2-5 boundary f_{N+1}, n_{N+1}).
    """
    B, n = q.shape
    R, p = joint_transforms(chain, q)
    F, N = [], []
    # forward pass ([CSDN] §2.1): each body's ω, ω̇ and origin acceleration in its own frame
    for i, (w, wd, vd) in enumerate(body_motions(chain, R, p, qd, qdd, gravity)):
        c = chain.com[i]
        vd_com = vd + cross(wd, np.broadcast_to(c, (B, 3))) + cross(w, cross(w, np.broadcast_to(c, (B, 3))))
        F.append(chain.mass[i] * vd_com)
        Iw = w @ chain.inertia[i].T
        N.append(wd @ chain.inertia[i].T + cross(w, Iw))
    tau = np.empty((B, n))
    if wrench is None:
        f_child = np.zeros((B, 3))
        n_child = np.zeros((B, 3))
    else:
        f_child, n_child = tip_wrench_in_body(chain, wrench)
    for i in range(n - 1, -1, -1):
        c = np.broadcast_to(chain.com[i], (B, 3))
        f = F[i] + f_child                                   # [CSDN] eq. 2-4
        nm = N[i] + n_child + cross(c, F[i])                 # [CSDN] eq. 2-5
        tau[:, i] = f[:, 2] if chain.prismatic[i] else nm[:, 2]   # eq. 2-6
        if i > 0:
            f_child = rotate(R[:, i], f)
            n_child = rotate(R[:, i], nm) + cross(p[:, i], f_child)
    return tau


def mass_matrix_rnea(chain, q):
    """Rigid-body joint-space inertia matrix (B, n, n), column j = RNEA(q, 0, e_j) with
    gravity off (Walker & Orin [WAL] method 1; [TML] §3 'strobing')."""
    B, n = q.shape
    q_rep = np.repeat(q, n, axis=0)
    unit = np.tile(np.eye(n), (B, 1))
    cols = rnea(chain, q_rep, np.zeros_like(q_rep), unit, np.zeros(3))
    return cols.reshape(B, n, n).transpose(0, 2, 1)


def _motion_transform(R, p):
    """Plücker transform (B, 6, 6) from parent to body coordinates, [ω; v] ordering."""
    E = np.swapaxes(R, -1, -2)
    px = skew(p)
    X = np.zeros(R.shape[:-2] + (6, 6))
    X[..., :3, :3] = E
    X[..., 3:, 3:] = E
    X[..., 3:, :3] = -E @ px
    return X


def skew(v):
    out = np.zeros(v.shape + (3,))
    out[..., 0, 1], out[..., 0, 2] = -v[..., 2], v[..., 1]
    out[..., 1, 0], out[..., 1, 2] = v[..., 2], -v[..., 0]
    out[..., 2, 0], out[..., 2, 1] = -v[..., 1], v[..., 0]
    return out


def body_motions(chain, R, p, qd, qdd, gravity):
    """The Newton–Euler forward pass over a batch: for each body i in turn, (ω, ω̇, a) (B, 3)
    each, its angular velocity and acceleration and the linear acceleration of its frame's
    origin, in its own axes, with gravity as a base acceleration; R, p from
    `joint_transforms`. A generator: body i's values are yielded before body i + 1's."""
    B = qd.shape[0]
    w = np.zeros((B, 3))
    wd = np.zeros((B, 3))
    vd = np.broadcast_to(-np.asarray(gravity, dtype=float), (B, 3))
    for i in range(qd.shape[1]):
        Ri, pi = R[:, i], p[:, i]
        vd_origin = vd + cross(wd, pi) + cross(w, cross(w, pi))
        w_new = rotate_t(Ri, w)
        wd_new = rotate_t(Ri, wd)
        vd_new = rotate_t(Ri, vd_origin)
        qd_z = qd[:, i, None] * _Z
        qdd_z = qdd[:, i, None] * _Z
        if chain.prismatic[i]:
            vd_new = vd_new + qdd_z + 2.0 * cross(w_new, qd_z)
        else:
            wd_new = wd_new + cross(w_new, qd_z) + qdd_z
            w_new = w_new + qd_z
        w, wd, vd = w_new, wd_new, vd_new
        yield w, wd, vd


def inertia_operator(v):
    """L(v) (B, 3, 6) with I v = L(v) [I_xx, I_xy, I_xz, I_yy, I_yz, I_zz] for symmetric I:
    the inertia-dependent columns of a body's wrench in a regressor."""
    x, y, z = v[:, 0], v[:, 1], v[:, 2]
    out = np.zeros(v.shape[:1] + (3, 6))
    out[:, 0, 0], out[:, 0, 1], out[:, 0, 2] = x, y, z
    out[:, 1, 1], out[:, 1, 3], out[:, 1, 4] = x, y, z
    out[:, 2, 2], out[:, 2, 4], out[:, 2, 5] = x, y, z
    return out


def steiner(mass, com):
    """m (c·c 1 − c cᵀ): what the parallel-axis theorem adds to a centroidal inertia to give
    the inertia about a point at −c from the centre of mass (e.g. the body origin)."""
    c = np.asarray(com, dtype=float)
    return mass * (float(c @ c) * np.eye(3) - np.outer(c, c))


def spatial_inertia(mass, com, inertia):
    """6×6 spatial inertia about the body origin from mass, centre of mass and centroidal
    inertia (Featherstone, RBDA eq. 2.63)."""
    cx = skew(np.asarray(com, dtype=float))
    out = np.zeros((6, 6))
    out[:3, :3] = inertia + steiner(mass, com)
    out[:3, 3:] = mass * cx
    out[3:, :3] = mass * cx.T
    out[3:, 3:] = mass * np.eye(3)
    return out


def crm(v, m):
    """Spatial motion cross product v ×m (batched 6-vectors)."""
    w, vl = v[..., :3], v[..., 3:]
    return np.concatenate((cross(w, m[..., :3]), cross(w, m[..., 3:]) + cross(vl, m[..., :3])),
                          axis=-1)


def crf(v, f):
    """Spatial force cross product v ×f (batched 6-vectors)."""
    w, vl = v[..., :3], v[..., 3:]
    return np.concatenate((cross(w, f[..., :3]) + cross(vl, f[..., 3:]), cross(w, f[..., 3:])),
                          axis=-1)


def aba(chain, q, qd, tau, gravity, armature, wrench=None):
    """Articulated-body algorithm (Featherstone, RBDA Table 7.1): q̈ (B, n) in O(n).

    `tau` is the net joint force after friction; `armature` (n,) adds to each D_i;
    `wrench` as in `rnea` (the force the tip exerts on its environment)."""
    B, n = q.shape
    R, p = joint_transforms(chain, q)
    X = _motion_transform(R, p)
    k = np.where(chain.prismatic, 5, 2)              # S_i is the unit vector e_k
    v = np.zeros((B, 6))
    vJ_all, c_all, IA, pA = [], [], [], []
    for i in range(n):
        vJ = np.zeros((B, 6))
        vJ[:, k[i]] = qd[:, i]
        v = np.einsum('bij,bj->bi', X[:, i], v) + vJ
        c_all.append(crm(v, vJ))
        I_i = spatial_inertia(chain.mass[i], chain.com[i], chain.inertia[i])
        IA.append(np.broadcast_to(I_i, (B, 6, 6)).copy())
        pA.append(crf(v, v @ I_i.T))
        vJ_all.append(vJ)
    if wrench is not None:
        f, nm = tip_wrench_in_body(chain, wrench)
        pA[n - 1] = pA[n - 1] + np.concatenate((nm, f), axis=-1)
    U, D, u = [None] * n, [None] * n, [None] * n
    for i in range(n - 1, -1, -1):
        ki = k[i]
        U[i] = IA[i][:, :, ki]
        D[i] = IA[i][:, ki, ki] + armature[i]
        u[i] = tau[:, i] - pA[i][:, ki]
        if i > 0:
            Ia = IA[i] - np.einsum('bi,bj->bij', U[i], U[i]) / D[i][:, None, None]
            pa = pA[i] + np.einsum('bij,bj->bi', Ia, c_all[i]) + U[i] * (u[i] / D[i])[:, None]
            Xi = X[:, i]
            IA[i - 1] = IA[i - 1] + np.einsum('bki,bkl,blj->bij', Xi, Ia, Xi)
            pA[i - 1] = pA[i - 1] + np.einsum('bki,bk->bi', Xi, pa)
    a = np.zeros((B, 6))
    a[:, 3:] = -np.asarray(gravity, dtype=float)
    qdd = np.empty((B, n))
    for i in range(n):
        a = np.einsum('bij,bj->bi', X[:, i], a) + c_all[i]
        qdd[:, i] = (u[i] - np.einsum('bi,bi->b', U[i], a)) / D[i]
        a[:, k[i]] += qdd[:, i]
    return qdd


def body_poses(chain, q):
    """Pose of every body frame in the base: rotations (B, n, 3, 3), origins (B, n, 3)."""
    B, n = q.shape
    R, p = joint_transforms(chain, q)
    Rs = np.empty((B, n, 3, 3))
    ps = np.empty((B, n, 3))
    R_acc = np.broadcast_to(np.eye(3), (B, 3, 3))
    p_acc = np.zeros((B, 3))
    for i in range(n):
        p_acc = p_acc + rotate(R_acc, p[:, i])
        R_acc = R_acc @ R[:, i]
        Rs[:, i], ps[:, i] = R_acc, p_acc
    return Rs, ps


def body_velocities(chain, q, qd):
    """Angular velocity and origin velocity of every body, in its own frame (B, n, 3)."""
    B, n = q.shape
    R, p = joint_transforms(chain, q)
    w = np.zeros((B, 3))
    v = np.zeros((B, 3))
    ws = np.empty((B, n, 3))
    vs = np.empty((B, n, 3))
    for i in range(n):
        v = rotate_t(R[:, i], v + cross(w, p[:, i]))
        w = rotate_t(R[:, i], w)
        qd_z = qd[:, i, None] * _Z
        if chain.prismatic[i]:
            v = v + qd_z
        else:
            w = w + qd_z
        ws[:, i], vs[:, i] = w, v
    return ws, vs
