"""Whole-arm identification: every link's inertial parameters, rotor inertia and friction
from the arm's own motion and efforts. Pure numpy (+ scipy and cvxpy, imported where used);
no ROS.

Model and parameters
--------------------
The inverse dynamics of `robot_dynamics.dynamics` are linear in the parameters

    τ = Y(q, q̇, q̈) φ

(Atkeson, An & Hollerbach 1986; Khalil & Dombre 2002). φ holds, for every index i = 1..n
(`parameter_names`, in this order):

* link i's ten inertial parameters in **link frame i** (the DH link frame; for a URDF
  model the child link frame of movable joint i, the last one the tip link frame — the
  frames of ``model.com`` and ``model.inertia``): m, m·c_x, m·c_y, m·c_z, I_xx, I_xy,
  I_xz, I_yy, I_yz, I_zz with I **about the link frame's origin** (as
  `identification.payload_parameters`); a payload of the model is part of the last link;
* joint i's armature (reflected rotor inertia, τ_i += armature·q̈_i), viscous friction
  (τ_i += b·q̇_i) and Coulomb friction (τ_i += f_c·sign(q̇_i): the model's exact sign,
  not a smooth one, so that Y φ equals `dynamics.inverse_dynamics` exactly; samples of a
  joint moving slower than ``friction_velocity`` are left out of the estimation instead),
  or the level(s) of the joint's other friction law (`RobotModel.friction_model`:
  asymmetric 'coulomb_negative', stribeck 'stribeck'; tanh uses 'coulomb'), linear in
  them for the law's velocity scale (`joint_terms`, `friction_columns`);
* with ``offset=True``, a constant effort offset of joint i (the effort sensor's bias:
  `RobotModel.effort_offset`, which no dynamics function adds).

Public API
----------
``parameter_names(model, offset=False) -> list[str]``
    'link3.m', 'link3.m*c_x', ..., 'link3.I_zz', 'joint3.armature', 'joint3.viscous',
    'joint3.coulomb' [, 'joint3.offset'] (1-based indices), p = n·13 (+ n).
``arm_parameters(model, offset=False) -> (p,)``
    φ of a model (offsets 0).
``arm_regressor(model, q, qd, qdd, offset=False) -> (n, p) | (B, n, p)``
    Y with ``Y @ arm_parameters(model) == dynamics.inverse_dynamics(model, q, qd, qdd)``.
``base_parameters(model, offset=False, samples=None, tolerance=1e-8, seed=0) -> BaseParameters``
    the identifiable combinations β = K φ found numerically; ``.describe()`` prints them.
``model_with_parameters(model, phi) -> RobotModel``
    the model with links' inertials, armature and friction replaced (DH and URDF).
``robot_params_overrides(model) -> dict``
    the `robot` parameter-block keys that a parameter file loaded after the robot's own
    file must hold so that `RobotModel.from_params` of the merged block gives this model.
``physical_consistency_issues(model_or_phi, n=None) -> list[str]``
    what is not physically consistent ([] when all is).
``joint_terms(model, offset=False)``, ``friction_columns(laws, velocities, qd)``
    the joint entries of φ per index, and the friction levels' regressor columns.
``essential_parameters(G_j, h_j, yy, counts, weights, inflation, columns, ratio)``
    the essential parameters (Pham & Gautier 1991).
``identify_arm(prior_model, t, q, qd, tau, offset=False, ..., effort_timing='instant') -> ArmIdentification``
    the estimator (below). t, q, qd, tau: one recording (K,), (K, n)... or lists of them.
    effort_timing: 'instant' (a measured effort), 'held_after' (`closed_loop_experiment`)
    or 'held_before' (the plant node's /joint_states: the effort held over the step that
    ends at the message's time); see `_prepare`.
``validation_errors(model, t, q, qd, tau, ...) -> (rms (n,), relative (n,))``
    RMS effort error of a model on recorded data, and relative to the RMS measured effort.
``optimal_excitation(model, duration, q0, seed=0, ...) -> Excitation``
    an optimised rest-to-rest finite Fourier series (``.condition``, ``.sample(t)``,
    ``.points(period)``).
``excitation_limits(model, ...) -> dict``
    the position, velocity and acceleration bounds `optimal_excitation` respects.
``perturbed_model(model, fraction=0.3, seed=0, ...)``, ``closed_loop_experiment(...)``
    simulation helpers: a consistently perturbed "true" arm, and a closed-loop run with
    measurement noise (what the tests and benchmarks/identification.py use).

Estimator: why a semidefinite program, and what it gives
--------------------------------------------------------
`identify_arm` is a maximum a posteriori estimate under physical-consistency constraints
(Wensing, Kim & Slotine 2018): weighted least squares on the filtered data plus a Gaussian
prior around the user's model, with every link's pseudo-inertia matrix constrained
positive definite and armature and friction non-negative, solved by cvxpy (Clarabel).
Chosen over a log-Cholesky parametrisation with scipy's nonlinear least squares because the
problem is convex: the global optimum, no starting point, no iteration count to tune, and
the friction bounds are plain linear constraints. Its size does not grow with the data:
the rows are reduced to normal equations first (p ≤ 98 unknowns for 7 joints with offsets).
Measured (benchmarks/identification.py, 60 s at 1 kHz, noise σ_q = 1 mrad, σ_q̇ =
0.01 rad/s, 1 % effort noise, plant ±30 % from the prior with drive friction and rotor
inertia): relative RMS torque error on an unseen validation motion 0.01–0.11 % per joint
(PUMA 560) and 0.02–0.43 % (Panda) against the noise-free efforts, every identified set
physically consistent; `identify_arm` on the Panda's 60 000 samples takes about 2 s on a
loaded two-core machine, plus 1–4 s to import scipy.signal and cvxpy in a fresh process
(timing per stage in `ArmIdentification.timing`).

References
----------
C. G. Atkeson, C. H. An, J. M. Hollerbach, "Estimation of inertial parameters of
manipulator loads and links", Int. J. Robotics Research 5(3), 101–119, 1986.
M. Gautier, "Numerical calculation of the base inertial parameters of robots", J. Robotic
Systems 8(4), 485–506, 1991.
M. Gautier, W. Khalil, "Direct calculation of minimum set of inertial parameters of serial
robots", IEEE Trans. Robotics and Automation 6(3), 368–373, 1990.
P. M. Wensing, S. Kim, J.-J. E. Slotine, "Linear matrix inequalities for physically
consistent inertial parameter identification: a statistical perspective on the mass
distribution", IEEE Robotics and Automation Letters 3(1), 60–67, 2018.
J. Swevers, C. Ganseman, D. B. Tükel, J. De Schutter, H. Van Brussel, "Optimal robot
excitation and identification", IEEE Trans. Robotics and Automation 13(5), 730–740, 1997.
M. Gautier, S. Briot, "Global identification of joint drive gains and dynamic parameters
of robots", ASME J. Dynamic Systems, Measurement, and Control 136(5), 051025, 2014.
C. M. Pham, M. Gautier, "Essential parameters of robots", Proc. 30th IEEE Conference on
Decision and Control, 2769–2774, 1991.
W. Khalil, E. Dombre, "Modeling, Identification and Control of Robots", Hermes Penton, 2002.
"""

import math
from typing import NamedTuple

import numpy as np

from robot_dynamics import algorithms, dynamics
from robot_dynamics.model import FRICTION_MODELS, RobotModel

__all__ = ['parameter_names', 'arm_parameters', 'arm_regressor', 'base_parameters',
           'BaseParameters', 'model_with_parameters', 'robot_params_overrides',
           'physical_consistency_issues', 'identify_arm', 'ArmIdentification',
           'validation_errors', 'optimal_excitation', 'Excitation', 'perturbed_model',
           'closed_loop_experiment', 'Experiment', 'excitation_limits', 'drive_terms', 'pseudo_inertia',
           'LINK_PARAMETERS', 'JOINT_PARAMETERS', 'EFFORT_TIMINGS', 'RecordingError',
           'require_estimator_libraries', 'uniform_grid', 'joint_terms',
           'friction_columns', 'essential_parameters', 'BaseUncertainty', 'VELOCITY_GRID']

LINK_PARAMETERS = ('m', 'm*c_x', 'm*c_y', 'm*c_z', 'I_xx', 'I_xy', 'I_xz', 'I_yy', 'I_yz',
                   'I_zz')
JOINT_PARAMETERS = ('armature', 'viscous', 'coulomb', 'coulomb_negative', 'stribeck',
                    'offset')
FRICTION_LEVELS = ('coulomb', 'coulomb_negative', 'stribeck')


def _require(module):
    """Import scipy / cvxpy with one line naming what to install."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError:
        package = module.split('.')[0]
        raise ImportError(f'arm identification needs {package}: pip install {package}') from None


def require_estimator_libraries():
    """ImportError with one line naming every missing library of the estimator (scipy,
    cvxpy) and the pip command that installs them; nothing when both import."""
    import importlib
    missing = []
    for module in ('scipy.signal', 'cvxpy'):
        try:
            importlib.import_module(module)
        except ImportError as error:
            cause = (getattr(error, 'name', None) or '').split('.')[0]
            if cause not in missing:            # cvxpy failing for want of scipy: scipy
                missing.append(module.split('.')[0])
    if missing:
        raise ImportError(f'arm identification needs {" and ".join(missing)}: '
                          f'pip install {" ".join(missing)}')


class RecordingError(ValueError):
    """Recorded data that cannot be used for the estimate (one line saying why and what to
    do); any other exception from the estimator is a bug, not bad data."""


# ---------------------------------------------------------------------- parameters


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


def friction_columns(laws, velocities, qd, filtered=None):
    """The friction levels' regressor columns, {'coulomb', 'coulomb_negative',
    'stribeck'} -> (…, n), for per-joint `laws` and velocity scales v_s at velocities qd:
    coulomb s = sign(q̇) (tanh: tanh(q̇/v_s); asymmetric: max(s, 0)), coulomb_negative
    min(s, 0) (asymmetric joints, else 0), stribeck exp(−(q̇/v_s)²) s (stribeck joints, else
    0). `filtered`: the same functions of the full-rate velocity low-pass filtered like the
    efforts ({'sign': …, ('tanh', v): …, ('stribeck', v): …}, `_prepare`'s features),
    used instead of evaluating them at qd."""
    qd = np.asarray(qd, dtype=float)
    sign = np.sign(qd) if filtered is None else filtered['sign']
    coulomb = sign.copy()
    negative = np.zeros_like(qd)
    stribeck = np.zeros_like(qd)
    for j, law in enumerate(laws):
        v = float(velocities[j])
        if law == 'asymmetric':
            whole = np.abs(np.sign(qd[..., j])) if filtered is None else 1.0
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
    that law (only their columns are computed)."""
    keys = []
    for j, law in enumerate(laws):
        if law in ('tanh', 'stribeck'):
            keys += [(law, float(v)) for v in velocity_sets[j]]
    keys = sorted(set(keys))

    def function(key):
        law, v = key
        columns = [j for j, name in enumerate(laws) if name == law]
        if law == 'tanh':
            return lambda qd: np.tanh(qd / v), columns
        return lambda qd: np.exp(-np.minimum((qd / v) ** 2, 700.0)) * np.sign(qd), columns
    return keys, [function(key) for key in keys]


# ---------------------------------------------------------------------- regressor


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


# ---------------------------------------------------------------------- base parameters


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
    C, *_ = np.linalg.lstsq(Ys[:, independent], Ys, rcond=None)   # Ys = Ys_b C
    K = C * scale[None, :] / scale[independent][:, None]
    K[np.abs(K) < 1e-12] = 0.0
    K[np.arange(len(independent)), independent] = 1.0
    result = BaseParameters(names=parameter_names(model, offset), independent=independent,
                            K=K, rank=len(independent), tolerance=tolerance)
    model.__dict__[key] = result          # a model is immutable: its base parameters too
    return result


# ---------------------------------------------------------------------- models from φ


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


# ---------------------------------------------------------------------- data


class _Prepared(NamedTuple):
    q: np.ndarray        # (K, n) filtered, decimated
    qd: np.ndarray
    qdd: np.ndarray      # derivative of the filtered velocity
    tau: np.ndarray      # filtered with the same filter
    coulomb: np.ndarray  # the filtered sign(q̇): the Coulomb column, filtered like τ
    mask: np.ndarray     # (K, n) bool: joint row usable (moving faster than friction_velocity)
    raw_samples: int
    features: list = []  # `features` functions of the full-rate filtered q̇, filtered like τ


def _segments(t, q, qd, tau, n):
    """Split the input into recordings: a list of arrays (one per recording) or single
    arrays; each recording is split again where time does not increase or jumps."""
    if isinstance(t, (list, tuple)) and len(t) and np.ndim(t[0]) == 1:
        groups = list(zip(t, q, qd, tau))
    else:
        groups = [(t, q, qd, tau)]
    out = []
    for g, (tg, qg, qdg, taug) in enumerate(groups):
        tg = np.asarray(tg, dtype=float).reshape(-1)
        arrays = []
        for name, value in (('q', qg), ('qd', qdg), ('tau', taug)):
            value = np.asarray(value, dtype=float)
            if value.ndim != 2 or value.shape != (tg.size, n):
                raise RecordingError(f'{name}: expected shape ({tg.size}, {n}) (samples × '
                                     f'joints), got {value.shape}')
            if not np.all(np.isfinite(value)):
                raise RecordingError(f'{name}: non-finite values')
            arrays.append(value)
        if not np.all(np.isfinite(tg)):
            raise RecordingError('t: non-finite times')
        if tg.size < 2:
            continue
        dt = np.diff(tg)
        step = np.median(dt[dt > 0]) if np.any(dt > 0) else 0.0
        if not step > 0.0:
            continue
        breaks = np.flatnonzero((dt <= 0.0) | (dt > 5.0 * step)) + 1
        for piece in np.split(np.arange(tg.size), breaks):
            if piece.size >= 2:
                out.append((tg[piece], *(a[piece] for a in arrays)))
    return out


EFFORT_TIMINGS = ('instant', 'held_after', 'held_before')


def uniform_grid(t, arrays):
    """(step, resampled arrays): samples at times t (K,) (increasing, one run without
    gaps) on the uniform grid t[0] + k·step, step the median time step, k = 0.. while
    inside [t[0], t[-1]]. Arrays already on that grid (every stamp within 0.1 % of a step
    of its grid point) are returned as they are; otherwise each column is interpolated
    linearly (jittered stamps, a dropped message). The grid may hold one sample more or
    less than t."""
    t = np.asarray(t, dtype=float)
    step = float(np.median(np.diff(t)))
    count = int(math.floor((t[-1] - t[0]) / step + 1e-9)) + 1
    grid = t[0] + step * np.arange(count)
    if count == t.size and np.max(np.abs(t - grid)) <= 1e-3 * step:
        return step, tuple(arrays)
    return step, tuple(np.column_stack([np.interp(grid, t, a[:, j]) for j in range(a.shape[1])])
                       for a in arrays)


def _prepare(model, t, q, qd, tau, cutoff_frequency, sample_rate, friction_velocity,
             effort_timing='instant', features=()):
    """Zero-phase Butterworth low-pass (order 4, `cutoff_frequency`) of q, q̇ and τ
    (parallel filtering: the same filter on both sides of τ = Y φ), q̈ from differences
    of the filtered q̇, edges of 1/cutoff s dropped, decimation to about `sample_rate`.
    Each gap-free run of samples is put on a uniform grid first (`uniform_grid`: its
    median step; linear interpolation where the stamps jitter or a message is missing;
    runs are cut where time does not increase or a step exceeds 5 median steps). The Coulomb
    column sign(q̇) is computed at the full rate and filtered with the same filter, as are
    the `features` ((function, joints): a function of the filtered full-rate q̇ of those
    joints (K, m) -> (K, m), the smooth friction laws' columns; zeros for other joints).

    effort_timing: what the effort of sample k is. 'instant': the effort at t_k (a
    measured effort); paired with the state at t_k and the central difference of q̇.
    'held_after': the effort applied from t_k to t_k+1 (a zero-order hold starting at the
    sample, as `simulation.simulate_closed_loop` records it); 'held_before': the effort
    applied from t_k−1 to t_k (the plant node's /joint_states: the state at the end of a
    step and the effort held over it). A held effort is paired with the mean state of
    its interval and the interval's mean acceleration (Δq̇/Δt), exact for a zero-order
    hold to O(Δt²); pairing it with the state at a sample instead is off by half a sample,
    which costs about 0.1–0.3 % of the efforts at 1 kHz."""
    if effort_timing not in EFFORT_TIMINGS:
        raise ValueError(f'effort_timing: expected one of {EFFORT_TIMINGS}, got '
                         f'{effort_timing!r}')
    signal = _require('scipy.signal')
    n = model.n
    pieces = []
    raw = 0
    longest = 0.0
    for tg, qg, qdg, taug in _segments(t, q, qd, tau, n):
        raw += tg.size
        longest = max(longest, float(tg[-1] - tg[0]))
        step, (qg, qdg, taug) = uniform_grid(tg, (qg, qdg, taug))
        rate = 1.0 / step
        cutoff = min(float(cutoff_frequency), 0.4 * rate)
        sos = signal.butter(4, cutoff, fs=rate, output='sos')
        edge = int(math.ceil(rate / cutoff))
        if qg.shape[0] <= 4 * edge + 20:
            continue                            # too short to filter
        qf, qdf, tauf = (signal.sosfiltfilt(sos, a, axis=0) for a in (qg, qdg, taug))
        # the Coulomb column, filtered like every other term of τ: filtering does not
        # commute with sign(), and sign(filtered q̇) would be a step where the filtered
        # effort has a ramp ~1/cutoff long at every reversal
        coulomb = signal.sosfiltfilt(sos, np.sign(qdf), axis=0)
        extra = []
        for function, columns in features:
            column = np.zeros_like(qdf)
            column[:, columns] = signal.sosfiltfilt(sos, function(qdf[:, columns]), axis=0)
            extra.append(column)
        if effort_timing == 'instant':
            qddf = np.gradient(qdf, step, axis=0)
        else:
            qddf = np.diff(qdf, axis=0) / step
            qf, qdf = 0.5 * (qf[1:] + qf[:-1]), 0.5 * (qdf[1:] + qdf[:-1])
            coulomb = 0.5 * (coulomb[1:] + coulomb[:-1])
            extra = [0.5 * (e[1:] + e[:-1]) for e in extra]
            tauf = tauf[:-1] if effort_timing == 'held_after' else tauf[1:]
        keep = slice(edge, qf.shape[0] - edge, max(1, int(round(rate / sample_rate))))
        pieces.append((qf[keep], qdf[keep], qddf[keep], tauf[keep], coulomb[keep],
                       *(e[keep] for e in extra)))
    if not pieces:
        raise RecordingError(
            f'no recording long enough to filter: the longest run without a gap is '
            f'{longest:.3g} s, the filter needs more than {4.0 / cutoff_frequency:.3g} s '
            '(record a longer motion, without pauses or dropped stretches)')
    qf, qdf, qddf, tauf, coulomb, *extra = (np.concatenate(parts) for parts in zip(*pieces))
    mask = np.abs(qdf) >= friction_velocity
    return _Prepared(qf, qdf, qddf, tauf, coulomb, mask, raw, list(extra))


# ---------------------------------------------------------------------- estimator


class BaseUncertainty(NamedTuple):
    """How well the data determine each base parameter (`identify_arm`'s ``uncertainty``).

    names (r,): the base parameters (`BaseParameters.base_names`; with drive gains also
    'jointN.drive_gain'); expressions (r,): `BaseParameters.describe` lines; value: the
    estimate's β (the constrained estimate, what the model holds); wls: the unconstrained
    weighted least-squares estimate; std: its standard deviation; relative_std: std /
    |value| (a fraction; inf for a value 0); essential (r,) bool: the essential parameters
    (`essential_parameters`); covariance (r, r) of the weighted least-squares estimate;
    inflation (n,): per joint factor on the residual variance for the correlation of the
    filtered samples; dof: rows − parameters."""

    names: list
    expressions: list
    value: np.ndarray
    wls: np.ndarray
    std: np.ndarray
    relative_std: np.ndarray
    essential: np.ndarray
    covariance: np.ndarray
    inflation: np.ndarray
    dof: int

    def above(self, threshold):
        """Names of the parameters whose relative std exceeds `threshold` (a fraction)."""
        return [name for name, r in zip(self.names, self.relative_std) if not r <= threshold]


class ArmIdentification(NamedTuple):
    """What `identify_arm` found.

    model: the identified `RobotModel` (the prior's kinematics, limits and payload; links'
    inertial parameters, armature, friction (law, levels, velocity scale) and, with
    offsets, the effort offsets identified); phi (p,): the full parameters
    (`parameter_names(model, offset)` order; offsets in the recorded effort's units);
    base: the `BaseParameters` of the model; beta: their values K φ; condition_number: of
    the weighted base regressor with columns scaled to unit norm (inf when a base
    parameter is not determined); samples: time samples used (after decimation) and rows
    (joint equations); raw_samples: samples read; rms_residual (n,): per joint RMS of the
    filtered effort minus the model's on the estimation data; sigma (n,): per joint
    residual standard deviation used as weight; not_excited: what the data do not
    determine (empty when all is excited); fixed: how the directions the data do not
    determine were fixed (one paragraph); consistency: physical_consistency_issues of phi
    ([] expected); timing: seconds per stage; offset (n,): the identified effort offsets
    (None without ``offset``); drive_gain (n,): τ = gain × recorded effort (None without
    a payload recording); uncertainty: `BaseUncertainty`; friction_model, stribeck_velocity:
    each joint's law and the velocity scale chosen."""

    model: RobotModel
    phi: np.ndarray
    base: BaseParameters
    beta: np.ndarray
    condition_number: float
    samples: int
    rows: int
    raw_samples: int
    rms_residual: np.ndarray
    sigma: np.ndarray
    not_excited: list
    fixed: str
    consistency: list
    timing: dict
    offset: np.ndarray = None
    drive_gain: np.ndarray = None
    uncertainty: BaseUncertainty = None
    friction_model: tuple = ()
    stribeck_velocity: np.ndarray = None

    @property
    def excited(self):
        return not self.not_excited


def _prior_std(model, phi0, offset, relative):
    """Standard deviations of the Gaussian prior around the prior model: per link
    `relative` × (s_m, s_m L, s_m L², ...) with s_m = max(m, 5 % of the mean link mass,
    0.01 kg) and L = max(|c|, 0.1 m) in the link frame; armature, friction and offsets a
    weak prior (scale of the arm's efforts and inertias)."""
    n = model.n
    terms = joint_terms(model, offset)
    k = 10 + len(terms)
    blocks = phi0.reshape(n, k)
    mean_mass = max(float(np.mean(np.abs(blocks[:, 0]))), 0.01)
    std = np.empty((n, k))
    for i in range(n):
        m = abs(blocks[i, 0])
        s_m = max(m, 0.05 * mean_mass, 0.01)
        L = max(float(np.linalg.norm(blocks[i, 1:4])) / m if m > 0 else 0.0, 0.1)
        std[i, :10] = relative * s_m * np.array([1.0, L, L, L] + [L * L] * 6)
    rng = np.random.default_rng(1)
    states = _random_states(model, 20, rng)
    M = dynamics.mass_matrix(model, states[0])
    inertia_scale = np.maximum(np.max(np.diagonal(M, axis1=1, axis2=2), axis=0), 1e-3)
    effort_scale = np.maximum(np.max(np.abs(dynamics.gravity_torques(model, states[0])),
                                     axis=0), 1.0)
    for t, term in enumerate(terms):
        std[:, 10 + t] = inertia_scale if term == 'armature' else effort_scale
    return std.reshape(-1)


def _weighted(G_j, h_j, weights, columns):
    """Σ_j w_j G_j and Σ_j w_j h_j, restricted to `columns` (None: all)."""
    G = np.tensordot(weights, G_j, axes=1)
    h = weights @ h_j
    if columns is not None:
        G, h = G[np.ix_(columns, columns)], h[columns]
    return G, h


def _normal_solve(G, h):
    """Least-squares solution of the normal equations G x = h (columns scaled first;
    directions without information left at zero)."""
    d = np.sqrt(np.diag(G))
    d = np.where(d > 0.0, d, 1.0)
    eigenvalues, vectors = np.linalg.eigh(G / np.outer(d, d))
    kept = eigenvalues > 1e-12 * eigenvalues[-1]
    x = vectors[:, kept] @ ((vectors[:, kept].T @ (h / d)) / eigenvalues[kept])
    return x / d


def _compress(G, h):
    """R (r, p), z (r,) with ‖R φ − z‖² = φᵀ G φ − 2 hᵀ φ + const (G = AᵀA, h = Aᵀb):
    the least-squares problem ‖A φ − b‖² in p unknowns whatever A's number of rows."""
    d = np.sqrt(np.diag(G))
    d = np.where(d > 0.0, d, 1.0)
    eigenvalues, vectors = np.linalg.eigh(G / np.outer(d, d))
    kept = eigenvalues > 1e-13 * eigenvalues[-1]
    root = np.sqrt(eigenvalues[kept])
    R = (root[:, None] * vectors[:, kept].T) * d[None, :]
    z = (vectors[:, kept].T @ (h / d)) / root
    return R, z


VELOCITY_GRID = tuple(float(v) for v in np.geomspace(0.002, 0.5, 25))


def _with_laws(model, friction):
    """`model` with the friction law of every joint replaced (None: unchanged; a law for
    all joints, or one per joint)."""
    if friction is None:
        return model
    laws = [friction] * model.n if isinstance(friction, str) else list(friction)
    if len(laws) != model.n or any(law not in FRICTION_MODELS for law in laws):
        raise ValueError(f'friction: expected one of {FRICTION_MODELS} or a list of {model.n} '
                         f'of them, got {friction!r}')
    if tuple(laws) == model.friction_model:
        return model
    block = model.to_params()
    block['friction_model'] = laws
    if 'asymmetric' in laws and 'coulomb_friction_negative' not in block:
        block['coulomb_friction_negative'] = [float(v) for v in model.coulomb_friction]
    return RobotModel.from_params(block)


def _payload_vector(payload):
    """Ten parameters (last link frame, inertia about its origin) of a payload given as a
    mapping {mass, com, inertia} (centroidal inertia, 3×3 or URDF order) or a `Payload`."""
    from robot_dynamics.model import Payload, _payload
    pl = payload if isinstance(payload, Payload) else _payload(dict(payload))
    com = np.asarray(pl.com, dtype=float)
    return np.concatenate(([pl.mass], pl.mass * com,
                           _urdf6(np.asarray(pl.inertia) + algorithms.steiner(pl.mass, com))))


def _noise_shape(rate, decimation, cutoff, frequencies):
    """The power spectrum, relative to its mean, at `frequencies` [Hz] of white noise at
    `rate` Hz after `_prepare`'s zero-phase filter (|H(f)|⁴: the Butterworth filter run
    forward and backward) and the decimation by `decimation` (aliases summed)."""
    signal = _require('scipy.signal')
    sos = signal.butter(4, min(float(cutoff), 0.4 * rate), fs=rate, output='sos')
    decimated = rate / decimation
    total = np.zeros(len(frequencies))
    for alias in range(-decimation, decimation + 1):
        f = np.abs(frequencies + alias * decimated)
        inside = f <= rate / 2.0
        if np.any(inside):
            _, response = signal.sosfreqz(sos, worN=f[inside], fs=rate)
            total[inside] += np.abs(response) ** 4
    return total


def _long_run(A, r, positions, shape):
    """Cov(Aᵀ e) = Σ_s Σ_t a_s a_tᵀ γ(s − t) (P, P) for noise e on rows A (N, P) at sample
    indices `positions` (rows left out are zeros on that grid) with the residuals r's
    variance and the spectral shape `shape(F) -> (F // 2 + 1,)` (relative to its mean;
    `_noise_shape`), computed in the frequency domain, zero-padded to twice the length
    so that the correlations are linear, not circular."""
    N = len(r)
    if N == 0:
        return np.zeros((A.shape[1], A.shape[1]))
    variance = float(r @ r) / N
    full = np.zeros((int(positions[-1]) + 1, A.shape[1]))
    full[positions] = A
    F = 2 * full.shape[0]
    F += F % 2                              # even: the last bin is the Nyquist one
    A_hat = np.fft.rfft(full, n=F, axis=0)
    S = variance * shape(F)
    weight = np.full(len(S), 2.0)
    weight[0] = weight[-1] = 1.0
    band = S > 1e-9 * np.max(S)             # the filter's stop band adds nothing
    X = A_hat[band] * np.sqrt(weight[band] * S[band] / F)[:, None]
    return np.einsum('fp,fq->pq', X.real, X.real) + np.einsum('fp,fq->pq', X.imag, X.imag)


def _inverse(G, h=None):
    """G⁻¹ (or G⁻¹ h) of a symmetric positive semi-definite G: columns scaled to a unit
    diagonal, a ridge of 1e-12 for directions without information. An LU solve rather
    than an eigendecomposition: called in loops, and LAPACK's eigensolvers can be tens of
    times slower on a loaded machine."""
    d = np.sqrt(np.diag(G))
    d = np.where(d > 0.0, d, 1.0)
    scaled = G / np.outer(d, d) + 1e-12 * np.eye(len(d))
    if h is not None:
        return np.linalg.solve(scaled, h / d) / d
    return np.linalg.solve(scaled, np.eye(len(d))) / np.outer(d, d)


def _wls_statistics(G_j, h_j, yy, counts, weights, inflation, columns):
    """Weighted least squares on `columns` from per-joint normal equations: (x, covariance,
    per-joint residual sums of squares). Covariance G⁻¹ (Σ_j w_j² v_j c_j G_j) G⁻¹ with
    v_j = ‖r_j‖² / (N_j − p N_j / N) the joint's residual variance and c_j its correlation
    inflation: with one common variance and c = 1 the textbook σ² (WᵀW)⁻¹,
    σ² = ‖W r‖² / (N − p)."""
    G, h = _weighted(G_j, h_j, weights, columns)
    inverse = _inverse(G)
    x = inverse @ h
    sub = G_j[:, columns][:, :, columns]
    rss = yy - 2.0 * h_j[:, columns] @ x + np.einsum('p,jpq,q->j', x, sub, x)
    rss = np.maximum(rss, 0.0)
    total = max(float(np.sum(counts)), 1.0)
    dof = np.maximum(counts - len(columns) * counts / total, 1.0)
    variance = rss / dof
    middle = np.tensordot(weights ** 2 * variance * inflation, sub, axes=1)
    return x, inverse @ middle @ inverse, rss


def essential_parameters(G_j, h_j, yy, counts, weights, inflation, columns, ratio=100.0,
                         keep=()):
    """Indices (into `columns`) of the essential parameters (Pham & Gautier 1991; Khalil &
    Dombre 2002, §12.5): starting from all of them, the parameter with the largest
    relative standard deviation is dropped and the rest estimated again, until the
    largest relative standard deviation is at most `ratio` times the smallest. Entries
    of `keep` (indices into `columns`) are never dropped."""
    active = list(range(len(columns)))
    while len(active) > 1:
        x, covariance, _ = _wls_statistics(G_j, h_j, yy, counts, weights, inflation,
                                           [columns[a] for a in active])
        with np.errstate(divide='ignore', invalid='ignore'):
            relative = np.sqrt(np.maximum(np.diag(covariance), 0.0)) / np.abs(x)
        relative = np.where(np.isfinite(relative), relative, math.inf)
        candidates = [c for c, a in enumerate(active) if a not in keep]
        if not candidates:
            break
        smallest = float(np.min(relative))
        worst = max(candidates, key=lambda c: relative[c])
        if relative[worst] <= ratio * smallest:
            break
        del active[worst]
    return active


def identify_arm(prior_model, t, q, qd, tau, offset=False, cutoff_frequency=10.0,
                 sample_rate=100.0, friction_velocity=0.02, prior_relative=0.5,
                 max_condition=1000.0, effort_timing='instant', base=None, solver=None,
                 verbose=False, friction=None, velocity_grid=VELOCITY_GRID,
                 payload_recording=None, payload=None, essential_ratio=100.0,
                 constrained=True):
    """Estimate the whole arm's parameters from recorded motion and efforts.

    t (K,) [s], q, qd, tau (K, n): measured positions, velocities and applied efforts (or
    lists of such arrays, one per recording), in the model's joint order.

    Data: `_prepare` (zero-phase Butterworth filter at `cutoff_frequency` Hz of q, q̇ and
    τ, q̈ from the filtered q̇, decimation to `sample_rate` Hz; positions are never
    differentiated twice); `effort_timing` says whether an effort sample is measured at its
    instant ('instant', default: a real drive's measured effort), held over the following
    period ('held_after': `closed_loop_experiment`) or over the preceding one
    ('held_before': the plant node's /joint_states), see `_prepare`. A joint's equation at
    a sample is left out when the joint moves slower than `friction_velocity` (its
    friction is not a function of q̇ there).

    Sensor and drive model: ``offset=True`` adds a constant effort offset per joint (a
    sensor bias: recorded = applied + offset; written as ``effort_offset``, which the
    dynamics and the controller's command do not use). `friction`: each joint's friction
    law (`dynamics.friction_torques`; None: the prior model's; one name for all joints
    or a list), linear in its levels; the velocity scale v_s of tanh and stribeck joints
    is found by a search over `velocity_grid` (None: the prior's v_s kept): per joint in
    turn (two sweeps), the v_s of the grid whose weighted least-squares fit of the base
    parameters leaves the smallest weighted residual. `payload_recording` (t, q, qd, tau,
    as above) recorded with a known `payload` ({mass, com, inertia}: last link frame,
    inertia about the centre of mass) attached: the drive gains k (τ = k ⊙ recorded
    effort) are estimated with the parameters, from both recordings together (Gautier &
    Briot 2014: without the payload the efforts fix the parameters only up to a common
    scale per joint; the payload's known torques fix it).

    Estimator (maximum a posteriori under physical-consistency constraints): with the
    rows weighted by each joint's residual standard deviation σ_j (from an ordinary least
    squares on the base parameters first: Gautier & Poignet's weighted least squares),

        minimise   Σ ((τ − Y φ)_j / σ_j)² + Σ_k ((φ_k − φ_prior,k) / s_k)²
        subject to the pseudo-inertia matrix of every link ⪰ ε (Wensing, Kim & Slotine
                   2018: mass > 0, inertia positive definite, triangle inequality),
                   armature and friction levels ≥ 0 (drive gains > 0),

    where s (`_prior_std`, scaled by `prior_relative`) is a Gaussian prior around the prior
    model. The data term fixes the base parameters (its information grows with the
    samples); the prior fixes what the data cannot see (the p − r non-identifiable
    directions) and has a negligible pull on the rest. The weighted rows are compressed
    into per-joint normal equations (‖Aφ − b‖² = ‖Rφ − z‖² + const with RᵀR = AᵀA, R at
    most p×p, from a scaled eigendecomposition), so the semidefinite program (cvxpy,
    solver Clarabel unless `solver` names another) has p variables and n 4×4 LMIs
    whatever the number of samples. Why an SDP rather than a log-Cholesky
    parametrisation with nonlinear least squares: the problem is convex, so the solution is
    the global optimum without a starting point or iterations to tune, and constraints
    on friction and armature are plain inequalities.

    ``constrained=False`` skips the semidefinite program: the result is the unconstrained
    weighted least-squares estimate of the base parameters, mapped to the full parameters
    nearest the prior's (φ = φ0 + K⁺(β − K φ0)), and ``model`` is None when that φ has a
    negative mass or friction level (a yardstick, not a model to control with).

    Uncertainty (``uncertainty``, `BaseUncertainty`): the covariance of the unconstrained
    weighted least-squares estimate of the base parameters, G⁻¹ (Σ_j w_j² v_j c_j G_j) G⁻¹
    (`_wls_statistics`: v_j each joint's residual variance with N − p degrees of freedom,
    c_j the inflation for the correlation of the low-pass filtered samples, measured on
    the residuals). It describes the constrained estimate too wherever the constraints and
    the prior do not bind (the usual case for base parameters); where they bind, the
    constrained value differs from the least-squares one (both are reported). The
    essential parameters: `essential_parameters` with `essential_ratio`.

    Excitation: `condition_number` is that of the weighted base regressor with unit-norm
    columns; when it exceeds `max_condition` the base parameters that dominate the
    poorly determined directions are listed in `not_excited`, as are joints that did not
    move. The estimate is still returned (the prior holds those directions); callers that
    must not write a poor model check ``result.excited``.
    """
    import time
    timing = {}
    start = time.perf_counter()
    _require('scipy.signal')
    _require('cvxpy')
    timing['imports'] = time.perf_counter() - start
    start = time.perf_counter()
    prior = _with_laws(prior_model, friction)
    n = prior.n
    laws = prior.friction_model
    velocities = np.array(prior.stribeck_velocity, dtype=float)
    smooth = [j for j in range(n) if laws[j] in ('tanh', 'stribeck')]
    grid = [] if velocity_grid is None else [float(v) for v in velocity_grid]
    if any(not (math.isfinite(v) and v > 0.0) for v in grid):
        raise ValueError(f'velocity_grid: expected positive velocities, got {velocity_grid}')
    keys, functions = _feature_functions(laws, [[velocities[j], *grid] for j in range(n)])
    gains = payload_recording is not None
    if gains and payload is None:
        raise ValueError('payload: the payload recording needs the payload\'s mass, com '
                         'and inertia')
    recordings = [(t, q, qd, tau)] + ([tuple(payload_recording)] if gains else [])
    data = [_prepare(prior, *r, cutoff_frequency, sample_rate, friction_velocity,
                     effort_timing, functions) for r in recordings]
    timing['filter'] = time.perf_counter() - start
    start = time.perf_counter()
    base = base_parameters(prior, offset) if base is None else base
    timing['base parameters'] = time.perf_counter() - start
    start = time.perf_counter()
    filtered = [dict(zip(keys, d.features), sign=d.coulomb) for d in data]
    Y = [arm_regressor(prior, d.q, d.qd, d.qdd, offset=offset) for d in data]

    def set_columns():
        for Yr, d, f in zip(Y, data, filtered):
            _set_friction_columns(Yr, prior, offset, friction_columns(laws, velocities,
                                                                      d.qd, f))
    set_columns()
    level_terms = [(t, term) for t, term in enumerate(joint_terms(prior, offset))
                   if term in FRICTION_LEVELS]

    def set_joint(j):
        """Joint j's friction columns for its current velocity scale."""
        key = (laws[j], float(velocities[j]))
        for Yr, d, f in zip(Y, data, filtered):
            columns = friction_columns([laws[j]], [velocities[j]], d.qd[:, [j]],
                                       {'sign': f['sign'][:, [j]], key: f[key][:, [j]]})
            k_ = Yr.shape[-1] // n
            for t, term in level_terms:
                Yr[:, j, j * k_ + 10 + t] = columns[term][:, 0]
    timing['regressor'] = time.perf_counter() - start
    start = time.perf_counter()
    p = Y[0].shape[-1]
    k = _per_index(prior, offset)
    P = p + (n if gains else 0)
    payload_torque = (Y[1][..., (n - 1) * k:(n - 1) * k + 10] @ _payload_vector(payload)
                      if gains else None)

    def build(j):
        """A_j (N_j, P), b_j (N_j,): joint j's equations of every recording."""
        A, b = [], []
        for r, d in enumerate(data):
            m = d.mask[:, j]
            block = np.zeros((int(np.sum(m)), P))
            block[:, :p] = Y[r][m, j]
            if gains:
                block[:, p + j] = -d.tau[m, j]
                b.append(np.zeros(block.shape[0]) if r == 0 else -payload_torque[m, j])
            else:
                b.append(d.tau[m, j])
            A.append(block)
        return np.concatenate(A), np.concatenate(b)

    cache = {}

    def rows(j):
        if j not in cache:
            cache[j] = build(j)
        return cache[j]

    def refresh(j, columns):
        """Joint j's friction columns `columns` taken again from Y, normal equations
        updated."""
        A, b = rows(j)
        A[:, columns] = np.concatenate([Y[r][:, j, columns][d.mask[:, j]]
                                        for r, d in enumerate(data)])
        G_j[j][:, columns] = np.einsum('kp,kq->pq', A, A[:, columns])
        G_j[j][columns, :] = G_j[j][:, columns].T
        h_j[j][columns] = np.einsum('kp,k->p', A[:, columns], b)

    G_j = np.empty((n, P, P))
    h_j = np.empty((n, P))
    yy = np.empty(n)
    counts = np.array([sum(int(np.sum(d.mask[:, j])) for d in data) for j in range(n)],
                      dtype=float)

    def normal_equations(j):
        A, b = rows(j)
        # einsum, not BLAS: a threaded GEMM can be many times slower on a loaded machine
        G_j[j] = np.einsum('kp,kq->pq', A, A)
        h_j[j] = np.einsum('kp,k->p', A, b)
        yy[j] = float(b @ b)

    for j in range(n):
        normal_equations(j)
    timing['normal equations'] = time.perf_counter() - start
    start = time.perf_counter()
    ix = np.concatenate((base.independent, np.arange(p, P))).astype(int)
    effort = [np.concatenate([d.tau[d.mask[:, j], j] for d in data]) for j in range(n)]
    scale0 = np.array([math.sqrt(np.mean(e ** 2)) if e.size else 1.0 for e in effort]) + 1e-9
    if smooth and grid:
        # the velocity scales: a search over the grid, one joint at a time
        weights0 = 1.0 / scale0 ** 2

        def weighted_residual():
            G, h = _weighted(G_j, h_j, weights0, ix)
            x = _inverse(G, h)
            return float(weights0 @ yy - 2.0 * h @ x + x @ G @ x)
        for _ in range(2):
            for j in smooth:
                columns = [j * k + 10 + t for t, term in enumerate(joint_terms(prior, offset))
                           if term in FRICTION_LEVELS]
                best = None
                for v in sorted(set([velocities[j], *grid])):
                    velocities[j] = v
                    set_joint(j)
                    refresh(j, columns)
                    value = weighted_residual()
                    if best is None or value < best[0]:
                        best = (value, v)
                velocities[j] = best[1]
                set_joint(j)
                refresh(j, columns)
        timing['velocity scales'] = time.perf_counter() - start
        start = time.perf_counter()
    # ordinary, then weighted least squares on the base parameters: σ_j and excitation
    beta0 = _inverse(*_weighted(G_j, h_j, 1.0 / scale0 ** 2, ix))
    residuals = []
    for j in range(n):
        A, b = rows(j)
        residuals.append(b - A[:, ix] @ beta0)
    sigma = np.array([math.sqrt(np.mean(r ** 2)) if r.size else scale0[j]
                      for j, r in enumerate(residuals)])
    # at least 0.1 % of each joint's RMS effort: exact (simulated) data would otherwise
    # weigh the data 10⁸ times the prior and leave the conic solver without precision
    sigma = np.maximum(sigma, 1e-3 * scale0)
    weights = 1.0 / sigma ** 2
    G_b, _ = _weighted(G_j, h_j, weights, ix)
    d = np.sqrt(np.diag(G_b))
    d = np.where(d > 0.0, d, 1.0)
    eigenvalues, vectors = np.linalg.eigh(G_b / np.outer(d, d))
    condition = (math.sqrt(eigenvalues[-1] / eigenvalues[0]) if eigenvalues[0] > 0.0
                 else math.inf)
    not_excited = [f'joint{j + 1} (did not move faster than {friction_velocity:g})'
                   for j in range(n) if counts[j] == 0]
    names = base.base_names + [f'joint{j + 1}.drive_gain' for j in range(P - p)]
    if not condition <= max_condition:
        weak = eigenvalues < eigenvalues[-1] / max_condition ** 2
        for v in vectors[:, weak].T:
            for c in np.argsort(-np.abs(v)):
                if abs(v[c]) < 0.3:
                    break
                if names[c] not in not_excited:
                    not_excited.append(names[c])
    timing['least squares'] = time.perf_counter() - start
    start = time.perf_counter()
    # uncertainty of the weighted least-squares estimate; the essential parameters
    beta_wls, covariance, _ = _wls_statistics(G_j, h_j, yy, counts, weights, np.ones(n), ix)
    middle = np.zeros((len(ix), len(ix)))
    steps = np.concatenate([np.diff(np.asarray(r, dtype=float).reshape(-1))
                            for r in ([t] if np.ndim(t[0]) == 0 else t)])
    steps = steps[steps > 0.0]          # as `_segments`: a repeated stamp is no step
    full_rate = 1.0 / float(np.median(steps)) if steps.size else float(sample_rate)
    decimation = max(1, int(round(full_rate / sample_rate)))

    def shape(F):
        frequencies = np.fft.rfftfreq(F, decimation / full_rate)
        power = _noise_shape(full_rate, decimation, cutoff_frequency, frequencies)
        weight = np.full(len(power), 2.0)
        weight[0] = weight[-1] = 1.0
        return power / (float(weight @ power) / F)
    inflation = np.full(n, float(shape(64)[0]))
    for j in range(n):
        A, b = rows(j)
        positions, first = [], 0
        for d in data:      # the rows' places in time (recordings apart by 1000 samples)
            positions.append(first + np.flatnonzero(d.mask[:, j]))
            first += d.mask.shape[0] + 1000
        middle += weights[j] ** 2 * _long_run(A[:, ix], b - A[:, ix] @ beta_wls,
                                              np.concatenate(positions), shape)
    dof = max(int(np.sum(counts)) - len(ix), 1)
    inverse = _inverse(_weighted(G_j, h_j, weights, ix)[0])
    covariance = inverse @ middle @ inverse * (np.sum(counts) / dof)
    essential = essential_parameters(G_j, h_j, yy, counts, weights, inflation, ix,
                                     essential_ratio, keep=range(base.rank, len(ix)))
    timing['uncertainty'] = time.perf_counter() - start
    start = time.perf_counter()
    # the compressed full-parameter problem: ‖A φ − b‖² = ‖R φ − z‖² + const
    G, h = _weighted(G_j, h_j, weights, None)
    terms = joint_terms(prior, offset)
    phi0 = np.concatenate((arm_parameters(prior, offset), np.ones(P - p)))
    if gains:           # offsets in joint efforts (k·o): around 0
        phi0[:p][np.tile(np.r_[np.zeros(10, bool), np.array(terms) == 'offset'], n)] = 0.0
    std = np.concatenate((_prior_std(prior, phi0[:p], offset, prior_relative),
                          np.full(P - p, 10.0)))
    nonnegative = np.concatenate((np.tile(np.r_[np.zeros(10, bool), [term != 'offset'
                                                                      for term in terms]], n),
                                  np.ones(P - p, bool)))
    if constrained:
        R, z = _compress(G, h)
        timing['compression'] = time.perf_counter() - start
        start = time.perf_counter()
        solution = _solve_sdp(R, z, phi0, std, n, k, nonnegative, solver, verbose)
        timing['semidefinite program'] = time.perf_counter() - start
    else:
        K = base.K
        correction = np.linalg.lstsq(K, beta_wls[:base.rank] - K @ phi0[:p], rcond=None)[0]
        solution = np.concatenate((phi0[:p] + correction, beta_wls[base.rank:]))
    phi, drive_gain = solution[:p].copy(), (solution[p:] if gains else None)
    blocks = phi.reshape(n, k)
    offsets = None
    if offset:
        column = 10 + terms.index('offset')
        if gains:            # the offset column is in joint efforts: k·o
            blocks[:, column] = blocks[:, column] / drive_gain
        offsets = blocks[:, column].copy()
    issues = physical_consistency_issues(phi, n, terms=terms)
    try:
        model = model_with_parameters(prior, phi, stribeck_velocity=velocities)
    except ValueError:
        if constrained:
            raise
        model = None
    fit = [rows(j)[1] - rows(j)[0] @ solution for j in range(n)]
    timing['total'] = sum(timing.values())
    rms = np.array([math.sqrt(np.mean(f ** 2)) if f.size else math.nan for f in fit])
    fixed = (f'{base.rank} of {p} parameter combinations (the base parameters) are '
             f'determined by the data; the other {p - base.rank} directions, and any '
             f'poorly excited ones, come from the prior model (Gaussian prior, standard '
             f'deviation {prior_relative:g} of each link\'s mass scale, length scale '
             f'max(|c|, 0.1 m)), under physical-consistency constraints (pseudo-inertia '
             f'positive definite per link, armature and friction >= 0).')
    value = np.concatenate((base.values(solution[:p]), solution[p:]))
    std_wls = np.sqrt(np.maximum(np.diag(covariance), 0.0))
    with np.errstate(divide='ignore', invalid='ignore'):
        relative = np.where(value != 0.0, std_wls / np.abs(value), math.inf)
    expressions = base.describe().splitlines() + [
        f'drive gain of joint {j + 1}: joint effort / recorded effort' for j in range(P - p)]
    uncertainty = BaseUncertainty(
        names=names, expressions=expressions, value=value, wls=beta_wls, std=std_wls,
        relative_std=relative, essential=np.isin(np.arange(len(ix)), essential),
        covariance=covariance, inflation=inflation,
        dof=int(np.sum(counts)) - len(ix))
    return ArmIdentification(
        model=model, phi=phi, base=base, beta=base.values(phi), condition_number=condition,
        samples=int(sum(d.q.shape[0] for d in data)), rows=int(np.sum(counts)),
        raw_samples=sum(d.raw_samples for d in data), rms_residual=rms, sigma=sigma,
        not_excited=not_excited, fixed=fixed, consistency=issues, timing=timing,
        offset=offsets, drive_gain=drive_gain, uncertainty=uncertainty,
        friction_model=laws, stribeck_velocity=velocities)


def _solve_sdp(R, z, phi0, std, n, k, nonnegative, solver, verbose):
    """minimise ‖R φ − z‖² + ‖(φ − φ0)/s‖² s.t. pseudo-inertias ⪰ ε (links i < n, k
    entries per index), φ[nonnegative] ≥ 0, in the scaled variable x = (φ − φ0)/s."""
    cp = _require('cvxpy')
    p = R.shape[1]
    x = cp.Variable(p)
    phi = phi0 + cp.multiply(std, x)
    residual = (R * std[None, :]) @ x - (z - R @ phi0)
    objective = cp.Minimize(cp.sum_squares(residual) + cp.sum_squares(x))
    constraints = []
    for i in range(n):
        o = i * k
        m, h = phi[o], phi[o + 1:o + 4]
        ixx, ixy, ixz, iyy, iyz, izz = (phi[o + 4 + c] for c in range(6))
        trace_half = 0.5 * (ixx + iyy + izz)
        J = cp.bmat([[trace_half - ixx, -ixy, -ixz, h[0]],
                     [-ixy, trace_half - iyy, -iyz, h[1]],
                     [-ixz, -iyz, trace_half - izz, h[2]],
                     [h[0], h[1], h[2], m]])
        s_m, s_i = std[o], std[o + 4]
        eps = 1e-6 * np.diag([s_i, s_i, s_i, s_m])
        constraints.append(0.5 * (J + J.T) >> eps)
    index = np.flatnonzero(nonnegative)
    constraints.append(phi[index] >= 0.0)
    problem = cp.Problem(objective, constraints)
    installed = cp.installed_solvers()
    solvers = [solver] if solver else [s for s in ('CLARABEL', 'SCS') if s in installed]
    status = 'not solved'
    for name in solvers or [None]:
        try:
            problem.solve(solver=name, verbose=verbose)
        except cp.error.SolverError as error:
            status = f'{name} failed ({error})'
            continue
        status = problem.status
        if status in ('optimal', 'optimal_inaccurate') and x.value is not None:
            break
    else:
        raise RuntimeError(f'identify_arm: the semidefinite program was not solved: {status}')
    phi = phi0 + std * np.asarray(x.value)
    phi[index] = np.maximum(phi[index], 0.0)       # solver rounding (≈ -1e-13)
    return phi


def validation_errors(model, t, q, qd, tau, cutoff_frequency=10.0, sample_rate=100.0,
                      friction_velocity=0.02, offset=None, effort_timing='instant',
                      drive_gain=None):
    """RMS effort error of `model` on recorded data (prepared as in `identify_arm`:
    filtered q, q̇, τ, q̈ from the filtered q̇; samples where a joint moves slower than
    `friction_velocity` left out for that joint) and the relative error, RMS error /
    RMS measured effort, per joint: two (n,) arrays. The prediction of a recorded effort
    is τ_model / drive_gain + offset; `offset` (n,): the effort sensor's offsets (default:
    the model's ``effort_offset``), `drive_gain` (n,): τ = gain × recorded effort
    (default 1)."""
    keys, functions = _feature_functions(model.friction_model,
                                         [[v] for v in model.stribeck_velocity])
    data = _prepare(model, t, q, qd, tau, cutoff_frequency, sample_rate, friction_velocity,
                    effort_timing, functions)
    predicted = dynamics.inverse_dynamics(model, data.q, data.qd, data.qdd)
    # friction as filtered like the efforts (see `_prepare`): the levels times the
    # filtered columns instead of the law at the filtered velocity
    levels = {'coulomb': model.coulomb_friction,
              'coulomb_negative': model.coulomb_friction_negative,
              'stribeck': model.stribeck_friction}
    for columns, sign in ((friction_columns(model.friction_model, model.stribeck_velocity,
                                            data.qd, dict(zip(keys, data.features),
                                                          sign=data.coulomb)), 1.0),
                          (friction_columns(model.friction_model, model.stribeck_velocity,
                                            data.qd), -1.0)):
        for term, level in levels.items():
            predicted += sign * level * columns[term]
    if drive_gain is not None:
        predicted = predicted / np.asarray(drive_gain, dtype=float)
    offset = model.effort_offset if offset is None else offset
    if np.any(np.asarray(offset, dtype=float) != 0.0):
        predicted = predicted + np.asarray(offset, dtype=float)
    error = data.tau - predicted
    rms, relative = np.empty(model.n), np.empty(model.n)
    for j in range(model.n):
        rows = data.mask[:, j]
        if not np.any(rows):
            rms[j] = relative[j] = math.nan
            continue
        rms[j] = math.sqrt(np.mean(error[rows, j] ** 2))
        relative[j] = rms[j] / max(math.sqrt(np.mean(data.tau[rows, j] ** 2)), 1e-300)
    return rms, relative


# ---------------------------------------------------------------------- excitation


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


def optimal_excitation(model, duration, q0, seed=0, harmonics=5, base_frequency=0.1,
                       samples=60, candidates=8, iterations=20, limits=None,
                       offset=False, **margins):
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
    velocity and acceleration bounds (so every candidate is admissible). Raises ValueError
    when q0 is outside the limits."""
    optimize = _require('scipy.optimize')
    n = model.n
    q0 = np.asarray(q0, dtype=float).reshape(-1)
    if q0.shape != (n,) or not np.all(np.isfinite(q0)):
        raise ValueError(f'q0: expected {n} finite values, got {q0}')
    bad = np.flatnonzero((q0 < model.position_min) | (q0 > model.position_max))
    if bad.size:
        raise ValueError(f'q0[{bad[0]}]: {q0[bad[0]]} is outside the position limits '
                         f'[{model.position_min[bad[0]]}, {model.position_max[bad[0]]}]')
    limits = excitation_limits(model, **margins) if limits is None else limits
    duration = float(duration)
    if not duration > 0.0:
        raise ValueError(f'duration: must be > 0, got {duration}')
    harmonics = int(harmonics)
    if harmonics < 2:
        raise ValueError(f'harmonics: need at least 2, got {harmonics}')
    periods = max(1, int(round(duration * base_frequency)))
    omega = 2.0 * math.pi * periods / duration
    orders = np.arange(1, harmonics + 1, dtype=float)
    Na, Nb = _null_basis(orders), _null_basis(orders ** 2)
    h1 = harmonics - 1
    t = np.linspace(0.0, 2.0 * math.pi / omega, samples, endpoint=False)
    phase = omega * np.outer(t, orders)
    S, C = np.sin(phase), np.cos(phase) - 1.0
    w = omega * orders
    Sd, Cd = np.cos(phase) * w, -np.sin(phase) * w
    Sdd, Cdd = -np.sin(phase) * w ** 2, -np.cos(phase) * w ** 2
    up = np.maximum(limits['position_max'] - q0, 0.0)
    down = np.maximum(q0 - limits['position_min'], 0.0)
    base = base_parameters(model, offset)
    cache = {}

    def trajectory(x):
        X = x.reshape(n, 2 * h1)
        a, b = X[:, :h1] @ Na.T, X[:, h1:] @ Nb.T
        dq = S @ a.T + C @ b.T
        qd = Sd @ a.T + Cd @ b.T
        qdd = Sdd @ a.T + Cdd @ b.T
        with np.errstate(divide='ignore', invalid='ignore'):
            factor = np.ones(n)
            for excess, room in ((np.max(dq, axis=0), up), (np.max(-dq, axis=0), down),
                                 (np.max(np.abs(qd), axis=0), limits['velocity']),
                                 (np.max(np.abs(qdd), axis=0), limits['acceleration'])):
                factor = np.minimum(factor, np.where(excess > room, room / excess, 1.0))
        factor = np.nan_to_num(factor)
        return a * factor[:, None], b * factor[:, None], q0 + dq * factor, qd * factor, \
            qdd * factor

    def objective(x):
        return _log_condition(*trajectory(x)[2:])

    def _log_condition(q, qd, qdd):
        Y = base.regressor(arm_regressor(model, q, qd, qdd, offset=offset))
        if 'weights' not in cache:
            tau = dynamics.inverse_dynamics(model, q, qd, qdd)
            cache['weights'] = 1.0 / np.maximum(np.sqrt(np.mean(tau ** 2, axis=0)), 1e-3)
        Y = (Y * cache['weights'][None, :, None]).reshape(-1, Y.shape[-1])
        G = Y.T @ Y
        d = np.sqrt(np.diag(G))
        if not np.all(d > 0.0):
            return 50.0
        eigenvalues = np.linalg.eigvalsh(G / np.outer(d, d))
        if not eigenvalues[0] > 1e-20:
            return 50.0
        return 0.5 * math.log(eigenvalues[-1] / eigenvalues[0])

    rng = np.random.default_rng(seed)
    best = None
    for _ in range(max(1, int(candidates))):
        x = rng.normal(size=n * 2 * h1) / np.tile(np.concatenate((orders[1:], orders[1:])), n)
        value = objective(x)
        if best is None or value < best[0]:
            best = (value, x)
    value, x = best
    if iterations > 0:
        result = optimize.minimize(objective, x, method='L-BFGS-B',
                                   options={'maxiter': int(iterations), 'eps': 1e-4})
        if result.fun < value:
            value, x = result.fun, result.x
    a, b, *_ = trajectory(x)
    # the bounds were imposed at the optimisation's samples: check them on a fine grid
    # (2000 points per period) and scale a joint down where it exceeds one between samples
    fine = Excitation(duration, omega, q0, a, b)
    dq, qd, qdd = fine.sample(np.linspace(0.0, 2.0 * math.pi / omega, 2001))
    dq = dq - q0
    with np.errstate(divide='ignore', invalid='ignore'):
        factor = np.ones(n)
        for excess, room in ((np.max(dq, axis=0), up), (np.max(-dq, axis=0), down),
                             (np.max(np.abs(qd), axis=0), limits['velocity']),
                             (np.max(np.abs(qdd), axis=0), limits['acceleration'])):
            factor = np.minimum(factor, np.where(excess > room, room / excess, 1.0))
    factor = np.nan_to_num(factor)
    a, b = a * factor[:, None], b * factor[:, None]
    if np.any(factor < 1.0):
        q, qd, qdd = Excitation(duration, omega, q0, a, b).sample(t)
        value = _log_condition(q, qd, qdd)
    return Excitation(duration, omega, q0, a, b, condition=math.exp(value), limits=limits)


# ---------------------------------------------------------------------- simulation helpers


def perturbed_model(model, fraction=0.3, seed=0, armature=None, viscous=None, coulomb=None):
    """A consistently perturbed copy of `model` (the "true" arm of a simulation study):
    each link's mass × (1 + u), its centre of mass moved by u·max(|c|, 0.05 m) per axis,
    its centroidal principal moments × (1 + u) (then pulled back inside the triangle
    inequality) and its principal axes turned by up to `fraction`·0.5 rad, every u uniform
    in ±`fraction` (generator seeded with `seed`); armature, viscous and Coulomb friction
    (per joint, or scalars) replace the model's when given. Links that are not physical to
    start with (e.g. textbook data with zero mass) are scaled as a whole instead."""
    rng = np.random.default_rng(seed)
    n = model.n
    mass = np.array(model.mass, dtype=float)
    com = np.array(model.com, dtype=float)
    inertia = np.array(model.inertia, dtype=float)
    for i in range(n):
        u = rng.uniform(-fraction, fraction, size=8)
        moments, axes = np.linalg.eigh(inertia[i])
        physical = mass[i] > 0.0 and moments[0] > 0.0 and \
            moments[2] <= moments[0] + moments[1]
        if not physical:
            mass[i] *= 1.0 + u[0]
            inertia[i] *= 1.0 + u[0]
            continue
        mass[i] *= 1.0 + u[0]
        com[i] = com[i] + u[1:4] * max(float(np.linalg.norm(com[i])), 0.05)
        moments = moments * (1.0 + u[4:7])
        largest = int(np.argmax(moments))
        others = float(np.sum(moments) - moments[largest])
        if moments[largest] > 0.98 * others:
            moments[largest] = 0.98 * others
        angle = 0.5 * fraction * u[7] / max(fraction, 1e-12)
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        K = algorithms.skew(axis)
        turn = np.eye(3) + math.sin(angle) * K + (1.0 - math.cos(angle)) * K @ K
        axes = turn @ axes
        inertia[i] = (axes * moments) @ axes.T
    joints = np.column_stack([
        np.broadcast_to(np.asarray(value if value is not None else default, dtype=float), (n,))
        for value, default in ((armature, model.armature), (viscous, model.viscous_friction),
                               (coulomb, model.coulomb_friction))])
    links = np.column_stack((mass, mass[:, None] * com,
                             [_urdf6(inertia[i] + algorithms.steiner(mass[i], com[i]))
                              for i in range(n)]))
    # link frame parameters of the rigid links; the payload (if any) is added back
    links[-1] += _payload_parameters(model)
    phi = arm_parameters(model).reshape(model.n, -1)
    phi[:, :13] = np.column_stack((links, joints))
    return model_with_parameters(model, phi.reshape(-1))


def drive_terms(model, armature=0.5, viscous=0.05, coulomb=0.05, acceleration=2.0,
                seed=0):
    """Per-joint armature, viscous and Coulomb friction of a plausible drive for `model`,
    relative to the arm: armature = `armature` × joint j's mean diagonal inertia over
    random configurations; Coulomb = `coulomb` × S_j and viscous = `viscous` × S_j per
    rad/s (m/s), with the effort scale S_j = max(RMS gravity effort, mean diagonal
    inertia × `acceleration`). Returns a dict for `perturbed_model`."""
    rng = np.random.default_rng(seed)
    q = _random_states(model, 40, rng)[0]
    rigid = model_with_parameters(model, arm_parameters(model) * np.tile(
        np.r_[np.ones(10), np.zeros(_per_index(model, False) - 10)], model.n))
    M = np.mean(np.diagonal(dynamics.mass_matrix(rigid, q), axis1=1, axis2=2), axis=0)
    g = np.sqrt(np.mean(dynamics.gravity_torques(rigid, q) ** 2, axis=0))
    scale = np.maximum(g, M * acceleration)
    return {'armature': armature * M, 'viscous': viscous * scale, 'coulomb': coulomb * scale}


class Experiment(NamedTuple):
    """A simulated recording at the control instants: t (K,); q, qd, tau (K, n) as
    measured (noisy states, noisy efforts); q_true, qd_true, tau_true (the plant's state
    and the applied effort); qdd_true: the plant's acceleration at the start of each
    control period (forward dynamics of the true state and effort)."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    q_true: np.ndarray
    qd_true: np.ndarray
    tau_true: np.ndarray
    qdd_true: np.ndarray


def closed_loop_experiment(plant, model, reference, duration, q0, kp=100.0, kd=20.0,
                           control_period=0.001, plant_step=0.001, sigma_q=1e-3,
                           sigma_qd=0.01, effort_noise=0.01, seed=0):
    """Computed torque with `model` tracking `reference` (t -> q_d, q̇_d, q̈_d) on `plant`
    in simulated time (`simulation.simulate_closed_loop`), the controller seeing states
    with Gaussian noise (sigma_q [rad | m], sigma_qd [rad/s | m/s]); the recorded efforts
    carry Gaussian noise of `effort_noise` × each joint's RMS applied effort. Returns an
    `Experiment` sampled every control period."""
    from robot_dynamics import simulation
    rng = np.random.default_rng(seed)
    n = plant.n
    measured = []

    def measurement(q, qd):
        qm = q + rng.normal(0.0, sigma_q, n) if sigma_q else q
        qdm = qd + rng.normal(0.0, sigma_qd, n) if sigma_qd else qd
        measured.append((qm, qdm))
        return qm, qdm

    controller = simulation.computed_torque(model, kp, kd, reference)
    run = simulation.simulate_closed_loop(plant, controller, reference, duration,
                                          control_period, plant_step, q0, np.zeros(n),
                                          measurement=measurement)
    every = int(round(control_period / plant_step))
    index = np.arange(0, run.t.size - 1, every)
    q_m = np.array([m[0] for m in measured])
    qd_m = np.array([m[1] for m in measured])
    tau_true = run.tau[index]
    rms = np.sqrt(np.mean(tau_true ** 2, axis=0))
    tau_m = tau_true + rng.normal(size=tau_true.shape) * (effort_noise * rms)
    qdd = dynamics.forward_dynamics(plant, run.q[index], run.qd[index], tau_true)
    return Experiment(t=run.t[index], q=q_m, qd=qd_m, tau=tau_m, q_true=run.q[index],
                      qd_true=run.qd[index], tau_true=tau_true, qdd_true=qdd)
