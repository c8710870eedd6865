"""The whole-arm regressor Y(q, q̇, q̈) with Y φ = τ, and the friction laws' columns."""

import numpy as np

from robot_dynamics.dynamics import algorithms
from robot_dynamics import dynamics
from robot_dynamics.identification.arm.parameters import _link_transforms, joint_terms


MOVING = ('moving', 0.0)    # the feature |sign(q̇)| of asymmetric joints


def friction_columns(laws, velocities, qd, filtered=None):
    """The friction levels' regressor columns, {'coulomb', 'coulomb_negative',
    'stribeck'} -> (…, n), for per-joint `laws` and velocity scales v_s at velocities qd:
    coulomb s = sign(q̇) (tanh: tanh(q̇/v_s); asymmetric: max(s, 0)), coulomb_negative
    min(s, 0) (asymmetric joints, else 0), stribeck exp(−(q̇/v_s)²) s (stribeck joints, else
    0). `filtered`: the same functions of the full-rate velocity low-pass filtered like the
    efforts ({'sign': …, MOVING: |sign|, ('tanh', v): …, ('stribeck', v): …},
    `_prepare`'s features), used instead of evaluating them at qd."""
    qd = np.asarray(qd, dtype=float)
    sign = np.sign(qd) if filtered is None else filtered['sign']
    coulomb = sign.copy()
    negative = np.zeros_like(qd)
    stribeck = np.zeros_like(qd)
    for j, law in enumerate(laws):
        v = float(velocities[j])
        if law == 'asymmetric':
            # |sign(q̇)|: 0 at rest, where neither level applies
            whole = (np.abs(np.sign(qd[..., j])) if filtered is None
                     else filtered.get(MOVING, np.ones_like(qd))[..., j])
            coulomb[..., j] = 0.5 * (whole + sign[..., j])
            negative[..., j] = 0.5 * (sign[..., j] - whole)
        elif law == 'tanh':
            coulomb[..., j] = (np.tanh(qd[..., j] / v) if filtered is None
                               else filtered[('tanh', v)][..., j])
        elif law == 'stribeck':
            with np.errstate(under='ignore'):
                stribeck[..., j] = (np.exp(-(qd[..., j] / v) ** 2) * np.sign(qd[..., j])
                                    if filtered is None else filtered[('stribeck', v)][..., j])
    return {'coulomb': coulomb, 'coulomb_negative': negative, 'stribeck': stribeck}


def _feature_functions(laws, velocity_sets):
    """Keys and (function of q̇, joints) for `_prepare`'s features: ('tanh', v) and
    ('stribeck', v) for every v of `velocity_sets` (per joint iterables) of joints with
    that law, MOVING (|sign q̇|) for asymmetric joints (only their columns are
    computed)."""
    keys = []
    for j, law in enumerate(laws):
        if law in ('tanh', 'stribeck'):
            keys += [(law, float(v)) for v in velocity_sets[j]]
        elif law == 'asymmetric':
            keys.append(MOVING)
    keys = sorted(set(keys))

    def function(key):
        law, v = key
        columns = [j for j, name in enumerate(laws) if name == ('asymmetric' if key == MOVING
                                                                 else law)]
        if key == MOVING:
            return lambda qd: np.abs(np.sign(qd)), columns
        if law == 'tanh':
            return lambda qd: np.tanh(qd / v), columns
        return lambda qd: np.exp(-np.minimum((qd / v) ** 2, 700.0)) * np.sign(qd), columns
    return keys, [function(key) for key in keys]


def arm_regressor(model, q, qd, qdd, offset=False):
    """Y (n, p) for one state, (B, n, p) for a batch, with
    ``Y @ arm_parameters(model, offset) == dynamics.inverse_dynamics(model, q, qd, qdd)``
    (to rounding) for any model with the same kinematics and gravity.

    Method (vectorised over the batch; loops over the n bodies only): the Newton–Euler
    forward pass (`algorithms.rnea`) gives each body's ω, ω̇ and origin acceleration a
    (gravity as a base acceleration); the body's wrench about its origin is linear in its
    ten parameters (f = m a + (ω̇× + ω×ω×)(m c), n = I ω̇ + ω × I ω + (m c) × a); the
    backward pass carries all bodies' columns down the chain, and each joint takes the z
    row. Body-frame columns are turned into link-frame ones by a constant 10×10 matrix per
    link (`_link_to_body`)."""
    (q_b, qd_b, qdd_b), single = dynamics._states(model, ('q', q), ('qd', qd), ('qdd', qdd))
    ch = model.chain
    B, n = q_b.shape
    terms = joint_terms(model, offset)
    k = 10 + len(terms)
    R, p = algorithms.joint_transforms(ch, q_b)
    F, N = [], []
    for w, wd, vd in algorithms.body_motions(ch, R, p, qd_b, qdd_b, model.gravity):
        Fi = np.zeros((B, 3, 10))
        Ni = np.zeros((B, 3, 10))
        w_skew = algorithms.skew(w)
        Fi[:, :, 0] = vd
        Fi[:, :, 1:4] = algorithms.skew(wd) + w_skew @ w_skew
        Ni[:, :, 1:4] = -algorithms.skew(vd)
        Ni[:, :, 4:] = algorithms.inertia_operator(wd) + w_skew @ algorithms.inertia_operator(w)
        F.append(Fi)
        N.append(Ni)
    Yb = np.zeros((B, n, 10 * n))
    f = np.zeros((B, 3, 0))
    nm = np.zeros((B, 3, 0))
    for i in range(n - 1, -1, -1):
        f = np.concatenate((F[i], f), axis=2)            # columns of bodies i..n-1
        nm = np.concatenate((N[i], nm), axis=2)
        Yb[:, i, 10 * i:] = f[:, 2] if ch.prismatic[i] else nm[:, 2]
        if i > 0:
            f = R[:, i] @ f
            nm = R[:, i] @ nm + algorithms.skew(p[:, i]) @ f
    transforms = _link_transforms(model)
    Y = np.zeros((B, n, n * k))
    for i in range(n):
        Y[:, :, i * k:i * k + 10] = Yb[:, :, 10 * i:10 * i + 10] @ transforms[i]
        Y[:, i, i * k + 10] = qdd_b[:, i]
        Y[:, i, i * k + 11] = qd_b[:, i]
    _set_friction_columns(Y, model, offset, friction_columns(
        model.friction_model, model.stribeck_velocity, qd_b))
    return Y[0] if single else Y


def _set_friction_columns(Y, model, offset, columns):
    """Write `friction_columns` (and the offsets' ones) into Y (…, n, p) in place. An
    asymmetric joint's offset column stays zero: on moving samples a constant offset and
    the difference of the two Coulomb levels are the same column, so its offset is not
    identified (kept at the prior's)."""
    terms = joint_terms(model, offset)
    k = 10 + len(terms)
    for i in range(model.n):
        for t, term in enumerate(terms[2:], start=12):
            if term == 'offset':
                Y[..., i, i * k + t] = 0.0 if model.friction_model[i] == 'asymmetric' else 1.0
            else:
                Y[..., i, i * k + t] = columns[term][..., i]
