"""`identify estimate` end to end on bags recorded from a closed-loop simulation: a PUMA 560
plant whose links differ from the robot file by up to ±30 % and which has rotor inertia and
friction the file lacks, controlled by computed torque with the file's model, with sensor
noise. The written parameter file, layered after the robot's own file as a node loads it,
predicts the plant's noise-free efforts on a motion it never saw better than the robot file
does, on every joint; data that do not excite the arm end with status 3 and nothing written.
"""

import contextlib
import io
import os
import warnings

import numpy as np
import pytest

pytest.importorskip('rosbags')
pytest.importorskip('scipy')
pytest.importorskip('cvxpy')

from robot_dynamics.identification import arm as ai  # noqa: E402
from robot_dynamics import dynamics
from robot_dynamics.identification.recordings import write_joint_states  # noqa: E402
from robot_dynamics.model import RobotModel  # noqa: E402
from robot_dynamics.nodes.identify import main, prior_model  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUMA = os.path.join(REPO, 'config', 'puma560.yaml')
JOINTS = tuple(f'joint_{i}' for i in range(1, 7))
CONTROLLER = 'computed_torque_controller'     # the node the written file addresses
Q0 = np.array([0.0, -0.5, 0.5, 0.0, 0.3, 0.0])
DURATION = 10.0           # s of excitation (simulated)
PERIOD = 0.005            # s: control period and sample period of the recording


def puma():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return RobotModel.from_yaml(PUMA)


def plant_of(prior):
    """The arm as it is: links perturbed, drives the robot file does not have."""
    return ai.perturbed_model(prior, 0.3, seed=1, **ai.drive_terms(prior))


def record(plant, prior, seed, folder, extra_joint=True):
    """A bag of the closed loop on an excitation (its seed), sensor noise included; a
    gripper joint the model does not have is in every message."""
    excitation = ai.optimal_excitation(prior, DURATION, Q0, seed=seed, candidates=2,
                                       iterations=0)
    run = ai.closed_loop_experiment(plant, prior, excitation.reference, DURATION, Q0,
                                    control_period=PERIOD, plant_step=PERIOD, seed=seed)
    names, columns = JOINTS, (run.q, run.qd, run.tau)
    if extra_joint:
        names = ('gripper', *JOINTS)
        columns = [np.hstack([np.full((len(run.t), 1), 0.02), c]) for c in columns]
    write_joint_states(folder, names, 100.0 + run.t, *columns)
    return run


@pytest.fixture(scope='module')
def estimated(tmp_path_factory):
    folder = tmp_path_factory.mktemp('identify')
    prior = puma()
    plant = plant_of(prior)
    record(plant, prior, 0, folder / 'excitation')
    validation = record(plant, prior, 7, folder / 'validation')
    output = folder / 'identified.yaml'
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(['identify', 'estimate', '--params-file', PUMA, '--bag',
                     str(folder / 'excitation'), '--validate', str(folder / 'validation'),
                     '--effort-timing', 'held_after', '--output', str(output)])
    return code, printed.getvalue(), output, prior, plant, validation


def test_estimate_exits_0_and_reports_what_it_found(estimated):
    code, text, output, *_ = estimated
    assert code == 0, text
    assert output.exists()
    for figure in ('condition number', 'samples read', 'used after filtering',
                   'RMS error, prior', 'RMS error, identified', 'relative error, prior',
                   'relative error, identified', 'physically consistent: yes',
                   'unidentifiable directions: '):
        assert figure in text, figure


def test_the_written_file_layered_after_the_robot_file_predicts_efforts_better(estimated):
    """On the validation motion, against the plant's noise-free applied efforts and its
    true states and accelerations (not what the estimator saw): every joint's RMS error
    smaller than the robot file's, and the whole arm's several times smaller."""
    _, _, output, prior, _, run = estimated
    identified, joints, _ = prior_model([PUMA, str(output)], CONTROLLER)   # as it loads it
    assert joints == JOINTS
    steady = slice(len(run.t) // 20, None)
    errors = {}
    for name, model in (('prior', prior), ('identified', identified)):
        predicted = dynamics.inverse_dynamics(model, run.q_true, run.qd_true, run.qdd_true)
        errors[name] = np.sqrt(np.mean((run.tau_true - predicted)[steady] ** 2, axis=0))
    assert np.all(errors['identified'] < errors['prior']), errors
    assert np.linalg.norm(errors['identified']) < 0.2 * np.linalg.norm(errors['prior']), errors
    # what the file holds: the identified inertial data and the drives, nothing else
    assert identified.has_armature and identified.has_friction
    np.testing.assert_array_equal(identified.position_max, prior.position_max)
    assert not ai.physical_consistency_issues(identified)


def test_without_excitation_nothing_is_written_and_the_status_is_3(tmp_path, capsys):
    """Every joint moves but the last, which holds still: what is not determined is
    named."""
    prior = puma()
    t = 100.0 + np.arange(int(DURATION / PERIOD)) * PERIOD
    frequency = np.array([0.3, 0.5, 0.7, 0.9, 1.1, 0.0])
    q = Q0 + 0.4 * np.sin(frequency * t[:, None])
    qd = 0.4 * frequency * np.cos(frequency * t[:, None])
    qdd = -0.4 * frequency ** 2 * np.sin(frequency * t[:, None])
    tau = dynamics.inverse_dynamics(prior, q, qd, qdd)
    write_joint_states(tmp_path / 'bag', JOINTS, t, q, qd, tau)
    output = tmp_path / 'out.yaml'
    code = main(['identify', 'estimate', '--params-file', PUMA, '--bag', str(tmp_path / 'bag'),
                 '--output', str(output)])
    text = capsys.readouterr().out
    assert code == 3, text
    assert not output.exists()
    assert 'not excited: the data do not determine joint6' in text
    assert 'Nothing written' in text


def test_a_recording_too_short_to_filter_exits_2(tmp_path, capsys):
    t = 100.0 + np.arange(10) * PERIOD
    q = np.tile(Q0, (10, 1))
    # efforts that could be a drive's (gravity and some noise): only the length is wrong
    tau = dynamics.gravity_torques(puma(), q) + np.random.default_rng(0).normal(0, 0.1, q.shape)
    write_joint_states(tmp_path / 'bag', JOINTS, t, q, 0 * q, tau)
    code = main(['identify', 'estimate', '--params-file', PUMA, '--bag', str(tmp_path / 'bag'),
                 '--output', str(tmp_path / 'out.yaml')])
    err = capsys.readouterr().err
    assert code == 2 and err.count('\n') == 1 and 'long enough' in err, err


def test_a_urdf_model_gets_a_file_with_its_inertials_that_loads_after_its_own(tmp_path):
    """UR5 from a URDF: the written file holds robot.inertials and the drives; layered
    after the robot's file it predicts the plant's efforts better than the URDF alone."""
    params = tmp_path / 'ur5.yaml'
    params.write_text('/**:\n  ros__parameters:\n    robot:\n      source: urdf\n'
                      f"      urdf_file: {os.path.join(REPO, 'test', 'data', 'ur5.urdf')}\n"
                      '      tip_link: tool0\n')
    prior, joints, _ = prior_model([str(params)])
    plant = ai.perturbed_model(prior, 0.3, seed=2, **ai.drive_terms(prior))
    q0 = np.array([0.0, -1.2, 1.2, -1.5, -1.5, 0.0])
    runs = {}
    for name, seed in (('excitation', 3), ('validation', 9)):
        motion = ai.optimal_excitation(prior, DURATION, q0, seed=seed, candidates=2,
                                       iterations=0)
        run = ai.closed_loop_experiment(plant, prior, motion.reference, DURATION, q0,
                                        control_period=PERIOD, plant_step=PERIOD, seed=seed)
        write_joint_states(tmp_path / name, joints, 50.0 + run.t, run.q, run.qd, run.tau)
        runs[name] = run
    output = tmp_path / 'identified.yaml'
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        code = main(['identify', 'estimate', '--params-file', str(params), '--bag',
                     str(tmp_path / 'excitation'), '--validate', str(tmp_path / 'validation'),
                     '--effort-timing', 'held_after', '--friction', 'coulomb', '--no-offset',
                     '--output', str(output)])
    assert code == 0, printed.getvalue()
    import yaml
    written = yaml.safe_load(output.read_text())[f'/**/{CONTROLLER}']['ros__parameters']['robot']
    assert set(written) == {'inertials', 'armature', 'viscous_friction', 'coulomb_friction',
                            'friction_model'}
    assert written['friction_model'] == ['coulomb'] * 6
    identified, _, _ = prior_model([str(params), str(output)], CONTROLLER)
    run = runs['validation']
    steady = slice(len(run.t) // 20, None)
    errors = {}
    for name, model in (('prior', prior), ('identified', identified)):
        predicted = dynamics.inverse_dynamics(model, run.q_true, run.qd_true, run.qdd_true)
        errors[name] = np.sqrt(np.mean((run.tau_true - predicted)[steady] ** 2, axis=0))
    assert np.all(errors['identified'] < errors['prior']), errors
