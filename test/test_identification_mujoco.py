"""Whole-arm identification on recordings of an arm simulated by MuJoCo, a physics engine
that is not this package's (benchmarks/mujoco_recordings.py): the same URDF read by
MuJoCo's compiler and by `RobotModel`, MuJoCo's own rotor inertia, damping and dry
friction (``frictionloss``, a soft constraint: a law outside the estimator's family), the
arm driven by feedforward + PD from a robot file whose links are ±30 % off, recorded with
encoder quantisation, coloured noise, effort offsets, jittered stamps and dropped
messages. First the conversion: MuJoCo's inverse dynamics (``mj_inverse``) equals ours;
then the identification targets (benchmarks/identification.py --study mujoco prints them
for longer recordings) through `identify estimate`. Simulated time only."""

import os
import subprocess
import sys

import numpy as np
import pytest

mujoco = pytest.importorskip('mujoco')
pytest.importorskip('scipy')
pytest.importorskip('rosbags')

from robot_dynamics import dynamics  # noqa: E402
from robot_dynamics.model import urdf
from robot_dynamics.identification.recordings import read_joint_states  # noqa: E402
from benchmark_modules import benchmark_module  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUARD = 600.0          # s: a hang guard for the child process, not a timing assertion


mr = benchmark_module('mujoco_recordings')
rr = benchmark_module('realistic_recordings')


@pytest.fixture(scope='module', params=['ur5', 'panda'])
def arm(request):
    return mr.make_arm(request.param, seed=1)


# every arm of the conversion tests: also a URDF with rotated origins and inertials,
# unaligned and unnormalised axes, a prismatic joint and massive fixed links
@pytest.fixture(scope='module', params=['ur5', 'panda', 'skewed'])
def any_arm(request):
    return mr.make_arm(request.param, seed=1)


# ---------------------------------------------------------------------- the conversion


def test_mujoco_reads_the_same_arm(any_arm):
    """MuJoCo's moving bodies carry our bodies' mass (fixed links merged into them), one
    joint per movable joint, a slide where ours is prismatic."""
    arm = any_arm
    assert arm.mj.nv == arm.ours.n == len(arm.joints)
    moving = arm.mj.body_weldid != 0           # welded to the world: the fixed base
    assert float(np.sum(arm.mj.body_mass[moving])) == pytest.approx(float(np.sum(arm.ours.mass)))
    slide = arm.mj.jnt_type[[arm.mj.joint(j).id for j in arm.joints]] == \
        mujoco.mjtJoint.mjJNT_SLIDE
    np.testing.assert_array_equal(slide, arm.ours.chain.prismatic)


def test_mujoco_inverse_dynamics_equals_ours(any_arm):
    """On random states: ours plus armature·q̈ + damping·q̇ equals MuJoCo's qfrc_inverse
    (friction loss off, no constraints) to 1e-9 relative; without the drive terms MuJoCo's
    exceeds ours by them (so the check sees them)."""
    arm = any_arm
    assert mr.inverse_agreement(arm, count=200, seed=3)['with drive'] < 1e-9
    q, qd, qdd = mr.random_states(arm.ours, 20, seed=4)
    rigid = dynamics.inverse_dynamics(arm.ours, q, qd, qdd)
    theirs = arm.inverse(q, qd, qdd)
    np.testing.assert_allclose(theirs - rigid, arm.armature * qdd + arm.damping * qd,
                               atol=1e-9 * float(np.max(np.abs(theirs))))
    assert np.max(np.abs(arm.armature * qdd)) > 1e-3 * np.max(np.abs(theirs))


def test_our_urdf_export_reads_the_same_in_mujoco(any_arm):
    """`urdf.model_to_urdf` of our model, compiled by MuJoCo: the same inverse dynamics."""
    arm = any_arm
    text = urdf.model_to_urdf(arm.ours, arm.joints)
    model, qadr, dadr = mr.mujoco_model(text, arm.joints, np.zeros(arm.ours.n),
                                        np.zeros(arm.ours.n), np.zeros(arm.ours.n))
    data = mujoco.MjData(model)
    q, qd, qdd = mr.random_states(arm.ours, 50, seed=5)
    ours = dynamics.inverse_dynamics(arm.ours, q, qd, qdd)
    for k in range(q.shape[0]):
        data.qpos[qadr], data.qvel[dadr], data.qacc[dadr] = q[k], qd[k], qdd[k]
        mujoco.mj_inverse(model, data)
        np.testing.assert_allclose(data.qfrc_inverse[dadr], ours[k],
                                   atol=1e-9 * float(np.max(np.abs(ours[k]))))


# ---------------------------------------------------------------------- the recordings


def test_a_recording_is_mujocos_motion_under_the_drive_torques(arm):
    """The recorded effort (before noise and offset) is the applied drive torque: at the
    states MuJoCo integrated, MuJoCo's inverse dynamics with its friction loss gives it
    back, and ours plus armature, damping and the friction-loss force too; the friction
    loss acts (its force reaches its level while sliding and stays within it); the arm
    tracks the plan closely but not exactly."""
    motion = mr.excitation(arm, 3.0, seed=5)
    recording = mr.record(arm, motion, 3.0, rr.Effects(rate=500.0), seed=5)
    scale = float(np.max(np.abs(recording.tau_true)))
    every = slice(None, None, 10)
    np.testing.assert_allclose(
        arm.inverse(recording.q_true[every], recording.qd_true[every],
                    recording.qdd_true[every], frictionloss=True),
        recording.tau_true[every], atol=1e-8 * scale)
    ours = (dynamics.inverse_dynamics(arm.truth(), recording.q_true, recording.qd_true,
                                      recording.qdd_true) + recording.friction_true)
    np.testing.assert_allclose(ours, recording.tau_true, atol=1e-9 * scale)
    friction = np.abs(recording.friction_true)
    assert np.all(friction <= arm.frictionloss * (1.0 + 1e-9))
    assert np.all(np.max(friction, axis=0) >= 0.99 * arm.frictionloss)
    planned = motion.sample(recording.t_true - recording.t_true[0])[0]
    error = np.max(np.abs(recording.q_true - planned), axis=0)
    assert np.all(error < 0.05) and np.max(error) > 1e-4, error
    # the effects: offsets and noise on the efforts, dropped messages
    assert recording.dropped > 0 and recording.t.size == recording.kept.size
    residual = recording.tau - recording.tau_true[recording.kept]
    np.testing.assert_allclose(np.mean(residual, axis=0), arm.offsets(rr.Effects()),
                               atol=0.2 * float(np.max(np.abs(arm.offsets(rr.Effects())))))


# ---------------------------------------------------------------------- the targets


def _estimate(tmp_path, arm, estimation, validation, friction):
    params = arm.write_params(str(tmp_path))
    mr.write_bag(tmp_path / 'excitation', arm, estimation, storage='mcap')
    mr.write_bag(tmp_path / 'validation', arm, validation)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
    done = subprocess.run(
        [sys.executable, '-W', 'ignore', '-m', 'robot_dynamics.nodes.identify', 'estimate',
         '--params-file', params, '--bag', str(tmp_path / 'excitation'),
         '--validate', str(tmp_path / 'validation'), '--offset', '--friction', friction,
         '--output', str(tmp_path / 'identified.yaml')],
        env=env, capture_output=True, text=True, timeout=GUARD)
    assert done.returncode == 0, done.stdout + done.stderr
    return params, done.stdout


@pytest.mark.parametrize('name, rate, friction', [
    ('ur5', 1000.0, 'coulomb'), ('panda', 500.0, 'tanh')], ids=['ur5', 'panda'])
def test_identify_estimate_on_a_mujoco_arm(tmp_path, name, rate, friction):
    """End to end on 15 s of a MuJoCo arm: `identify estimate --offset --friction LAW`
    with the prior ±30 % off. Held-out error within 1.05× of the unconstrained
    least-squares fit with the same law and offsets (mean over joints), not far above
    MuJoCo's arm itself on the same data, physically consistent, 3× better than the prior
    where it is more than 10 % off; and within 3 % of MuJoCo's applied torques at the
    exact states on every joint."""
    pytest.importorskip('cvxpy')
    from robot_dynamics.identification import arm as ai
    from robot_dynamics.nodes.identify import pieces, prior_model
    effects = rr.Effects(rate=rate)
    arm, estimation, validation = mr.recordings(name, 15.0, 8.0, effects, seed=2)
    params, stdout = _estimate(tmp_path, arm, estimation, validation, friction)

    def row(label):
        line = next(r for r in stdout.splitlines() if r.startswith(label))
        return np.array([float(c.rstrip('%')) for c in line[len(label):].split()]) / 100.0
    prior = row('relative error, prior')
    identified = row('relative error, identified')
    off = prior > 0.10
    assert np.any(off) and np.all(prior[off] >= 3.0 * identified[off]), (prior, identified)
    assert 'physically consistent: yes' in stdout
    line = next(r for r in stdout.splitlines() if r.startswith('accelerations:'))
    source = 'position' if 'second derivative of the recorded positions' in line else 'velocity'
    # the unconstrained least-squares fit and MuJoCo's arm on the same held-out data
    t, q, qd, tau = (list(c) for c in zip(*pieces([
        read_joint_states(tmp_path / 'excitation', arm.joints)])))
    least = ai.identify_arm(arm.prior, t, q, qd, tau, offset=True, friction=friction,
                            constrained=False, accelerations=source)
    vt, vq, vqd, vtau = (list(c) for c in zip(*pieces([
        read_joint_states(tmp_path / 'validation', arm.joints)])))
    least_errors = rr.predicted_errors(arm.prior, friction, True, least.phi,
                                       least.stribeck_velocity, vt, vq, vqd, vtau,
                                       accelerations=source)
    assert np.mean(identified) <= 1.05 * np.mean(least_errors), (identified, least_errors)
    floor = mr.floor_errors(arm, effects, validation, vt, vq, vqd, vtau,
                            accelerations=source)
    assert np.all(identified <= 1.5 * floor + 0.005), (identified, floor)
    model = prior_model([params, str(tmp_path / 'identified.yaml')],
                        'computed_torque_controller')[0]
    assert not ai.physical_consistency_issues(model)
    # against MuJoCo's applied torques at the states it integrated (no noise, no offset)
    exact = rr.exact_errors(model, validation)
    assert np.all(exact < 0.03), exact
    assert np.max(rr.exact_errors(arm.prior, validation)) > 0.1
