"""Fixed-step integration of the forward dynamics (the plant): pure math, no ROS.

The state is (q, q̇); the effort τ is held constant over a step (zero-order hold, as a
digital controller applies it). [TML] §7 integrates the same state with RK4.
"""

import numpy as np

from robot_dynamics import dynamics


def rk4_step(model, q, qd, tau, dt):
    """One classical Runge–Kutta step of q̈ = forward_dynamics(q, q̇, τ); returns (q, q̇).

    One state runs as one call of the current backend's RK4 kernel, chosen by the dynamics
    dispatcher (`dynamics.rk4_step_one`: generated, four articulated-body passes on floats;
    numba, one compiled call); batches, the reference backend and whatever that kernel
    declines go through `dynamics.forward_dynamics` four times."""
    result = dynamics.rk4_step_one(model, q, qd, tau, dt)
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


def semi_implicit_euler_step(model, q, qd, tau, dt):
    """Symplectic Euler: q̇ ← q̇ + dt q̈(q, q̇); q ← q + dt q̇. Cheap, first order."""
    qd_next = qd + dt * dynamics.forward_dynamics(model, q, qd, tau)
    return q + dt * qd_next, qd_next


METHODS = {'rk4': rk4_step, 'euler': semi_implicit_euler_step}


def step_with_effort(stepper, model, q, qd, tau, dt, extra):
    """One step of `stepper` (a METHODS entry) with `extra(q, q̇)` (n,) added to the held
    effort `tau` at every stage (RK4) or evaluation (Euler): a state-dependent effort such
    as an external wrench's J(q)ᵀ w. Returns (q, q̇)."""
    fd = dynamics.forward_dynamics

    def acceleration(q_, qd_):
        return fd(model, q_, qd_, tau + extra(q_, qd_))
    return _stages(stepper, acceleration, q, qd, dt)


def _stages(stepper, acceleration, q, qd, dt):
    """The stages of `stepper` (RK4 or semi-implicit Euler) on q̈ = acceleration(q, q̇)."""
    if stepper is semi_implicit_euler_step:
        qd_next = qd + dt * acceleration(q, qd)
        return q + dt * qd_next, qd_next
    k1v = acceleration(q, qd)
    k2q = qd + 0.5 * dt * k1v
    k2v = acceleration(q + 0.5 * dt * qd, k2q)
    k3q = qd + 0.5 * dt * k2v
    k3v = acceleration(q + 0.5 * dt * k2q, k3q)
    k4q = qd + dt * k3v
    k4v = acceleration(q + dt * k3q, k4q)
    return (q + dt / 6.0 * (qd + 2.0 * k2q + 2.0 * k3q + k4q),
            qd + dt / 6.0 * (k1v + 2.0 * k2v + 2.0 * k3v + k4v))


def step(model, q, qd, tau, dt, method='rk4'):
    try:
        stepper = METHODS[method]
    except KeyError:
        raise ValueError(f'integration method {method!r} unknown, expected one of '
                         f'{sorted(METHODS)}') from None
    q = np.asarray(q, dtype=float)
    qd = np.asarray(qd, dtype=float)
    return stepper(model, q, qd, np.asarray(tau, dtype=float), dt)


# ---------------------------------------------------------------------- mechanical stops

# The stop of joint i is a spring–damper acting only beyond its limit, with stiffness
# k_i = m_i ω² and damping c_i = 2 ζ m_i ω, m_i = 1 / (M⁻¹(q))_ii the inertia joint i
# presents to an effort of its own (the other joints moving freely). One stop alone then
# moves the penetration p as p̈ = −ω² p − 2ζω ṗ: critically damped (ζ = 1) at ω = STOP_OMEGA_H
# / h whatever the joint's inertia. With s stops engaged at once the modes solve
# λ² + 2ζωμ λ + ω²μ = 0, μ an eigenvalue of D^½ (M⁻¹)_SS D^½ (D = diag m_i: unit diagonal,
# so 0 < μ ≤ s); the fastest |λ| < 2μω ≤ 2sω, and RK4 is stable for |λ h| < 2.78 on the real
# axis: ω h = 0.2 keeps it stable with up to 6 stops engaged together (2 · 6 · 0.2 = 2.4; the
# bound μ ≤ s is reached only by fully coupled joints) and resolves one contact in
# 1 / (ω h) = 5 steps per time constant. Penetration: at most v / (e ω) after an impact at
# speed v (e.g. 1.8 mrad per rad/s at h = 1 ms), plus τ / k under a steady effort τ.
# A light joint with a strong drive (the PUMA 560's wrist without rotor inertia:
# k_6 = 2 N m/rad at h = 1 ms) could push far into such a spring: MAX_PENETRATION is a hard
# end behind it, an inelastic stop (the joint is put back to it and loses its outward
# velocity), so no effort winds a joint up.
STOP_OMEGA_H = 0.2
STOP_DAMPING_RATIO = 1.0
MAX_PENETRATION = 0.05   # rad | m beyond a limit
GAINS_REUSE = 0.01   # rad | m: the stop gains are recomputed when a joint moved further


class JointStops:
    """Mechanical stops at `lower` and `upper` (n,) [rad | m]; an infinite limit has none.

    `step(stepper, model, q, qd, tau, dt)` integrates one step of `stepper` (a METHODS
    entry) with the stops' efforts inside the dynamics and returns (q, q̇, stop effort at
    the end of the step (n,), read-only). Far from the stops (start and end of the plain step inside
    the limits) it is the plain step, unchanged (bit for bit); otherwise the step is redone
    with the stop efforts added to τ at every stage (RK4) or evaluation (Euler), and a joint
    more than `max_penetration` beyond its limit is put back there without its outward
    velocity."""

    def __init__(self, lower, upper, omega_h=STOP_OMEGA_H, damping_ratio=STOP_DAMPING_RATIO,
                 max_penetration=MAX_PENETRATION):
        self.lower = np.array(lower, dtype=float)
        self.upper = np.array(upper, dtype=float)
        if self.lower.shape != self.upper.shape or self.lower.ndim != 1:
            raise ValueError(f'JointStops: lower and upper need the same (n,) shape, got '
                             f'{self.lower.shape} and {self.upper.shape}')
        if np.isnan(self.lower).any() or np.isnan(self.upper).any() \
                or not (self.lower < self.upper).all():
            raise ValueError('JointStops: every lower limit must be below its upper limit')
        self.omega_h = float(omega_h)
        self.max_penetration = float(max_penetration)
        self.damping_ratio = float(damping_ratio)
        self.any = bool(np.isfinite(self.lower).any() or np.isfinite(self.upper).any())
        self._gains = None       # (model, dt, q, k, c) of the last `gains`
        self._inside = None      # the last plain step's result, known to be inside
        self._zero = np.zeros(self.lower.shape)
        self._zero.setflags(write=False)     # returned as the stop effort far from the stops

    def inside(self, q):
        """True when every joint is within its limits (limits included)."""
        return bool(((q >= self.lower) & (q <= self.upper)).all())

    def outside(self, q):
        """Signed distance beyond the limits (n,): > 0 above `upper`, < 0 below `lower`,
        0 within."""
        q = np.asarray(q, dtype=float)
        return np.where(q > self.upper, q - self.upper,
                        np.where(q < self.lower, q - self.lower, 0.0))

    def gains(self, model, q, dt):
        """(stiffness k (n,) [N m/rad | N/m], damping c (n,) [N m s/rad | N s/m]) at q.

        (M⁻¹)_ii from n + 1 forward-dynamics calls at rest (column i of M⁻¹ is the change of
        q̈ under a unit effort on joint i), reused while no joint has moved more than
        GAINS_REUSE from where they were computed (M changes by well under 1 % there)."""
        cached = self._gains
        if (cached is not None and cached[0] is model and cached[1] == dt
                and np.max(np.abs(q - cached[2])) <= GAINS_REUSE):
            return cached[3], cached[4]
        n = len(q)
        states = np.repeat(np.asarray(q, dtype=float)[None, :], n + 1, axis=0)
        efforts = np.vstack([np.zeros(n), np.eye(n)])
        qdd = dynamics.forward_dynamics(model, states, np.zeros((n + 1, n)), efforts)
        m = 1.0 / np.diag(qdd[1:] - qdd[0])
        omega = self.omega_h / dt
        k, c = m * omega * omega, 2.0 * self.damping_ratio * m * omega
        self._gains = (model, dt, np.array(q, dtype=float), k, c)
        return k, c

    def effort(self, q, qd, k, c):
        """The stops' efforts (n,) at (q, q̇): only beyond a limit, only pushing back."""
        tau = np.zeros_like(q)
        over = q - self.upper
        up = over > 0.0
        if up.any():
            tau[up] = -np.maximum(0.0, k[up] * over[up] + c[up] * qd[up])
        under = self.lower - q
        down = under > 0.0
        if down.any():
            tau[down] = np.maximum(0.0, k[down] * under[down] - c[down] * qd[down])
        return tau

    def step(self, stepper, model, q, qd, tau, dt, extra=None):
        """One step of `stepper` with the stops; (q, q̇, stop effort (n,)). `extra(q, q̇)`:
        an effort added at every stage besides the stops' (`step_with_effort`)."""
        if extra is None:
            plain = stepper
        else:
            def plain(model_, q_, qd_, tau_, dt_):
                return step_with_effort(stepper, model_, q_, qd_, tau_, dt_, extra)
        if not self.any:
            q_next, qd_next = plain(model, q, qd, tau, dt)
            return q_next, qd_next, self._zero
        if q is self._inside or self.inside(q):   # else at a stop: the plain step would
            q_next, qd_next = plain(model, q, qd, tau, dt)   # be redone
            if self.inside(q_next):
                self._inside = q_next
                return q_next, qd_next, self._zero
        k, c = self.gains(model, q, dt)
        fd = dynamics.forward_dynamics

        def acceleration(q_, qd_):
            total = tau + self.effort(q_, qd_, k, c)
            if extra is not None:
                total = total + extra(q_, qd_)
            return fd(model, q_, qd_, total)
        q_next, qd_next = _stages(stepper, acceleration, q, qd, dt)
        over = q_next > self.upper + self.max_penetration
        under = q_next < self.lower - self.max_penetration
        if over.any() or under.any():        # the hard end: inelastic
            q_next = np.clip(q_next, self.lower - self.max_penetration,
                             self.upper + self.max_penetration)
            qd_next = np.where(over, np.minimum(qd_next, 0.0),
                               np.where(under, np.maximum(qd_next, 0.0), qd_next))
        return q_next, qd_next, self.effort(q_next, qd_next, k, c)
