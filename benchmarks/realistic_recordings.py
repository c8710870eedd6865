"""Recordings that are not the estimator's own: an arm whose drives and sensors are built
differently from what `identify_arm` assumes, written as rosbag2 JointState folders like a
robot's, for the identification benchmark (benchmarks/identification.py) and its tests.

The arm ("the plant") is the robot file's model with every link's mass, centre of mass and
inertia perturbed by up to ±30 % consistently (`arm_identification.perturbed_model`) and
drives the file lacks: rotor inertia (armature) and a friction law outside the
estimator's family (`PlantFriction`),

    τ_f = b q̇ + (f_c,± + f_s exp(−|q̇/v_s|^δ)) tanh(q̇/v_t),

with per-joint levels f_c,+ ≠ f_c,− (up to ±15 % apart), a Stribeck bump f_s, a Stribeck
velocity v_s, a shape exponent δ in [0.7, 1.5] (the estimator's Stribeck law has δ = 2)
and a smoothing velocity v_t (its Coulomb and Stribeck laws switch at once), drawn from a
seeded generator and never told to the estimator. The arm follows an excitation (the
stiff position control of an industrial arm: the motion is the plan's), and its drives
apply the plant's inverse dynamics plus that friction at every instant.

What is recorded, as a robot and its logger record it (`Effects`):

* the robot's sampling clock is regular (the rate, 100 Hz–1 kHz); the logger stamps each
  message late or early by up to ±`jitter` of the period (uniform), and a fraction
  `drop` of the messages never reaches the bag;
* positions from encoders of `counts` counts per turn (rounded to the count);
* velocities with coloured noise (white noise through a first-order low-pass of
  `noise_cutoff` Hz, standard deviation `velocity_noise`);
* efforts with a constant offset per joint (the sensor's bias, 0.5–1 × `offset` × each
  joint's effort scale, random sign) and coloured noise (`effort_noise` × each joint's RMS
  effort);
* written with `JointStateBagWriter` (one message per sample, joints named as the robot
  file names them, received 0.3 ms after the stamp).

`Recording` holds the truth beside the recorded values (the exact states, the applied
efforts without noise or offset) for the figures that need it.
"""

from dataclasses import dataclass, field
import math
import os
import sys
import warnings

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from robot_dynamics.identification import arm as ai  # noqa: E402
from robot_dynamics import dynamics  # noqa: E402
from robot_dynamics.identification.recordings import JointStateBagWriter  # noqa: E402
from robot_dynamics.model import ModelWarning, RobotModel  # noqa: E402

STARTS = {'puma560': np.array([0.0, -0.5, 0.5, 0.0, 0.3, 0.0]),
          'panda': np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])}
LATENCY = 3e-4          # s from the stamp to the bag's receive time


@dataclass(frozen=True)
class Effects:
    """What the robot and its logger do to a recording (see the module docstring)."""

    rate: float = 1000.0            # Hz, the robot's sampling rate
    jitter: float = 0.4             # the logger's stamp error, ± this fraction of a period
    drop: float = 0.005             # fraction of messages lost
    counts: int = 2 ** 17           # encoder counts per turn (0: not quantised)
    velocity_noise: float = 0.01    # rad/s (m/s), coloured
    effort_noise: float = 0.01      # × each joint's RMS effort, coloured
    noise_cutoff: float = 50.0      # Hz, the noise's first-order low-pass
    offset: float = 0.03            # × each joint's effort scale, the sensor's bias


@dataclass(frozen=True)
class PlantFriction:
    """τ_f = b q̇ + (f_c,± + f_s exp(−|q̇/v_s|^δ)) tanh(q̇/v_t) per joint ((n,) arrays;
    f_c,+ for q̇ > 0, f_c,− for q̇ < 0)."""

    viscous: np.ndarray
    positive: np.ndarray
    negative: np.ndarray
    stribeck: np.ndarray
    stribeck_velocity: np.ndarray
    shape: np.ndarray
    smoothing_velocity: np.ndarray

    def __call__(self, qd):
        qd = np.asarray(qd, dtype=float)
        level = np.where(qd >= 0.0, self.positive, self.negative)
        bump = self.stribeck * np.exp(-np.abs(qd / self.stribeck_velocity) ** self.shape)
        return self.viscous * qd + (level + bump) * np.tanh(qd / self.smoothing_velocity)


@dataclass
class Plant:
    """The simulated arm: `rigid` (links and armature, no friction), its `friction`,
    the sign and size of each joint's effort offset (`bias`: ±0.5–1 × its effort scale
    `scale`, times `Effects.offset` when recorded), the robot file's joint names."""

    name: str
    prior: RobotModel
    rigid: RobotModel
    friction: PlantFriction
    bias: np.ndarray
    scale: np.ndarray
    joints: tuple
    params_file: str

    def offsets(self, effects):
        """The effort sensors' offsets (n,) of a recording with `effects`."""
        return effects.offset * self.bias

    def applied_effort(self, q, qd, qdd):
        """The drives' efforts (K, n) along a motion: inverse dynamics plus friction."""
        return dynamics.inverse_dynamics(self.rigid, q, qd, qdd) + self.friction(qd)


@dataclass
class Recording:
    """A recording as written (stamps t, recorded q, qd, tau) and the truth beside it
    (t_true: the robot's sampling instants; q_true, qd_true, qdd_true, tau_true: the
    exact states and the applied efforts, without offset or noise)."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    t_true: np.ndarray
    q_true: np.ndarray
    qd_true: np.ndarray
    qdd_true: np.ndarray
    tau_true: np.ndarray
    dropped: int = 0
    notes: list = field(default_factory=list)


def params_file(name):
    return os.path.join(REPO, 'config', f'{name}.yaml')


def load(name):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        return RobotModel.from_yaml(params_file(name))


def joint_names(name):
    from robot_dynamics.nodes.identify import prior_model
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        return tuple(prior_model([params_file(name)])[1])


def make_plant(name, fraction=0.3, seed=1):
    """The arm of robot preset `name` (config/NAME.yaml): links ±`fraction` off the file,
    armature and a `PlantFriction` drawn with `seed`, effort offsets of ±0.5–1 of each
    joint's effort scale (times `Effects.offset` when recording)."""
    prior = load(name)
    drive = ai.drive_terms(prior)
    rigid = ai.perturbed_model(prior, fraction, seed=seed, armature=drive['armature'],
                               viscous=0.0, coulomb=0.0)
    rng = np.random.default_rng(seed + 1000)
    n = prior.n
    coulomb = drive['coulomb'] * rng.uniform(0.7, 1.3, n)
    asymmetry = rng.uniform(-0.15, 0.15, n)
    friction = PlantFriction(
        viscous=drive['viscous'] * rng.uniform(0.7, 1.3, n),
        positive=coulomb * (1.0 + asymmetry), negative=coulomb * (1.0 - asymmetry),
        stribeck=coulomb * rng.uniform(0.3, 0.8, n),
        stribeck_velocity=rng.uniform(0.03, 0.15, n), shape=rng.uniform(0.7, 1.5, n),
        smoothing_velocity=rng.uniform(0.005, 0.02, n))
    scale = drive['coulomb'] / 0.05          # `drive_terms`' effort scale per joint
    bias = scale * rng.choice([-1.0, 1.0], n) * rng.uniform(0.5, 1.0, n)
    return Plant(name, prior, rigid, friction, bias, scale, joint_names(name),
                 params_file(name))


def excitation(plant, duration, seed=0, iterations=0, candidates=2, offset=True):
    """An optimised excitation of the robot file's model from the preset's start at rest
    (with `offset`: conditioned for effort offsets too, as for ``--offset``)."""
    return ai.optimal_excitation(plant.prior, duration, STARTS[plant.name], seed=seed,
                                 candidates=candidates, iterations=iterations, offset=offset)


def coloured_noise(rng, shape, sigma, cutoff, rate):
    """Gaussian noise (K, n) through a first-order low-pass of `cutoff` Hz at `rate` Hz,
    scaled to standard deviation `sigma` ((n,) or scalar)."""
    white = rng.normal(size=shape)
    a = math.exp(-2.0 * math.pi * cutoff / rate)
    from scipy import signal
    coloured = signal.lfilter([1.0 - a], [1.0, -a], white, axis=0)
    coloured /= math.sqrt((1.0 - a) / (1.0 + a))      # unit variance in steady state
    return coloured * sigma


def _closed_loop(plant, motion, t, measure, bandwidth, substeps):
    """The arm integrated by its forward dynamics (RK4, `substeps` steps per sample; its own
    friction), tracking `motion` as an industrial controller does: the robot file's
    inverse dynamics along the reference as feedforward plus a PD per joint from the
    measured states (`measure(k, q, qd)`), tuned to `bandwidth` Hz (damping 0.7) for the
    joint's mean inertia along the motion; the effort held over each sample period.
    Returns q, qd, qdd (the acceleration just after each sample) and the held efforts."""
    n = plant.prior.n
    rigid, friction = plant.rigid, plant.friction
    q_d, qd_d, qdd_d = motion.sample(t)
    feedforward = dynamics.inverse_dynamics(plant.prior, q_d, qd_d, qdd_d)
    inertia = np.mean(np.diagonal(dynamics.mass_matrix(rigid, q_d[::max(1, t.size // 50)]),
                                  axis1=1, axis2=2), axis=0)
    omega = 2.0 * math.pi * bandwidth
    kp, kd = omega ** 2 * inertia, 2.0 * 0.7 * omega * inertia
    q, qd = q_d[0].copy(), qd_d[0].copy()
    out = [np.empty((t.size, n)) for _ in range(4)]

    def acceleration(q_, qd_, tau_):
        return dynamics.forward_dynamics(rigid, q_, qd_, tau_ - friction(qd_))
    for k in range(t.size):
        q_m, qd_m = measure(k, q, qd)
        tau = feedforward[k] + kp * (q_d[k] - q_m) + kd * (qd_d[k] - qd_m)
        a1 = acceleration(q, qd, tau)
        out[0][k], out[1][k], out[2][k], out[3][k] = q, qd, a1, tau
        if k + 1 == t.size:
            break
        h = (t[k + 1] - t[k]) / substeps
        for s in range(substeps):
            a1 = a1 if s == 0 else acceleration(q, qd, tau)
            v2 = qd + 0.5 * h * a1
            a2 = acceleration(q + 0.5 * h * qd, v2, tau)
            v3 = qd + 0.5 * h * a2
            a3 = acceleration(q + 0.5 * h * v2, v3, tau)
            v4 = qd + h * a3
            a4 = acceleration(q + h * v3, v4, tau)
            q = q + h / 6.0 * (qd + 2.0 * v2 + 2.0 * v3 + v4)
            qd = qd + h / 6.0 * (a1 + 2.0 * a2 + 2.0 * a3 + a4)
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(qd))):
            raise FloatingPointError(f'the simulated arm diverged at t = {t[k + 1]:.4g} s')
    return out


def sensors(model, effects, rng, count):
    """measure(k, q, qd) -> (q, qd) as the robot measures sample(s) k of `count`: encoders
    of `effects.counts` counts per turn on revolute joints, the velocities with coloured
    noise (drawn here from `rng`, `effects.velocity_noise` through a first-order low-pass of
    `effects.noise_cutoff` Hz at `effects.rate`)."""
    revolute = ~np.asarray(model.chain.prismatic, dtype=bool)
    resolution = 2.0 * math.pi / effects.counts if effects.counts else 0.0
    velocity_noise = coloured_noise(rng, (count, model.n), effects.velocity_noise,
                                    effects.noise_cutoff, float(effects.rate))

    def measure(k, q, qd):
        q_m = np.array(q, dtype=float)
        if resolution:
            q_m[..., revolute] = np.round(q_m[..., revolute] / resolution) * resolution
        return q_m, qd + velocity_noise[k]
    return measure


def record(plant, motion, duration, effects=Effects(), seed=0, start=100.0,
           closed_loop=False, bandwidth=10.0, substeps=1):
    """A `Recording` of `plant` following `motion` (an `Excitation`) for `duration` s
    with `effects`. Default: the arm follows the motion exactly (stiff position control)
    and the efforts are its inverse dynamics plus its friction. `closed_loop`: the arm is
    integrated by its forward dynamics instead (`substeps` RK4 steps per sample), driven
    by the robot file's inverse dynamics along the motion plus a PD of `bandwidth` Hz per
    joint from the recorded (quantised, noisy) states, the effort held over each sample
    period; the recorded effort of a sample is the one applied from it on."""
    rng = np.random.default_rng(seed)
    rate = float(effects.rate)
    count = int(round(duration * rate)) + 1
    t_true = np.arange(count) / rate
    measure = sensors(plant.prior, effects, rng, count)
    if closed_loop:
        q, qd, qdd, tau = _closed_loop(plant, motion, t_true, measure, bandwidth,
                                         substeps)
    else:
        q, qd, qdd = motion.sample(t_true)
        tau = plant.applied_effort(q, qd, qdd)
    t, q_rec, qd_rec, tau_rec, keep = logged(effects, rng, measure, plant.offsets(effects),
                                             t_true, q, qd, tau, start)
    return Recording(t=t, q=q_rec, qd=qd_rec, tau=tau_rec, t_true=start + t_true, q_true=q,
                     qd_true=qd, qdd_true=qdd, tau_true=tau, dropped=int(count - np.sum(keep)))


def logged(effects, rng, measure, offsets, t_true, q, qd, tau, start):
    """(stamps, q, qd, tau, kept (K,) bool) as the robot measures and its logger writes the
    exact states and applied efforts at the robot's sampling instants `t_true` (from 0):
    `measure` (`sensors`), the efforts plus `offsets` and coloured noise, the stamps
    `start` + t jittered, a fraction of the messages dropped (never the first or last)."""
    rate, count = float(effects.rate), len(t_true)
    q_rec, qd_rec = measure(slice(None), q, qd)
    rms = np.sqrt(np.mean(tau ** 2, axis=0))
    tau_rec = tau + offsets + coloured_noise(rng, tau.shape, effects.effort_noise * rms,
                                             effects.noise_cutoff, rate)
    stamps = start + t_true + rng.uniform(-effects.jitter, effects.jitter, count) / rate
    keep = rng.random(count) >= effects.drop
    keep[[0, -1]] = True
    return stamps[keep], q_rec[keep], qd_rec[keep], tau_rec[keep], keep


def write_bag(folder, plant, recording, storage='sqlite3', version=8):
    """The recording as a rosbag2 folder of sensor_msgs/JointState (the robot file's
    joint names), each message received `LATENCY` after its stamp."""
    with JointStateBagWriter(folder, storage=storage, version=version) as writer:
        for k in range(len(recording.t)):
            writer.write(float(recording.t[k]), plant.joints, recording.q[k],
                         recording.qd[k], recording.tau[k],
                         received=float(recording.t[k]) + LATENCY)
    return folder


def recordings(name, duration=60.0, validation_duration=20.0, effects=Effects(), seed=1,
               iterations=0, closed_loop=False):
    """(plant, estimation recording, validation recording): two excitations (seeds
    `seed` and `seed` + 100) of the arm of preset `name` (`record`'s `closed_loop`)."""
    plant = make_plant(name, seed=seed)
    estimation = record(plant, excitation(plant, duration, seed, iterations), duration,
                        effects, seed=seed, closed_loop=closed_loop)
    validation = record(plant, excitation(plant, validation_duration, seed + 100),
                        validation_duration, effects, seed=seed + 100,
                        closed_loop=closed_loop)
    return plant, estimation, validation


# ---------------------------------------------------------------------- the yardsticks


def predicted_errors(prior, friction, offset, phi, velocities, t, q, qd, tau,
                     effort_timing='instant', accelerations='velocity'):
    """Relative RMS error per joint of the efforts predicted by the parameters `phi`
    (`arm_identification.parameter_names` order of `prior` with the friction laws
    `friction` and offsets when `offset`; the laws' velocity scales `velocities`) on a
    recording prepared as `identify_arm` prepares it: Y φ with the same filtered columns.
    Any φ, physical or not (the unconstrained least-squares fit), is evaluated alike; q̈
    from `accelerations` (the estimate's)."""
    model = ai._with_laws(prior, friction)
    laws = model.friction_model
    keys, functions = ai._feature_functions(laws, [[v] for v in velocities])
    data = ai._prepare(model, t, q, qd, tau, 10.0, 100.0, 0.02, effort_timing, functions,
                       accelerations)
    Y = ai.arm_regressor(model, data.q, data.qd, data.qdd, offset=offset)
    ai._set_friction_columns(Y, model, offset, ai.friction_columns(
        laws, velocities, data.qd, dict(zip(keys, data.features), sign=data.coulomb)))
    error = data.tau - Y @ phi
    relative = np.empty(model.n)
    for j in range(model.n):
        rows = data.mask[:, j]
        relative[j] = (math.sqrt(np.mean(error[rows, j] ** 2))
                       / math.sqrt(np.mean(data.tau[rows, j] ** 2)))
    return relative


def floor_errors(plant, effects, t, q, qd, tau, friction_velocity=0.02,
                 accelerations='velocity'):
    """Relative RMS error per joint of the true arm itself (its exact links, armature,
    friction and offsets) on a recording prepared as `identify_arm` prepares it (its
    friction computed from the filtered full-rate velocity and filtered like the
    efforts; q̈ from `accelerations`): what no model can go below, the noise's share of
    the held-out error."""
    n = plant.prior.n
    feature = (lambda velocity: plant.friction(velocity), list(range(n)))
    data = ai._prepare(plant.rigid, t, q, qd, tau, 10.0, 100.0, friction_velocity,
                       'instant', [feature], accelerations)
    predicted = (dynamics.inverse_dynamics(plant.rigid, data.q, data.qd, data.qdd)
                 + data.features[0] + plant.offsets(effects))
    error = data.tau - predicted
    return np.array([math.sqrt(np.mean(error[data.mask[:, j], j] ** 2)
                               / np.mean(data.tau[data.mask[:, j], j] ** 2))
                     for j in range(n)])


def exact_errors(model, recording, friction_velocity=0.02):
    """Relative RMS error per joint of `model`'s inverse dynamics (its friction law, no
    offset) against the applied efforts at the exact states, over the samples where the
    joint moves at least `friction_velocity` (as `validation_errors` counts them)."""
    predicted = dynamics.inverse_dynamics(model, recording.q_true, recording.qd_true,
                                          recording.qdd_true)
    error = predicted - recording.tau_true
    moving = np.abs(recording.qd_true) >= friction_velocity
    return np.array([math.sqrt(np.mean(error[moving[:, j], j] ** 2)
                               / np.mean(recording.tau_true[moving[:, j], j] ** 2))
                     for j in range(error.shape[1])])


__all__ = ['Effects', 'PlantFriction', 'Plant', 'Recording', 'make_plant', 'excitation',
           'record', 'write_bag', 'recordings', 'predicted_errors', 'floor_errors',
           'exact_errors',
           'coloured_noise']
