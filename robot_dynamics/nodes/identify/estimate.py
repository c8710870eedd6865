"""What `identify estimate` asks of robot_dynamics.arm_identification, in its own words:
the estimate of a list of gap-free recordings, the validation errors of a model, and the
parameter-file keys of the identified model."""

from typing import NamedTuple

import numpy as np

from robot_dynamics import arm_identification, dynamics

GRAVITY_SHARE = 0.02    # efforts whose RMS is below this share of the gravity torques: refused


class Estimate(NamedTuple):
    model: object          # the identified RobotModel
    samples: int           # samples used (after filtering and decimation)
    raw_samples: int       # samples read
    condition: float       # condition number of the weighted base regressor
    not_excited: list      # what the data do not determine ([] when all is identified)
    fixed: str             # how the directions the data cannot determine were fixed
    consistency: list      # physical-consistency issues of the estimate ([] expected)
    timing: dict           # seconds per stage
    offset: object = None          # (n,) identified effort offsets, or None
    drive_gain: object = None      # (n,) joint effort / recorded effort, or None
    uncertainty: object = None     # arm_identification.BaseUncertainty
    friction_model: tuple = ()     # each joint's friction law
    stribeck_velocity: object = None   # (n,) the laws' velocity scales
    accelerations: str = 'velocity'    # where q̈ came from: 'velocity' or 'position'
    acceleration_fit: dict = {}        # {source: relative residual} of the sources compared
    velocities_recorded: bool = True   # False: q̇ and q̈ from the positions (none recorded)
    drive_fit: dict = {}               # the friction law and offsets compared, when chosen


class Errors(NamedTuple):
    rms: np.ndarray        # per joint RMS effort error [N m | N]
    relative: np.ndarray   # per joint RMS error / RMS measured effort


def _columns(pieces):
    return tuple(list(column) for column in zip(*pieces))


def identify(prior, pieces, effort_timing='instant', offset=False, friction=None,
             payload_pieces=None, payload=None, essential_ratio=100.0,
             accelerations='auto'):
    """Estimate from [(t, q, qd, tau)] gap-free recordings (with effort offsets, the
    friction laws `friction`, drive gains from `payload_pieces` recorded with `payload`,
    q̈ from `accelerations`); ValueError for data that cannot be used (e.g. too short to
    filter)."""
    t, q, qd, tau = _columns(pieces)
    extra = {}
    if payload_pieces is not None:
        extra = dict(payload_recording=_columns(payload_pieces), payload=payload)
    result = arm_identification.identify_arm(prior, t, q, qd, tau, offset=offset,
                                             friction=friction, effort_timing=effort_timing,
                                             essential_ratio=essential_ratio,
                                             accelerations=accelerations, **extra)
    return Estimate(result.model, int(result.samples), int(result.raw_samples),
                    float(result.condition_number), list(result.not_excited),
                    str(result.fixed), list(result.consistency), dict(result.timing),
                    result.offset, result.drive_gain, result.uncertainty,
                    tuple(result.friction_model), result.stribeck_velocity,
                    result.accelerations, dict(result.acceleration_fit),
                    bool(result.velocities_recorded), dict(result.drive_fit))


def errors(model, pieces, effort_timing='instant', drive_gain=None,
           accelerations=None):
    """Per joint RMS and relative effort error of `model` on [(t, q, qd, tau)] (recorded
    efforts predicted as τ / drive_gain + the model's effort offset; q̈ from
    `accelerations`, as the estimate took it)."""
    t, q, qd, tau = _columns(pieces)
    rms, relative = arm_identification.validation_errors(model, t, q, qd, tau,
                                                         effort_timing=effort_timing,
                                                         drive_gain=drive_gain,
                                                         accelerations=accelerations)
    return Errors(np.asarray(rms, dtype=float), np.asarray(relative, dtype=float))


def overrides(model):
    """The robot keys of the parameter file (nested dict)."""
    return arm_identification.robot_params_overrides(model)


def uninformative_efforts(model, joints, pieces, scaled=False):
    """Why the recorded efforts of [(t, q, qd, tau)] carry no information about the arm
    (one sentence), or None: a joint whose effort never changes (0 or a constant: a mock
    or a misconfigured effort interface; a real drive's effort follows the motion), or,
    unless `scaled` (efforts in other units, drive gains estimated), efforts whose RMS is
    below GRAVITY_SHARE of the model's gravity torques along the recorded positions on
    every joint that gravity loads."""
    tau = np.concatenate([np.asarray(p[3], dtype=float) for p in pieces])
    q = np.concatenate([np.asarray(p[1], dtype=float) for p in pieces])
    if tau.shape[0] == 0:
        return None
    spread = np.ptp(tau, axis=0)
    level = np.max(np.abs(tau), axis=0)
    still = spread <= 1e-12 * np.maximum(level, 1.0)
    if np.any(still):
        zero = [j for j, s, v in zip(joints, still, level) if s and v == 0.0]
        constant = [f'{j} ({tau[0, i]:.6g})' for i, (j, s, v) in enumerate(
            zip(joints, still, level)) if s and v != 0.0]
        what = []
        if zero:
            what.append(f'0 in every sample for {", ".join(zero)}')
        if constant:
            what.append(f'constant for {", ".join(constant)}')
        return (f'the recorded efforts carry no information: {"; ".join(what)} (a mock or '
                'misconfigured effort interface, e.g. mock hardware publishing the effort '
                'state as 0; a drive\'s effort follows the motion): record the efforts the '
                'drives apply')
    if scaled:
        return None
    every = max(1, q.shape[0] // 2000)
    gravity = dynamics.gravity_torques(model, q[::every])
    g = np.sqrt(np.mean(gravity ** 2, axis=0))
    loaded = g > 0.05 * float(np.max(g)) if np.max(g) > 0.0 else np.zeros(len(g), bool)
    rms = np.sqrt(np.mean(tau ** 2, axis=0))
    if np.any(loaded) and np.all(rms[loaded] < GRAVITY_SHARE * g[loaded]):
        worst = [f'{j} {r:.3g} against {gj:.3g}' for j, r, gj, l in zip(joints, rms, g, loaded)
                 if l]
        return (f'the recorded efforts are far below the model\'s gravity torques (RMS '
                f'effort against RMS gravity torque along the recorded positions: '
                f'{", ".join(worst)}): not the joint efforts the drives apply (units? a '
                'mock effort interface?); efforts in other units need their drive gains '
                '(--payload-bag, --payload)')
    return None
