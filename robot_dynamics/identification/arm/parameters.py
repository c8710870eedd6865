"""The parameter vector φ: its names and order per index (link i's ten inertial parameters
in link frame i, joint i's armature, friction levels and offset), and φ of a model."""

import numpy as np

from robot_dynamics.dynamics import algorithms


LINK_PARAMETERS = ('m', 'm*c_x', 'm*c_y', 'm*c_z', 'I_xx', 'I_xy', 'I_xz', 'I_yy', 'I_yz',
                   'I_zz')
JOINT_PARAMETERS = ('armature', 'viscous', 'coulomb', 'coulomb_negative', 'stribeck',
                    'offset')
FRICTION_LEVELS = ('coulomb', 'coulomb_negative', 'stribeck')


def joint_terms(model, offset=False):
    """The joint parameters of every index, in φ's order: armature, viscous, coulomb;
    coulomb_negative when a joint's friction law is asymmetric, stribeck when one is
    stribeck (the entries of joints with another law have a zero column); offset."""
    laws = set(model.friction_model)
    terms = ['armature', 'viscous', 'coulomb']
    if 'asymmetric' in laws:
        terms.append('coulomb_negative')
    if 'stribeck' in laws:
        terms.append('stribeck')
    if offset:
        terms.append('offset')
    return tuple(terms)


def _per_index(model, offset):
    return 10 + len(joint_terms(model, offset))


def parameter_names(model, offset=False):
    """Names of φ's entries: per index i (1-based), link i's ten inertial parameters then
    joint i's `joint_terms` (armature, viscous, coulomb [, coulomb_negative, stribeck]
    [, offset])."""
    joint = joint_terms(model, offset)
    names = []
    for i in range(1, model.n + 1):
        names += [f'link{i}.{p}' for p in LINK_PARAMETERS]
        names += [f'joint{i}.{p}' for p in joint]
    return names


def _link_to_body(chain, i):
    """(10, 10) matrix T with φ_body = T φ_link: the ten parameters of body i in its body
    frame (origin of the body frame) from those in link frame i (rotation R_link[i],
    origin p_link[i] in the body frame)."""
    R, p = chain.R_link[i], chain.p_link[i]
    T = np.empty((10, 10))
    for k in range(10):
        e = np.zeros(10)
        e[k] = 1.0
        T[:, k] = _move_parameters(e, R, p)
    return T


def _move_parameters(phi, R, p):
    """Parameters of a body given in frame L, expressed in frame B where L has rotation R
    and origin p (linear in phi)."""
    m, h = phi[0], R @ phi[1:4]
    inertia = R @ _sym(phi[4:10]) @ R.T
    pp = float(p @ p)
    inertia = (inertia + m * (pp * np.eye(3) - np.outer(p, p))
               + 2.0 * float(p @ h) * np.eye(3) - np.outer(p, h) - np.outer(h, p))
    return np.concatenate(([m], h + m * p, _urdf6(inertia)))


def _sym(v):
    ixx, ixy, ixz, iyy, iyz, izz = v
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


def _urdf6(inertia):
    return np.array([inertia[0, 0], inertia[0, 1], inertia[0, 2], inertia[1, 1],
                     inertia[1, 2], inertia[2, 2]])


def _link_transforms(model):
    cache = model.__dict__.get('_arm_id_link_transforms')
    if cache is None:
        cache = np.array([_link_to_body(model.chain, i) for i in range(model.n)])
        model.__dict__['_arm_id_link_transforms'] = cache
    return cache


def arm_parameters(model, offset=False):
    """φ (p,) of `model` (`parameter_names` order; offsets 0; a payload is part of the
    last link)."""
    ch = model.chain
    terms = joint_terms(model, offset)
    k = 10 + len(terms)
    phi = np.zeros(model.n * k)
    transforms = _link_transforms(model)
    asymmetric = np.array([law == 'asymmetric' for law in model.friction_model])
    values = {'armature': model.armature, 'viscous': model.viscous_friction,
              'coulomb': model.coulomb_friction,
              'coulomb_negative': np.where(asymmetric, model.coulomb_friction_negative, 0.0),
              'stribeck': model.stribeck_friction, 'offset': model.effort_offset}
    for i in range(model.n):
        body = np.concatenate(([ch.mass[i]], ch.mass[i] * ch.com[i],
                               _urdf6(ch.inertia[i] + algorithms.steiner(ch.mass[i],
                                                                         ch.com[i]))))
        phi[i * k:i * k + 10] = np.linalg.solve(transforms[i], body)
        phi[i * k + 10:i * k + k] = [values[term][i] for term in terms]
    return phi
