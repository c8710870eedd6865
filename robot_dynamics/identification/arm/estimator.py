"""The estimator `identify_arm` (maximum a posteriori under physical-consistency
constraints, a semidefinite program) and `validation_errors`."""

import math
import time
from typing import NamedTuple

import numpy as np

from robot_dynamics.dynamics import algorithms
from robot_dynamics import dynamics
from robot_dynamics.model import FRICTION_MODELS, Payload, RobotModel, _payload
from robot_dynamics.identification.arm.base import BaseParameters, _random_states, base_parameters
from robot_dynamics.identification.arm.least_squares import (_compress, _inverse, _long_run, _noise_shape, _weighted,
                               _wls_statistics, essential_parameters)
from robot_dynamics.identification.arm.libraries import _require
from robot_dynamics.identification.arm.models import model_with_parameters, physical_consistency_issues
from robot_dynamics.identification.arm.parameters import (FRICTION_LEVELS, _per_index, _urdf6, arm_parameters,
                            joint_terms)
from robot_dynamics.identification.arm.recording import ACCELERATION_SOURCES, _prepare
from robot_dynamics.identification.arm.regressor import (_feature_functions, _set_friction_columns, arm_regressor,
                           friction_columns)


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
    each joint's law and the velocity scale chosen; accelerations: where q̈ came from
    ('velocity' or 'position', see `identify_arm`); acceleration_fit: {source: the RMS
    over joints of the relative residual of an ordinary least-squares fit} for each source
    compared (empty when the source was given); velocities_recorded: False when no
    recording had velocities (q̇ and q̈ from the positions); drive_fit: with 'auto'
    offsets or friction, {'scores': {(law, offset): held-out relative residual},
    'chosen': (law, offset), 'folds': blocks} (empty otherwise)."""

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
    accelerations: str = 'velocity'
    acceleration_fit: dict = {}
    velocities_recorded: bool = True
    drive_fit: dict = {}

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
    pl = payload if isinstance(payload, Payload) else _payload(dict(payload))
    com = np.asarray(pl.com, dtype=float)
    return np.concatenate(([pl.mass], pl.mass * com,
                           _urdf6(np.asarray(pl.inertia) + algorithms.steiner(pl.mass, com))))


def identify_arm(prior_model, t, q, qd, tau, offset=False, cutoff_frequency=10.0,
                 sample_rate=100.0, friction_velocity=0.02, prior_relative=0.5,
                 max_condition=1000.0, effort_timing='instant', base=None, solver=None,
                 verbose=False, friction=None, velocity_grid=VELOCITY_GRID,
                 payload_recording=None, payload=None, essential_ratio=100.0,
                 constrained=True, accelerations='auto'):
    """Estimate the whole arm's parameters from recorded motion and efforts.

    t (K,) [s], q, qd, tau (K, n): measured positions, velocities and applied efforts (or
    lists of such arrays, one per recording), in the model's joint order.

    Data: `_prepare` (zero-phase Butterworth filter at `cutoff_frequency` Hz of q, q̇ and
    τ, decimation to `sample_rate` Hz); q̈ from `accelerations`: 'velocity' (the
    derivative of the filtered recorded q̇), 'position' (the second derivative of the
    filtered recorded q; the only one for recordings without velocities: q̇ None or all
    NaN, q̇ from q too) or 'auto' (default: the one whose ordinary least-squares fit of
    the base parameters leaves the smaller relative residual on these data; a source's
    noise in q̈, times the inertia, is residual no parameter can explain: noisy velocity
    sensors favour the positions, coarse encoders or stamps off the sampling instants
    favour the velocities); `effort_timing` says whether an effort sample is measured at its
    instant ('instant', default: a real drive's measured effort), held over the following
    period ('held_after': `closed_loop_experiment`) or over the preceding one
    ('held_before': the plant node's /joint_states), see `_prepare`. A joint's equation at
    a sample is left out when the joint moves slower than `friction_velocity` (its
    friction is not a function of q̇ there).

    Sensor and drive model: ``offset=True`` adds a constant effort offset per joint (a
    sensor bias: recorded = applied + offset; written as ``effort_offset``, which the
    dynamics and the controller's command do not use). ``offset='auto'`` and/or
    ``friction='auto'`` choose them from the data (`_choose_drive_model`: offsets on or
    off, one law for all joints among coulomb, tanh and stribeck, by the held-out residual
    of a least-squares fit on FOLDS contiguous blocks; ``drive_fit`` says what was
    compared; not with a payload recording, where 'auto' is no offset and the prior's
    laws). `friction`: each joint's friction
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
    stopwatch = _Stopwatch()
    _require('scipy.signal')
    _require('cvxpy')
    stopwatch.lap('imports')
    drive_choice = {}
    if offset == 'auto' or friction == 'auto':
        if payload_recording is not None:       # drive gains: not compared; the defaults
            offset = False if offset == 'auto' else offset
            friction = None if friction == 'auto' else friction
        else:
            drive_choice = _choose_drive_model(
                prior_model, (t, q, qd, tau), offset, friction, cutoff_frequency,
                sample_rate, friction_velocity, effort_timing, velocity_grid, accelerations)
            offset, friction = drive_choice['offset'], drive_choice['friction']
            prior_model = drive_choice['prior']
            accelerations = drive_choice['accelerations']
            if any(law in ('tanh', 'stribeck') for law in prior_model.friction_model):
                velocity_grid = None            # the scales the comparison found
            stopwatch.lap('friction law and offsets chosen')
    prior = _with_laws(prior_model, friction)
    n = prior.n
    velocities = np.array(prior.stribeck_velocity, dtype=float)
    smooth = [j for j in range(n) if prior.friction_model[j] in ('tanh', 'stribeck')]
    grid = _checked_grid(velocity_grid)
    keys, functions = _feature_functions(prior.friction_model,
                                         [[velocities[j], *grid] for j in range(n)])
    gains = payload_recording is not None
    if gains and payload is None:
        raise ValueError('payload: the payload recording needs the payload\'s mass, com '
                         'and inertia')
    if accelerations not in ACCELERATION_SOURCES + ('auto',):
        raise ValueError(f'accelerations: expected auto or one of {ACCELERATION_SOURCES}, '
                         f'got {accelerations!r}')
    recordings = [(t, q, qd, tau)] + ([tuple(payload_recording)] if gains else [])
    data = [_prepare(prior, *r, cutoff_frequency, sample_rate, friction_velocity,
                     effort_timing, functions) for r in recordings]
    stopwatch.lap('filter')
    base = base_parameters(prior, offset) if base is None else base
    stopwatch.lap('base parameters')
    effort = [np.concatenate([d.tau[d.mask[:, j], j] for d in data]) for j in range(n)]
    scale0 = np.array([math.sqrt(np.mean(e ** 2)) if e.size else 1.0 for e in effort]) + 1e-9
    recorded = any(d.velocities_recorded for d in data)
    sources = ((ACCELERATION_SOURCES if recorded else ('position',))
               if accelerations == 'auto' else (accelerations,))
    candidates = {}
    for source in sources:
        chosen = [d.with_accelerations(source) for d in data]
        candidate = _Equations(prior, offset, chosen, keys, velocities.copy())
        candidate.normal_equations(payload if gains else None)
        candidates[source] = candidate
    stopwatch.lap('regressor and normal equations')
    p, P = candidates[sources[0]].p, candidates[sources[0]].P
    ix = np.concatenate((base.independent, np.arange(p, P))).astype(int)
    fit = {source: _relative_fit(c, ix, 1.0 / scale0 ** 2) for source, c in candidates.items()}
    accelerations = min(fit, key=fit.get)
    equations = candidates[accelerations]
    velocities = equations.velocities
    fit = fit if len(fit) > 1 else dict(drive_choice.get('acceleration_fit', {}))
    if smooth and grid:
        _search_velocity_scales(equations, smooth, grid, ix, 1.0 / scale0 ** 2)
        stopwatch.lap('velocity scales')
    sigma, weights = _residual_weights(equations, ix, scale0)
    names = base.base_names + [f'joint{j + 1}.drive_gain' for j in range(P - p)]
    condition, not_excited = _conditioning(equations, weights, ix, names, friction_velocity,
                                         max_condition)
    stopwatch.lap('least squares')
    beta_wls, covariance, inflation, essential = _uncertainty(
        equations, t, weights, ix, base.rank, sample_rate, cutoff_frequency, essential_ratio)
    stopwatch.lap('uncertainty')
    phi0, std, nonnegative = _prior(equations, prior_relative)
    if constrained:
        # the compressed full-parameter problem: ‖A φ − b‖² = ‖R φ − z‖² + const
        R, z = _compress(*_weighted(equations.G_j, equations.h_j, weights, None))
        stopwatch.lap('compression')
        solution = _solve_sdp(R, z, phi0, std, n, equations.k, nonnegative, solver, verbose)
        stopwatch.lap('semidefinite program')
    else:
        K = base.K
        correction = np.linalg.lstsq(K, beta_wls[:base.rank] - K @ phi0[:p], rcond=None)[0]
        solution = np.concatenate((phi0[:p] + correction, beta_wls[base.rank:]))
    phi, drive_gain, offsets = _split_solution(equations, solution, gains)
    issues = physical_consistency_issues(phi, n, terms=equations.terms)
    try:
        model = model_with_parameters(prior, phi, stribeck_velocity=velocities)
    except ValueError:
        if constrained:
            raise
        model = None
    rms = _rms_residual(equations, solution)
    timing = stopwatch.timing
    timing['total'] = sum(timing.values())
    fixed = _fixed_text(base.rank, p, prior_relative)
    counts = equations.counts
    uncertainty = _base_uncertainty(base, solution, names, beta_wls, covariance, inflation,
                                    essential, counts, p, ix)
    return ArmIdentification(
        model=model, phi=phi, base=base, beta=base.values(phi), condition_number=condition,
        samples=int(sum(d.q.shape[0] for d in data)), rows=int(np.sum(counts)),
        raw_samples=sum(d.raw_samples for d in data), rms_residual=rms, sigma=sigma,
        not_excited=not_excited, fixed=fixed, consistency=issues, timing=timing,
        offset=offsets, drive_gain=drive_gain, uncertainty=uncertainty,
        friction_model=prior.friction_model, stribeck_velocity=velocities,
        accelerations=accelerations, acceleration_fit=fit, velocities_recorded=recorded,
        drive_fit={key: value for key, value in drive_choice.items()
                   if key in ('scores', 'chosen', 'folds')})


GIVEN = 'given'         # `_choose_drive_model`: the friction law given, offsets compared
DRIVE_CANDIDATES = (('coulomb', False), ('coulomb', True), ('tanh', False), ('tanh', True),
                    ('stribeck', False), ('stribeck', True))
FOLDS = 5               # contiguous blocks of the rows: the held-out comparison
SIMPLER = 1e-3          # a richer candidate must leave this share less residual


def _choose_drive_model(prior_model, recording, offset, friction, cutoff_frequency,
                        sample_rate, friction_velocity, effort_timing, velocity_grid,
                        accelerations):
    """The effort offsets (on or off) and the friction law (one for every joint: coulomb,
    tanh or stribeck) that `identify_arm` takes when given 'auto': each candidate's ordinary
    least-squares fit of the base parameters is held out in turn on FOLDS contiguous
    blocks of the rows (fitted on the others), and the candidate leaving the smallest
    held-out relative residual (RMS over the rows of residual / RMS effort of the joint)
    is kept; a richer one must improve on a simpler one by more than SIMPLER. The velocity
    scales of tanh and stribeck are searched first (as `identify_arm` does). Returns
    {'offset', 'friction', 'prior' (the model with the chosen velocity scales),
    'accelerations', 'acceleration_fit', 'scores' {(law, offset): held-out residual},
    'chosen' (law, offset), 'folds'}."""
    t, q, qd, tau = recording
    given = friction != 'auto'          # the law(s) given (None: the prior's): offsets only
    laws = [GIVEN] if given else [c[0] for c in DRIVE_CANDIDATES[::2]]
    offsets = [offset] if offset != 'auto' else [False, True]
    richest = True in offsets
    grid = _checked_grid(velocity_grid)
    n = prior_model.n
    # the data once, with the features of every smooth law compared
    keys, functions = [], []
    per_joint = ([_with_laws(prior_model, friction).friction_model] if given else
                 [[law] * n for law in ('tanh', 'stribeck')])
    for joint_laws in per_joint:
        more = _feature_functions(joint_laws, [[v, *grid]
                                               for v in prior_model.stribeck_velocity])
        keys += more[0]
        functions += more[1]
    data = _prepare(prior_model, t, q, qd, tau, cutoff_frequency, sample_rate,
                    friction_velocity, effort_timing, functions)
    weights = 1.0 / (np.array([math.sqrt(np.mean(data.tau[data.mask[:, j], j] ** 2))
                               if np.any(data.mask[:, j]) else 1.0 for j in range(n)])
                     + 1e-9) ** 2
    # Coulomb is Stribeck without its Stribeck columns: one set of equations for both
    groups = ({'given': [GIVEN]} if given
              else {'stribeck': ['coulomb', 'stribeck'], 'tanh': ['tanh']})
    scores, found, source_fit = {}, {}, {}
    used = accelerations
    for group, members in groups.items():
        prior = _with_laws(prior_model, friction if given else group)
        velocities = np.array(prior.stribeck_velocity, dtype=float)
        base = base_parameters(prior, richest)
        if accelerations != 'auto':
            sources = (accelerations,)
        elif source_fit:
            sources = (used,)
        else:
            sources = ACCELERATION_SOURCES if data.velocities_recorded else ('position',)
        candidates = {}
        for source in sources:
            equations = _Equations(prior, richest, [data.with_accelerations(source)], keys,
                                   velocities.copy())
            equations.normal_equations()
            candidates[source] = equations
        ix = np.asarray(base.independent, dtype=int)
        if len(candidates) > 1:
            source_fit = {s: _relative_fit(c, ix, weights) for s, c in candidates.items()}
        used = min(source_fit, key=source_fit.get) if source_fit else sources[0]
        equations = candidates[used]
        smooth = [j for j in range(n) if prior.friction_model[j] in ('tanh', 'stribeck')]
        if smooth and grid:
            _search_velocity_scales(equations, smooth, grid, ix, weights)
        k, terms = equations.k, equations.terms
        drop = {'offset': [j * k + 10 + terms.index('offset') for j in range(n)]
                if richest else [],
                'stribeck': [j * k + 10 + terms.index('stribeck') for j in range(n)]
                if 'stribeck' in terms else []}
        parts = _fold_parts(equations, weights)
        for law in members:
            found[law] = (prior if given else _with_laws(prior_model, law),
                          equations.velocities.copy())
            for with_offset in offsets:
                removed = set(drop['offset'] if not with_offset else []) | set(
                    drop['stribeck'] if law == 'coulomb' else [])
                columns = np.array([c for c in ix if c not in removed], dtype=int)
                scores[(law, with_offset)] = _held_out_fit(parts, columns,
                                                           np.sum(equations.counts))
    accelerations_used = used
    chosen = None
    for candidate in [c for c in DRIVE_CANDIDATES if c in scores] + [
            c for c in scores if c not in DRIVE_CANDIDATES]:
        if chosen is None or scores[candidate] < (1.0 - SIMPLER) * scores[chosen]:
            chosen = candidate
    law, with_offset = chosen
    prior, velocities = found[law]
    if any(law in ('tanh', 'stribeck') for law in prior.friction_model):
        block = prior.to_params()
        block['stribeck_velocity'] = [float(v) for v in velocities]
        prior = RobotModel.from_params(block)
    if given:           # the scores name the law as given
        laws = set(prior.friction_model)
        label = laws.pop() if len(laws) == 1 else 'the given laws'
        scores = {(label, o): v for (_, o), v in scores.items()}
        chosen = (scores and next(iter(scores))[0], with_offset)
    return {'offset': with_offset, 'friction': friction if given else law, 'prior': prior,
            'accelerations': accelerations_used,
            'acceleration_fit': source_fit if len(source_fit) > 1 else {},
            'scores': scores, 'chosen': chosen, 'folds': FOLDS}


def _fold_parts(equations, weights, folds=FOLDS):
    """Per fold [(G, h, yy)] of the weighted normal equations (`weights` (n,): 1 / each
    joint's mean square effort) of every joint's rows cut into `folds` contiguous blocks
    (in time), for `_held_out_fit`."""
    parts = []
    for f in range(folds):
        G, h, yy = np.zeros((equations.P, equations.P)), np.zeros(equations.P), 0.0
        for j in range(equations.n):
            A, b = equations.rows(j)
            edges = np.linspace(0, A.shape[0], folds + 1).astype(int)
            Af, bf = A[edges[f]:edges[f + 1]], b[edges[f]:edges[f + 1]]
            # einsum, not BLAS: a threaded GEMM can be many times slower on a loaded machine
            G += weights[j] * np.einsum('kp,kq->pq', Af, Af)
            h += weights[j] * np.einsum('kp,k->p', Af, bf)
            yy += weights[j] * float(bf @ bf)
        parts.append((G, h, yy))
    return parts


def _held_out_fit(parts, columns, rows):
    """The held-out relative residual of an ordinary least-squares fit of the φ entries
    `columns`: each fold of `_fold_parts` predicted by the fit of the others; the RMS over
    all `rows` of the residual, each joint's relative to its RMS effort."""
    c = np.asarray(columns, dtype=int)
    G_all = sum(p[0] for p in parts)[np.ix_(c, c)]
    h_all = sum(p[1] for p in parts)[c]
    residual = 0.0
    for G, h, yy in parts:
        G, h = G[np.ix_(c, c)], h[c]
        x = _inverse(G_all - G, h_all - h)
        residual += yy - 2.0 * h @ x + x @ G @ x
    return math.sqrt(max(residual, 0.0) / max(float(rows), 1.0))


def _checked_grid(velocity_grid):
    """`identify_arm`'s velocity grid as a list of floats ([] for None); ValueError when
    one is not a positive number."""
    grid = [] if velocity_grid is None else [float(v) for v in velocity_grid]
    if any(not (math.isfinite(v) and v > 0.0) for v in grid):
        raise ValueError(f'velocity_grid: expected positive velocities, got {velocity_grid}')
    return grid


def _rms_residual(equations, solution):
    """Per joint RMS of b_j − A_j x on the estimation data (nan for a joint without rows)."""
    fit = [equations.rows(j)[1] - equations.rows(j)[0] @ solution
           for j in range(equations.n)]
    return np.array([math.sqrt(np.mean(f ** 2)) if f.size else math.nan for f in fit])


class _Stopwatch:
    """Seconds per stage of `identify_arm` (`ArmIdentification.timing`)."""

    def __init__(self):
        self.timing = {}
        self.start = time.perf_counter()

    def lap(self, stage):
        self.timing[stage] = time.perf_counter() - self.start
        self.start = time.perf_counter()


class _Equations:
    """`identify_arm`'s equations, joint by joint: the regressor Y of every recording (the
    friction columns filtered like the efforts, `_prepare`'s features), joint j's rows
    A_j (N_j, P), b_j (the samples where it moves, of every recording) and the normal
    equations G_j = A_jᵀA_j (n, P, P), h_j = A_jᵀb_j (n, P), yy_j = b_jᵀb_j (n,), counts
    N_j (n,). With a payload the unknowns are φ (p) and the n drive gains (P = p + n).
    `velocities` (n,) is updated in place by `set_velocity`."""

    def __init__(self, prior, offset, data, keys, velocities):
        self.prior, self.offset, self.data = prior, offset, data
        self.n = prior.n
        self.laws = prior.friction_model
        self.velocities = velocities
        self.terms = joint_terms(prior, offset)
        self.k = _per_index(prior, offset)
        self.filtered = [dict(zip(keys, d.features), sign=d.coulomb) for d in data]
        self.Y = [arm_regressor(prior, d.q, d.qd, d.qdd, offset=offset) for d in data]
        for Yr, d, f in zip(self.Y, data, self.filtered):
            _set_friction_columns(Yr, prior, offset, friction_columns(self.laws, velocities,
                                                                      d.qd, f))
        self.level_terms = [(t, term) for t, term in enumerate(self.terms)
                            if term in FRICTION_LEVELS]
        self.p = self.Y[0].shape[-1]
        self.P = self.p
        self.payload_torque = None
        self.cache = {}

    def normal_equations(self, payload=None):
        """Build every joint's rows and normal equations; `payload`: the payload of the
        second recording (drive gains estimated), None without."""
        n, k, p = self.n, self.k, self.p
        if payload is not None:
            self.P = p + n
            self.payload_torque = (self.Y[1][..., (n - 1) * k:(n - 1) * k + 10]
                                   @ _payload_vector(payload))
        self.G_j = np.empty((n, self.P, self.P))
        self.h_j = np.empty((n, self.P))
        self.yy = np.empty(n)
        self.counts = np.array([sum(int(np.sum(d.mask[:, j])) for d in self.data)
                                for j in range(n)], dtype=float)
        for j in range(n):
            A, b = self.rows(j)
            # einsum, not BLAS: a threaded GEMM can be many times slower on a loaded machine
            self.G_j[j] = np.einsum('kp,kq->pq', A, A)
            self.h_j[j] = np.einsum('kp,k->p', A, b)
            self.yy[j] = float(b @ b)

    def rows(self, j):
        """A_j (N_j, P), b_j (N_j,): joint j's equations of every recording."""
        if j not in self.cache:
            self.cache[j] = self._build(j)
        return self.cache[j]

    def _build(self, j):
        gains = self.payload_torque is not None
        A, b = [], []
        for r, d in enumerate(self.data):
            m = d.mask[:, j]
            block = np.zeros((int(np.sum(m)), self.P))
            block[:, :self.p] = self.Y[r][m, j]
            if gains:
                block[:, self.p + j] = -d.tau[m, j]
                b.append(np.zeros(block.shape[0]) if r == 0 else -self.payload_torque[m, j])
            else:
                b.append(d.tau[m, j])
            A.append(block)
        return np.concatenate(A), np.concatenate(b)

    def level_columns(self, j):
        """Joint j's friction-level columns of φ."""
        return [j * self.k + 10 + t for t, term in enumerate(self.terms)
                if term in FRICTION_LEVELS]

    def set_velocity(self, j, v):
        """Joint j's velocity scale set to v: its friction columns of Y, its rows and its
        normal equations updated."""
        self.velocities[j] = v
        self._set_joint(j)
        self._refresh(j, self.level_columns(j))

    def _set_joint(self, j):
        """Joint j's friction columns of Y for its current velocity scale."""
        laws, velocities, n = self.laws, self.velocities, self.n
        key = (laws[j], float(velocities[j]))
        for Yr, d, f in zip(self.Y, self.data, self.filtered):
            # a scale off the prepared grid is made now (and not kept)
            feature = f[key] if key in f else _scale_feature(d, laws, key)
            columns = friction_columns([laws[j]], [velocities[j]], d.qd[:, [j]],
                                       {'sign': f['sign'][:, [j]], key: feature[:, [j]]})
            k_ = Yr.shape[-1] // n
            for t, term in self.level_terms:
                Yr[:, j, j * k_ + 10 + t] = columns[term][:, 0]

    def _refresh(self, j, columns):
        """Joint j's friction columns `columns` taken again from Y, normal equations
        updated."""
        A, b = self.rows(j)
        A[:, columns] = np.concatenate([self.Y[r][:, j, columns][d.mask[:, j]]
                                        for r, d in enumerate(self.data)])
        self.G_j[j][:, columns] = np.einsum('kp,kq->pq', A, A[:, columns])
        self.G_j[j][columns, :] = self.G_j[j][:, columns].T
        self.h_j[j][columns] = np.einsum('kp,k->p', A[:, columns], b)


def _scale_feature(data, laws, key):
    """The prepared feature of `key` ((law, v_s)) for every joint with that law, made from
    the recording like the grid's (`_prepare`'s `feature`)."""
    keys, functions = _feature_functions(
        laws, [[key[1]] if law == key[0] else [] for law in laws])
    return data.feature(*functions[keys.index(key)])


GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
SCALE_TOLERANCE = 1e-3      # relative: the refined v_s's bracket is narrower than this


def _search_velocity_scales(equations, smooth, grid, ix, weights0):
    """The velocity scales of the `smooth` joints: a search over the grid, one joint at a
    time (two sweeps), each keeping the v_s whose weighted least-squares fit of the base
    parameters `ix` leaves the smallest residual; then each refined between its grid
    neighbours (a golden-section search in log v_s, two sweeps).

    The refinement matters: the Stribeck level and v_s trade against each other, so a v_s
    one grid step (a factor 1.26) off moves the identified level by about a third, and
    which of two grid points next to the true v_s fits better can turn on rounding (it
    differed between two BLAS builds of the same numpy)."""
    G_j, h_j, yy = equations.G_j, equations.h_j, equations.yy

    def weighted_residual(j, v):
        equations.set_velocity(j, v)
        G, h = _weighted(G_j, h_j, weights0, ix)
        x = _inverse(G, h)
        return float(weights0 @ yy - 2.0 * h @ x + x @ G @ x)
    velocities = equations.velocities
    for _ in range(2):
        for j in smooth:
            best = min((weighted_residual(j, v), v) for v in sorted(set([velocities[j], *grid])))
            equations.set_velocity(j, best[1])
    points = np.log(sorted(grid))
    for _ in range(2):
        for j in smooth:
            v = math.log(velocities[j])
            low = points[points < v - 1e-12]
            high = points[points > v + 1e-12]
            bracket = (low[-1] if low.size else v, high[0] if high.size else v)
            equations.set_velocity(j, math.exp(_golden_section(
                lambda x: weighted_residual(j, math.exp(x)), *bracket, v,
                math.log1p(SCALE_TOLERANCE))))


def _golden_section(f, a, b, start, tolerance):
    """The minimiser of f on [a, b] by golden-section search to `tolerance`, or `start`
    where f is no larger (f unimodal near its grid minimum is all that is assumed)."""
    best = (f(start), start)
    c, d = b - GOLDEN * (b - a), a + GOLDEN * (b - a)
    fc, fd = f(c), f(d)
    while b - a > tolerance:
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - GOLDEN * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + GOLDEN * (b - a)
            fd = f(d)
    return min(best, (fc, c), (fd, d))[1]


def _relative_fit(equations, ix, weights):
    """The RMS over joints of the relative residual (residual / RMS effort: `weights` (n,)
    1 / each joint's mean square effort) of the ordinary least-squares fit of the base
    parameters `ix`, from the normal equations."""
    G, h = _weighted(equations.G_j, equations.h_j, weights, ix)
    x = _inverse(G, h)
    residual = float(weights @ equations.yy - 2.0 * h @ x + x @ G @ x)
    return math.sqrt(max(residual, 0.0) / max(float(np.sum(equations.counts)), 1.0))


def _residual_weights(equations, ix, scale0):
    """σ (n,) and the weights 1/σ² (n,): each joint's RMS residual of an ordinary least
    squares on the base parameters `ix` (rows scaled by `scale0`, each joint's RMS
    effort), at least 0.1 % of its RMS effort."""
    beta0 = _inverse(*_weighted(equations.G_j, equations.h_j, 1.0 / scale0 ** 2, ix))
    residuals = []
    for j in range(equations.n):
        A, b = equations.rows(j)
        residuals.append(b - A[:, ix] @ beta0)
    sigma = np.array([math.sqrt(np.mean(r ** 2)) if r.size else scale0[j]
                      for j, r in enumerate(residuals)])
    # at least 0.1 % of each joint's RMS effort: exact (simulated) data would otherwise
    # weigh the data 10⁸ times the prior and leave the conic solver without precision
    sigma = np.maximum(sigma, 1e-3 * scale0)
    return sigma, 1.0 / sigma ** 2


def _conditioning(equations, weights, ix, names, friction_velocity, max_condition):
    """The condition number of the weighted base regressor with unit-norm columns, and
    what the data do not determine: joints that did not move, and the base parameters
    (`names`) that dominate the directions weaker than 1/`max_condition`."""
    G_b, _ = _weighted(equations.G_j, equations.h_j, weights, ix)
    d = np.sqrt(np.diag(G_b))
    d = np.where(d > 0.0, d, 1.0)
    eigenvalues, vectors = np.linalg.eigh(G_b / np.outer(d, d))
    condition = (math.sqrt(eigenvalues[-1] / eigenvalues[0]) if eigenvalues[0] > 0.0
                 else math.inf)
    not_excited = [f'joint{j + 1} (did not move faster than {friction_velocity:g})'
                   for j in range(equations.n) if equations.counts[j] == 0]
    if not condition <= max_condition:
        weak = eigenvalues < eigenvalues[-1] / max_condition ** 2
        for v in vectors[:, weak].T:
            for c in np.argsort(-np.abs(v)):
                if abs(v[c]) < 0.3:
                    break
                if names[c] not in not_excited:
                    not_excited.append(names[c])
    return condition, not_excited


def _noise_spectrum(t, sample_rate, cutoff_frequency):
    """(decimation, shape): `_long_run`'s spectral shape of white noise on the recording's
    full-rate grid after `_prepare`'s filter and decimation (`_noise_shape`)."""
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
    return decimation, shape


def _uncertainty(equations, t, weights, ix, rank, sample_rate, cutoff_frequency,
                 essential_ratio):
    """The weighted least-squares estimate of the base parameters `ix`, its covariance
    with the residuals' correlation in time (`_long_run`), the per-joint inflation and the
    essential parameters (the drive gains, entries from `rank` on, always kept)."""
    G_j, h_j, yy, counts = equations.G_j, equations.h_j, equations.yy, equations.counts
    n = equations.n
    beta_wls, covariance, _ = _wls_statistics(G_j, h_j, yy, counts, weights, np.ones(n), ix)
    middle = np.zeros((len(ix), len(ix)))
    _, shape = _noise_spectrum(t, sample_rate, cutoff_frequency)
    inflation = np.full(n, float(shape(64)[0]))
    for j in range(n):
        A, b = equations.rows(j)
        positions, first = [], 0
        for d in equations.data:    # the rows' places in time (recordings 1000 samples apart)
            positions.append(first + np.flatnonzero(d.mask[:, j]))
            first += d.mask.shape[0] + 1000
        middle += weights[j] ** 2 * _long_run(A[:, ix], b - A[:, ix] @ beta_wls,
                                              np.concatenate(positions), shape)
    dof = max(int(np.sum(counts)) - len(ix), 1)
    inverse = _inverse(_weighted(G_j, h_j, weights, ix)[0])
    covariance = inverse @ middle @ inverse * (np.sum(counts) / dof)
    essential = essential_parameters(G_j, h_j, yy, counts, weights, inflation, ix,
                                     essential_ratio, keep=range(rank, len(ix)))
    return beta_wls, covariance, inflation, essential


def _prior(equations, prior_relative):
    """φ0 (P,): the prior model's parameters (drive gains 1; with drive gains the offsets,
    in joint efforts k·o, around 0), the prior's standard deviations (P,) and which
    entries must be non-negative (armature, friction levels, drive gains)."""
    prior, offset, n, p, P = equations.prior, equations.offset, equations.n, equations.p, \
        equations.P
    terms = equations.terms
    phi0 = np.concatenate((arm_parameters(prior, offset), np.ones(P - p)))
    if P > p:           # offsets in joint efforts (k·o): around 0
        phi0[:p][np.tile(np.r_[np.zeros(10, bool), np.array(terms) == 'offset'], n)] = 0.0
    std = np.concatenate((_prior_std(prior, phi0[:p], offset, prior_relative),
                          np.full(P - p, 10.0)))
    nonnegative = np.concatenate((np.tile(np.r_[np.zeros(10, bool), [term != 'offset'
                                                                      for term in terms]], n),
                                  np.ones(P - p, bool)))
    return phi0, std, nonnegative


def _split_solution(equations, solution, gains):
    """φ (p,), the drive gains (n,) or None, the effort offsets (n,) or None of a solution
    (P,); with drive gains the offset column (k·o) divided by the gain."""
    p, n, k = equations.p, equations.n, equations.k
    phi, drive_gain = solution[:p].copy(), (solution[p:] if gains else None)
    blocks = phi.reshape(n, k)
    offsets = None
    if equations.offset:
        column = 10 + equations.terms.index('offset')
        if gains:            # the offset column is in joint efforts: k·o
            blocks[:, column] = blocks[:, column] / drive_gain
        offsets = blocks[:, column].copy()
    return phi, drive_gain, offsets


def _fixed_text(rank, p, prior_relative):
    """`ArmIdentification.fixed`: how the directions the data do not determine were fixed."""
    return (f'{rank} of {p} parameter combinations (the base parameters) are '
            f'determined by the data; the other {p - rank} directions, and any '
            f'poorly excited ones, come from the prior model (Gaussian prior, standard '
            f'deviation {prior_relative:g} of each link\'s mass scale, length scale '
            f'max(|c|, 0.1 m)), under physical-consistency constraints (pseudo-inertia '
            f'positive definite per link, armature and friction >= 0).')


def _base_uncertainty(base, solution, names, beta_wls, covariance, inflation, essential,
                      counts, p, ix):
    """The `BaseUncertainty` of a solution (P,): its base parameters (and drive gains)
    with the weighted least-squares estimate's standard deviations."""
    P = len(solution)
    value = np.concatenate((base.values(solution[:p]), solution[p:]))
    std_wls = np.sqrt(np.maximum(np.diag(covariance), 0.0))
    with np.errstate(divide='ignore', invalid='ignore'):
        relative = np.where(value != 0.0, std_wls / np.abs(value), math.inf)
    expressions = base.describe().splitlines() + [
        f'drive gain of joint {j + 1}: joint effort / recorded effort' for j in range(P - p)]
    return BaseUncertainty(
        names=names, expressions=expressions, value=value, wls=beta_wls, std=std_wls,
        relative_std=relative, essential=np.isin(np.arange(len(ix)), essential),
        covariance=covariance, inflation=inflation,
        dof=int(np.sum(counts)) - len(ix))


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
                      drive_gain=None, accelerations=None):
    """RMS effort error of `model` on recorded data (prepared as in `identify_arm`:
    filtered q, q̇, τ, q̈ from the filtered q̇ or, with `accelerations` 'position' or
    without recorded velocities, from the filtered q (pass the estimate's
    ``accelerations``); samples where a joint moves
    slower than `friction_velocity` left out for that joint) and the relative error, RMS error /
    RMS measured effort, per joint: two (n,) arrays. The prediction of a recorded effort
    is τ_model / drive_gain + offset; `offset` (n,): the effort sensor's offsets (default:
    the model's ``effort_offset``), `drive_gain` (n,): τ = gain × recorded effort
    (default 1)."""
    keys, functions = _feature_functions(model.friction_model,
                                         [[v] for v in model.stribeck_velocity])
    data = _prepare(model, t, q, qd, tau, cutoff_frequency, sample_rate, friction_velocity,
                    effort_timing, functions, accelerations)
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
