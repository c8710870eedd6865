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

import numpy as np

from robot_dynamics import algorithms

__all__ = ['link_poses', 'tool_pose', 'jacobian', 'jacobian_dot_qd',
           'quaternion_from_matrix', 'matrix_from_quaternion']

_ORTHONORMAL_TOLERANCE = 1e-6


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


def _homogeneous(R, p):
    T = np.zeros(R.shape[:-2] + (4, 4))
    T[..., :3, :3] = R
    T[..., :3, 3] = p
    T[..., 3, 3] = 1.0
    return T


def link_poses(model, q):
    """Link frames 1..n in the base frame: (n, 4, 4) or (B, n, 4, 4); the last is the tip
    frame."""
    (q_b,), single = _states(model, q)
    Rb, pb = algorithms.body_poses(model.chain, q_b)
    ch = model.chain
    T = _homogeneous(Rb @ ch.R_link, pb + np.einsum('bnij,nj->bni', Rb, ch.p_link))
    return _out(T, single)


def tool_pose(model, q, tool=None):
    """The tip frame (the last link frame) times the fixed transform `tool` (4×4, the tool
    frame in the tip frame; default identity), in the base frame: (4, 4) or (B, 4, 4)."""
    (q_b,), single = _states(model, q)
    tool_R, tool_p = _tool(tool, q_b.shape[0])
    Rb, pb = algorithms.body_poses(model.chain, q_b)
    R, p = _frame(model, model.n - 1, Rb, pb, tool_R, tool_p)
    return _out(_homogeneous(R, p), single)


def _target(model, q_b, tool, link, point):
    """Index k of the link that carries the point, body poses, and the point in the base
    frame (B, 3)."""
    size = q_b.shape[0]
    k = _link(model, link)
    tool_R, tool_p = _tool(tool, size)
    p_local = _point(point, size)
    Rb, pb = algorithms.body_poses(model.chain, q_b)
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
    (q_b, qd_b), single = _states(model, q, qd)
    k, Rb, pb, target = _target(model, q_b, tool, link, point)
    ch = model.chain
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
