"""Excitation planning: a rest-to-rest finite Fourier series per joint, optimised for the
condition of the base regressor within position, velocity and acceleration bounds
(Swevers et al. 1997)."""

import math

import numpy as np

from robot_dynamics import dynamics
from robot_dynamics.identification.arm.base import _random_states, base_parameters
from robot_dynamics.identification.arm.libraries import _require
from robot_dynamics.identification.arm.regressor import arm_regressor


class Excitation:
    """A rest-to-rest finite Fourier series per joint (Swevers et al. 1997):

        q_j(t) = q0_j + Σ_{l=1..H} a_jl sin(l ω t) + b_jl (cos(l ω t) − 1),  0 ≤ t ≤ duration

    with Σ_l l a_jl = 0 and Σ_l l² b_jl = 0, so q(0) = q0 and q̇ = q̈ = 0 at t = 0 and, the
    duration being a whole number of periods 2π/ω, at the end. Outside [0, duration] the
    motion holds q0. Attributes: duration [s], omega [rad/s], q0 (n,), a, b (n, H),
    condition (the weighted base regressor's condition number along the motion, as
    optimised), limits: dict of the position, velocity and acceleration bounds used."""

    def __init__(self, duration, omega, q0, a, b, condition=math.nan, limits=None):
        self.duration = float(duration)
        self.omega = float(omega)
        self.q0 = np.asarray(q0, dtype=float)
        self.a = np.asarray(a, dtype=float)
        self.b = np.asarray(b, dtype=float)
        self.condition = float(condition)
        self.limits = limits or {}

    @property
    def harmonics(self):
        return self.a.shape[1]

    def sample(self, t):
        """(q, q̇, q̈) at time(s) t: (n,) each for a scalar t, (K, n) for an array."""
        scalar = np.ndim(t) == 0
        t = np.clip(np.atleast_1d(np.asarray(t, dtype=float)), 0.0, self.duration)
        orders = np.arange(1, self.harmonics + 1)
        phase = self.omega * np.outer(t, orders)
        s, c = np.sin(phase), np.cos(phase)
        w = self.omega * orders
        q = self.q0 + s @ self.a.T + (c - 1.0) @ self.b.T
        qd = (c * w) @ self.a.T - (s * w) @ self.b.T
        qdd = -(s * w ** 2) @ self.a.T - (c * w ** 2) @ self.b.T
        if scalar:
            return q[0], qd[0], qdd[0]
        return q, qd, qdd

    def reference(self, t):
        """t -> (q_d, q̇_d, q̈_d) for `simulation.simulate_closed_loop`."""
        return self.sample(t)

    def points(self, period=0.05):
        """Trajectory points every `period` s from 0 to duration (both included):
        (times (K,), positions, velocities, accelerations (K, n)), for a
        trajectory_msgs/JointTrajectory whose points carry all three (the controller's
        quintic interpolation then reproduces the series closely)."""
        count = max(1, int(math.ceil(self.duration / float(period) - 1e-9)))
        times = np.linspace(0.0, self.duration, count + 1)
        return (times, *self.sample(times))

    def __repr__(self):
        return (f'Excitation(duration={self.duration:g} s, harmonics={self.harmonics}, '
                f'base frequency={self.omega / (2 * math.pi):.4g} Hz, '
                f'condition={self.condition:.4g})')


def _null_basis(weights):
    """Orthonormal basis (H, H-1) of {x : weights·x = 0}."""
    _, _, vt = np.linalg.svd(weights[None, :])
    return vt[1:].T


def excitation_limits(model, velocity_margin=0.8, acceleration_margin=0.5,
                      position_margin=0.05, default_velocity=1.0, default_acceleration=3.0):
    """The bounds the excitation respects, per joint: positions within [min + margin,
    max − margin] (`position_margin` rad | m), |q̇| ≤ velocity_margin·velocity_max
    (`default_velocity` without a limit), |q̈| ≤ acceleration_margin × the acceleration
    the joint's effort limit gives against its largest diagonal inertia and gravity
    effort over random configurations (`default_acceleration` without an effort limit)."""
    low = model.position_min + position_margin
    high = model.position_max - position_margin
    velocity = np.where(np.isfinite(model.velocity_max), velocity_margin * model.velocity_max,
                        default_velocity)
    rng = np.random.default_rng(0)
    q = _random_states(model, 50, rng)[0]
    M = np.max(np.diagonal(dynamics.mass_matrix(model, q), axis1=1, axis2=2), axis=0)
    g = np.max(np.abs(dynamics.gravity_torques(model, q)), axis=0)
    with np.errstate(invalid='ignore', divide='ignore'):
        from_effort = (model.effort_max - g) / np.maximum(M, 1e-9)
    acceleration = np.where(np.isfinite(from_effort) & (from_effort > 0),
                            acceleration_margin * from_effort, default_acceleration)
    acceleration = np.minimum(acceleration, 10.0 * default_acceleration)
    return {'position_min': low, 'position_max': high, 'velocity': velocity,
            'acceleration': acceleration}


def _admissible_scale(violation, steps=20):
    """The largest s in [0, 1] (by bisection, to 2^-steps) with violation(s) <= 0, where
    s scales a motion about its start (s = 0: the start, admissible)."""
    if violation(1.0) <= 0.0:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(steps):
        middle = 0.5 * (low + high)
        if violation(middle) <= 0.0:
            low = middle
        else:
            high = middle
    return low


def optimal_excitation(model, duration, q0, seed=0, harmonics=5, base_frequency=0.1,
                       samples=60, candidates=8, iterations=20, limits=None,
                       offset=False, constraint=None, **margins):
    """An excitation trajectory for `identify_arm`: a finite Fourier series per joint
    (`Excitation`) from q0 at rest back to q0 at rest, optimised so that the weighted base
    regressor along it is well conditioned (Swevers et al. 1997).

    duration [s] (the base frequency is rounded to a whole number of periods in it),
    q0 (n,): the start (current) position, inside the position limits; harmonics H;
    limits: `excitation_limits(model, **margins)` unless given. The free coefficients (the
    rest conditions removed) are drawn `candidates` times from a generator seeded with
    `seed`; the best draw is improved by L-BFGS (`iterations`, finite-difference
    gradients) on log cond(W Y_b S) over `samples` points of one period, W: rows divided by
    each joint's RMS effort of the model along the motion, S: unit-norm columns. Each
    evaluation scales every joint's motion down so that it stays within its position,
    velocity and acceleration bounds (so every candidate is admissible). `constraint`: None
    or a function of positions (K, n) returning by how much they violate a further bound
    (>= 0, 0: admissible; e.g. a floor plane for the links, robot_dynamics.motion_limits):
    each candidate's motion is then also scaled down, all joints together, until it is
    admissible. Raises ValueError when q0 is outside the limits or violates `constraint`."""
    optimize = _require('scipy.optimize')
    q0 = _checked_start(model, q0, constraint)
    limits = excitation_limits(model, **margins) if limits is None else limits
    duration = float(duration)
    if not duration > 0.0:
        raise ValueError(f'duration: must be > 0, got {duration}')
    harmonics = int(harmonics)
    if harmonics < 2:
        raise ValueError(f'harmonics: need at least 2, got {harmonics}')
    periods = max(1, int(round(duration * base_frequency)))
    omega = 2.0 * math.pi * periods / duration
    planner = _Planner(model, q0, omega, harmonics, samples, limits, offset, constraint)
    rng = np.random.default_rng(seed)
    best = None
    for _ in range(max(1, int(candidates))):
        x = rng.normal(size=model.n * 2 * planner.h1) / np.tile(
            np.concatenate((planner.orders[1:], planner.orders[1:])), model.n)
        value = planner.objective(x)
        if best is None or value < best[0]:
            best = (value, x)
    value, x = best
    if iterations > 0:
        result = optimize.minimize(planner.objective, x, method='L-BFGS-B',
                                   options={'maxiter': int(iterations), 'eps': 1e-4})
        if result.fun < value:
            value, x = result.fun, result.x
    a, b, *_ = planner.trajectory(x)
    # the bounds were imposed at the optimisation's samples: check them on a fine grid
    # (2000 points per period) and scale a joint down where it exceeds one between samples
    fine = Excitation(duration, omega, q0, a, b)
    dq, qd, qdd = fine.sample(np.linspace(0.0, 2.0 * math.pi / omega, 2001))
    dq = dq - q0
    factor = planner.scale(dq, qd, qdd)
    a, b = a * factor[:, None], b * factor[:, None]
    if np.any(factor < 1.0):
        q, qd, qdd = Excitation(duration, omega, q0, a, b).sample(planner.t)
        value = planner.log_condition(q, qd, qdd)
    return Excitation(duration, omega, q0, a, b, condition=math.exp(value), limits=limits)


def _checked_start(model, q0, constraint):
    """q0 as (n,) floats; ValueError when it is not finite, outside the position limits
    or violates `constraint`."""
    n = model.n
    q0 = np.asarray(q0, dtype=float).reshape(-1)
    if q0.shape != (n,) or not np.all(np.isfinite(q0)):
        raise ValueError(f'q0: expected {n} finite values, got {q0}')
    bad = np.flatnonzero((q0 < model.position_min) | (q0 > model.position_max))
    if bad.size:
        raise ValueError(f'q0[{bad[0]}]: {q0[bad[0]]} is outside the position limits '
                         f'[{model.position_min[bad[0]]}, {model.position_max[bad[0]]}]')
    if constraint is not None and constraint(q0[None, :]) > 0.0:
        raise ValueError(f'q0: {q0.tolist()} violates the constraint')
    return q0


class _Planner:
    """`optimal_excitation`'s objective: the series' free coefficients x (n·2(H−1): per
    joint the sine then the cosine coefficients in the bases of the rest conditions) ->
    the motion at `samples` points of one period, scaled into the bounds, and the log
    condition number of its weighted base regressor."""

    def __init__(self, model, q0, omega, harmonics, samples, limits, offset, constraint):
        self.model, self.q0, self.limits, self.offset = model, q0, limits, offset
        self.constraint = constraint
        self.orders = orders = np.arange(1, harmonics + 1, dtype=float)
        self.Na, self.Nb = _null_basis(orders), _null_basis(orders ** 2)
        self.h1 = harmonics - 1
        self.t = np.linspace(0.0, 2.0 * math.pi / omega, samples, endpoint=False)
        phase = omega * np.outer(self.t, orders)
        self.S, self.C = np.sin(phase), np.cos(phase) - 1.0
        w = omega * orders
        self.Sd, self.Cd = np.cos(phase) * w, -np.sin(phase) * w
        self.Sdd, self.Cdd = -np.sin(phase) * w ** 2, -np.cos(phase) * w ** 2
        self.up = np.maximum(limits['position_max'] - q0, 0.0)
        self.down = np.maximum(q0 - limits['position_min'], 0.0)
        self.base = base_parameters(model, offset)
        self.weights = None

    def scale(self, dq, qd, qdd):
        """Per joint factor (n,) in [0, 1] that brings the motion q0 + dq (with its q̇,
        q̈) within the position, velocity and acceleration bounds, then all joints
        together within `constraint`."""
        n = dq.shape[1]
        limits = self.limits
        with np.errstate(divide='ignore', invalid='ignore'):
            factor = np.ones(n)
            for excess, room in ((np.max(dq, axis=0), self.up),
                                 (np.max(-dq, axis=0), self.down),
                                 (np.max(np.abs(qd), axis=0), limits['velocity']),
                                 (np.max(np.abs(qdd), axis=0), limits['acceleration'])):
                factor = np.minimum(factor, np.where(excess > room, room / excess, 1.0))
        factor = np.nan_to_num(factor)
        if self.constraint is not None:
            constraint, q0 = self.constraint, self.q0
            factor = factor * _admissible_scale(lambda s: constraint(q0 + dq * (s * factor)))
        return factor

    def trajectory(self, x):
        """(a, b (n, H), q, q̇, q̈ (samples, n)) of coefficients x, scaled into bounds."""
        X = x.reshape(self.model.n, 2 * self.h1)
        a, b = X[:, :self.h1] @ self.Na.T, X[:, self.h1:] @ self.Nb.T
        dq = self.S @ a.T + self.C @ b.T
        qd = self.Sd @ a.T + self.Cd @ b.T
        qdd = self.Sdd @ a.T + self.Cdd @ b.T
        factor = self.scale(dq, qd, qdd)
        return a * factor[:, None], b * factor[:, None], self.q0 + dq * factor, \
            qd * factor, qdd * factor

    def objective(self, x):
        return self.log_condition(*self.trajectory(x)[2:])

    def log_condition(self, q, qd, qdd):
        """log cond(W Y_b S) (50 for a singular one); W: each joint's rows divided by its
        RMS effort along the first motion evaluated."""
        model = self.model
        Y = self.base.regressor(arm_regressor(model, q, qd, qdd, offset=self.offset))
        if self.weights is None:
            tau = dynamics.inverse_dynamics(model, q, qd, qdd)
            self.weights = 1.0 / np.maximum(np.sqrt(np.mean(tau ** 2, axis=0)), 1e-3)
        Y = (Y * self.weights[None, :, None]).reshape(-1, Y.shape[-1])
        G = Y.T @ Y
        d = np.sqrt(np.diag(G))
        if not np.all(d > 0.0):
            return 50.0
        eigenvalues = np.linalg.eigvalsh(G / np.outer(d, d))
        if not eigenvalues[0] > 1e-20:
            return 50.0
        return 0.5 * math.log(eigenvalues[-1] / eigenvalues[0])
