"""Whether a sampled joint motion stays within the robot's limits and clear of its
surroundings, before it is sent to any controller (`identify plan`).

Joint limits: the positions within [robot.position_min, robot.position_max], the speeds
within robot.velocity_max, the accelerations within a per-joint bound (`acceleration_limits`:
what robot.effort_max allows against the arm's largest inertia and gravity, as
`arm_identification.excitation_limits` computes it with no margin).

Surroundings (`Workspace`), in the robot's base frame (z up): a floor plane z >= floor and
keep-out boxes (axis-aligned, given by their min and max corners), for every link's origin
(the frame of the link each joint moves, at that joint), the far end of a link where it is
elsewhere (a DH link frame beyond a joint offset), and the tool frame (the model's tip:
`dynamics.forward_kinematics`' last frame). The floor applies to the points that move
(`moving_points`): a point fixed in the base frame (the PUMA 560's shoulder at z = 0) is
where the robot stands, whatever the floor.

`workspace_violation` is a continuous measure (m) for an optimiser, `first_violation` the
one line a user reads.
"""

import math
from typing import NamedTuple

import numpy as np

from robot_dynamics.dynamics import algorithms

TOLERANCE = 1e-9          # rad | m (and per s, per s²): rounding, not a margin
WORKSPACE_TOLERANCE = 1e-4   # m: a motion kept clear at 2000 samples per period (as
#                              optimal_excitation does) comes closer between them by
#                              ~|acceleration| (period / 4000)² / 2: 1e-5 m at 3 m/s², 10 s


class Workspace(NamedTuple):
    """The floor height [m] (None: no floor) and keep-out boxes ((min xyz, max xyz) [m])."""
    floor: float = None
    boxes: tuple = ()

    @property
    def empty(self):
        return self.floor is None and not self.boxes


class Violation(NamedTuple):
    time: float           # s from the start of the motion
    where: str            # the joint or the point of a link
    text: str             # one line: where, when, the value and the limit


def link_point_names(model, joints):
    """Names of the points `link_points` returns: every link origin, the far ends of the
    links that end elsewhere, the tool frame."""
    return [name for name, _ in _points(model, joints)]


def link_points(model, q):
    """Positions (K, P, 3) in the base frame of the points named by `link_point_names`,
    for positions q (K, n)."""
    return _origins_and_ends(model, q)[:, [k for _, k in _points(model)]]


def _origins_and_ends(model, q):
    """(K, 2n, 3): the origin of every link's frame (at its joint), then every link's DH
    frame (its far end; the last one is the tool frame)."""
    q = np.atleast_2d(np.asarray(q, dtype=float))
    R, p = algorithms.body_poses(model.chain, q)
    ends = p + np.einsum('knij,nj->kni', R, model.chain.p_link)
    return np.concatenate((p, ends), axis=1)


def _points(model, joints=None):
    """[(name, index into `_origins_and_ends`)]: the link ends that coincide with a link
    origin (at two random configurations) left out, the tool frame (the last end) kept."""
    n = model.n
    names = list(joints) if joints is not None else [f'joint {i + 1}' for i in range(n)]
    x = _origins_and_ends(model, np.random.default_rng(0).uniform(-math.pi, math.pi, (2, n)))
    origins = x[:, :n]
    distinct = [i for i in range(n - 1) if np.min(np.max(np.linalg.norm(
        origins - x[:, n + i:n + i + 1], axis=2), axis=0)) > 1e-9]
    points = [(f'link {i + 1} ({names[i]}) origin', i) for i in range(n)]
    points += [(f'link {i + 1} ({names[i]}) end', n + i) for i in distinct]
    points.append(('tool frame', 2 * n - 1))
    return points


def moving_points(model):
    """(2n,) bool, per point of `_origins_and_ends`: True where its position depends on q
    (False for a link origin fixed in the base frame whatever the joints do, e.g. the
    PUMA 560's link 1 origin at z = 0): the floor applies to these only, since no motion
    can lift a point that does not move."""
    x = _origins_and_ends(model, np.random.default_rng(1).uniform(-math.pi, math.pi,
                                                                  (4, model.n)))
    return np.max(np.ptp(x, axis=0), axis=-1) > 1e-9


def workspace_violation(model, q, workspace, clearance=0.0):
    """How far (m) the link points of positions q (K, n) come into the floor or a keep-out
    box, each grown by `clearance`: 0 when they stay clear, else the deepest intrusion
    (continuous in q). `clearance`: one distance, or per point and obstacle as
    `start_clearance` gives it."""
    if workspace.empty:
        return 0.0
    clearance = np.broadcast_to(clearance, (1 + len(workspace.boxes), 2 * model.n))
    depth = _depths(_origins_and_ends(model, q), workspace,
                    moving_points(model)) + clearance                     # (K, 1 + B, 2n)
    return max(0.0, float(np.max(depth)))


def start_clearance(model, start, workspace, clearance):
    """Per obstacle (the floor, then each box) and point (1 + B, 2n): `clearance`, or half
    the distance a point has at `start` where that is less than twice the clearance (e.g. a
    base on the floor: 0), so that the start is clear of the grown obstacles with room to
    move."""
    depth = _depths(_origins_and_ends(model, np.asarray(start, dtype=float)[None, :]),
                    workspace, moving_points(model))[0]
    return np.clip(-0.5 * depth, 0.0, clearance)


def _depths(x, workspace, moving=None):
    """(K, 1 + B, P): how deep each point of x (K, P, 3) is below the floor (row 0; -inf
    without a floor, and for the points that `moving` (P,) says do not move) and in each
    box (its smallest inward distance to a face); negative: outside, by that much (for
    the floor: its height above it)."""
    rows = [np.where(True if moving is None else moving, workspace.floor - x[..., 2], -np.inf)
            if workspace.floor is not None else np.full(x.shape[:2], -np.inf)]
    for low, high in workspace.boxes:
        rows.append(np.min(np.minimum(x - np.asarray(low), np.asarray(high) - x), axis=-1))
    return np.stack(rows, axis=1)


def acceleration_limits(model):
    """Per joint |q̈| bound [rad/s² | m/s²] and where it comes from."""
    from robot_dynamics.arm_identification import excitation_limits
    bound = excitation_limits(model, acceleration_margin=1.0)['acceleration']
    origin = ['what robot.effort_max allows against the largest inertia and gravity'
              if math.isfinite(e) else 'the default without robot.effort_max'
              for e in model.effort_max]
    return bound, origin


def first_violation(model, joints, t, q, qd, qdd, workspace=Workspace(),
                    acceleration_max=None):
    """The earliest Violation of the sampled motion (t (K,), q, qd, qdd (K, n)) of the
    joint limits and the workspace, or None. `acceleration_max`: per joint bound (default:
    `acceleration_limits`)."""
    t = np.asarray(t, dtype=float)
    q, qd, qdd = (np.atleast_2d(np.asarray(v, dtype=float)) for v in (q, qd, qdd))
    found = []
    unit = ['m' if kind == 'prismatic' else 'rad' for kind in model.joint_types]
    low, high = model.position_min, model.position_max
    bad = (q < low - TOLERANCE) | (q > high + TOLERANCE) | ~np.isfinite(q)
    found += _joint_violations(bad, t, joints, lambda k, j: (
        f'position {q[k, j]:.6g} {unit[j]} beyond its limits [{low[j]:.6g}, {high[j]:.6g}] '
        f'{unit[j]} (robot.position_min/max)'))
    vmax = model.velocity_max
    bad = (np.abs(qd) > vmax + TOLERANCE) | ~np.isfinite(qd)
    found += _joint_violations(bad, t, joints, lambda k, j: (
        f'velocity {qd[k, j]:.6g} {unit[j]}/s beyond its limit {vmax[j]:.6g} {unit[j]}/s '
        '(robot.velocity_max)'))
    if acceleration_max is None:
        amax, origin = acceleration_limits(model)
    else:
        amax, origin = np.broadcast_to(acceleration_max, (model.n,)), ['given'] * model.n
    bad = (np.abs(qdd) > amax + TOLERANCE) | ~np.isfinite(qdd)
    found += _joint_violations(bad, t, joints, lambda k, j: (
        f'acceleration {qdd[k, j]:.6g} {unit[j]}/s² beyond its limit {amax[j]:.6g} '
        f'{unit[j]}/s² ({origin[j]})'))
    if not workspace.empty and np.all(np.isfinite(q)):
        found += _workspace_violations(model, joints, t, q, workspace)
    return min(found, key=lambda v: v.time) if found else None


def _joint_violations(bad, t, joints, describe):
    """The first violation of each joint with a bad sample."""
    out = []
    for j in np.flatnonzero(np.any(bad, axis=0)):
        k = int(np.argmax(bad[:, j]))
        out.append(Violation(float(t[k]), joints[j],
                             f'{joints[j]} at t = {t[k]:.6g} s: {describe(k, j)}'))
    return out


def _workspace_violations(model, joints, t, q, workspace):
    names = link_point_names(model, joints)
    x = link_points(model, q)                              # (K, P, 3)
    out = []
    if workspace.floor is not None:
        moving = moving_points(model)[[k for _, k in _points(model)]]
        bad = (x[..., 2] < workspace.floor - WORKSPACE_TOLERANCE) & moving
        for k, i in _first_per_point(bad):
            out.append(Violation(float(t[k]), names[i], (
                f'{names[i]} at t = {t[k]:.6g} s: z = {x[k, i, 2]:.6g} m, below the floor at '
                f'{workspace.floor:.6g} m (--floor)')))
    for low, high in workspace.boxes:
        low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
        bad = np.all((x > low + WORKSPACE_TOLERANCE) & (x < high - WORKSPACE_TOLERANCE),
                     axis=-1)
        for k, i in _first_per_point(bad):
            out.append(Violation(float(t[k]), names[i], (
                f'{names[i]} at t = {t[k]:.6g} s: at {_xyz(x[k, i])} m, inside the keep-out '
                f'box from {_xyz(low)} to {_xyz(high)} m (--keep-out)')))
    return out


def _first_per_point(bad):
    """(sample, point) of the first bad sample of each point that has one."""
    return [(int(np.argmax(bad[:, i])), int(i)) for i in np.flatnonzero(np.any(bad, axis=0))]


def _xyz(v):
    return '(' + ', '.join(f'{float(c):.4g}' for c in v) + ')'
