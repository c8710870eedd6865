"""Kinematics of a serial arm: frames, Jacobians and J̇q̇ in the base frame.

Every function takes the model first and one state ``(n,)`` or a batch ``(B, n)`` (the
result has a matching leading axis); batches are vectorised, with no Python loop over
samples. Pure functions of their arguments.

Frames and conventions:

* the base frame is the frame of the model's base (the DH base, or a URDF's `base_link`);
  every pose, velocity and acceleration is expressed in it;
* link frame k+1 (``link_poses(model, q)[..., k, :, :]``, k 0-based) is DH link frame k+1
  (a URDF: the child link of movable joint k+1, the last one `tip_link`); it is moved by
  joints 1..k+1 only;
* the tip frame is the last link frame: the frame at whose origin `dynamics.jacobian` and
  the `wrench` of `dynamics.inverse_dynamics` act. A `tool` (a fixed 4×4 transform of the
  tool frame in the tip frame, or in link frame k+1 with ``link=k``) is applied after it;
* Jacobian rows are ``[v; ω]``: v the linear velocity of the point, ω the angular velocity
  of its link, ``[v; ω] = J q̇``; ``jacobian_dot_qd`` is ``J̇ q̇``, the classical
  acceleration ``[a; α]`` of the same point at q̈ = 0, so that ``[a; α] = J q̈ + J̇ q̇``;
* quaternions are unit quaternions in ROS order ``(x, y, z, w)`` with ``w >= 0``.
"""

import math

import numpy as np

from robot_dynamics.dynamics import algorithms
from robot_dynamics.model.kernel_cache import KernelCache

__all__ = ['link_poses', 'tool_pose', 'jacobian', 'jacobian_dot_qd',
           'quaternion_from_matrix', 'matrix_from_quaternion']

_ORTHONORMAL_TOLERANCE = 1e-6

# With the numba backend, `dynamics.set_backend` sets this to its one-state dispatcher
# (model, kernel name) -> runner: tool_pose, jacobian and jacobian_dot_qd of one state
# (a float64 (n,) array; the tool frame, no link or point) then run compiled kernels
# (`_numba_loops`); a runner's None (another input type, an invalid tool, a non-finite
# state) falls through to the paths below.
_accelerated = None


# ---------------------------------------------------------------------- argument checks


def _states(model, q, qd=None):
    """q (and qd) as (B, n) float arrays, and whether the input was one state."""
    n = model.n
    arrays, singles = [], []
    for name, value in (('q', q), ('qd', qd)):
        if name == 'qd' and qd is None:
            continue
        array = np.asarray(value, dtype=float)
        if array.ndim == 1 and array.shape[0] == n:
            arrays.append(array[None, :])
            singles.append(True)
        elif array.ndim == 2 and array.shape[1] == n:
            arrays.append(array)
            singles.append(False)
        else:
            raise ValueError(f'{name}: expected shape ({n},) or (B, {n}), got {array.shape}')
    sizes = {a.shape[0] for a, single in zip(arrays, singles) if not single}
    if len(sizes) > 1:
        raise ValueError(f'q and qd: batch sizes differ ({arrays[0].shape[0]} and '
                         f'{arrays[1].shape[0]})')
    size = sizes.pop() if sizes else 1
    arrays = [np.broadcast_to(a, (size, n)) for a in arrays]
    return arrays, all(singles)


def _tool(tool, size):
    """(R, p) of the tool transform, (B, 3, 3) and (B, 3), or (None, None)."""
    if tool is None:
        return None, None
    T = np.asarray(tool, dtype=float)
    if T.shape == (4, 4):
        T = T[None]
    elif not (T.ndim == 3 and T.shape[1:] == (4, 4) and T.shape[0] in (1, size)):
        raise ValueError(f'tool: expected a 4x4 homogeneous transform, shape (4, 4) or '
                         f'({size}, 4, 4), got {T.shape}')
    if not np.all(np.isfinite(T)):
        raise ValueError('tool: not finite')
    if np.any(np.abs(T[:, 3] - (0.0, 0.0, 0.0, 1.0)) > 0.0):
        raise ValueError(f'tool: last row must be [0, 0, 0, 1], got {T[:, 3].tolist()}')
    _check_rotation('tool', T[:, :3, :3])
    return (np.broadcast_to(T[:, :3, :3], (size, 3, 3)),
            np.broadcast_to(T[:, :3, 3], (size, 3)))


def _check_rotation(name, R):
    error = np.abs(np.swapaxes(R, -1, -2) @ R - np.eye(3)).max(initial=0.0)
    if not error <= _ORTHONORMAL_TOLERANCE:
        raise ValueError(f'{name}: rotation part not orthonormal (|RᵀR − I| = {error:.1e})')
    if np.any(np.linalg.det(R) < 0.0):
        raise ValueError(f'{name}: rotation part is a reflection (det < 0)')


def _link(model, link):
    """0-based link index in 0..n-1 (None: the tip, n-1; negative: from the end)."""
    n = model.n
    if link is None:
        return n - 1
    if isinstance(link, (bool, np.bool_)) or not isinstance(link, (int, np.integer)):
        raise ValueError(f'link: expected an integer link index (0-based), got {link!r}')
    if not -n <= link < n:
        raise ValueError(f'link: index {link} out of range for {n} links (0..{n - 1})')
    return int(link) % n


def _point(point, size):
    """(B, 3) point or None."""
    if point is None:
        return None
    p = np.asarray(point, dtype=float)
    if p.shape == (3,):
        p = p[None]
    elif not (p.ndim == 2 and p.shape[1] == 3 and p.shape[0] in (1, size)):
        raise ValueError(f'point: expected shape (3,) or ({size}, 3), got {p.shape}')
    if not np.all(np.isfinite(p)):
        raise ValueError('point: not finite')
    return np.broadcast_to(p, (size, 3))


def _out(array, single):
    return array[0] if single else array


# ---------------------------------------------------------------------- one state
# One state (a float64 (n,) array or a list of n floats) runs on Python floats: for a
# 7-joint arm about ten times faster than the numpy path, whose cost is the fixed cost
# of each array operation. The same formulas as the batch path below; the tests compare
# both with Pinocchio.


class _Constants:
    """A model's chain as tuples of Python floats (made once per model)."""

    def __init__(self, model):
        ch = model.chain
        self.n = model.n
        self.R0 = [tuple(R.ravel().tolist()) for R in ch.R0]
        self.p0 = [tuple(p.tolist()) for p in ch.p0]
        self.theta0 = ch.theta0.tolist()
        self.d0 = ch.d0.tolist()
        self.prismatic = [bool(v) for v in ch.prismatic]
        self.R_link = [tuple(R.ravel().tolist()) for R in ch.R_link]
        self.p_link = [tuple(p.tolist()) for p in ch.p_link]
        self.R_link[-1] = tuple(ch.R_tip.ravel().tolist())
        self.p_link[-1] = tuple(ch.p_tip.tolist())


def _constants(model):
    return KernelCache.of(model).value('kinematics', _Constants, model)


def _one(n, value):
    """One state as a list of n floats, or None (then the numpy path decides)."""
    if type(value) is np.ndarray:
        if value.dtype == np.float64 and value.shape == (n,):
            return value.tolist()
        return None
    if type(value) in (list, tuple) and len(value) == n \
            and all(type(x) is float for x in value):
        return list(value)
    return None


def _poses_one(c, q):
    """Body frames of one state: rotations (row-major 9-tuples) and origins (3-tuples) in
    the base, body i = body i-1 · (R0_i, p0_i) · Rz(θ_i) Tz(d_i)."""
    Rs, ps = [], []
    r0, r1, r2, r3, r4, r5, r6, r7, r8 = 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0
    x = y = z = 0.0
    cos, sin = math.cos, math.sin
    for i in range(c.n):
        a0, a1, a2, a3, a4, a5, a6, a7, a8 = c.R0[i]
        # A = R_acc · R0_i
        b0 = r0 * a0 + r1 * a3 + r2 * a6
        b1 = r0 * a1 + r1 * a4 + r2 * a7
        b2 = r0 * a2 + r1 * a5 + r2 * a8
        b3 = r3 * a0 + r4 * a3 + r5 * a6
        b4 = r3 * a1 + r4 * a4 + r5 * a7
        b5 = r3 * a2 + r4 * a5 + r5 * a8
        b6 = r6 * a0 + r7 * a3 + r8 * a6
        b7 = r6 * a1 + r7 * a4 + r8 * a7
        b8 = r6 * a2 + r7 * a5 + r8 * a8
        px, py, pz = c.p0[i]
        if c.prismatic[i]:
            theta, d = c.theta0[i], c.d0[i] + q[i]
        else:
            theta, d = c.theta0[i] + q[i], c.d0[i]
        x, y, z = (x + r0 * px + r1 * py + r2 * pz + b2 * d,
                   y + r3 * px + r4 * py + r5 * pz + b5 * d,
                   z + r6 * px + r7 * py + r8 * pz + b8 * d)
        co, si = cos(theta), sin(theta)
        r0, r1, r2 = co * b0 + si * b1, co * b1 - si * b0, b2
        r3, r4, r5 = co * b3 + si * b4, co * b4 - si * b3, b5
        r6, r7, r8 = co * b6 + si * b7, co * b7 - si * b6, b8
        Rs.append((r0, r1, r2, r3, r4, r5, r6, r7, r8))
        ps.append((x, y, z))
    return Rs, ps


def _frame_one(c, k, Rs, ps, tool):
    """Rotation (9-tuple) and origin of link frame k+1 · tool (tool: (R, p) or None)."""
    R = _mul(Rs[k], c.R_link[k])
    p = _add(ps[k], _apply(Rs[k], c.p_link[k]))
    if tool is not None:
        p = _add(p, _apply(R, tool[1]))
        R = _mul(R, tool[0])
    return R, p


def _mul(A, B):
    a0, a1, a2, a3, a4, a5, a6, a7, a8 = A
    b0, b1, b2, b3, b4, b5, b6, b7, b8 = B
    return (a0 * b0 + a1 * b3 + a2 * b6, a0 * b1 + a1 * b4 + a2 * b7,
            a0 * b2 + a1 * b5 + a2 * b8, a3 * b0 + a4 * b3 + a5 * b6,
            a3 * b1 + a4 * b4 + a5 * b7, a3 * b2 + a4 * b5 + a5 * b8,
            a6 * b0 + a7 * b3 + a8 * b6, a6 * b1 + a7 * b4 + a8 * b7,
            a6 * b2 + a7 * b5 + a8 * b8)


def _apply(R, v):
    x, y, z = v
    return (R[0] * x + R[1] * y + R[2] * z, R[3] * x + R[4] * y + R[5] * z,
            R[6] * x + R[7] * y + R[8] * z)


def _add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _matrix(R, p):
    return np.array(((R[0], R[1], R[2], p[0]), (R[3], R[4], R[5], p[1]),
                     (R[6], R[7], R[8], p[2]), (0.0, 0.0, 0.0, 1.0)))


def _tool_one(tool):
    """A single 4×4 tool as (R 9-tuple, p 3-tuple), or None if it is not one valid tool
    (then the numpy path checks it and names the problem)."""
    if type(tool) is not np.ndarray or tool.shape != (4, 4) or tool.dtype != np.float64:
        return None
    t = tool.ravel().tolist()
    if t[12:] != [0.0, 0.0, 0.0, 1.0] or not math.isfinite(sum(t)):
        return None
    R = (t[0], t[1], t[2], t[4], t[5], t[6], t[8], t[9], t[10])
    RtR = _mul((R[0], R[3], R[6], R[1], R[4], R[7], R[2], R[5], R[8]), R)
    if max(abs(v - e) for v, e in zip(RtR, (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0))) \
            > _ORTHONORMAL_TOLERANCE or _det(R) < 0.0:
        return None
    return R, (t[3], t[7], t[11])


def _det(R):
    return (R[0] * (R[4] * R[8] - R[5] * R[7]) - R[1] * (R[3] * R[8] - R[5] * R[6])
            + R[2] * (R[3] * R[7] - R[4] * R[6]))


def _single_target(model, q, tool, link, point):
    """(constants, k, body poses, point in the base) of one state, or None."""
    c = _constants(model)
    q = _one(c.n, q)
    if q is None:
        return None
    if tool is not None:
        tool = _tool_one(tool)
        if tool is None:
            return None
    if point is not None:
        point = _one(3, point)
        if point is None or not math.isfinite(sum(point)):
            return None
    k = _link(model, link)
    try:
        Rs, ps = _poses_one(c, q)
    except (ValueError, OverflowError):                 # sin(inf): the numpy path (NaN)
        return None
    R, p = _frame_one(c, k, Rs, ps, tool)
    if point is not None:
        p = _add(p, _apply(R, point))
    return c, k, Rs, ps, R, p


def _jacobian_one(c, k, Rs, ps, target):
    rows = [[0.0] * c.n for _ in range(6)]
    tx, ty, tz = target
    for j in range(k + 1):
        R = Rs[j]
        zx, zy, zz = R[2], R[5], R[8]
        if c.prismatic[j]:
            rows[0][j], rows[1][j], rows[2][j] = zx, zy, zz
        else:
            ox, oy, oz = ps[j]
            lx, ly, lz = tx - ox, ty - oy, tz - oz
            rows[0][j] = zy * lz - zz * ly
            rows[1][j] = zz * lx - zx * lz
            rows[2][j] = zx * ly - zy * lx
            rows[3][j], rows[4][j], rows[5][j] = zx, zy, zz
    return np.array(rows)


def _jacobian_dot_qd_one(c, k, Rs, ps, target, qd):
    """The classical acceleration of `target` on body k at q̈ = 0, in the base: along the
    chain, body origin o_i = o_{i-1} + r_i (r_i fixed in body i-1 but for a prismatic
    joint's slide along z_i): a_i = a_{i-1} + α×r + ω×(ω×r) [+ 2 ω×(q̇_i z_i)], and
    α_i = α + ω×(q̇_i z_i), ω_i = ω + q̇_i z_i for a revolute joint."""
    w = (0.0, 0.0, 0.0)
    alpha = (0.0, 0.0, 0.0)
    a = (0.0, 0.0, 0.0)
    o = (0.0, 0.0, 0.0)
    for i in range(k + 1):
        o_i = ps[i]
        r = (o_i[0] - o[0], o_i[1] - o[1], o_i[2] - o[2])
        a = _add(a, _add(_cross(alpha, r), _cross(w, _cross(w, r))))
        R = Rs[i]
        s = qd[i]
        axis = (R[2] * s, R[5] * s, R[8] * s)
        if c.prismatic[i]:
            a = _add(a, _cross(w, (2.0 * axis[0], 2.0 * axis[1], 2.0 * axis[2])))
        else:
            alpha = _add(alpha, _cross(w, axis))
            w = _add(w, axis)
        o = o_i
    r = (target[0] - o[0], target[1] - o[1], target[2] - o[2])
    a = _add(a, _add(_cross(alpha, r), _cross(w, _cross(w, r))))
    return np.array(a + alpha)


# ---------------------------------------------------------------------- frames


def _frame(model, k, Rb, pb, tool_R, tool_p):
    """Rotation (B, 3, 3) and origin (B, 3) in the base of link frame k+1 times the tool;
    Rb, pb: body poses (`algorithms.body_poses`)."""
    ch = model.chain
    if k == model.n - 1:
        R_l, p_l = ch.R_tip, ch.p_tip                 # the same as R_link[-1], p_link[-1]
    else:
        R_l, p_l = ch.R_link[k], ch.p_link[k]
    R = Rb[:, k] @ R_l
    p = pb[:, k] + Rb[:, k] @ p_l
    if tool_R is not None:
        p = p + algorithms.rotate(R, tool_p)
        R = R @ tool_R
    return R, p


def _body_poses(chain, q_b):
    with np.errstate(invalid='ignore'):             # sin(inf) is NaN, silently
        return algorithms.body_poses(chain, q_b)


def _homogeneous(R, p):
    T = np.zeros(R.shape[:-2] + (4, 4))
    T[..., :3, :3] = R
    T[..., :3, 3] = p
    T[..., 3, 3] = 1.0
    return T


def link_poses(model, q):
    """Link frames 1..n in the base frame: (n, 4, 4) or (B, n, 4, 4); the last is the tip
    frame."""
    c = _constants(model)
    q_one = _one(c.n, q)
    if q_one is not None:
        try:
            Rs, ps = _poses_one(c, q_one)
        except (ValueError, OverflowError):
            pass
        else:
            return np.array([_matrix(*_frame_one(c, k, Rs, ps, None)) for k in range(c.n)])
    (q_b,), single = _states(model, q)
    Rb, pb = _body_poses(model.chain, q_b)
    ch = model.chain
    T = _homogeneous(Rb @ ch.R_link, pb + np.einsum('bnij,nj->bni', Rb, ch.p_link))
    return _out(T, single)


def tool_pose(model, q, tool=None):
    """The tip frame (the last link frame) times the fixed transform `tool` (4×4, the tool
    frame in the tip frame; default identity), in the base frame: (4, 4) or (B, 4, 4)."""
    fast = _accelerated
    if fast is not None and type(q) is np.ndarray and q.ndim == 1:
        T = fast(model, 'tool_pose')(q, tool)
        if T is not None:
            return T
    one = _single_target(model, q, tool, None, None)
    if one is not None:
        return _matrix(one[4], one[5])
    (q_b,), single = _states(model, q)
    tool_R, tool_p = _tool(tool, q_b.shape[0])
    Rb, pb = _body_poses(model.chain, q_b)
    R, p = _frame(model, model.n - 1, Rb, pb, tool_R, tool_p)
    return _out(_homogeneous(R, p), single)


def _target(model, q_b, tool, link, point):
    """Index k of the link that carries the point, body poses, and the point in the base
    frame (B, 3)."""
    size = q_b.shape[0]
    k = _link(model, link)
    tool_R, tool_p = _tool(tool, size)
    p_local = _point(point, size)
    Rb, pb = _body_poses(model.chain, q_b)
    R, p = _frame(model, k, Rb, pb, tool_R, tool_p)
    if p_local is not None:
        p = p + algorithms.rotate(R, p_local)
    return k, Rb, pb, p


def jacobian(model, q, tool=None, link=None, point=None):
    """Geometric Jacobian (6, n) or (B, 6, n) in the base frame, rows [v; ω].

    v is the velocity of the origin of the tool frame (tip frame · `tool`; the tip frame
    itself by default); with ``link=k`` (0-based) of link frame k+1 (· `tool`), and with
    `point` (3-vector in that frame, link frame k+1 without a tool) of that point. ω is
    the angular velocity of the link. Columns of joints after k are zero."""
    fast = _accelerated
    if fast is not None and link is None and point is None and type(q) is np.ndarray \
            and q.ndim == 1:
        J = fast(model, 'jacobian')(q, tool)
        if J is not None:
            return J
    one = _single_target(model, q, tool, link, point)
    if one is not None:
        c, k, Rs, ps, _, target = one
        return _jacobian_one(c, k, Rs, ps, target)
    (q_b,), single = _states(model, q)
    k, Rb, pb, target = _target(model, q_b, tool, link, point)
    return _out(_jacobian_columns(model, k, Rb, pb, target), single)


def _jacobian_columns(model, k, Rb, pb, target):
    z = Rb[:, :k + 1, :, 2]                               # (B, k+1, 3) joint axes
    lever = target[:, None, :] - pb[:, :k + 1]
    revolute = algorithms.cross(z, lever)
    prismatic = model.chain.prismatic[None, :k + 1, None]
    J = np.zeros((target.shape[0], 6, model.n))
    J[:, :3, :k + 1] = np.swapaxes(np.where(prismatic, z, revolute), 1, 2)
    J[:, 3:, :k + 1] = np.swapaxes(np.where(prismatic, 0.0, z), 1, 2)
    return J


def jacobian_dot_qd(model, q, qd, tool=None, link=None, point=None):
    """J̇ q̇ (6,) or (B, 6): the classical acceleration [a; α] in the base frame of the
    point `jacobian` describes (same `tool`, `link`, `point`) at q̈ = 0: a the linear
    acceleration of the point, α the angular acceleration of its link."""
    fast = _accelerated
    if fast is not None and link is None and point is None and type(q) is np.ndarray \
            and q.ndim == 1 and type(qd) is np.ndarray and qd.ndim == 1:
        a = fast(model, 'jacobian_dot_qd')(q, qd, tool)
        if a is not None:
            return a
    one = _single_target(model, q, tool, link, point)
    if one is not None:
        qd_one = _one(one[0].n, qd)
        if qd_one is not None and math.isfinite(sum(qd_one)):
            c, k, Rs, ps, _, target = one
            return _jacobian_dot_qd_one(c, k, Rs, ps, target, qd_one)
    (q_b, qd_b), single = _states(model, q, qd)
    k, Rb, pb, target = _target(model, q_b, tool, link, point)
    ch = model.chain
    with np.errstate(invalid='ignore'):
        R, p = algorithms.joint_transforms(ch, q_b)
    zeros = np.zeros_like(q_b)
    # Craig's forward pass with q̈ = 0 and no gravity: ω, ω̇ and the classical acceleration
    # of each body origin, in the body's own axes
    for i, (w, wd, vd) in enumerate(algorithms.body_motions(ch, R, p, qd_b, zeros,
                                                            np.zeros(3))):
        if i == k:
            break
    r = algorithms.rotate_t(Rb[:, k], target - pb[:, k])        # point in body k's axes
    a = vd + algorithms.cross(wd, r) + algorithms.cross(w, algorithms.cross(w, r))
    out = np.concatenate((algorithms.rotate(Rb[:, k], a), algorithms.rotate(Rb[:, k], wd)),
                         axis=-1)
    return _out(out, single)


# ---------------------------------------------------------------------- quaternions


def quaternion_from_matrix(R):
    """Unit quaternion (x, y, z, w), w >= 0, of a rotation matrix: R (3, 3) or (..., 3, 3)
    (a homogeneous transform (..., 4, 4) gives its rotation's). Shepperd's method (the
    largest of 1 + trace and the diagonal chooses the stable formula)."""
    one = _quaternion_one(R)
    if one is not None:
        return one
    M = np.asarray(R, dtype=float)
    if M.ndim >= 2 and M.shape[-2:] == (4, 4):
        M = M[..., :3, :3]
    if M.ndim < 2 or M.shape[-2:] != (3, 3):
        raise ValueError(f'R: expected shape (3, 3), (..., 3, 3) or (..., 4, 4), got '
                         f'{np.shape(R)}')
    if not np.all(np.isfinite(M)):
        raise ValueError('R: not finite')
    _check_rotation('R', M)
    m00, m11, m22 = M[..., 0, 0], M[..., 1, 1], M[..., 2, 2]
    candidates = np.stack((1.0 + m00 - m11 - m22, 1.0 - m00 + m11 - m22,
                           1.0 - m00 - m11 + m22, 1.0 + m00 + m11 + m22), axis=-1)
    which = np.argmax(candidates, axis=-1)
    t = np.take_along_axis(candidates, which[..., None], axis=-1)[..., 0]
    s = 0.5 / np.sqrt(t)
    d21, d02, d10 = M[..., 2, 1] - M[..., 1, 2], M[..., 0, 2] - M[..., 2, 0], \
        M[..., 1, 0] - M[..., 0, 1]
    s21, s02, s10 = M[..., 2, 1] + M[..., 1, 2], M[..., 0, 2] + M[..., 2, 0], \
        M[..., 1, 0] + M[..., 0, 1]
    rows = (np.stack((t, s10, s02, d21), axis=-1),      # x largest
            np.stack((s10, t, s21, d02), axis=-1),      # y largest
            np.stack((s02, s21, t, d10), axis=-1),      # z largest
            np.stack((d21, d02, d10, t), axis=-1))      # w largest
    quat = np.choose(which[..., None], rows) * s[..., None]
    quat = quat * np.where(quat[..., 3:] < 0.0, -1.0, 1.0)
    return quat / np.linalg.norm(quat, axis=-1, keepdims=True)


def _quaternion_one(R):
    """`quaternion_from_matrix` of one float64 (3, 3) or (4, 4) array on Python floats (the
    same formulas; ~15 times faster than the array path, whose cost is the fixed cost of
    its many small operations: a control law calls it every cycle), or None when R is
    anything else or fails a check (then the array path names the problem)."""
    if type(R) is not np.ndarray or R.dtype != np.float64 or R.shape not in ((3, 3), (4, 4)):
        return None
    rows = R.tolist()
    m00, m01, m02 = rows[0][:3]
    m10, m11, m12 = rows[1][:3]
    m20, m21, m22 = rows[2][:3]
    M = (m00, m01, m02, m10, m11, m12, m20, m21, m22)
    if not math.isfinite(sum(M)):
        return None
    RtR = _mul((m00, m10, m20, m01, m11, m21, m02, m12, m22), M)
    if max(abs(v - e) for v, e in zip(RtR, (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0))) \
            > _ORTHONORMAL_TOLERANCE or _det(M) < 0.0:
        return None
    candidates = (1.0 + m00 - m11 - m22, 1.0 - m00 + m11 - m22, 1.0 - m00 - m11 + m22,
                  1.0 + m00 + m11 + m22)
    t = max(candidates)
    which = candidates.index(t)                       # the first largest, as np.argmax
    s = 0.5 / math.sqrt(t)
    d21, d02, d10 = m21 - m12, m02 - m20, m10 - m01
    s21, s02, s10 = m21 + m12, m02 + m20, m10 + m01
    quat = ((t, s10, s02, d21), (s10, t, s21, d02), (s02, s21, t, d10),
            (d21, d02, d10, t))[which]
    x, y, z, w = (v * s for v in quat)
    if w < 0.0:
        x, y, z, w = -x, -y, -z, -w
    norm = math.sqrt(x * x + y * y + z * z + w * w)
    return np.array((x / norm, y / norm, z / norm, w / norm))


def matrix_from_quaternion(q_xyzw):
    """Rotation matrix (3, 3) or (..., 3, 3) of a quaternion (x, y, z, w) or (..., 4),
    normalised first (a zero or non-finite quaternion is an error)."""
    quat = np.asarray(q_xyzw, dtype=float)
    if quat.ndim < 1 or quat.shape[-1] != 4:
        raise ValueError(f'q_xyzw: expected shape (4,) or (..., 4) in the order (x, y, z, w), '
                         f'got {quat.shape}')
    norm = np.linalg.norm(quat, axis=-1, keepdims=True)
    if not np.all(np.isfinite(quat)) or np.any(norm < 1e-12):
        raise ValueError('q_xyzw: not a finite non-zero quaternion')
    x, y, z, w = np.moveaxis(quat / norm, -1, 0)
    return np.stack((
        np.stack((1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)), -1),
        np.stack((2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)), -1),
        np.stack((2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)), -1)),
        axis=-2)
