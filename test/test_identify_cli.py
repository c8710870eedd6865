"""The `identify` executable's command line: bad arguments and bad input end with their exit
status and one line that says why, before anything is written; the prior model is the
robot's parameter files layered as ROS layers them; the file it writes is one rcl reads."""

import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

pytest.importorskip('rosbags')

from robot_dynamics.identification.recordings import (JointStateBagWriter, write_joint_states)  # noqa: E402
from robot_dynamics.model import RobotModel  # noqa: E402
from robot_dynamics.nodes.identify import (layered_parameters, main,  # noqa: E402
                                           parameter_file_text, parse_arguments, prior_model,
                                           yaml_value)
from robot_dynamics.parameters.params_file import check_params_file  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUMA = os.path.join(REPO, 'config', 'puma560.yaml')
SIM = os.path.join(REPO, 'config', 'sim.yaml')
PUMA_DEMO = os.path.join(REPO, 'config', 'sim_puma560.yaml')   # [LEE]'s demo on the PUMA
UR5 = os.path.join(REPO, 'test', 'data', 'ur5.urdf')
JOINTS = tuple(f'joint_{i}' for i in range(1, 7))
GUARD = 120.0          # s: a hang guard for the subprocesses, not a timing assertion


def states(count=50):
    """A short motion of the PUMA 560 with efforts of the size its gravity asks for
    (`identify estimate` refuses efforts far below the model's gravity torques)."""
    import warnings
    from robot_dynamics import dynamics
    t = 10.0 + np.arange(count) * 0.01
    q = 0.1 * np.sin(t[:, None] + np.arange(6))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        gravity = dynamics.gravity_torques(RobotModel.from_yaml(PUMA), q)
    return t, q, np.cos(t[:, None] + np.arange(6)), 5.0 * q + gravity


def run_estimate(capsys, *arguments):
    code = main(['identify', 'estimate', *arguments])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize('make, message', [
    ('missing', 'no such folder'),
    ('no_joint_state', 'no sensor_msgs/msg/JointState topic'),
    ('joints_missing', "joints missing on /joint_states: ['joint_6']"),
    ('no_effort', 'have no effort'),
])
def test_estimate_refuses_a_bad_recording_with_status_2_and_one_line(tmp_path, capsys, make,
                                                                    message):
    bag = tmp_path / 'bag'
    t, q, qd, tau = states()
    if make == 'no_joint_state':
        from rosbags.rosbag2 import Writer
        with Writer(bag, version=8) as writer:
            from rosbags.typesys import get_typestore, Stores
            writer.add_connection('/rosout', 'rcl_interfaces/msg/Log',
                                  typestore=get_typestore(Stores.ROS2_JAZZY))
    elif make == 'joints_missing':
        write_joint_states(bag, JOINTS[:5], t, q[:, :5], qd[:, :5], tau[:, :5])
    elif make == 'no_effort':
        with JointStateBagWriter(bag) as writer:
            for k in range(len(t)):
                writer.write(t[k], JOINTS, q[k], qd[k])
    output = tmp_path / 'out.yaml'
    code, out, err = run_estimate(capsys, '--params-file', PUMA, '--bag', str(bag),
                                  '--output', str(output))
    assert code == 2
    assert err.count('\n') == 1 and err.startswith('identify estimate: bag ') and message in err
    assert not output.exists()


def test_estimate_refuses_a_bad_validation_recording_too(tmp_path, capsys):
    t, q, qd, tau = states()
    write_joint_states(tmp_path / 'bag', JOINTS, t, q, qd, tau)
    code, _, err = run_estimate(capsys, '--params-file', PUMA, '--bag', str(tmp_path / 'bag'),
                                '--validate', str(tmp_path / 'nowhere'), '--output',
                                str(tmp_path / 'out.yaml'))
    assert code == 2 and 'nowhere: no such folder' in err


@pytest.mark.parametrize('content, message', [
    (None, 'no such file'),
    ('/**:\n  ros__parameters:\n    joints: [a]\n', 'no robot block'),
    ('/**:\n  ros__parameters:\n    robot:\n      dh_convention: standard\n',
     'robot.joint_types: missing'),
    ('robot: {mass: [1, 2.0]}\n', 'ros__parameters'),
])
def test_estimate_refuses_a_bad_parameter_file_with_status_2(tmp_path, capsys, content,
                                                            message):
    params = tmp_path / 'robot.yaml'
    if content is not None:
        params.write_text(content)
    t, q, qd, tau = states()
    write_joint_states(tmp_path / 'bag', JOINTS, t, q, qd, tau)
    code, _, err = run_estimate(capsys, '--params-file', str(params), '--bag',
                                str(tmp_path / 'bag'), '--output', str(tmp_path / 'out.yaml'))
    assert code == 2 and err.count('\n') == 1 and message in err, err


@pytest.mark.parametrize('arguments, message', [
    (['estimate', '--bag', 'b', '--output', 'o'], '--params-file'),
    (['estimate', '--params-file', 'p', '--output', 'o'], '--bag'),
    (['estimate', '--params-file', 'p', '--bag', 'b'], '--output'),
    (['excite'], '--record'),
    (['excite', '--record', 'r', '--duration', '0'], '--duration'),
    (['excite', '--record', 'r', '--timeout', 'nan'], '--timeout'),
    ([], 'excite,estimate'),
])
def test_bad_arguments_exit_with_status_2_naming_the_option(arguments, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        parse_arguments(arguments)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_excite_refuses_an_existing_record_folder(tmp_path, capsys):
    assert main(['identify', 'excite', '--record', str(tmp_path)]) == 2
    assert 'exists already' in capsys.readouterr().err


def test_the_prior_is_the_parameter_files_layered_as_ros_does(tmp_path):
    """A later file overrides key by key; a node section after /**; the controller's
    widened limits of the PUMA's demo file are in its section."""
    later = tmp_path / 'later.yaml'
    later.write_text('/**:\n  ros__parameters:\n    robot:\n      mass: [0.0, 20.0, 4.8, '
                     '0.82, 0.34, 0.09]\n')
    robot, others = layered_parameters([PUMA, PUMA_DEMO, SIM, str(later)],
                                       'computed_torque_controller')
    assert robot['mass'][1] == 20.0 and robot['a'][1] == 0.4318
    assert robot['position_max'][0] == pytest.approx(2 * np.pi)
    assert others['joints'] == list(JOINTS) and others['control_mode'] == 'on_state'
    model, joints, _ = prior_model([PUMA, str(later)])
    assert joints == JOINTS and model.mass[1] == 20.0


def test_a_urdf_prior_reads_its_file_relative_to_the_parameter_file(tmp_path):
    (tmp_path / 'arm.urdf').write_text(open(UR5, encoding='utf-8').read())
    params = tmp_path / 'ur5.yaml'
    params.write_text('/**:\n  ros__parameters:\n    robot:\n      source: urdf\n'
                      '      urdf_file: arm.urdf\n      tip_link: tool0\n')
    model, joints, _ = prior_model([str(params)])
    assert model.source == 'urdf' and model.n == 6 and joints == tuple(model.joint_names)


def test_the_written_file_is_read_by_rcl_rules_and_overrides_the_robot_file(tmp_path):
    """Lists of floats only (also where a value is a whole number), tiny values with a
    point in the mantissa (PyYAML would read 4e-05 as a string); the merged model has the
    written values."""
    model = RobotModel.from_yaml(PUMA)
    robot = {'mass': [1.0, 17, 4.8, 0.82, 0.34, 0.09], 'armature': [4e-05] * 6,
             'coulomb_friction': [0, 0, 0, 0, 0, 1e-20]}
    path = tmp_path / 'out.yaml'
    path.write_text(parameter_file_text(robot, ['a comment']))
    check_params_file(str(path))
    document = yaml.safe_load(path.read_text())
    written = document['/**']['ros__parameters']['robot']
    assert written['armature'] == [4e-05] * 6 and written['mass'][1] == 17.0
    assert all(isinstance(v, float) for v in written['coulomb_friction'])
    merged, _ = prior_model([PUMA, str(path)])[:2]
    assert merged.mass[0] == 1.0 and merged.armature[2] == 4e-05
    np.testing.assert_array_equal(merged.com, model.com)


@pytest.mark.parametrize('value, text', [(4e-05, '4.0e-05'), (2.0, '2.0'), (17, '17'),
                                         (1e+20, '1.0e+20'), (-0.5, '-0.5'), (True, 'true')])
def test_yaml_values_keep_their_type(value, text):
    assert yaml_value(value) == text


def launch(*arguments):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
    return subprocess.run([sys.executable, '-m', 'robot_dynamics.nodes.identify', *arguments],
                          env=env, capture_output=True, text=True, timeout=GUARD)


def test_excite_without_a_controller_exits_1_and_says_why(tmp_path):
    record = tmp_path / 'bag'
    done = launch('excite', '--timeout', '1.0', '--controller', '/nobody_here', '--record',
                  str(record))
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'no robot model from /nobody_here' in done.stderr
    assert not record.exists()


def test_python_m_prints_the_usage():
    done = launch('--help')
    assert done.returncode == 0 and 'excite' in done.stdout and 'estimate' in done.stdout


def test_without_rosbags_the_line_says_what_to_install(tmp_path, capsys, monkeypatch):
    import sys as system
    for name in ('rosbags.highlevel', 'rosbags.rosbag2', 'rosbags.typesys'):
        monkeypatch.setitem(system.modules, name, None)       # import fails
    (tmp_path / 'bag').mkdir()
    (tmp_path / 'bag' / 'metadata.yaml').write_text('{}')
    code, _, err = run_estimate(capsys, '--params-file', PUMA, '--bag', str(tmp_path / 'bag'),
                                '--output', str(tmp_path / 'out.yaml'))
    assert code == 2 and err.count('\n') == 1 and 'pip install rosbags' in err


def test_a_failing_solver_ends_with_status_1_and_one_line(tmp_path, capsys, monkeypatch):
    from robot_dynamics.nodes.identify import estimate

    def failing(*args, **kwargs):
        raise RuntimeError('the semidefinite program ended infeasible\nmore detail')
    monkeypatch.setattr(estimate.arm, 'identify_arm', failing)
    t, q, qd, tau = states()
    write_joint_states(tmp_path / 'bag', JOINTS, t, q, qd, tau)
    code, _, err = run_estimate(capsys, '--params-file', PUMA, '--bag', str(tmp_path / 'bag'),
                                '--output', str(tmp_path / 'out.yaml'))
    assert code == 1 and err.count('\n') == 1
    assert 'the estimation failed: RuntimeError: the semidefinite program ended' in err
    assert not (tmp_path / 'out.yaml').exists()


def estimate_in_a_child(blocked, message, params, bag, output, timeout):
    """`identify estimate` in a fresh interpreter in which the top-level packages `blocked`
    cannot be imported (ModuleNotFoundError `message` + the name, as if not installed)."""
    code = ('import sys\n'
            'class Block:\n'
            '    def find_spec(self, name, path=None, target=None):\n'
            f'        if name.split(".")[0] in {tuple(blocked)!r}:\n'
            f'            raise ModuleNotFoundError({message!r} + repr(name), name=name)\n'
            'sys.meta_path.insert(0, Block())\n'
            'from robot_dynamics.nodes.identify import main\n'
            "sys.exit(main(['identify', 'estimate', '--params-file', sys.argv[1], '--bag', "
            "sys.argv[2], '--output', sys.argv[3]]))\n")
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
    return subprocess.run([sys.executable, '-W', 'ignore', '-c', code, str(params), str(bag),
                           str(output)], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_estimate_reads_bags_and_the_prior_without_ros(tmp_path):
    """A fresh interpreter in which rclpy and the ROS messages cannot be imported runs
    `identify estimate` as far as the data (a bad recording: no motion)."""
    t, q, qd, tau = states()
    write_joint_states(tmp_path / 'bag', JOINTS, t, q, qd, tau)
    done = estimate_in_a_child(('rclpy', 'sensor_msgs', 'rcl_interfaces'), 'no ROS here: ',
                               PUMA, tmp_path / 'bag', tmp_path / 'out.yaml', GUARD)
    assert 'no ROS here' not in done.stderr, done.stderr
    assert '50 samples of 6 joints' in done.stdout, done.stdout + done.stderr
    assert done.returncode == 2 and 'long enough' in done.stderr     # 0.5 s: too short


# ---------------------------------------------------------------------- layering, timing,
#                                                                        the written section


@pytest.fixture
def estimator(monkeypatch):
    """The estimator replaced by one that returns the prior model and records the effort
    timing it was asked for: what is tested here is the command line around it."""
    from robot_dynamics.nodes.identify import estimate

    class Asked(list):
        """The effort timings asked for; ``options``: the other options of each estimate,
        ``errors``: the acceleration source of each validation."""
    asked = Asked()
    asked.options, asked.errors = [], []

    def identify(prior, pieces, effort_timing='instant', **options):
        asked.append(effort_timing)
        asked.options.append(options)
        source = options.get('accelerations', 'auto')
        fit = {'velocity': 0.05, 'position': 0.01} if source == 'auto' else {}
        return arm_result(prior, accelerations='position' if source == 'auto' else source,
                          acceleration_fit=fit)

    def errors(model, pieces, effort_timing='instant', drive_gain=None,
               accelerations='velocity'):
        asked.errors.append(accelerations)
        return estimate.Errors(np.full(model.n, 0.1), np.full(model.n, 0.01))
    monkeypatch.setattr(estimate, 'identify', identify)
    monkeypatch.setattr(estimate, 'errors', errors)
    return asked


def arm_result(prior, consistency=(), **fields):
    """An estimator result (identification.arm.ArmIdentification) whose model is the prior:
    100 samples used of 500, condition number 10, everything excited."""
    from robot_dynamics.identification.arm import ArmIdentification
    return ArmIdentification(
        model=prior, phi=None, base=None, beta=None, condition_number=10.0, samples=100,
        rows=100 * prior.n, raw_samples=500, rms_residual=None, sigma=None, not_excited=[],
        fixed='fixed by the prior', consistency=list(consistency), timing={}, **fields)


def write_bag(folder, custom_data=None):
    t, q, qd, tau = states(count=200)
    with JointStateBagWriter(folder, custom_data=custom_data) as writer:
        for k in range(len(t)):
            writer.write(t[k], JOINTS, q[k], qd[k], tau[k])


def test_repeated_params_files_are_all_layered_and_the_hint_repeats_them(tmp_path, capsys,
                                                                         estimator):
    """`--params-file A --params-file B` layers A then B (B's mass wins, A's geometry
    stays), as `--params-file A B` does; the hint names both before the written file."""
    later = tmp_path / 'later.yaml'
    later.write_text('/**:\n  ros__parameters:\n    robot:\n      mass: [0.0, 20.0, 4.8, '
                     '0.82, 0.34, 0.09]\n')
    write_bag(tmp_path / 'bag')
    output = tmp_path / 'out.yaml'
    for flags in (['--params-file', PUMA, '--params-file', str(later)],
                  ['--params-file', PUMA, str(later)]):
        output.unlink(missing_ok=True)
        code, out, err = run_estimate(capsys, *flags, '--bag', str(tmp_path / 'bag'),
                                      '--output', str(output))
        assert code == 0, out + err
        assert f'from {PUMA} {later};' in out
        assert (f'--params-file {PUMA} --params-file {later} --params-file {output}'
                in out.splitlines()[-1])
        written = yaml.safe_load(output.read_text())
        robot = written['/**/computed_torque_controller']['ros__parameters']['robot']
        assert robot['mass'][1] == 20.0                       # the later file's prior


@pytest.mark.parametrize('section, applies', [
    ('/*', True),
    ('/**/computed_torque_controller', True),
    ('/computed_torque_controller', True),
    ('/ns/computed_torque_controller', False),
    ('/**/plant_simulator', False),
    ('/computed_torque_controller*', None),     # whatever the nodes say
    ('/computed_torque_*', None),
    ('/computed_torque_controller_2*', None),
])
def test_node_sections_match_as_the_nodes_match_them(tmp_path, section, applies):
    """One matching for identify and the nodes (rcl's wildcards): identify applies a
    section exactly when the nodes' own matching says it applies to the controller."""
    from robot_dynamics.parameters.params_file import section_applies
    extra = tmp_path / 'extra.yaml'
    extra.write_text(f'{section}:\n  ros__parameters:\n    robot:\n      mass: [0.0, 21.0, '
                     '4.8, 0.82, 0.34, 0.09]\n')
    robot, _ = layered_parameters([PUMA, str(extra)], 'computed_torque_controller')
    nodes_say = section_applies(section, '/computed_torque_controller')
    assert (robot['mass'][1] == 21.0) is nodes_say
    if applies is not None:
        assert nodes_say is applies


def test_the_acceleration_source_is_chosen_said_and_used_for_the_validation(tmp_path, capsys,
                                                                           estimator):
    """By default the estimate chooses (auto) and the line says which and both fits; the
    validation errors are computed with the source the estimate used; `--accelerations`
    passes a source through and the line names the flag."""
    write_bag(tmp_path / 'bag')
    output = tmp_path / 'out.yaml'
    code, out, err = run_estimate(capsys, '--params-file', PUMA, '--bag',
                                  str(tmp_path / 'bag'), '--output', str(output))
    assert code == 0, out + err
    assert estimator.options[-1]['accelerations'] == 'auto'
    assert estimator.errors == ['position', 'position']          # the prior and the estimate
    line = next(r for r in out.splitlines() if r.startswith('accelerations:'))
    assert 'second derivative of the recorded positions' in line and '1 %' in line
    assert '5 %' in line and 'derivative of the recorded velocities' in line
    assert 'accelerations from the recorded positions' in output.read_text()
    code, out, err = run_estimate(capsys, '--params-file', PUMA, '--bag',
                                  str(tmp_path / 'bag'), '--accelerations', 'velocity',
                                  '--output', str(output))
    assert code == 0, out + err
    assert estimator.options[-1]['accelerations'] == 'velocity'
    assert estimator.errors[-2:] == ['velocity', 'velocity']
    assert ('accelerations: the derivative of the recorded velocities (--accelerations '
            'velocity)') in out
    code, out, err = run_estimate(capsys, '--params-file', PUMA, '--bag',
                                  str(tmp_path / 'bag'), '--accelerations', 'encoder',
                                  '--output', str(output))
    assert code == 2 and '--accelerations' in err


def test_the_effort_timing_comes_from_the_bag_unless_given(tmp_path, capsys, estimator):
    write_bag(tmp_path / 'held', {'robot_dynamics.effort_timing': 'held_before'})
    write_bag(tmp_path / 'plain')
    common = ['--params-file', PUMA, '--output', str(tmp_path / 'out.yaml')]
    code, out, _ = run_estimate(capsys, *common, '--bag', str(tmp_path / 'held'))
    assert code == 0 and estimator[-1] == 'held_before'
    assert "effort timing: held_before (from the bags' metadata" in out
    code, out, _ = run_estimate(capsys, *common, '--bag', str(tmp_path / 'held'),
                                '--effort-timing', 'instant')
    assert code == 0 and estimator[-1] == 'instant'
    code, out, _ = run_estimate(capsys, *common, '--bag', str(tmp_path / 'plain'))
    assert code == 0 and estimator[-1] == 'instant' and 'effort timing' not in out
    assert '(effort timing instant)' in (tmp_path / 'out.yaml').read_text()
    calls = len(estimator)
    code, _, err = run_estimate(capsys, *common, '--bag', str(tmp_path / 'held'),
                                str(tmp_path / 'plain'))
    assert code == 0 and estimator[-1] == 'held_before'      # one says, the other is silent
    write_bag(tmp_path / 'after', {'robot_dynamics.effort_timing': 'held_after'})
    code, _, err = run_estimate(capsys, *common, '--bag', str(tmp_path / 'held'),
                                str(tmp_path / 'after'))
    assert code == 2 and err.count('\n') == 1 and 'different effort timings' in err
    assert len(estimator) == calls + 1


def test_the_written_file_addresses_the_controller_not_the_plant(tmp_path, capsys,
                                                                 estimator):
    """Loaded into a simulation after the robot file, the identified values reach the
    controller and leave the plant as the robot file makes it; --output-section /** for
    every node."""
    from robot_dynamics.parameters.params_file import section_applies
    write_bag(tmp_path / 'bag')
    output = tmp_path / 'out.yaml'
    code, out, err = run_estimate(capsys, '--params-file', PUMA, '--bag', str(tmp_path / 'bag'),
                                  '--output', str(output))
    assert code == 0, err
    check_params_file(str(output))
    (section,) = yaml.safe_load(output.read_text())
    assert section == '/**/computed_torque_controller'
    assert section_applies(section, '/computed_torque_controller')
    assert not section_applies(section, '/plant_simulator')
    code, _, _ = run_estimate(capsys, '--params-file', PUMA, '--bag', str(tmp_path / 'bag'),
                              '--node', 'my_ctrl', '--output', str(output))
    assert code == 0 and list(yaml.safe_load(output.read_text())) == ['/**/my_ctrl']
    code, _, _ = run_estimate(capsys, '--params-file', PUMA, '--bag', str(tmp_path / 'bag'),
                              '--output-section', '/**', '--output', str(output))
    assert code == 0 and list(yaml.safe_load(output.read_text())) == ['/**']
    with pytest.raises(SystemExit):
        parse_arguments(['estimate', '--params-file', PUMA, '--bag', 'b', '--output', 'o',
                         '--output-section', 'controller'])
    assert '--output-section' in capsys.readouterr().err


def test_excite_writes_held_before_for_the_plant_and_instant_for_a_driver():
    """What `identify excite` writes into the bag's metadata, from the node that publishes
    the joint states (or --effort-timing)."""
    from types import SimpleNamespace
    pytest.importorskip('rclpy')
    from robot_dynamics.nodes.identify.excite import ExcitationRecorder
    timing = ExcitationRecorder.effort_timing
    plant = SimpleNamespace(publishers_=['plant_simulator'], states_topic='/joint_states')
    driver = SimpleNamespace(publishers_=['joint_state_broadcaster'],
                             states_topic='/joint_states')
    assert timing(plant)[0] == 'held_before' and timing(driver)[0] == 'instant'
    assert timing(plant, 'instant')[0] == 'instant'
    options = parse_arguments(['excite', '--record', 'r', '--effort-timing', 'held_after'])
    assert options.effort_timing == 'held_after'
    assert parse_arguments(['excite', '--record', 'r']).effort_timing is None


def test_an_unknown_effort_timing_in_the_bag_is_refused_in_one_line(tmp_path, capsys,
                                                                    estimator):
    write_bag(tmp_path / 'bag', {'robot_dynamics.effort_timing': 'sometimes'})
    code, _, err = run_estimate(capsys, '--params-file', PUMA, '--bag', str(tmp_path / 'bag'),
                                '--output', str(tmp_path / 'out.yaml'))
    assert code == 2 and err.count('\n') == 1 and "['sometimes'] is not one of" in err
    assert '--effort-timing' in err and not estimator
