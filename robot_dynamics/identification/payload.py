"""Payload identification: the arm's own motion and efforts give the load it carries.

Pure numpy, no ROS. The rigid-body inverse dynamics are linear in the ten inertial
parameters of a body (Atkeson, An & Hollerbach 1986), so the efforts a payload adds are

    τ = τ_0(q, q̇, q̈) + Y(q, q̇, q̈) π

with τ_0 the inverse dynamics of the model without the payload (its friction and armature
included) and π the payload's parameters (`payload_parameters`):

    π = [m, m c_x, m c_y, m c_z, I_xx, I_xy, I_xz, I_yy, I_yz, I_zz]

c the centre of mass and I the inertia **about the origin of the payload frame** (the last
DH link frame, where `RobotModel.with_payload` puts a payload; for a URDF model the tip
link's frame), all in that frame's axes. `payload_regressor` computes Y, `PayloadEstimator`
fits π to a stream of measured states and applied efforts, `exciting_trajectory` makes a
motion that determines π. The theory, the choices and the measured limits are in
doc/payload-identification.md.

The same regressor identifies the model's own last link: a model whose last link has zero
mass and inertia, with the link's parameters as the "payload" (its centre of mass and
inertia are then given in the last link frame, as for any payload).

References:
    C. G. Atkeson, C. H. An, J. M. Hollerbach, "Estimation of inertial parameters of
    manipulator loads and links", Int. J. Robotics Research 5(3), 101–119, 1986.
"""

import math
import warnings
from typing import NamedTuple

import numpy as np

from robot_dynamics.dynamics import algorithms
from robot_dynamics import dynamics, simulation
from robot_dynamics.control import ComputedTorqueLaw

__all__ = ['payload_regressor', 'payload_parameters', 'payload_from_parameters',
           'physical_consistency', 'PayloadEstimator', 'PayloadEstimate',
           'exciting_trajectory', 'ExcitationWarning', 'sampled_reference',
           'identify_in_closed_loop', 'PARAMETER_NAMES']

PARAMETER_NAMES = ('m', 'm*c_x', 'm*c_y', 'm*c_z', 'I_xx', 'I_xy', 'I_xz', 'I_yy', 'I_yz',
                   'I_zz')


# ---------------------------------------------------------------------- parameters


def payload_parameters(mass, com, inertia):
    """π (10,) of a body: mass [kg], centre of mass `com` (3,) [m] and inertia about the
    centre of mass (URDF order ixx, ixy, ixz, iyy, iyz, izz, or 3×3) [kg m²], both in the
    payload frame. The inertia in π is about the frame's origin (parallel-axis theorem)."""
    mass = float(mass)
    com = np.asarray(com, dtype=float).reshape(3)
    inertia = _inertia_matrix(inertia)
    about_origin = inertia + algorithms.steiner(mass, com)
    return np.concatenate(([mass], mass * com, _urdf6(about_origin)))


def payload_from_parameters(pi):
    """(mass, com (3,), inertia (6,) about the centre of mass in URDF order) from π.

    The inverse of `payload_parameters`. A zero mass gives a zero centre of mass (the first
    moment then carries no position); a negative mass is returned as it is (see
    `physical_consistency`)."""
    pi = np.asarray(pi, dtype=float).reshape(10)
    mass = float(pi[0])
    com = pi[1:4] / mass if mass != 0.0 else np.zeros(3)
    about_origin = _inertia_matrix(pi[4:])
    centroidal = about_origin - algorithms.steiner(mass, com)
    return mass, com, np.array(_urdf6(centroidal))


def _inertia_matrix(values):
    values = np.asarray(values, dtype=float)
    if values.shape == (3, 3):
        return values
    ixx, ixy, ixz, iyy, iyz, izz = values.reshape(6)
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


def _urdf6(inertia):
    return [inertia[0, 0], inertia[0, 1], inertia[0, 2], inertia[1, 1], inertia[1, 2],
            inertia[2, 2]]


# ---------------------------------------------------------------------- regressor


def payload_regressor(model, q, qd, qdd):
    """Y (n, 10) for one state, (B, n, 10) for a batch: the efforts that the payload's
    parameters π (`payload_parameters`, inertia about the payload frame's origin) add,

        inverse_dynamics(model.with_payload(mass, com, inertia), q, q̇, q̈)
            = inverse_dynamics(model.with_payload(), q, q̇, q̈) + Y @ π.

    The payload frame is the last DH link frame (the tip link of a URDF model). Y does not
    depend on the model's masses, friction, armature or payload, only on its kinematics
    and gravity.

    Method: the Newton–Euler forward pass (as `algorithms.rnea`) gives the payload frame's
    angular velocity ω, angular acceleration ω̇ and origin acceleration a (gravity as a
    base acceleration −g); the wrench the last link exerts on the payload is linear in π
    (Atkeson, An & Hollerbach 1986, eq. 6–8, moments about the frame origin):

        f = m a + ω̇ × (m c) + ω × (ω × (m c))
        n = I ω̇ + ω × (I ω) + (m c) × a

    and the backward pass carries each of its ten columns down the chain to the joints.
    """
    (q_b, qd_b, qdd_b), single = dynamics._states(model, ('q', q), ('qd', qd), ('qdd', qdd))
    ch = model.chain
    B, n = q_b.shape
    R, p = algorithms.joint_transforms(ch, q_b)
    # forward pass: the last body's velocities and accelerations in its own frame
    w, wd, vd = list(algorithms.body_motions(ch, R, p, qd_b, qdd_b, model.gravity))[-1]
    # the payload frame (R_tip, p_tip in the last body): its motion in its own axes
    p_tip = np.broadcast_to(ch.p_tip, (B, 3))
    a_tip = vd + algorithms.cross(wd, p_tip) + algorithms.cross(w, algorithms.cross(w, p_tip))
    w_t = w @ ch.R_tip
    wd_t = wd @ ch.R_tip
    a_t = a_tip @ ch.R_tip
    # wrench on the payload per parameter: force F (B, 3, 10), moment N about the origin
    F = np.zeros((B, 3, 10))
    N = np.zeros((B, 3, 10))
    w_skew = algorithms.skew(w_t)
    F[:, :, 0] = a_t
    F[:, :, 1:4] = algorithms.skew(wd_t) + w_skew @ w_skew
    N[:, :, 1:4] = -algorithms.skew(a_t)                  # (m c) × a = −a × (m c)
    N[:, :, 4:] = algorithms.inertia_operator(wd_t) + w_skew @ algorithms.inertia_operator(w_t)
    # into the last body's axes, moment about its origin (as algorithms.tip_wrench_in_body)
    f = np.einsum('ij,bjk->bik', ch.R_tip, F)
    nm = np.einsum('ij,bjk->bik', ch.R_tip, N) + algorithms.skew(p_tip) @ f
    # backward pass (algorithms.rnea): joint i takes the z component of f or n
    Y = np.empty((B, n, 10))
    for i in range(n - 1, -1, -1):
        Y[:, i] = f[:, 2] if ch.prismatic[i] else nm[:, 2]
        if i > 0:
            f = R[:, i] @ f
            nm = R[:, i] @ nm + algorithms.skew(p[:, i]) @ f
    return Y[0] if single else Y


# ---------------------------------------------------------------------- estimator


class PayloadEstimate(NamedTuple):
    """What `PayloadEstimator.estimate` found.

    mass [kg], com (3,) [m] and inertia (6,) [kg m²] (URDF order ixx, ixy, ixz, iyy, iyz,
    izz, about the centre of mass) in the payload frame, ready for
    ``model.with_payload(mass=, com=, inertia=)``; parameters π (10,) and their standard
    deviations parameters_std (10,) and covariance (10, 10) (`payload_parameters` order,
    inertia about the frame origin); mass_std [kg] and com_std (3,) [m] (first-order
    propagation of the covariance); condition_number of the weighted regressor in physical
    scaling (see `PayloadEstimator`), inf when the data leave a direction undetermined;
    samples (rows of the least-squares problem, one per joint and kept sample); excited:
    the data determine π (condition number and mass uncertainty within the estimator's
    limits); consistent: mass ≥ 0 and the centroidal inertia positive semi-definite with
    principal moments satisfying the triangle inequality; reason: why the estimate is not
    usable, '' when it is (`usable` = excited and consistent). mass, com and inertia are
    moved onto the consistent set when they are outside it by less than the estimate's
    precision (see `_nearest_consistent`); parameters keep the raw least-squares values.
    """

    mass: float
    com: np.ndarray
    inertia: np.ndarray
    parameters: np.ndarray
    parameters_std: np.ndarray
    covariance: np.ndarray
    mass_std: float
    com_std: np.ndarray
    condition_number: float
    samples: int
    excited: bool
    consistent: bool
    reason: str

    @property
    def usable(self):
        return self.excited and self.consistent

    @property
    def payload(self):
        """The keyword arguments of `RobotModel.with_payload`: mass, com, inertia."""
        return {'mass': float(self.mass), 'com': tuple(float(c) for c in self.com),
                'inertia': [float(v) for v in self.inertia]}


def physical_consistency(mass, inertia, tolerance=1e-9):
    """'' when a body is physically possible, else why not: mass ≥ 0 and the centroidal
    inertia (6,) or 3×3 positive semi-definite with principal moments satisfying the
    triangle inequality λ_k ≤ λ_i + λ_j (Traversaro, Brossette, Escande & Nori 2016;
    Wensing, Kim & Slotine 2017). `tolerance` [kg m²] absorbs rounding."""
    if not math.isfinite(mass) or mass < 0.0:
        return f'mass {mass:.4g} kg is negative'
    moments = np.linalg.eigvalsh(_inertia_matrix(inertia))
    if not np.all(np.isfinite(moments)):
        return 'inertia is not finite'
    if moments[0] < -tolerance:
        return (f'inertia is not positive semi-definite (principal moments '
                f'{np.array2string(moments, precision=4)} kg m²)')
    if moments[2] > moments[0] + moments[1] + tolerance:
        return (f'principal moments {np.array2string(moments, precision=4)} kg m² violate the '
                'triangle inequality')
    return ''


class PayloadEstimator:
    """Least-squares payload identification from the control loop's own samples.

    Feed it every control cycle with `add(t, q, qd, tau)`: the measured position and
    velocity at time t and the effort applied from t on (held until the next sample, as a
    digital controller's zero-order hold does). `estimate()` returns a `PayloadEstimate`
    of the payload on the last link (it replaces any payload the model already has:
    τ_0 is the model's inverse dynamics without payload, friction and armature included).

    **Rows without a measured acceleration.** Over one control period [t_k, t_k+1] the
    effort τ_k is constant, so the period's mean acceleration (q̇_k+1 − q̇_k)/Δt and the
    mid-period state pair with τ_k (to O(Δt²)):

        y_k = τ_k − τ_0(q̄, q̄̇, Δq̇/Δt) = Y(q̄, q̄̇, Δq̇/Δt) π

    The difference of measured velocities is noisy, so every row (y_k and the ten columns
    of Y) then goes through the same low-pass filter (two first-order stages, cut-off
    `cutoff_frequency`). A joint with Coulomb friction whose velocity changes sign within
    the period or is below `friction_velocity` [rad/s | m/s] at either end has its row of
    that period set to zero: a reversing or sticking joint's friction is not
    f_c·sign(q̇). Because each row is linear in π, filtering both sides with the
    same linear filter keeps y_f = Y_f π exact — the filter never has to commute with the
    nonlinear dynamics — while y_f and Y_f only see the acceleration through the filter:
    the filtered differentiator of velocity of the "parallel filtering" used in robot
    identification (M. Gautier & P. Poignet, "Extended Kalman filtering and weighted least
    squares dynamic identification of robot", Control Engineering Practice 9(12), 2001;
    W. Khalil & E. Dombre, Modeling, Identification and Control of Robots, Hermes Penton
    Science, 2002). Positions are never differentiated.

    **Least squares.** Filtered rows are kept every 1/(4·cutoff_frequency) s (decimation:
    the filter leaves little above that rate, so the kept rows are not far from
    independent) and summed into per-joint normal equations A_j = Σ Y_jᵀY_j,
    b_j = Σ Y_jᵀy_j (O(n·10²) numbers per row, no growing storage). Samples are processed
    in blocks of `block` (one vectorised regressor call per block: about 1.3 ms per 20
    samples on a 7-joint arm, 60 µs per sample); with ``block=0`` `add` only appends and
    the samples wait for `update()` or `estimate()`, e.g. from a slower timer than the
    control loop. `estimate()` solves the ordinary least squares, estimates each joint's
    residual variance σ_j², and solves again weighted by 1/σ_j² (weighted least squares
    as in Gautier & Poignet 2001 and J. Swevers, W. Verdonck & J. De Schutter, "Dynamic
    model identification for industrial robots", IEEE Control Systems Magazine 27(5),
    2007): joints with large efforts do not drown the wrist. Batch least squares, not
    recursive: the payload is constant while it is identified, and the normal equations
    give the covariance and the excitation measure directly. The covariance assumes
    independent kept rows; it is a lower bound when the residual is not white (see
    doc/payload-identification.md for measured errors against it).

    **Excitation measure.** The condition number of the weighted regressor with π in
    physical units scaled by `length_scale` L (m, m·c/L, I/L²: all in kg) — inf when the
    data leave a combination of parameters undetermined (holding still determines no
    inertia). `excited` requires condition_number ≤ `max_condition`, at least
    `min_samples` kept rows and mass_std ≤ `max_mass_std`.

    **Arguments.** model: the controller's `RobotModel` (its payload is ignored);
    cutoff_frequency [Hz] of the row filter; max_condition, min_samples, max_mass_std [kg]
    and length_scale [m]: the excitation test above; max_gap [s]: a longer interval
    between samples forms no row; block: samples per processing step (0: only on
    `update`/`estimate`); friction_velocity [rad/s | m/s]: see Coulomb friction above;
    method: 'ls' (least squares, above) or 'iv' (instrumental variables, below).

    **Instrumental variables** (``method='iv'``). Noise on the measured q and q̇ enters Y
    itself (errors in variables), which biases least squares. With 'iv' every sample also
    carries the reference the controller tracks, (q_d, q̇_d, q̈_d) of the same cycle;
    its regressor Z, built with the same mid-period/ZOH construction (mean reference
    acceleration over the period) and the same filter and decimation, is the instrument:
    correlated with Y, not with the measurement noise (A. Janot, P.-O. Vandanjon &
    M. Gautier, "A Generic Instrumental Variable Approach for Industrial Robot
    Identification", IEEE Trans. Control Systems Technology 22(1), 2014). Per joint
    ZᵀY, Zᵀy and ZᵀZ are summed; θ = (Σ_j Z_jᵀY_j/σ_j²)⁻¹ Σ_j Z_jᵀy_j/σ_j², σ_j² from the
    IV residual, and its covariance is the IV sandwich M⁻¹ (Σ_j Z_jᵀZ_j/σ_j²) M⁻ᵀ with
    M = Σ_j Z_jᵀY_j/σ_j². The condition number is that of the weighted instruments (what
    the planned motion excites, on the scale of least squares's); a singular M also
    makes it inf. `add` without a reference is refused.
    """

    def __init__(self, model, cutoff_frequency=5.0, max_condition=300.0, min_samples=100,
                 max_mass_std=0.05, length_scale=0.1, max_gap=0.1, block=20,
                 friction_velocity=0.05, method='ls'):
        if method not in ('ls', 'iv'):
            raise ValueError(f"method: must be 'ls' or 'iv', got {method!r}")
        self.method = method
        self.model = model
        self._model0 = model.with_payload()
        self.cutoff_frequency = _positive('cutoff_frequency', cutoff_frequency)
        self.max_condition = _positive('max_condition', max_condition)
        self.min_samples = int(min_samples)
        self.max_mass_std = _positive('max_mass_std', max_mass_std)
        self.length_scale = _positive('length_scale', length_scale)
        self.max_gap = _positive('max_gap', max_gap)
        self.block = max(0, int(block))
        self.friction_velocity = float(friction_velocity)
        if not math.isfinite(self.friction_velocity) or self.friction_velocity < 0.0:
            raise ValueError(f'friction_velocity: must be finite and >= 0, got '
                             f'{friction_velocity}')
        self._scale = np.array([1.0] + [length_scale] * 3 + [length_scale ** 2] * 6)
        self.reset()

    def reset(self):
        """Forget every sample (e.g. after the payload changed)."""
        n = self.model.n
        self._previous = None
        self._pending = []
        self._stage1 = np.zeros((n, 11))
        self._stage2 = np.zeros((n, 11))
        self._since_kept = 0.0
        self._A = np.zeros((n, 10, 10))
        self._b = np.zeros((n, 10))
        self._yy = np.zeros(n)
        self._rows = 0
        self._zstage1 = np.zeros((n, 10))
        self._zstage2 = np.zeros((n, 10))
        self._ZY = np.zeros((n, 10, 10))
        self._Zy = np.zeros((n, 10))
        self._ZZ = np.zeros((n, 10, 10))

    @property
    def samples(self):
        """Filtered rows kept so far (per joint)."""
        return self._rows

    def add(self, t, q, qd, tau, reference=None):
        """One control cycle: time t [s] (increasing), measured q, q̇ (n,) and the effort
        τ (n,) applied from t on; reference: (q_d, q̇_d, q̈_d) tracked in this cycle
        (required with method 'iv', ignored by 'ls'). Raises ValueError naming the field
        for a wrong shape, a non-finite value, a missing reference or a time that does
        not increase; nothing is stored then."""
        n = self.model.n
        if self.method == 'iv':
            if reference is None:
                raise ValueError("reference: method 'iv' needs the reference (q_d, qd_d, "
                                 "qdd_d) of every sample")
            if len(reference) != 3:
                raise ValueError(f'reference: expected (q_d, qd_d, qdd_d), got '
                                 f'{len(reference)} arrays')
            reference = _checked_arrays(zip(('reference.q', 'reference.qd',
                                             'reference.qdd'), reference), n)
        else:
            reference = None
        t = float(t)
        if not math.isfinite(t):
            raise ValueError(f't: non-finite time {t}')
        values = list(_checked_arrays((('q', q), ('qd', qd), ('tau', tau)), n))
        if self._previous is not None and t <= self._previous[0]:
            raise ValueError(f't: time {t} s does not increase (previous sample at '
                             f'{self._previous[0]} s)')
        previous, self._previous = self._previous, (t, *values, reference)
        if previous is None:
            return
        dt = t - previous[0]
        if dt > self.max_gap:      # a lost sample or a pause: no mean acceleration to form
            return
        self._pending.append((dt, previous[1], values[0], previous[2], values[1], previous[3],
                              previous[4], reference))
        if self.block and len(self._pending) >= self.block:
            self._process()

    def update(self):
        """Process the samples buffered by `add` now (`estimate` does it too). With
        ``block=0`` `add` only checks and appends (about 10 µs) and a slower timer calls this
        (about 20 µs per buffered sample, vectorised)."""
        self._process()

    def _process(self):
        if not self._pending:
            return
        columns = list(zip(*self._pending))
        dt, q0, q1, qd0, qd1, tau = (np.array(column) for column in columns[:6])
        references = columns[6:]
        self._pending = []
        q_mid, qd_mid, qdd = 0.5 * (q0 + q1), 0.5 * (qd0 + qd1), (qd1 - qd0) / dt[:, None]
        Y = payload_regressor(self.model, q_mid, qd_mid, qdd)
        # one-state calls: the generated kernels are fastest per state (a batch call of
        # the generated backend loops over the states in Python anyway)
        y = tau - np.array([dynamics.inverse_dynamics(self._model0, *state)
                            for state in zip(q_mid, qd_mid, qdd)])
        rows = np.concatenate((Y * self._scale, y[:, :, None]), axis=2)     # (k, n, 11)
        # Coulomb friction is not f_c·sign(q̇) while a joint reverses or sticks: that
        # joint's row of the period becomes 0 = 0·π (the other joints' rows of the period
        # are unaffected: friction acts per joint)
        slow = (np.sign(qd0) != np.sign(qd1)) | (
            np.minimum(np.abs(qd0), np.abs(qd1)) < self.friction_velocity)
        stiction = slow & (self._model0.coulomb_friction > 0.0)
        rows[stiction] = 0.0
        instruments = None
        if self.method == 'iv':
            r0 = [np.array([r[i] for r in references[0]]) for i in range(3)]
            r1 = [np.array([r[i] for r in references[1]]) for i in range(3)]
            instruments = payload_regressor(self.model, 0.5 * (r0[0] + r1[0]),
                                            0.5 * (r0[1] + r1[1]),
                                            (r1[1] - r0[1]) / dt[:, None]) * self._scale
            instruments[stiction] = 0.0
        alpha = -np.expm1(-2.0 * math.pi * self.cutoff_frequency * dt)
        keep_every = 0.25 / self.cutoff_frequency
        s1, s2 = self._stage1, self._stage2
        for k in range(rows.shape[0]):
            s1 += alpha[k] * (rows[k] - s1)
            s2 += alpha[k] * (s1 - s2)
            if instruments is not None:
                self._zstage1 += alpha[k] * (instruments[k] - self._zstage1)
                self._zstage2 += alpha[k] * (self._zstage1 - self._zstage2)
            self._since_kept += dt[k]
            if self._since_kept >= keep_every:
                self._since_kept = 0.0
                Yf, yf = s2[:, :10], s2[:, 10]
                self._A += np.einsum('ji,jk->jik', Yf, Yf)
                self._b += Yf * yf[:, None]
                self._yy += yf * yf
                self._rows += 1
                if instruments is not None:
                    Zf = self._zstage2
                    self._ZY += np.einsum('ji,jk->jik', Zf, Yf)
                    self._Zy += Zf * yf[:, None]
                    self._ZZ += np.einsum('ji,jk->jik', Zf, Zf)

    def estimate(self):
        """The current `PayloadEstimate` (processes the samples still buffered)."""
        self._process()
        n, rows = self.model.n, self._rows
        if rows * n < 10:
            return self._unusable(f'not excited: {rows} samples kept, need at least '
                                  f'{self.min_samples}')
        if self.method == 'iv':
            theta, cov, cond = self._instrumental_solution()
        else:
            theta, cov, cond = self._weighted_solution()
        pi = theta * self._scale
        cov = cov * np.outer(self._scale, self._scale)
        std = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        mass_std, com_std = float(std[0]), _com_std(pi, cov)
        reasons = []
        excited = True
        if rows < self.min_samples:
            excited = False
            reasons.append(f'not excited: {rows} samples kept, need at least {self.min_samples}')
        if not cond <= self.max_condition:
            excited = False
            reasons.append(f'not excited: condition number {cond:.4g} > {self.max_condition:g} '
                           '(the motion does not determine every inertial parameter)')
        elif mass_std > self.max_mass_std:
            excited = False
            reasons.append(f'not excited: mass uncertainty {mass_std:.3g} kg > '
                           f'{self.max_mass_std:g} kg')
        # the precision asked for (max_mass_std, in kg for every scaled parameter) bounds
        # how far outside the consistent set an estimate may be and still be moved onto it
        mass, com, inertia, inconsistency = _nearest_consistent(
            pi, std, max(3.0 * mass_std, self.max_mass_std),
            self.max_mass_std * self.length_scale ** 2)
        if inconsistency:
            reasons.append('not physically consistent: ' + inconsistency)
        return PayloadEstimate(mass, com, inertia, pi, std, cov, mass_std, com_std,
                               float(cond), rows * n, excited, not inconsistency,
                               '; '.join(reasons))

    def _weighted_solution(self):
        """θ (scaled π), its covariance and the condition number: ordinary least squares,
        per-joint residual variances, then least squares weighted by them."""
        A, b = self._A, self._b
        theta = _solve(A.sum(axis=0), b.sum(axis=0))[0]
        variance = self._residual_variance(theta)
        A_w = np.einsum('jik,j->ik', A, 1.0 / variance)
        b_w = b.T @ (1.0 / variance)
        theta, cov, cond = _solve(A_w, b_w)
        return theta, cov, cond

    def _residual_variance(self, theta):
        """Per-joint residual variance of the measured rows at θ (floored)."""
        A, b, yy, rows = self._A, self._b, self._yy, self._rows
        rss = yy - 2.0 * b @ theta + np.einsum('i,jik,k->j', theta, A, theta)
        variance = np.clip(rss, 0.0, None) / max(rows - 10.0 / self.model.n, 1.0)
        floor = 1e-12 * max(float(np.max(yy)) / rows, 1e-300)
        return np.maximum(variance, max(floor, 1e-6 * float(np.max(variance))))

    def _instrumental_solution(self):
        """θ (scaled π) of the instrumental-variable estimate, its sandwich covariance
        and the condition number of the weighted instruments."""
        theta = np.zeros(10)
        for weights in (np.ones(self.model.n), None):
            if weights is None:
                weights = 1.0 / self._residual_variance(theta)
            M = np.einsum('jik,j->ik', self._ZY, weights)
            ZZ = np.einsum('jik,j->ik', self._ZZ, weights)
            cond = _solve(ZZ, np.zeros(10))[2]
            if not math.isfinite(cond) or np.linalg.cond(M) > 1e12:
                return np.zeros(10), np.full((10, 10), math.inf), math.inf
            theta = np.linalg.solve(M, self._Zy.T @ weights)
        M_inv = np.linalg.inv(M)
        return theta, M_inv @ ZZ @ M_inv.T, cond

    def _unusable(self, reason):
        nan3 = np.full(3, math.nan)
        return PayloadEstimate(math.nan, nan3, np.full(6, math.nan), np.full(10, math.nan),
                               np.full(10, math.nan), np.full((10, 10), math.nan), math.nan,
                               nan3, math.inf, self._rows * self.model.n, False, False, reason)


def _checked_arrays(named_values, n):
    """Copies of the (name, value) arrays as float (n,), or ValueError naming the field."""
    out = []
    for name, value in named_values:
        array = np.asarray(value, dtype=float)
        if array.shape != (n,):
            raise ValueError(f'{name}: expected shape ({n},), got {array.shape}')
        if not np.all(np.isfinite(array)):
            raise ValueError(f'{name}: non-finite value in {array}')
        out.append(array.copy())
    return tuple(out)


def _nearest_consistent(pi, std, mass_tolerance, inertia_tolerance):
    """(mass, com, centroidal inertia (6,), '' or why not consistent) of π.

    An estimate of a body on the edge of consistency (a point mass has a zero centroidal
    inertia, no payload a zero mass) falls outside it as often as inside. Within the
    estimate's precision it is moved onto the consistent set: a mass below zero by at most
    `mass_tolerance` [kg] becomes 0 (centre of mass 0, the inertia about the frame origin
    as centroidal inertia); principal moments are projected onto the set (negative ones
    raised to 0, then, if the largest exceeds the sum of the others, it is lowered and
    they are raised by a third of the excess), accepted when no moment moves by more than
    max(`inertia_tolerance` [kg m²], 1 % of the largest moment about the frame origin,
    3 standard deviations of the inertia entries). Beyond, the raw values are returned
    with the reason."""
    mass, com, inertia = payload_from_parameters(pi)
    about_origin = _inertia_matrix(pi[4:])
    if -mass_tolerance <= mass < 0.0:
        mass, com, inertia = 0.0, np.zeros(3), np.array(_urdf6(about_origin))
    if mass < 0.0 or not math.isfinite(mass):
        return mass, com, inertia, physical_consistency(mass, inertia)
    moments, axes = np.linalg.eigh(_inertia_matrix(inertia))
    projected = np.clip(moments, 0.0, None)
    excess = projected[2] - projected[0] - projected[1]
    if excess > 0.0:
        projected = projected + excess / 3.0 * np.array([1.0, 1.0, -1.0])
    spread = float(np.max(np.abs(np.linalg.eigvalsh(about_origin))))
    inertia_std = float(np.max(std[4:])) if np.all(np.isfinite(std[4:])) else 0.0
    tolerance = max(inertia_tolerance, 0.01 * spread, 3.0 * inertia_std)
    if np.max(np.abs(projected - moments)) > tolerance:
        return mass, com, inertia, physical_consistency(mass, inertia)
    return mass, com, np.array(_urdf6((axes * projected) @ axes.T)), ''


def _solve(A, b):
    """Solution, inverse and condition number (of the regressor: √ of A's) of the normal
    equations A θ = b; directions with no information are left at zero and make the
    condition number inf."""
    eigenvalues, vectors = np.linalg.eigh(0.5 * (A + A.T))
    top = float(eigenvalues[-1])
    if not top > 0.0:
        return np.zeros(len(b)), np.full(A.shape, math.inf), math.inf
    kept = eigenvalues > 1e-14 * top
    inverse_values = np.where(kept, 1.0 / np.where(kept, eigenvalues, 1.0), 0.0)
    inverse = (vectors * inverse_values) @ vectors.T
    cond = math.sqrt(top / eigenvalues[0]) if np.all(kept) else math.inf
    undetermined = np.sum(vectors[:, ~kept] ** 2, axis=1) > 1e-12   # parameters touched
    inverse[undetermined, :] = math.inf
    inverse[:, undetermined] = math.inf
    return (vectors * inverse_values) @ (vectors.T @ b), inverse, cond


def _com_std(pi, cov):
    """Standard deviation of c = (m c)/m by first-order propagation of the covariance."""
    mass = pi[0]
    if mass == 0.0 or not np.all(np.isfinite(cov[:4, :4])):
        return np.full(3, math.inf)
    out = np.empty(3)
    for axis in range(3):
        gradient = np.zeros(4)
        gradient[0] = -pi[1 + axis] / mass ** 2
        gradient[1 + axis] = 1.0 / mass
        out[axis] = math.sqrt(max(float(gradient @ cov[:4, :4] @ gradient), 0.0))
    return out


def _positive(name, value):
    value = float(value)
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(f'{name}: must be finite and > 0, got {value}')
    return value


# ---------------------------------------------------------------------- excitation


class ExcitationWarning(UserWarning):
    """The exciting trajectory was scaled down to respect a joint's limits."""


def exciting_trajectory(model, duration, amplitude=0.5, harmonics=5, base_frequency=0.2,
                        start=None, sample_period=0.01, seed=0, candidates=8,
                        limit_margin=0.9):
    """A finite Fourier series per joint (Swevers, Ganseman, Tükel, De Schutter & Van
    Brussel 1997) that starts and ends at rest at `start`:

        q_j(t) = start_j + Σ_{l=1..H} a_jl sin(l ω t) + b_jl (cos(l ω t) − 1)

    with Σ_l l a_jl = 0 and Σ_l l² b_jl = 0, so q(0) = start, q̇(0) = q̈(0) = 0, and, the
    series being periodic over the whole duration, the same at the end.

    duration [s]: the base frequency is rounded so that a whole number of periods fits
    (ω = 2π k / duration, k = round(duration · base_frequency) ≥ 1). amplitude [rad | m]
    (scalar or per joint): the largest excursion from `start`. harmonics H: the highest
    frequency is H·k/duration Hz. start (n,): default the middle of each joint's position
    limits (0 where a joint has none). The coefficients are drawn from a generator seeded
    with `seed`; of `candidates` draws the one whose payload regressor along the motion
    has the smallest condition number is kept (a cheap form of Swevers' optimised
    excitation). Each joint is then scaled down, with an `ExcitationWarning`, where its
    excursion would leave `limit_margin` of the room to a position limit or its speed
    exceed `limit_margin` of its velocity limit.

    Returns (t, q, q̇, q̈): (K,), (K, n), (K, n), (K, n) at t = 0, sample_period, ...,
    duration.
    """
    n = model.n
    duration = _positive('duration', duration)
    sample_period = _positive('sample_period', sample_period)
    harmonics = int(harmonics)
    if harmonics < 2:
        raise ValueError(f'harmonics: need at least 2 (rest at both ends), got {harmonics}')
    amplitude = np.broadcast_to(np.asarray(amplitude, dtype=float), (n,)).copy()
    if not np.all(np.isfinite(amplitude)) or np.any(amplitude < 0.0):
        raise ValueError(f'amplitude: expected finite values >= 0, got {amplitude}')
    low, high = model.position_min, model.position_max
    if start is None:
        bounded = np.isfinite(low) & np.isfinite(high)
        start = 0.5 * (np.where(bounded, low, 0.0) + np.where(bounded, high, 0.0))
    start = np.asarray(start, dtype=float)
    if start.shape != (n,) or not np.all(np.isfinite(start)):
        raise ValueError(f'start: expected {n} finite values, got {start}')
    outside = np.flatnonzero((start < low) | (start > high))
    if outside.size:
        raise ValueError(f'start[{outside[0]}]: {start[outside[0]]} is outside the position '
                         f'limits [{low[outside[0]]}, {high[outside[0]]}]')
    periods = max(1, round(duration * _positive('base_frequency', base_frequency)))
    omega = 2.0 * math.pi * periods / duration
    steps = max(1, round(duration / sample_period))
    t = np.linspace(0.0, duration, steps + 1)
    rng = np.random.default_rng(seed)
    best = None
    for _ in range(max(1, int(candidates))):
        a, b = _fourier_coefficients(rng, n, harmonics)
        q, qd, qdd = _fourier_series(t, omega, start, a, b)
        excursion = np.max(np.abs(q - start), axis=0)
        scale = np.where(excursion > 0.0, amplitude / np.where(excursion > 0, excursion, 1), 0)
        q, qd, qdd = start + (q - start) * scale, qd * scale, qdd * scale
        cond = _regressor_condition(model, q[::10], qd[::10], qdd[::10])
        if best is None or cond < best[0]:
            best = (cond, q, qd, qdd)
    _, q, qd, qdd = best
    factor = np.ones(n)
    above = np.max(q - start, axis=0)
    below = np.max(start - q, axis=0)
    speed = np.max(np.abs(qd), axis=0)
    with np.errstate(divide='ignore', invalid='ignore'):
        for excess, room in ((above, limit_margin * (high - start)),
                             (below, limit_margin * (start - low)),
                             (speed, limit_margin * model.velocity_max)):
            factor = np.minimum(factor, np.where(excess > room, room / excess, 1.0))
    for j in np.flatnonzero(factor < 1.0):
        warnings.warn(f'exciting_trajectory: joint index {j} scaled down to {factor[j]:.3g} of the '
                      f'requested motion to stay within its limits', ExcitationWarning,
                      stacklevel=2)
    return t, start + (q - start) * factor, qd * factor, qdd * factor


def _fourier_coefficients(rng, n, harmonics):
    """Random a, b (n, H) that satisfy Σ l a_l = 0 and Σ l² b_l = 0 (rest at t = 0)."""
    orders = np.arange(1, harmonics + 1, dtype=float)
    a = rng.normal(size=(n, harmonics)) / orders
    b = rng.normal(size=(n, harmonics)) / orders
    for coefficients, constraint in ((a, orders), (b, orders ** 2)):
        coefficients -= np.outer(coefficients @ constraint, constraint) / (constraint @ constraint)
    return a, b


def _fourier_series(t, omega, start, a, b):
    orders = np.arange(1, a.shape[1] + 1)
    phase = omega * np.outer(t, orders)                          # (K, H)
    s, c = np.sin(phase), np.cos(phase)
    w = omega * orders
    q = start + s @ a.T + (c - 1.0) @ b.T
    qd = (c * w) @ a.T - (s * w) @ b.T
    qdd = -(s * w ** 2) @ a.T - (c * w ** 2) @ b.T
    return q, qd, qdd


def _regressor_condition(model, q, qd, qdd, length_scale=0.1):
    """Condition number of the stacked payload regressor along a motion, π scaled to kg."""
    Y = payload_regressor(model, q, qd, qdd).reshape(-1, 10)
    Y = Y * np.array([1.0] + [length_scale] * 3 + [length_scale ** 2] * 6)
    singular = np.linalg.svd(Y, compute_uv=False)
    return singular[0] / singular[-1] if singular[-1] > 0.0 else math.inf


# ---------------------------------------------------------------------- closed loop


def sampled_reference(t, q, qd, qdd):
    """A reference t -> (q_d, q̇_d, q̈_d) that returns the sample of (t, q, q̇, q̈) (as
    returned by `exciting_trajectory`) nearest in time, the last one after the end."""
    step = float(t[1] - t[0])

    def reference(time):
        k = min(max(int(round(time / step)), 0), len(t) - 1)
        return q[k], qd[k], qdd[k]
    return reference


def identify_in_closed_loop(plant, model, reference, duration, q0, kp, kd,
                            control_period=0.01, plant_step=0.002, sigma_q=0.0,
                            sigma_qd=0.0, seed=0, estimator=None, report_period=None):
    """Simulate (`simulation.simulate_closed_loop`) computed torque with `model` tracking
    `reference` on `plant`, effort clipped to the model's limits, and feed a
    `PayloadEstimator` (default settings unless `estimator` is given) every cycle with
    the measured state and the applied effort. Measurement noise: Gaussian, standard
    deviations sigma_q [rad | m] and sigma_qd [rad/s | m/s], generator seeded with `seed`.

    Returns (estimate, run, history): the final `PayloadEstimate`, the `ClosedLoopRun`
    and, every `report_period` s when given, a list of (t, PayloadEstimate)."""
    law = ComputedTorqueLaw(model, kp, kd)
    estimator = PayloadEstimator(model) if estimator is None else estimator
    rng = np.random.default_rng(seed)
    limits = model.effort_max
    history = []
    next_report = report_period

    def measurement(q, qd):
        return (q + rng.normal(0.0, sigma_q, q.shape) if sigma_q else q,
                qd + rng.normal(0.0, sigma_qd, qd.shape) if sigma_qd else qd)

    def controller(t, q, qd):
        nonlocal next_report
        tau = np.clip(law.effort(q, qd, *reference(t)), -limits, limits)
        estimator.add(t, q, qd, tau, reference=reference(t))
        if next_report is not None and t >= next_report - 1e-9:
            history.append((t, estimator.estimate()))
            next_report += report_period
        return tau

    run = simulation.simulate_closed_loop(plant, controller, reference, duration,
                                          control_period, plant_step, q0, np.zeros(len(q0)),
                                          measurement=measurement)
    return estimator.estimate(), run, history
