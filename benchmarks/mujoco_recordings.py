"""Recordings of an arm simulated by MuJoCo (a physics engine that is not this package's),
written as rosbag2 JointState folders like a robot's, for the identification benchmark
(benchmarks/identification.py --study mujoco) and test/test_identification_mujoco.py.

MuJoCo (https://mujoco.org, `pip install mujoco`) is a test and benchmark dependency only.

The arm is a URDF read twice, independently: by MuJoCo's own compiler and by this
package's `RobotModel.from_params({'source': 'urdf', ...})`. Two arms:

* ``ur5``: test/data/ur5.urdf (base_link -> tool0), joint frames turned by rpy origins and
  axes along y and z;
* ``panda``: a URDF written here from config/panda.yaml's modified DH table and link
  inertials (`panda_urdf`: joint i's origin is Craig's Rx(α_{i-1}) Tx(a_{i-1}) Rz(θ_i)
  Tz(d_i), the link's inertial its centre of mass and centroidal inertia in link frame
  i) without this package's chain or URDF export code; our side is the DH model of the
  file itself.

MuJoCo's joints get a drive this package's robot files do not describe: rotor inertia
(``armature``), viscous ``damping`` and ``frictionloss`` (MuJoCo's dry friction: a
soft constraint whose force, up to ± the level, is what the solver finds; a law outside
the estimator's family), per joint, drawn from a seeded generator around `drive_terms`'
levels. Contacts and joint-limit constraints are off (the URDFs have no collision
geometry; the excitation keeps inside the limits); gravity is MuJoCo's default (−9.81 m/s²
along z of the world, which is base_link here).

The arm follows an optimised excitation (`arm_identification.optimal_excitation`) under an
industrial controller: at each sample of the robot's clock the drives apply the robot
file's inverse dynamics along the reference (the prior, which is off: `perturbed_model`
±30 % of the links) plus a PD per joint from the measured (quantised, noisy) states, held
over the sample period (``data.qfrc_applied``), while MuJoCo integrates (RK4, several
steps per sample). The recorded effort is that applied drive torque, what a real drive
measures, not MuJoCo's passive or constraint forces. The recording's effects are
`realistic_recordings.Effects`' (encoders, coloured velocity and effort noise, effort
offsets, jittered stamps, dropped messages), written with `realistic_recordings.write_bag`.

The truth beside each recording is MuJoCo's own: the exact states, the acceleration
MuJoCo computed at each sample and its friction-loss force (``qfrc_constraint``); the
applied torque equals ``mj_inverse`` at those states (checked by the tests).
"""

from dataclasses import dataclass
import math
import os
import sys
import warnings
import xml.etree.ElementTree as ET

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (REPO, os.path.join(REPO, 'benchmarks')):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from robot_dynamics import arm_identification as ai  # noqa: E402
from robot_dynamics import dynamics  # noqa: E402
from robot_dynamics.simulation import mujoco_engine  # noqa: E402
from robot_dynamics.model import ModelWarning, RobotModel  # noqa: E402
import robot_dynamics.model.urdf  # noqa: E402,F401  (registers robot.source urdf)
import realistic_recordings as rr  # noqa: E402

UR5_URDF = os.path.join(REPO, 'test', 'data', 'ur5.urdf')
# the URDF arms read from files: (path, base_link, tip_link); 'skewed' (rotated origins and
# inertials, unaligned axes, a prismatic joint, massive fixed links) for the agreement only
URDF_ARMS = {'ur5': (UR5_URDF, 'base_link', 'tool0'),
             'skewed': (os.path.join(REPO, 'test', 'data', 'skewed_arm.urdf'), 'world', 'tool')}
STARTS = {'ur5': np.array([0.0, -1.3, 1.4, -1.6, -1.5, 0.0]),
          'panda': np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])}
ARMS = tuple(STARTS)            # the arms the identification study records


def _mujoco():
    try:
        import mujoco
    except ImportError:
        raise ImportError('MuJoCo recordings need mujoco: pip install mujoco') from None
    return mujoco


# ---------------------------------------------------------------------- the arms' URDFs


def _rpy(R):
    """URDF roll, pitch, yaw of R = Rz(yaw) Ry(pitch) Rx(roll)."""
    pitch = math.asin(max(-1.0, min(1.0, -R[2, 0])))
    if abs(R[2, 0]) < 1.0 - 1e-12:
        return math.atan2(R[2, 1], R[2, 2]), pitch, math.atan2(R[1, 0], R[0, 0])
    return math.atan2(-R[1, 2], R[1, 1]), pitch, 0.0


def _text(values):
    return ' '.join(repr(float(v)) for v in values)


def panda_urdf(path=None):
    """A URDF of the modified-DH arm in config/panda.yaml (or `path`), written from the
    file's numbers: links ``base_link``, ``link1``..``link7`` (Craig's frames), joints named
    as the file names them, no meshes, the tip ``link7``."""
    import yaml
    with open(path or rr.params_file('panda'), encoding='utf-8') as stream:
        params = yaml.safe_load(stream)['/**']['ros__parameters']
    robot, joints = params['robot'], params['joints']
    if robot['dh_convention'] != 'modified':
        raise ValueError('panda_urdf: expected a modified DH table')
    n = len(joints)
    com = np.reshape(robot['com'], (n, 3))
    inertia = np.reshape(robot['inertia'], (n, 6))
    root = ET.Element('robot', name='panda_from_dh')
    ET.SubElement(root, 'link', name='base_link')
    parent = 'base_link'
    for i in range(n):
        alpha, a, d, theta = (float(robot[key][i]) for key in ('alpha', 'a', 'd', 'theta'))
        ca, sa, ct, st = math.cos(alpha), math.sin(alpha), math.cos(theta), math.sin(theta)
        Rx = np.array([[1.0, 0.0, 0.0], [0.0, ca, -sa], [0.0, sa, ca]])
        Rz = np.array([[ct, -st, 0.0], [st, ct, 0.0], [0.0, 0.0, 1.0]])
        xyz = np.array([a, 0.0, 0.0]) + Rx @ np.array([0.0, 0.0, d])
        joint = ET.SubElement(root, 'joint', name=joints[i], type='revolute')
        ET.SubElement(joint, 'origin', xyz=_text(xyz), rpy=_text(_rpy(Rx @ Rz)))
        ET.SubElement(joint, 'parent', link=parent)
        ET.SubElement(joint, 'child', link=f'link{i + 1}')
        ET.SubElement(joint, 'axis', xyz='0 0 1')
        ET.SubElement(joint, 'limit', lower=repr(float(robot['position_min'][i])),
                      upper=repr(float(robot['position_max'][i])),
                      effort=repr(float(robot['effort_max'][i])),
                      velocity=repr(float(robot['velocity_max'][i])))
        link = ET.SubElement(root, 'link', name=f'link{i + 1}')
        inertial = ET.SubElement(link, 'inertial')
        ET.SubElement(inertial, 'origin', xyz=_text(com[i]), rpy='0 0 0')
        ET.SubElement(inertial, 'mass', value=repr(float(robot['mass'][i])))
        ET.SubElement(inertial, 'inertia', **dict(zip(
            ('ixx', 'ixy', 'ixz', 'iyy', 'iyz', 'izz'), (repr(float(v)) for v in inertia[i]))))
        parent = f'link{i + 1}'
    ET.indent(root)
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding='unicode') + '\n'


def our_model(name):
    """This package's model of arm `name` (no drive terms): a URDF of `URDF_ARMS` read
    by `RobotModel.from_params` (source urdf; the UR5 base_link -> tool0); the Panda's DH
    file."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        if name in URDF_ARMS:
            path, base, tip = URDF_ARMS[name]
            return RobotModel.from_params({'source': 'urdf', 'urdf_file': path,
                                           'base_link': base, 'tip_link': tip})
        if name == 'panda':
            return rr.load('panda')
    raise ValueError(f'arm: expected one of {(*URDF_ARMS, "panda")}, got {name!r}')


def arm_urdf(name):
    if name in URDF_ARMS:
        with open(URDF_ARMS[name][0], encoding='utf-8') as stream:
            return stream.read()
    if name == 'panda':
        return panda_urdf()
    raise ValueError(f'arm: expected one of {(*URDF_ARMS, "panda")}, got {name!r}')


def mujoco_model(urdf, joints, armature, damping, frictionloss, timestep=2.5e-4,
                 integrator='RK4'):
    """`robot_dynamics.simulation.mujoco_engine.urdf_model`: the URDF compiled by MuJoCo
    with the drive terms; (model, qpos addresses, dof addresses) in the order of `joints`."""
    _mujoco()
    return mujoco_engine.urdf_model(urdf, joints, armature, damping, frictionloss,
                                    timestep, integrator)


# ---------------------------------------------------------------------- the simulated arm


@dataclass
class MujocoArm:
    """Arm `name` in MuJoCo (`mj`, its qpos/dof addresses `qadr`/`dadr` in the order of
    `joints`) with its drive (`armature`, `damping`, `frictionloss` per joint); `ours`:
    this package's model of the same URDF without the drive; `prior`: the robot file the
    estimator starts from (links off, no drive); `bias` and `scale` as
    `realistic_recordings.Plant`'s (effort offsets)."""

    name: str
    urdf: str
    joints: tuple
    mj: object
    qadr: np.ndarray
    dadr: np.ndarray
    armature: np.ndarray
    damping: np.ndarray
    frictionloss: np.ndarray
    ours: RobotModel
    prior: RobotModel
    bias: np.ndarray
    scale: np.ndarray

    def offsets(self, effects):
        return effects.offset * self.bias

    def truth(self):
        """Our model of the arm with MuJoCo's armature and damping (no friction loss)."""
        return RobotModel.from_params(dict(self.ours.to_params(),
                                           armature=self.armature.tolist(),
                                           viscous_friction=self.damping.tolist()))

    def data(self):
        return _mujoco().MjData(self.mj)

    def inverse(self, q, qd, qdd, frictionloss=False, data=None):
        """MuJoCo's inverse dynamics (``mj_inverse``, qfrc_inverse) at states (K, n)
        (friction loss disabled unless `frictionloss`)."""
        mujoco = _mujoco()
        q, qd, qdd = (np.atleast_2d(np.asarray(v, dtype=float)) for v in (q, qd, qdd))
        data = self.data() if data is None else data
        flag = int(mujoco.mjtDisableBit.mjDSBL_FRICTIONLOSS)
        saved = self.mj.opt.disableflags
        if not frictionloss:
            self.mj.opt.disableflags = saved | flag
        try:
            out = np.empty(q.shape)
            for k in range(q.shape[0]):
                data.qpos[self.qadr], data.qvel[self.dadr] = q[k], qd[k]
                data.qacc[self.dadr] = qdd[k]
                mujoco.mj_inverse(self.mj, data)
                out[k] = data.qfrc_inverse[self.dadr]
        finally:
            self.mj.opt.disableflags = saved
        return out

    def write_params(self, folder):
        """The prior as a ROS 2 parameter file in `folder` (what `--params-file` reads)."""
        import yaml
        block = self.prior.to_params()
        document = {'/**': {'ros__parameters': {'joints': list(self.joints),
                                                'robot': block}}}
        path = os.path.join(folder, f'{self.name}_prior.yaml')
        with open(path, 'w', encoding='utf-8') as stream:
            yaml.safe_dump(document, stream, sort_keys=False)
        return path


def make_arm(name, fraction=0.3, seed=1, timestep=2.5e-4):
    """Arm `name` in MuJoCo with a drive drawn with `seed` (armature 0.7–1.3 × and damping
    and friction loss 0.5–1.5 × `drive_terms`' armature, viscous and Coulomb levels),
    effort offsets of ±0.5–1 of each joint's effort scale (× `Effects.offset`), and the
    prior: our model with every link ±`fraction` off (`perturbed_model`, seed `seed`)."""
    ours = our_model(name)
    joints = tuple(ours.joint_names) if ours.joint_names else rr.joint_names(name)
    drive = ai.drive_terms(ours)
    rng = np.random.default_rng(seed + 2000)
    n = ours.n
    armature = drive['armature'] * rng.uniform(0.7, 1.3, n)
    damping = drive['viscous'] * rng.uniform(0.5, 1.5, n)
    frictionloss = drive['coulomb'] * rng.uniform(0.5, 1.5, n)
    scale = drive['coulomb'] / 0.05
    bias = scale * rng.choice([-1.0, 1.0], n) * rng.uniform(0.5, 1.0, n)
    urdf = arm_urdf(name)
    mj, qadr, dadr = mujoco_model(urdf, joints, armature, damping, frictionloss, timestep)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        prior = ai.perturbed_model(ours, fraction, seed=seed)
    return MujocoArm(name, urdf, joints, mj, qadr, dadr, armature, damping, frictionloss,
                     ours, prior, bias, scale)


def random_states(model, count, seed=0, velocity=2.0, acceleration=5.0):
    """`count` random (q, q̇, q̈) within the model's position limits (±π where it has
    none), velocities and accelerations Gaussian of these sizes."""
    rng = np.random.default_rng(seed)
    low = np.where(np.isfinite(model.position_min), model.position_min, -math.pi)
    high = np.where(np.isfinite(model.position_max), model.position_max, math.pi)
    q = rng.uniform(low, high, (count, model.n))
    return (q, velocity * rng.normal(size=(count, model.n)),
            acceleration * rng.normal(size=(count, model.n)))


def inverse_agreement(arm, count=200, seed=0):
    """max over samples and joints of |ours − MuJoCo's| / max |MuJoCo's| per sample, with
    the drive (armature·q̈ + damping·q̇ added to ours; friction loss off), on `count`
    random states. Returns {'with drive': that}."""
    q, qd, qdd = random_states(arm.ours, count, seed)
    theirs = arm.inverse(q, qd, qdd)
    ours = (dynamics.inverse_dynamics(arm.ours, q, qd, qdd) + arm.armature * qdd
            + arm.damping * qd)
    drive = np.max(np.abs(ours - theirs), axis=1) / np.max(np.abs(theirs), axis=1)
    return {'with drive': float(np.max(drive))}


@dataclass
class MujocoRecording(rr.Recording):
    """`realistic_recordings.Recording` plus MuJoCo's friction-loss force at each of the
    robot's samples (`friction_true`, the drives' share of it: −qfrc_constraint) and the
    indices of the samples kept (`kept`)."""

    friction_true: np.ndarray = None
    kept: np.ndarray = None


def excitation(arm, duration, seed=0, iterations=0, candidates=2, offset=True):
    """An optimised excitation of the prior from the arm's start at rest."""
    return ai.optimal_excitation(arm.prior, duration, STARTS[arm.name], seed=seed,
                                 candidates=candidates, iterations=iterations, offset=offset)


def record(arm, motion, duration, effects=rr.Effects(), seed=0, start=100.0,
           bandwidth=10.0):
    """A `MujocoRecording` of `arm` following `motion` for `duration` s: feedforward (the
    prior's inverse dynamics along the motion) + PD of `bandwidth` Hz (damping 0.7, for
    each joint's mean inertia of the prior along the motion) from the recorded states,
    held over each sample period as ``qfrc_applied`` while MuJoCo steps at its timestep
    (a whole number of steps per sample); `effects` as `realistic_recordings.record`."""
    mujoco = _mujoco()
    rng = np.random.default_rng(seed)
    rate = float(effects.rate)
    count = int(round(duration * rate)) + 1
    substeps = int(round(1.0 / (rate * arm.mj.opt.timestep)))
    if substeps < 1 or abs(substeps * arm.mj.opt.timestep * rate - 1.0) > 1e-9:
        raise ValueError(f'effects.rate: {rate} Hz is not a whole number of MuJoCo steps '
                         f'of {arm.mj.opt.timestep} s')
    t_true = np.arange(count) / rate
    n = arm.prior.n
    measure = rr.sensors(arm.prior, effects, rng, count)
    q_d, qd_d, qdd_d = motion.sample(t_true)
    feedforward = dynamics.inverse_dynamics(arm.prior, q_d, qd_d, qdd_d)
    inertia = np.mean(np.diagonal(dynamics.mass_matrix(
        arm.prior, q_d[::max(1, count // 50)]), axis1=1, axis2=2), axis=0)
    omega = 2.0 * math.pi * bandwidth
    kp, kd = omega ** 2 * inertia, 2.0 * 0.7 * omega * inertia
    data = arm.data()
    data.qpos[arm.qadr], data.qvel[arm.dadr] = q_d[0], qd_d[0]
    q, qd, qdd, tau, friction = (np.empty((count, n)) for _ in range(5))
    for k in range(count):
        q[k], qd[k] = data.qpos[arm.qadr], data.qvel[arm.dadr]
        q_m, qd_m = measure(k, q[k], qd[k])
        tau[k] = feedforward[k] + kp * (q_d[k] - q_m) + kd * (qd_d[k] - qd_m)
        data.qfrc_applied[arm.dadr] = tau[k]
        mujoco.mj_forward(arm.mj, data)
        qdd[k] = data.qacc[arm.dadr]
        friction[k] = -data.qfrc_constraint[arm.dadr]
        if k + 1 < count:
            mujoco.mj_step(arm.mj, data, nstep=substeps)
            if not np.all(np.isfinite(data.qvel)):
                raise FloatingPointError(f'the MuJoCo arm diverged at t = {t_true[k]:.4g} s')
    t, q_rec, qd_rec, tau_rec, keep = rr.logged(effects, rng, measure, arm.offsets(effects),
                                                t_true, q, qd, tau, start)
    return MujocoRecording(t=t, q=q_rec, qd=qd_rec, tau=tau_rec,
                           t_true=start + t_true, q_true=q, qd_true=qd, qdd_true=qdd,
                           tau_true=tau, dropped=int(count - np.sum(keep)),
                           friction_true=friction, kept=np.flatnonzero(keep))


def write_bag(folder, arm, recording, storage='sqlite3', version=8):
    """`realistic_recordings.write_bag`: the recording as a rosbag2 JointState folder."""
    return rr.write_bag(folder, arm, recording, storage=storage, version=version)


def recordings(name, duration=20.0, validation_duration=10.0, effects=rr.Effects(), seed=1,
               iterations=0):
    """(arm, estimation recording, validation recording): two excitations (seeds `seed`
    and `seed` + 100) of MuJoCo arm `name`."""
    arm = make_arm(name, seed=seed)
    estimation = record(arm, excitation(arm, duration, seed, iterations), duration, effects,
                        seed=seed)
    validation = record(arm, excitation(arm, validation_duration, seed + 100),
                        validation_duration, effects, seed=seed + 100)
    return arm, estimation, validation


# ---------------------------------------------------------------------- the yardsticks


def floor_errors(arm, effects, recording, t, q, qd, tau, accelerations='velocity',
                 friction_velocity=0.02):
    """Relative RMS error per joint of MuJoCo's arm itself on a recording prepared as
    `identify_arm` prepares it: its links, armature, damping and offsets, and its
    friction-loss force as the simulation found it (taken off the recorded efforts and
    filtered with them), against the prepared recorded efforts: what the recording's noise
    leaves to any model. `t, q, qd, tau`: the recording's runs (lists) as read back."""
    truth = arm.truth()
    stamps = np.concatenate([np.atleast_1d(s) for s in t])
    index = np.clip(np.searchsorted(recording.t, stamps), 1, recording.t.size - 1)
    index -= np.abs(recording.t[index - 1] - stamps) < np.abs(recording.t[index] - stamps)
    if not np.allclose(recording.t[index], stamps, atol=1e-6):
        raise ValueError('floor_errors: the runs are not the recording\'s samples')
    loss = recording.friction_true[recording.kept[index]]
    split = np.cumsum([len(s) for s in t])[:-1]
    without = [tk - lk for tk, lk in zip(tau, np.split(loss, split))]
    args = (10.0, 100.0, friction_velocity, 'instant', (), accelerations)
    full = ai._prepare(truth, t, q, qd, tau, *args)
    data = ai._prepare(truth, t, q, qd, without, *args)
    predicted = (dynamics.inverse_dynamics(truth, data.q, data.qd, data.qdd)
                 + arm.offsets(effects))
    error = data.tau - predicted
    return np.array([math.sqrt(np.mean(error[full.mask[:, j], j] ** 2)
                               / np.mean(full.tau[full.mask[:, j], j] ** 2))
                     for j in range(truth.n)])


def exact_errors(arm, model, recording, friction_velocity=0.02):
    """`realistic_recordings.exact_errors`: `model` against the applied torques at the
    exact states MuJoCo integrated (no offset, no noise)."""
    return rr.exact_errors(model, recording, friction_velocity)


__all__ = ['ARMS', 'STARTS', 'MujocoArm', 'MujocoRecording', 'panda_urdf', 'our_model',
           'arm_urdf', 'mujoco_model', 'make_arm', 'random_states', 'inverse_agreement',
           'excitation', 'record', 'write_bag', 'recordings', 'floor_errors', 'exact_errors']
