"""The base parameters: the identifiable combinations β = K φ, found numerically from the
regressor at random states (Gautier 1991; Gautier & Khalil 1990)."""

import math
from typing import NamedTuple

import numpy as np

from robot_dynamics.identification.arm.parameters import _per_index, parameter_names
from robot_dynamics.identification.arm.regressor import arm_regressor


class BaseParameters(NamedTuple):
    """The identifiable combinations of φ: β = K φ (r,), with Y φ = Y[..., independent] β
    for every state (`base_parameters`).

    names: the full parameter names (p,); independent: (r,) indices of the parameters
    kept as base parameters, in φ order; K: (r, p) the coefficients (K[:, independent] = 1);
    rank r; tolerance: the rank tolerance used."""

    names: list
    independent: np.ndarray
    K: np.ndarray
    rank: int
    tolerance: float

    def regressor(self, Y):
        """The base regressor Y_b = Y[..., independent] ((…, n, r))."""
        return Y[..., self.independent]

    def values(self, phi):
        """β = K φ."""
        return self.K @ np.asarray(phi, dtype=float)

    @property
    def base_names(self):
        return [self.names[j] for j in self.independent]

    def describe(self, coefficient_tolerance=1e-9):
        """One line per base parameter, in words: which full parameters it sums, with their
        coefficients (lengths in m), e.g. ``β3 = link2.m*c_x + 0.4318·link3.m + ...``."""
        lines = []
        for r, j in enumerate(self.independent):
            name = self.names[j]
            link, _, what = name.partition('.')
            terms = [what if link == name.partition('.')[0] else name]
            for c in np.flatnonzero(np.abs(self.K[r]) > coefficient_tolerance):
                if c == j:
                    continue
                coefficient = self.K[r, c]
                other = self.names[c]
                other = other.partition('.')[2] if other.partition('.')[0] == link else other
                sign = '−' if coefficient < 0 else '+'
                magnitude = abs(coefficient)
                text = other if abs(magnitude - 1.0) < 1e-9 else f'{magnitude:.6g}·{other}'
                terms.append(f'{sign} {text}')
            kind = 'link' if link.startswith('link') else 'joint'
            lines.append(f'β{r + 1} = {kind} {link[len(kind):]}: ' + ' '.join(terms))
        return '\n'.join(lines)


def _random_states(model, count, rng):
    n = model.n
    low = np.where(np.isfinite(model.position_min), model.position_min, -math.pi)
    high = np.where(np.isfinite(model.position_max), model.position_max, math.pi)
    prismatic = np.array([jt == 'prismatic' for jt in model.joint_types])
    low = np.where(prismatic & ~np.isfinite(model.position_min), -0.5, low)
    high = np.where(prismatic & ~np.isfinite(model.position_max), 0.5, high)
    q = rng.uniform(low, high, size=(count, n))
    qd = rng.normal(size=(count, n))
    qdd = rng.normal(size=(count, n))
    return q, qd, qdd


def _elimination_order(model, offset):
    """The order in which the greedy rank selection considers φ's columns: earlier links'
    parameters are kept and later ones regrouped onto them (Gautier & Khalil 1990); within
    a link the parameters that usually regroup (m, m·c_z, I_yy) come last."""
    k = _per_index(model, offset)
    within = [4, 5, 6, 8, 9, 1, 2, 7, 3, 0]           # Ixx Ixy Ixz Iyz Izz mcx mcy Iyy mcz m
    order = []
    for i in range(model.n):
        order += [i * k + c for c in within]
        order += [i * k + 10 + c for c in range(k - 10)]
    return order


def base_parameters(model, offset=False, samples=None, tolerance=1e-8, seed=0):
    """The base parameters of `model` found numerically (Gautier 1991).

    The regressor is stacked at `samples` random states (default 6·p / n, at least 30;
    positions uniform within the limits, ±π or ±0.5 m without, velocities and
    accelerations standard normal), its columns scaled to unit norm, and the columns are
    taken greedily in `_elimination_order`: a column is independent when its distance to
    the span of those kept exceeds `tolerance` (relative; a QR factorisation with this
    order). Each other column is a combination of the kept ones, Y_d = Y_b C, so
    Y φ = Y_b (φ_b + C φ_d) = Y_b β: K = [I | C] in φ's order."""
    key = ('_arm_id_base', offset, samples, tolerance, seed, model.friction_model,
           tuple(model.stribeck_velocity))
    cached = model.__dict__.get(key)
    if cached is not None:
        return cached
    rng = np.random.default_rng(seed)
    p = model.n * _per_index(model, offset)
    count = samples if samples is not None else max(30, int(math.ceil(6 * p / model.n)))
    Y = arm_regressor(model, *_random_states(model, count, rng), offset=offset).reshape(-1, p)
    norms = np.linalg.norm(Y, axis=0)
    norms[norms <= 1e-10 * np.max(norms)] = 0.0          # no effect (to rounding)
    scale = np.where(norms > 0.0, norms, 1.0)
    Ys = np.where(norms > 0.0, Y / scale, 0.0)
    kept, basis = [], np.zeros((Y.shape[0], 0))
    for j in _elimination_order(model, offset):
        if norms[j] == 0.0:
            continue
        column = Ys[:, j]
        residual = column - basis @ (basis.T @ column)
        residual = residual - basis @ (basis.T @ residual)      # re-orthogonalise
        size = np.linalg.norm(residual)
        if size > tolerance:
            kept.append(j)
            basis = np.column_stack((basis, residual / size))
    independent = np.array(sorted(kept), dtype=int)
    # Ys = Ys_b C by least squares, from the QR factorisation the selection built
    # (Ys[:, kept] = basis R, R upper triangular): C = R⁻¹ basisᵀ Ys; einsum and a small
    # solve, not lstsq's threaded LAPACK (seconds on a loaded machine instead of 20 ms)
    R = np.einsum('kr,kc->rc', basis, Ys[:, kept])
    C = np.linalg.solve(R, np.einsum('kr,kc->rc', basis, Ys))[np.argsort(kept)]
    K = C * scale[None, :] / scale[independent][:, None]
    K[np.abs(K) < 1e-12] = 0.0
    K[np.arange(len(independent)), independent] = 1.0
    result = BaseParameters(names=parameter_names(model, offset), independent=independent,
                            K=K, rank=len(independent), tolerance=tolerance)
    model.__dict__[key] = result          # a model is immutable: its base parameters too
    return result
