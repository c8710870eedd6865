"""Checks of the control laws' parameters at construction: one helper per kind, each error
naming the parameter (and index) as the node names it, e.g.
``joint_impedance.stiffness[2]: must be finite and >= 0, got -1.0``."""

import math

import numpy as np


def per_joint(name, values, n, positive=False, allow_inf=False):
    """`values` (a scalar for all or n of them) as a float array (n,), each finite and
    >= 0 (> 0 with `positive`; +inf accepted with `allow_inf`)."""
    return per_axis(name, values, n, positive, allow_inf, 'values')


def per_axis(name, values, n, positive=False, allow_inf=False, what='values'):
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f'{name}: expected {n} numbers, got {values!r}') from None
    if array.ndim == 0:
        array = np.full(n, float(array))
    if array.shape != (n,):
        raise ValueError(f'{name}: expected {n} {what}, got shape {array.shape}')
    for i, v in enumerate(array):
        finite = math.isfinite(v) or (allow_inf and v == math.inf)
        if not finite or (v <= 0.0 if positive else v < 0.0):
            bound = '> 0' if positive else '>= 0'
            kind = 'finite or inf' if allow_inf else 'finite'
            raise ValueError(f'{name}[{i}]: must be {kind} and {bound}, got {v}')
    return array


def number(name, value, positive=False):
    """One finite float >= 0 (> 0 with `positive`)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f'{name}: expected a number, got {value!r}') from None
    if not math.isfinite(v) or (v <= 0.0 if positive else v < 0.0):
        raise ValueError(f'{name}: must be finite and {"> 0" if positive else ">= 0"}, '
                         f'got {v}')
    return v


def one_of(name, value, allowed):
    if value not in allowed:
        raise ValueError(f'{name}: expected one of {", ".join(map(repr, allowed))}, '
                         f'got {value!r}')
    return value


def damping_choice(prefix, damping, damping_ratio, n, what='values'):
    """(D (n,) or None, ζ or None): damping given per joint/axis, or a damping ratio
    (default 1.0 when neither is given); both at once is an error."""
    if damping is not None and damping_ratio is not None:
        raise ValueError(f'{prefix}.damping and {prefix}.damping_ratio: give one, not both')
    if damping is not None:
        return per_axis(f'{prefix}.damping', damping, n, what=what), None
    ratio = 1.0 if damping_ratio is None else damping_ratio
    return None, number(f'{prefix}.damping_ratio', ratio)


def finite_vector(name, values, n):
    """n finite numbers (any sign) as a float array (n,)."""
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f'{name}: expected {n} numbers, got {values!r}') from None
    if array.shape != (n,):
        raise ValueError(f'{name}: expected {n} values, got shape {array.shape}')
    for i, v in enumerate(array):
        if not math.isfinite(v):
            raise ValueError(f'{name}[{i}]: must be finite, got {v}')
    return array
