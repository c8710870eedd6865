"""Fixed-step integration of the forward dynamics (the plant): pure math, no ROS.

The state is (q, q̇); the effort τ is held constant over a step (zero-order hold, as a
digital controller applies it). [TML] §7 integrates the same state with RK4.
"""

import math

import numpy as np

from robot_dynamics import _numba_loops, codegen, dynamics


def rk4_step(model, q, qd, tau, dt):
    """One classical Runge–Kutta step of q̈ = forward_dynamics(q, q̇, τ); returns (q, q̇).

    One state on the generated backend runs as one generated call (four articulated-body
    passes on floats, `codegen` kernel 'rk4'), on the numba backend as one compiled call
    (`_numba_loops.rk4_step_one`); batches and the reference backend go through
    `dynamics.forward_dynamics` four times."""
    if dynamics.get_backend() != 'reference':
        result = _rk4_generated(model, q, qd, tau, dt)
        if result is not None:
            return result
    fd = dynamics.forward_dynamics
    k1v = fd(model, q, qd, tau)
    k1q = qd
    k2q = qd + 0.5 * dt * k1v
    k2v = fd(model, q + 0.5 * dt * k1q, k2q, tau)
    k3q = qd + 0.5 * dt * k2v
    k3v = fd(model, q + 0.5 * dt * k2q, k3q, tau)
    k4q = qd + dt * k3v
    k4v = fd(model, q + dt * k3q, k4q, tau)
    q_next = q + dt / 6.0 * (k1q + 2.0 * k2q + 2.0 * k3q + k4q)
    qd_next = qd + dt / 6.0 * (k1v + 2.0 * k2v + 2.0 * k3v + k4v)
    return q_next, qd_next


def _rk4_generated(model, q, qd, tau, dt):
    n = model.n
    if dynamics.get_backend() == 'numba':
        if type(dt) not in (float, int):
            return None
        return _numba_loops.rk4_step_one(model, q, qd, tau, float(dt))
    values = [dynamics._floats(n, x) for x in (q, qd, tau)]
    if None in values or type(dt) not in (float, int):
        return None
    kernels = model.__dict__.get('_kernels')
    fn = kernels.get(('rk4', 'scalar')) if kernels else None
    if fn is None:
        fn = codegen.kernel(model, 'rk4')
    try:
        q_next, qd_next = fn(*values, dt)
    except (ZeroDivisionError, ValueError):      # 1/0, sin(inf)
        return None
    if not math.isfinite(sum(q_next) + sum(qd_next)):    # let the reference path decide
        return None
    return np.array(q_next), np.array(qd_next)


def semi_implicit_euler_step(model, q, qd, tau, dt):
    """Symplectic Euler: q̇ ← q̇ + dt q̈(q, q̇); q ← q + dt q̇. Cheap, first order."""
    qd_next = qd + dt * dynamics.forward_dynamics(model, q, qd, tau)
    return q + dt * qd_next, qd_next


METHODS = {'rk4': rk4_step, 'euler': semi_implicit_euler_step}


def step(model, q, qd, tau, dt, method='rk4'):
    try:
        stepper = METHODS[method]
    except KeyError:
        raise ValueError(f'integration method {method!r} unknown, expected one of '
                         f'{sorted(METHODS)}') from None
    q = np.asarray(q, dtype=float)
    qd = np.asarray(qd, dtype=float)
    return stepper(model, q, qd, np.asarray(tau, dtype=float), dt)
