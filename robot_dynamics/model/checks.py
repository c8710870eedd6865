"""Checks of a model before its forward dynamics is integrated.

Forward dynamics solves M(q) q̈ = τ − h(q, q̇); it has no solution when the mass matrix
M(q) (armature included) is singular: some joint motion moves no mass and no rotational
inertia, e.g. a URDF whose last link has no ``<inertial>`` (its joint then turns nothing:
M's last row and column are zero). Integrating such a model ends in NaN. A link with zero
mass is fine as long as M stays positive definite: Corke's PUMA 560 link 1 (m = 0,
I = diag(0, 0.35, 0) kg m², turned about the axis with the 0.35) is.

`singular_joint(model)` evaluates M at a few configurations (q = 0 and seeded random
ones within the limits) and, if one is not positive definite, returns the first joint
whose motion the null space of M contains: the links from that joint's child on move
without mass or inertia.
"""

import numpy as np

__all__ = ['singular_joint', 'singular_mass_matrix_message', 'sample_configurations',
           'urdf_link_names', 'SAMPLES', 'RELATIVE_TOLERANCE']

SAMPLES = 4                    # configurations: q = 0 and 3 seeded random ones
RELATIVE_TOLERANCE = 1e-12     # an eigenvalue below this times the largest counts as zero


def sample_configurations(model, count=SAMPLES, seed=0):
    """(count, n) joint positions: zero (clipped into the limits) and random ones drawn
    uniformly within the limits (±π where a limit is not finite)."""
    low = np.where(np.isfinite(model.position_min), model.position_min, -np.pi)
    high = np.where(np.isfinite(model.position_max), model.position_max, np.pi)
    high = np.maximum(high, low)
    rng = np.random.default_rng(seed)
    rows = [np.clip(np.zeros(model.n), low, high)]
    rows += [rng.uniform(low, high) for _ in range(count - 1)]
    return np.array(rows)


def singular_joint(model, configurations=None):
    """(joint index, q) of the first joint (0-based) whose motion moves no mass or
    inertia at the configuration q where M(q) is singular (the smallest index with a
    non-zero entry in M's null space), or None if M is positive definite at every one of
    `configurations` (default `sample_configurations`)."""
    from robot_dynamics import dynamics     # the dynamics build on the model package
    qs = sample_configurations(model) if configurations is None else np.atleast_2d(
        configurations)
    for q in qs:
        M = np.asarray(dynamics.mass_matrix(model, q), dtype=float)
        M = 0.5 * (M + M.T)
        values, vectors = np.linalg.eigh(M)
        scale = max(float(np.max(np.abs(values))), 1.0)
        null = vectors[:, values <= RELATIVE_TOLERANCE * scale]
        if null.shape[1]:
            rows = np.linalg.norm(null, axis=1)
            return int(np.flatnonzero(rows > 1e-6)[0]), q
    return None


def singular_mass_matrix_message(model):
    """The one line naming the link that makes the mass matrix singular (a URDF's by its
    name), or None."""
    found = singular_joint(model)
    if found is None:
        return None
    i, q = found
    link_names = urdf_link_names(model)
    joints = model.joint_names
    joint = f'joint {joints[i]}' if joints else f'joint {i + 1}'
    link = f'link {link_names[i]!r}' if link_names else f'link {i + 1}'
    rest = ' and the links after it' if i + 1 < model.n else ''
    return (f'{link} (moved by {joint}){rest}: no mass or inertia moves with {joint}, so '
            f'the mass matrix is singular (at q = {np.round(q, 3).tolist()}) and the '
            'forward dynamics has no solution: give the link its mass and inertia (a URDF '
            '<inertial>), or the joint a robot.armature')


def urdf_link_names(model):
    """Per joint, the URDF link it moves (its child link), for a model built from a URDF
    whose joints are named; None otherwise or when the URDF cannot be read again."""
    if model.source != 'urdf' or not model.joint_names:
        return None
    try:
        from robot_dynamics.model import urdf   # the URDF reader builds on the model module
        params = model.to_params()
        robot = urdf.parse_urdf(params.get('urdf') or urdf.read_urdf_file(
            params['urdf_file']))
        return [robot.joints[name].child for name in model.joint_names]
    except (KeyError, ValueError, OSError):
        return None
