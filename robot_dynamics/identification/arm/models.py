"""Models from φ: a `RobotModel` with identified parameters, the parameter-file keys that
give it, and physical consistency (pseudo-inertia, Wensing, Kim & Slotine 2018)."""

import numpy as np

from robot_dynamics.dynamics import algorithms
from robot_dynamics.model import RobotModel
from robot_dynamics.identification.arm.parameters import (JOINT_PARAMETERS, _per_index, _sym, _urdf6, arm_parameters,
                            joint_terms)


def _link_values(model, phi):
    """Per link (n, 10) parameters in link frames and per joint {term: (n,)} of
    `joint_terms` from φ (with or without offsets)."""
    phi = np.asarray(phi, dtype=float).reshape(-1)
    n = model.n
    sizes = {n * _per_index(model, o): o for o in (False, True)}
    if phi.size not in sizes:
        raise ValueError(f'phi: expected {" or ".join(str(v) for v in sizes)} values for '
                         f'{n} joints, got {phi.size}')
    blocks = phi.reshape(n, -1)
    terms = joint_terms(model, sizes[phi.size])
    return blocks[:, :10], {term: blocks[:, 10 + t] for t, term in enumerate(terms)}


def _payload_parameters(model):
    """The payload's ten parameters in the last link frame (zeros without payload)."""
    pl = model.payload
    if not (pl.mass > 0.0 or np.any(np.asarray(pl.inertia))):
        return np.zeros(10)
    com = np.asarray(pl.com, dtype=float)
    return np.concatenate(([pl.mass], pl.mass * com,
                           _urdf6(np.asarray(pl.inertia) + algorithms.steiner(pl.mass, com))))


def _inertials(links):
    """mass (n,), com (n, 3), centroidal inertia (n, 3, 3) from link parameters."""
    mass = links[:, 0].copy()
    com = np.zeros((len(mass), 3))
    inertia = np.zeros((len(mass), 3, 3))
    for i, row in enumerate(links):
        if mass[i] != 0.0:
            com[i] = row[1:4] / mass[i]
        inertia[i] = _sym(row[4:10]) - algorithms.steiner(mass[i], com[i])
    return mass, com, inertia


def _link_inertials(model, phi):
    links, joints = _link_values(model, phi)
    links = links.copy()
    links[-1] -= _payload_parameters(model)
    mass, com, inertia = _inertials(links)
    for i, m in enumerate(mass):
        if m < 0.0:
            raise ValueError(f'phi: link {i + 1} has a negative mass ({m:.6g} kg)')
        if m == 0.0 and np.any(links[i, 1:4] != 0.0):
            raise ValueError(f'phi: link {i + 1} has zero mass but a first moment')
    for key, values in joints.items():
        bad = np.flatnonzero(values < 0.0)
        if key != 'offset' and bad.size:
            raise ValueError(f'phi: joint {bad[0] + 1} has a negative {key} '
                             f'({values[bad[0]]:.6g})')
    return mass, com, inertia, joints


def robot_params_overrides(model):
    """The `robot` parameter-block keys (nested dict) that a parameter file loaded after
    the robot's own file must hold so that `RobotModel.from_params` of the merged block
    builds `model`'s inertial data, armature and friction.

    DH models: mass, com, inertia (link frames, centroidal, URDF order), armature,
    viscous_friction, coulomb_friction. URDF models (``source: urdf``): ``inertials``
    {mass, com, inertia} (the same lists, in the link frames of `RobotModel.inertia`:
    the child link of each movable joint, the tip link for the last; each body with what
    is merged into it), armature, viscous_friction, coulomb_friction. A payload of the
    model is not included (it stays in the robot's own file). `friction_model` names
    every joint's friction law; its extra levels, velocity scales and the effort sensor's
    offset (`RobotModel.drive_params`) are included where they are not the defaults."""
    n = model.n
    inertia6 = [float(v) for i in range(n) for v in _urdf6(model.inertia[i])]
    inertials = {'mass': [float(m) for m in model.mass],
                 'com': [float(c) for c in np.asarray(model.com).reshape(-1)],
                 'inertia': inertia6}
    block = {'armature': [float(v) for v in model.armature],
             'viscous_friction': [float(v) for v in model.viscous_friction],
             'coulomb_friction': [float(v) for v in model.coulomb_friction],
             'friction_model': list(model.friction_model)}
    block.update(model.drive_params())
    if model.source == 'dh':
        return {**inertials, **block}
    if model.source == 'urdf':
        return {'inertials': inertials, **block}
    raise ValueError(f'robot_params_overrides: models of source {model.source!r} are not '
                     'supported (dh or urdf)')


def model_with_parameters(model, phi, stribeck_velocity=None):
    """`model` with its links' inertial parameters, armature, friction levels (and, when
    φ has offsets, the effort offsets) replaced by φ (`parameter_names` order), and the
    friction laws' velocity scales by `stribeck_velocity` (n,) when given. A payload of
    `model` is kept: the last link gets φ's last link minus the payload. Raises ValueError
    for a negative mass, armature or friction level."""
    mass, com, inertia, joints = _link_inertials(model, phi)
    overrides = {'mass': mass.tolist(), 'com': com.reshape(-1).tolist(),
                 'inertia': [float(v) for i in range(model.n) for v in _urdf6(inertia[i])]}
    friction = {'armature': joints['armature'].tolist(),
                'viscous_friction': joints['viscous'].tolist(),
                'coulomb_friction': joints['coulomb'].tolist(),
                'friction_model': list(model.friction_model)}
    for term, key in (('coulomb_negative', 'coulomb_friction_negative'),
                      ('stribeck', 'stribeck_friction'), ('offset', 'effort_offset')):
        if term in joints:
            friction[key] = joints[term].tolist()
    if stribeck_velocity is not None:
        friction['stribeck_velocity'] = [float(v) for v in stribeck_velocity]
    block = model.to_params()
    if model.source == 'dh':
        block.update(overrides)
    else:
        block['inertials'] = overrides
    block.update(friction)
    issues = physical_consistency_issues(np.column_stack(
        (mass, mass[:, None] * com, [_urdf6(inertia[i] + algorithms.steiner(mass[i], com[i]))
                                     for i in range(model.n)])).reshape(-1), model.n)
    if issues:
        block['accept_nonphysical_inertia'] = True
    return RobotModel.from_params(block)


def physical_consistency_issues(model_or_phi, n=None, tolerance=1e-10, terms=None):
    """What is not physically consistent, one line each ([] when all is): per link, the
    pseudo-inertia matrix J = [[½tr(I)·1 − I, m c], [(m c)ᵀ, m]] (I about the link frame
    origin) must be positive definite — equivalently m > 0, the centroidal inertia
    positive definite and its principal moments within the triangle inequality (Wensing,
    Kim & Slotine 2018) — and armature and friction levels ≥ 0 (offsets may have any
    sign). `tolerance` is relative to the largest eigenvalue of J. With a parameter
    vector, `terms` names its joint entries (`joint_terms`; default: armature, viscous,
    coulomb [, offset] by its size)."""
    if isinstance(model_or_phi, RobotModel):
        phi, n = arm_parameters(model_or_phi), model_or_phi.n
        terms = joint_terms(model_or_phi)
    else:
        phi = np.asarray(model_or_phi, dtype=float).reshape(-1)
        if n is None:
            raise ValueError('n: needed with a parameter vector')
    blocks = phi.reshape(n, -1)
    if terms is None:
        terms = (JOINT_PARAMETERS[:3] + ('offset',))[:blocks.shape[1] - 10]
    issues = []
    for i in range(n):
        eig = np.linalg.eigvalsh(pseudo_inertia(blocks[i, :10]))
        if not eig[0] > tolerance * max(eig[-1], 1e-300):
            issues.append(f'link {i + 1}: pseudo-inertia not positive definite (eigenvalues '
                          f'{np.array2string(eig, precision=4)})')
        for j, key in enumerate(terms):
            if key != 'offset' and blocks[i, 10 + j] < 0.0:
                issues.append(f'joint {i + 1}: negative {_TERM_WORDS[key]} '
                              f'{blocks[i, 10 + j]:.4g}')
    return issues


_TERM_WORDS = {'armature': 'armature', 'viscous': 'viscous friction',
               'coulomb': 'Coulomb friction', 'coulomb_negative': 'Coulomb friction (q̇ < 0)',
               'stribeck': 'Stribeck friction'}


def pseudo_inertia(link):
    """The 4×4 pseudo-inertia matrix of ten link parameters (inertia about the origin)."""
    inertia = _sym(link[4:10])
    J = np.empty((4, 4))
    J[:3, :3] = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    J[:3, 3] = J[3, :3] = link[1:4]
    J[3, 3] = link[0]
    return J
