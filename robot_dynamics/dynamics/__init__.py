"""Public dynamics functions: model first, one state `(n,)` or a batch `(B, n)`.

Joint-space terms beyond rigid bodies, all optional in the model and zero by default:

    τ = M_rb(q) q̈ + C(q, q̇) q̇ + g(q)              rigid bodies (Newton–Euler)
        + armature ⊙ q̈                              reflected rotor inertia
        + viscous_friction ⊙ q̇ + coulomb_friction ⊙ sign(q̇)   (per joint friction law:
                                                              `friction_torques`)
        + Jᵀ(q) w                                   tip wrench, see `inverse_dynamics`

`mass_matrix` includes the armature; `bias_forces` includes Coriolis, centrifugal,
gravity and friction, so that ``inverse_dynamics == mass_matrix @ q̈ + bias_forces``.
Units: SI; efforts in N·m (revolute) or N (prismatic).

Backends: `inverse_dynamics`, `bias_forces`, `gravity_torques` and `forward_dynamics` run
straight-line code generated for the model (`robot_dynamics.dynamics.codegen`, compiled on
first use) unless `set_backend('reference')` or the environment variable
``ROBOT_DYNAMICS_BACKEND=reference`` selects the readable algorithms of
`robot_dynamics.dynamics.algorithms`. ``'numba'`` runs looped kernels compiled once by numba
for every model (`robot_dynamics.dynamics._numba_loops`) when numba is installed (optional),
else warns and keeps ``'generated'``. All give the same results to rounding; non-finite
inputs and singular joint-space inertias always take the reference path. This module is the
one backend dispatcher: the integrator's RK4 step (`rk4_step_one`) is chosen here too. The
kernels of a model live in its `KernelCache` (robot_dynamics.model.kernel_cache).
"""

import functools
import math
import os
import warnings

import numpy as np

from robot_dynamics.dynamics import _fast_numba, _numba_loops, algorithms, codegen, kinematics
from robot_dynamics.model.kernel_cache import KernelCache

__all__ = ['inverse_dynamics', 'mass_matrix', 'bias_forces', 'gravity_torques',
           'forward_dynamics', 'forward_dynamics_mass_matrix', 'forward_kinematics',
           'jacobian', 'kinetic_energy', 'potential_energy', 'friction_torques']

BACKENDS = ('generated', 'reference')        # always available
OPTIONAL_BACKENDS = ('numba',)               # need an optional package
_backend = 'generated'


def set_backend(name):
    """'generated' (default): code generated per model; 'reference': `algorithms`;
    'numba': the generated code compiled by numba (falls back to 'generated', with a
    warning, when numba is not installed)."""
    global _backend
    if name not in BACKENDS + OPTIONAL_BACKENDS:
        raise ValueError(f'backend {name!r} unknown, expected one of '
                         f'{BACKENDS + OPTIONAL_BACKENDS}')
    if name == 'numba' and not _fast_numba.available():
        warnings.warn("backend 'numba' requested but numba is not installed; using "
                      "'generated'", RuntimeWarning, stacklevel=2)
        name = 'generated'
    _backend = name
    # kinematics (imported by this module, so it cannot import it) reaches the numba
    # backend's one-state kernels of frames and Jacobians through this dispatcher
    kinematics._accelerated = _single if name == 'numba' else None


def get_backend():
    return _backend


def _backend_from_environment():
    name = os.environ.get('ROBOT_DYNAMICS_BACKEND', 'generated')
    try:
        set_backend(name)
    except ValueError as error:
        warnings.warn(f'ROBOT_DYNAMICS_BACKEND: {error}; using {_backend!r}', RuntimeWarning,
                      stacklevel=2)


_F64 = np.dtype(float)
_array = np.array


def _floats(n, value):
    """One state as a list of n Python floats, or None if it is anything else (a batch,
    another dtype, a wrong shape: those take the general path with its error messages)."""
    if type(value) is np.ndarray:
        if value.dtype == _F64 and value.shape == (n,):
            return value.tolist()
        return None
    if type(value) in (list, tuple) and len(value) == n \
            and all(type(x) is float for x in value):
        return value
    return None


def _generated_single(model, name, states, wrench=None):
    """The fast kernel on one state, or None if it does not apply (then the general path
    runs, with its error messages). Inputs other than float64 (n,) arrays (and, on the
    generated backend, sequences of n floats) take the general path. A non-finite result
    (NaN/inf inputs, singular inertia) is recomputed by the reference path, so that such
    inputs keep the reference semantics exactly."""
    if wrench is not None:
        if type(wrench) is not np.ndarray:
            wrench = _floats(6, wrench)
            if wrench is None:
                return None
        states = (*states, wrench)
        name += '_wrench'
    return _single(model, name)(*states)


def _single(model, name):
    """The one-state runner of kernel `name` for the current backend: a function of the
    states returning the result or None (then the general path runs). Made once per model
    and kept in its `KernelCache` (``runners_for(backend)``; per model instance, so a
    payload's model has its own), so that the public functions find it with an attribute
    and two dictionary lookups. This is the one place that chooses a backend's kernel for
    a state; `rk4_step_one` (the integrator's step) goes through it too."""
    runners = KernelCache.of(model).runners_for(_backend)
    run = runners.get(name)
    if run is None:
        if _backend == 'reference':
            run = _no_runner
        elif name == 'rk4':
            run = _rk4_runner(model)
        elif _backend == 'numba':
            run = _numba_loops.runner(model, name)
        else:
            run = _python_runner(model, name)
        runners[name] = run
    return run


def _no_runner(*states):
    return None


def rk4_step_one(model, q, qd, tau, dt):
    """(q, q̇) after one classical RK4 step of the forward dynamics with τ held, on one
    state, by the current backend's kernel (generated: the 'rk4' kernel, four
    articulated-body passes on floats; numba: one compiled call), or None when no kernel
    applies (the reference backend, a batch, another dtype, a non-finite result): then
    `robot_dynamics.simulation.integration.rk4_step` runs its general path."""
    if type(dt) not in (float, int):
        return None
    return _single(model, 'rk4')(q, qd, tau, float(dt))


def _rk4_runner(model):
    """The one-state RK4 runner of the current (non-reference) backend."""
    if _backend == 'numba':
        return functools.partial(_numba_loops.rk4_step_one, model)
    fn = codegen.kernel(model, 'rk4')
    n = model.n

    def run(q, qd, tau, dt):
        values = [_floats(n, x) for x in (q, qd, tau)]
        if None in values:
            return None
        try:
            q_next, qd_next = fn(*values, dt)
        except (ZeroDivisionError, ValueError):      # 1/0, sin(inf)
            return None
        if not math.isfinite(sum(q_next) + sum(qd_next)):    # let the reference path decide
            return None
        return np.array(q_next), np.array(qd_next)
    return run


def _python_runner(model, name):
    """Runner of the generated Python kernel: the states become lists of floats."""
    fn = codegen.kernel(model, name)
    widths = [6 if p == 'w' else model.n for p in _KERNEL_PARAMS[name]]

    def general(*states):
        values = []
        for x, width in zip(states, widths):
            if type(x) is np.ndarray:
                if x.shape != (width,) or x.dtype != _F64:
                    return None
                values.append(x.tolist())
            else:
                x = _floats(width, x)
                if x is None:
                    return None
                values.append(x)
        return _finished(fn, values)

    if len(widths) != 3:
        return general

    def three(a, b, c):
        """The common case (ID, FD) without a loop: ~0.5 µs less per call (and the tail
        of `_finished` written out, not called, for the same reason). The length is not
        compared here: the kernel unpacks each list into exactly n names, so a 1-D array
        of another length raises ValueError and takes the general path (its error)."""
        try:
            if a.dtype is not _F64 or b.dtype is not _F64 or c.dtype is not _F64 \
                    or a.ndim != 1 or b.ndim != 1 or c.ndim != 1:
                return general(a, b, c)
            out = fn(a.tolist(), b.tolist(), c.tolist())
        except AttributeError:                       # not arrays: lists, tuples, ...
            return general(a, b, c)
        except (ZeroDivisionError, ValueError, TypeError):   # 1/0, sin(inf), wrong length
            return None
        total = sum(out)
        if total - total != 0.0:                     # NaN or inf somewhere
            return None
        return _array(out)
    return three


def _finished(fn, values):
    try:
        out = fn(*values)
    except (ZeroDivisionError, ValueError):          # 1/0, sin(inf)
        return None
    total = sum(out)
    if total - total != 0.0:                         # NaN or inf somewhere
        return None
    return np.array(out)


_NUMBA_BATCH = {'rnea': _numba_loops.inverse_dynamics_batch,
                'bias': _numba_loops.bias_forces_batch,
                'gravity': _numba_loops.gravity_torques_batch,
                'aba': _numba_loops.forward_dynamics_batch}


_KERNEL_PARAMS = {'rnea': 'q qd qdd', 'rnea_wrench': 'q qd qdd w', 'bias': 'q qd',
                  'gravity': 'q', 'aba': 'q qd tau', 'aba_wrench': 'q qd tau w'}
_KERNEL_PARAMS = {k: v.split() for k, v in _KERNEL_PARAMS.items()}


def _generated_batch(model, name, arrays, wrench=None):
    """The generated kernel on (B, n) arrays (one (B,) array per joint), or None."""
    if _backend == 'numba':      # checks finiteness itself; None: the reference decides
        if wrench is None:
            return _NUMBA_BATCH[name](model, *arrays)
        return _NUMBA_BATCH[name](model, *arrays, wrench)
    if wrench is not None:
        arrays = list(arrays) + [wrench]
        name += '_wrench'
    if not _all_finite(arrays):
        return None
    size = arrays[0].shape[0]
    if size == 1:
        try:
            return np.array(codegen.kernel(model, name)(*(a[0].tolist() for a in arrays)))[None]
        except ZeroDivisionError:
            return None
    try:
        with np.errstate(divide='ignore', invalid='ignore'):
            columns = codegen.kernel(model, name, 'array')(*(a.T for a in arrays))
    except ZeroDivisionError:
        return None
    out = np.empty((size, len(columns)))
    for j, column in enumerate(columns):
        out[:, j] = column
    if not _all_finite((out,)):      # a zero pivot of the last body's runtime inertia
        return None
    return out


def _all_finite(arrays):
    """Whether every entry is finite: one sum per array (NaN and inf propagate), and the
    entry-wise test only if a sum is not finite (it may have overflowed)."""
    for a in arrays:
        total = float(a.sum())
        if total - total != 0.0 and not np.isfinite(a).all():
            return False
    return True


def _batch(model, value, name, width=None):
    """(B, width) float array and whether the input was a single state."""
    width = model.n if width is None else width
    array = np.asarray(value, dtype=float)
    if array.ndim == 1 and array.shape[0] == width:
        return array[None, :], True
    if array.ndim == 2 and array.shape[1] == width:
        return array, False
    raise ValueError(f'{name}: expected shape ({width},) or (B, {width}), got {array.shape}')


def _states(model, *named):
    arrays, singles = [], []
    for name, value in named:
        array, single = _batch(model, value, name)
        arrays.append(array)
        singles.append(single)
    sizes = {a.shape[0] for a, s in zip(arrays, singles) if not s}
    if len(sizes) > 1:
        raise ValueError(f'batch sizes differ: {", ".join(f"{n}: {a.shape}" for (n, _), a in zip(named, arrays))}')
    size = sizes.pop() if sizes else 1
    arrays = [np.broadcast_to(a, (size, model.n)) if a.shape[0] != size else a for a in arrays]
    return arrays, all(singles)


def _wrench(wrench, size):
    if wrench is None:
        return None
    array = np.asarray(wrench, dtype=float)
    if array.shape == (6,):
        return np.broadcast_to(array, (size, 6))
    if array.shape == (size, 6):
        return array
    raise ValueError(f'wrench: expected shape (6,) or ({size}, 6), got {array.shape}')


def _out(array, single):
    return array[0] if single else array


def friction_torques(model, qd):
    """Joint friction by each joint's law (`RobotModel.friction_model`): viscous b q̇ plus

    * coulomb (default): f_c sign(q̇) ([SAS] eq. 2.39);
    * asymmetric: f_c for q̇ > 0, −f_c⁻ for q̇ < 0 (`coulomb_friction_negative`);
    * tanh: f_c tanh(q̇ / v_s), a smooth Coulomb law (`stribeck_velocity` v_s);
    * stribeck: (f_c + f_s exp(−(q̇ / v_s)²)) sign(q̇) (`stribeck_friction` f_s).

    Every law is linear in its levels (b, f_c, f_c⁻, f_s) for a fixed v_s."""
    qd_b, single = _batch(model, qd, 'qd')
    return _out(_friction(model, qd_b) + np.zeros_like(qd_b), single)


def friction_laws(model, qd):
    """τ_friction of `friction_torques` for (…, n) velocities (no shape checks)."""
    qd = np.asarray(qd, dtype=float)
    tau = qd * model.viscous_friction
    if model.plain_friction:
        return tau + np.sign(qd) * model.coulomb_friction
    smooth = np.array([m == 'tanh' for m in model.friction_model])
    v = model.stribeck_velocity
    with np.errstate(over='ignore', under='ignore'):
        s = np.where(smooth, np.tanh(qd / v), np.sign(qd))
        tau = (tau + np.maximum(s, 0.0) * model.coulomb_friction
               + np.minimum(s, 0.0) * model.coulomb_friction_negative)
        if np.any(model.stribeck_friction):
            tau = tau + model.stribeck_friction * np.exp(-(qd / v) ** 2) * np.sign(qd)
    return tau


def inverse_dynamics(model, q, qd, qdd, wrench=None):
    """Joint efforts τ that produce q̈ at (q, q̇): recursive Newton–Euler.

    `wrench` = [fx, fy, fz, nx, ny, nz] is the force and moment the last link exerts on
    its environment (e.g. holding a load), expressed in the last DH link frame, moment
    about that frame's origin; it adds ``Jᵀ w`` (J in the same frame) to τ. One wrench
    (6,) for all samples or one per sample (B, 6).
    """
    if wrench is None:
        try:                                      # the one-state fast path, inlined
            run = model._kernels.runners[_backend]['rnea']
        except (AttributeError, KeyError):
            run = _single(model, 'rnea')
        tau = run(q, qd, qdd)
        if tau is not None:
            return tau
    elif _backend != 'reference':
        tau = _generated_single(model, 'rnea', (q, qd, qdd), wrench)
        if tau is not None:
            return tau
    (q_b, qd_b, qdd_b), single = _states(model, ('q', q), ('qd', qd), ('qdd', qdd))
    w = _wrench(wrench, q_b.shape[0])
    if _backend != 'reference':
        tau = _generated_batch(model, 'rnea', (q_b, qd_b, qdd_b), w)
        if tau is not None:
            return _out(tau, single)
    tau = algorithms.rnea(model.chain, q_b, qd_b, qdd_b, model.gravity, w)
    tau = tau + qdd_b * model.armature + _friction(model, qd_b)
    return _out(tau, single)


def _friction(model, qd_b):
    if not model.has_friction:
        return 0.0
    return friction_laws(model, qd_b)


def mass_matrix(model, q):
    """Joint-space inertia matrix M(q) (n, n) or (B, n, n), armature included.

    One state (a float64 (n,) array or a list of floats) on the default backends: the
    composite-rigid-body algorithm in base coordinates on Python floats
    (`_mass_matrix_one`; with 'numba' the same algorithm compiled,
    `_numba_loops.mass_matrix_one`); a batch, or the 'reference' backend: n Newton–Euler passes
    (`algorithms.mass_matrix_rnea`)."""
    if _backend == 'numba' and type(q) is np.ndarray and q.ndim == 1:
        M = _single(model, 'mass_matrix')(q)
        if M is not None:
            return M
    if _backend != 'reference':
        M = _mass_matrix_one(model, q)
        if M is not None:
            return M
    q_b, single = _batch(model, q, 'q')
    M = algorithms.mass_matrix_rnea(model.chain, q_b)
    M = M + np.diag(model.armature)
    return _out(M, single)


class _Inertias:
    """A model's bodies as Python floats for `_mass_matrix_one` (made once per model)."""

    def __init__(self, model):
        ch = model.chain
        self.mass = ch.mass.tolist()
        self.com = [tuple(c) for c in ch.com.tolist()]
        self.inertia = [tuple(I.ravel().tolist()) for I in ch.inertia]
        self.prismatic = [bool(p) for p in ch.prismatic]
        self.armature = [float(a) for a in model.armature]


def _mass_matrix_one(model, q):
    """M(q) of one state, or None (then the general path runs): the composite-rigid-body
    algorithm (Featherstone, RBDA §6.2) with every quantity in base coordinates, so that
    composing bodies is a sum. Body i's spatial inertia about the base origin, [ω; v]
    order, from its mass m, centre of mass c and centroidal inertia I_c (both in the base):
    [[I_c − m c× c×, m c×], [−m c×, m 1]]; C_k sums those of bodies k..n; joint k's motion
    axis is S_k = [z_k; o_k × z_k] (revolute) or [0; z_k] (prismatic), z_k and o_k the axis
    and origin of body k; M_jk = S_jᵀ C_k S_k for j ≤ k."""
    n = model.n
    q = _floats(n, q)
    if q is None:
        return None
    bodies = KernelCache.of(model).value('mass matrix', _Inertias, model)
    try:
        Rs, ps = kinematics._poses_one(kinematics._constants(model), q)
    except (ValueError, OverflowError):                 # sin(inf)
        return None
    M = [[0.0] * n for _ in range(n)]
    S, F = [None] * n, [None] * n
    m = hx = hy = hz = 0.0                              # C_k: mass, m c, I about the origin
    i00 = i01 = i02 = i11 = i12 = i22 = 0.0
    for i in range(n - 1, -1, -1):
        r0, r1, r2, r3, r4, r5, r6, r7, r8 = Rs[i]
        px, py, pz = ps[i]
        lx, ly, lz = bodies.com[i]
        mi = bodies.mass[i]
        cx = px + r0 * lx + r1 * ly + r2 * lz
        cy = py + r3 * lx + r4 * ly + r5 * lz
        cz = pz + r6 * lx + r7 * ly + r8 * lz
        a0, a1, a2, a3, a4, a5, a6, a7, a8 = bodies.inertia[i]
        b0, b1, b2 = r0 * a0 + r1 * a3 + r2 * a6, r0 * a1 + r1 * a4 + r2 * a7, \
            r0 * a2 + r1 * a5 + r2 * a8
        b3, b4, b5 = r3 * a0 + r4 * a3 + r5 * a6, r3 * a1 + r4 * a4 + r5 * a7, \
            r3 * a2 + r4 * a5 + r5 * a8
        b6, b7, b8 = r6 * a0 + r7 * a3 + r8 * a6, r6 * a1 + r7 * a4 + r8 * a7, \
            r6 * a2 + r7 * a5 + r8 * a8
        cc = cx * cx + cy * cy + cz * cz                # R I_c Rᵀ + m (|c|² 1 − c cᵀ)
        i00 += b0 * r0 + b1 * r1 + b2 * r2 + mi * (cc - cx * cx)
        i01 += b0 * r3 + b1 * r4 + b2 * r5 - mi * cx * cy
        i02 += b0 * r6 + b1 * r7 + b2 * r8 - mi * cx * cz
        i11 += b3 * r3 + b4 * r4 + b5 * r5 + mi * (cc - cy * cy)
        i12 += b3 * r6 + b4 * r7 + b5 * r8 - mi * cy * cz
        i22 += b6 * r6 + b7 * r7 + b8 * r8 + mi * (cc - cz * cz)
        m += mi
        hx, hy, hz = hx + mi * cx, hy + mi * cy, hz + mi * cz
        if bodies.prismatic[i]:
            wx = wy = wz = 0.0
            vx, vy, vz = r2, r5, r8
        else:
            wx, wy, wz = r2, r5, r8
            vx, vy, vz = py * r8 - pz * r5, pz * r2 - px * r8, px * r5 - py * r2
        S[i] = (wx, wy, wz, vx, vy, vz)
        F[i] = (i00 * wx + i01 * wy + i02 * wz + hy * vz - hz * vy,       # C_i S_i
                i01 * wx + i11 * wy + i12 * wz + hz * vx - hx * vz,
                i02 * wx + i12 * wy + i22 * wz + hx * vy - hy * vx,
                m * vx - hy * wz + hz * wy, m * vy - hz * wx + hx * wz,
                m * vz - hx * wy + hy * wx)
    for k in range(n):
        f0, f1, f2, f3, f4, f5 = F[k]
        row = M[k]
        for j in range(k + 1):
            s0, s1, s2, s3, s4, s5 = S[j]
            row[j] = M[j][k] = s0 * f0 + s1 * f1 + s2 * f2 + s3 * f3 + s4 * f4 + s5 * f5
        row[k] += bodies.armature[k]
    out = np.array(M)
    total = float(out.sum())
    if total - total != 0.0:                            # NaN or inf: the general path
        return None
    return out


def bias_forces(model, q, qd):
    """C(q, q̇) q̇ + g(q) + friction(q̇): the efforts at zero acceleration."""
    if _backend != 'reference':
        tau = _generated_single(model, 'bias', (q, qd))
        if tau is not None:
            return tau
    (q_b, qd_b), single = _states(model, ('q', q), ('qd', qd))
    if _backend != 'reference':
        tau = _generated_batch(model, 'bias', (q_b, qd_b))
        if tau is not None:
            return _out(tau, single)
    tau = algorithms.rnea(model.chain, q_b, qd_b, np.zeros_like(q_b), model.gravity)
    return _out(tau + _friction(model, qd_b), single)


def gravity_torques(model, q):
    """g(q): the efforts that hold the arm still against gravity."""
    if _backend != 'reference':
        tau = _generated_single(model, 'gravity', (q,))
        if tau is not None:
            return tau
    q_b, single = _batch(model, q, 'q')
    if _backend != 'reference':
        tau = _generated_batch(model, 'gravity', (q_b,))
        if tau is not None:
            return _out(tau, single)
    zeros = np.zeros_like(q_b)
    return _out(algorithms.rnea(model.chain, q_b, zeros, zeros, model.gravity), single)


def forward_dynamics(model, q, qd, tau, wrench=None):
    """Joint accelerations q̈ under efforts τ: articulated-body algorithm, O(n).

    Inverse of `inverse_dynamics` (same friction, armature and wrench conventions)."""
    if wrench is None:
        try:                                      # the one-state fast path, inlined
            run = model._kernels.runners[_backend]['aba']
        except (AttributeError, KeyError):
            run = _single(model, 'aba')
        qdd = run(q, qd, tau)
        if qdd is not None:
            return qdd
    elif _backend != 'reference':
        qdd = _generated_single(model, 'aba', (q, qd, tau), wrench)
        if qdd is not None:
            return qdd
    (q_b, qd_b, tau_b), single = _states(model, ('q', q), ('qd', qd), ('tau', tau))
    w = _wrench(wrench, q_b.shape[0])
    if _backend != 'reference':
        with np.errstate(divide='ignore', invalid='ignore'):
            qdd = _generated_batch(model, 'aba', (q_b, qd_b, tau_b), w)
        if qdd is not None and np.isfinite(qdd).all():
            return _out(qdd, single)
    net = tau_b - _friction(model, qd_b)
    qdd = algorithms.aba(model.chain, q_b, qd_b, net, model.gravity, model.armature, w)
    return _out(qdd, single)


def forward_dynamics_mass_matrix(model, q, qd, tau, wrench=None):
    """q̈ = M⁻¹(τ − h): the mass-matrix route of [TML] §7, solved by Cholesky
    (M is symmetric positive definite). An independent cross-check of `forward_dynamics`."""
    (q_b, qd_b, tau_b), single = _states(model, ('q', q), ('qd', qd), ('tau', tau))
    w = _wrench(wrench, q_b.shape[0])
    h = algorithms.rnea(model.chain, q_b, qd_b, np.zeros_like(q_b), model.gravity, w)
    h = h + _friction(model, qd_b)
    M = algorithms.mass_matrix_rnea(model.chain, q_b) + np.diag(model.armature)
    L = np.linalg.cholesky(M)
    y = np.linalg.solve(L, (tau_b - h)[..., None])
    qdd = np.linalg.solve(np.swapaxes(L, -1, -2), y)[..., 0]
    return _out(qdd, single)


def forward_kinematics(model, q):
    """Homogeneous transforms of DH link frames 1..n in the base frame: (n, 4, 4) or
    (B, n, 4, 4). The last one is the tool (tip) frame. The same as
    `kinematics.link_poses`."""
    return kinematics.link_poses(model, q)


def jacobian(model, q):
    """Geometric Jacobian (6, n) or (B, 6, n) of the tip frame in the base frame:
    rows [v; ω], v the velocity of the tip-frame origin. `kinematics.jacobian` without
    a tool, link or point."""
    return kinematics.jacobian(model, q)


def kinetic_energy(model, q, qd):
    """Σ ½ m |v_c|² + ½ ωᵀ I ω over the links, plus ½ armature q̇² [J], computed from the
    link velocities (independently of the mass matrix)."""
    (q_b, qd_b), single = _states(model, ('q', q), ('qd', qd))
    ch = model.chain
    w, v = algorithms.body_velocities(ch, q_b, qd_b)
    vc = v + algorithms.cross(w, np.broadcast_to(ch.com, w.shape))
    rot = 0.5 * np.einsum('bni,nij,bnj->b', w, ch.inertia, w)
    lin = 0.5 * np.einsum('n,bni,bni->b', ch.mass, vc, vc)
    rotor = 0.5 * np.sum(model.armature * qd_b ** 2, axis=1)
    return _out(rot + lin + rotor, single)


def potential_energy(model, q):
    """−Σ m_i gᵀ c_i [J], c_i the centre of mass of link i in the base frame."""
    q_b, single = _batch(model, q, 'q')
    ch = model.chain
    Rb, pb = algorithms.body_poses(ch, q_b)
    c = pb + np.einsum('bnij,nj->bni', Rb, ch.com)
    return _out(-np.einsum('n,bni,i->b', ch.mass, c, model.gravity), single)


# last: selecting 'numba' refers to `_single` above
_backend_from_environment()
