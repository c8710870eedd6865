"""`identify plan` without ROS: the motion planned from a robot file alone, written as a
trajectory_msgs/JointTrajectory YAML file that loads back into the message; the joint
limits, the floor and the keep-out boxes checked at every point, a refusal naming the joint
or the point of a link and the time; the optimiser keeping clear of a floor the
unconstrained plan would go through."""

import contextlib
import io
import math
import warnings

import numpy as np
import pytest
import yaml

pytest.importorskip('scipy')

from builtin_interfaces.msg import Duration, Time  # noqa: E402
from std_msgs.msg import Header  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from robot_dynamics import dynamics  # noqa: E402
from robot_dynamics.model import RobotModel  # noqa: E402
from robot_dynamics.identification.motion_limits import (acceleration_limits, first_violation,
                                                         link_point_names, link_points, Workspace)
from robot_dynamics.nodes.identify import main as identify  # noqa: E402
from ros_testing import PUMA  # noqa: E402

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')

JOINTS = tuple(f'joint_{i}' for i in range(1, 7))
START = [0.0, 0.8, -1.2, 0.3, 0.5, 0.0]
NESTED = {'header': Header, 'stamp': Time, 'points': JointTrajectoryPoint,
          'time_from_start': Duration}


def puma():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return RobotModel.from_yaml(PUMA)


def run(*arguments):
    """(exit status, stdout, stderr) of `identify plan ...` in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = identify(['identify', 'plan', '--params-file', PUMA, *arguments])
    return code, out.getvalue(), err.getvalue()


def set_fields(message, fields):
    """The message filled from its YAML fields the way rosidl_runtime_py's
    set_message_fields does: every key must be a field of the message, nested messages
    and sequences of messages built from their own fields."""
    types = message.get_fields_and_field_types()
    for key, value in fields.items():
        assert key in types, f'{type(message).__name__} has no field {key!r}'
        if isinstance(value, dict):
            value = set_fields(NESTED[key](), value)
        elif key in NESTED and isinstance(value, list):
            value = [set_fields(NESTED[key](), item) for item in value]
        setattr(message, key, value)
    return message


def load(path):
    with open(path, encoding='utf-8') as stream:
        return set_fields(JointTrajectory(), yaml.safe_load(stream))


def arrays(message):
    t = np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec
                  for p in message.points])
    return (t, *(np.array([list(getattr(p, name)) for p in message.points])
                 for name in ('positions', 'velocities', 'accelerations')))


@pytest.fixture(scope='module')
def written(tmp_path_factory):
    path = tmp_path_factory.mktemp('plan') / 'plan.yaml'
    code, out, err = run('--duration', '4', '--rate', '50', '--iterations', '0',
                         '--start', *map(str, START), '--output', str(path))
    return code, out, err, path


def test_the_file_loads_into_a_joint_trajectory(written):
    code, out, err, path = written
    assert code == 0, out + err
    message = load(path)
    assert tuple(message.joint_names) == JOINTS
    assert message.header.stamp.sec == message.header.stamp.nanosec == 0   # start on arrival
    t, q, qd, qdd = arrays(message)
    assert len(t) == 4 * 50 + 1
    assert np.allclose(np.diff(t), 1.0 / 50, atol=1e-9) and t[-1] == 4.0
    assert all(len(p.effort) == 0 for p in message.points)
    assert q.shape == qd.shape == qdd.shape == (len(t), 6)
    assert f'wrote {path}' in out and 'condition number' in out


def test_the_motion_is_at_rest_at_the_start_at_both_ends_and_moves_every_joint(written):
    t, q, qd, qdd = arrays(load(written[3]))
    assert np.array_equal(q[0], START) and np.array_equal(q[-1], START)
    for k in (0, -1):
        assert np.all(qd[k] == 0.0) and np.all(qdd[k] == 0.0)     # exactly, not 1e-16
    assert np.all(np.ptp(q, axis=0) > 0.05)


def test_velocities_and_accelerations_are_those_of_the_positions(written):
    """The points are one motion: the central differences of the positions are the
    velocities, those of the velocities the accelerations (to the differences' h² error)."""
    t, q, qd, qdd = arrays(load(written[3]))
    h = t[1] - t[0]
    scale = np.max(np.abs(qd))
    assert np.max(np.abs((q[2:] - q[:-2]) / (2 * h) - qd[1:-1])) < 0.01 * scale
    scale = np.max(np.abs(qdd))
    assert np.max(np.abs((qd[2:] - qd[:-2]) / (2 * h) - qdd[1:-1])) < 0.02 * scale


def test_the_motion_respects_the_files_limits(written):
    model = puma()
    t, q, qd, qdd = arrays(load(written[3]))
    assert np.all(q >= model.position_min) and np.all(q <= model.position_max)
    assert np.all(np.abs(qd) <= model.velocity_max)
    bound, _ = acceleration_limits(model)
    assert np.all(np.abs(qdd) <= bound)


def test_the_start_defaults_to_the_files_initial_positions(tmp_path):
    initial = [0.1, 0.9, -1.0, 0.2, 0.4, -0.3]
    extra = tmp_path / 'home.yaml'
    extra.write_text('/**:\n  ros__parameters:\n    initial_positions: '
                     f'{[float(v) for v in initial]}\n')
    path = tmp_path / 'plan.yaml'
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = identify(['identify', 'plan', '--params-file', PUMA, str(extra), '--duration',
                         '2', '--rate', '20', '--iterations', '0', '--output', str(path)])
    assert code == 0, err.getvalue()
    t, q, qd, qdd = arrays(load(path))
    assert np.array_equal(q[0], initial) and np.array_equal(q[-1], initial)
    assert "initial_positions" in out.getvalue()


def test_without_a_start_it_plans_from_the_middle_of_the_ranges(tmp_path):
    model = puma()
    code, out, err = run('--duration', '2', '--rate', '20', '--iterations', '0',
                         '--output', str(tmp_path / 'plan.yaml'))
    assert code == 0, err
    t, q, qd, qdd = arrays(load(tmp_path / 'plan.yaml'))
    assert np.allclose(q[0], 0.5 * (model.position_min + model.position_max))


def lowest_z(model, q):
    """The lowest z of every link frame origin and the tool frame along q, by the model's
    forward kinematics (its DH/link frames: the tool frame is the last)."""
    T = dynamics.forward_kinematics(model, q)
    return float(np.min(T[..., 2, 3]))


def test_the_planner_keeps_clear_of_a_floor_the_free_plan_goes_through(tmp_path):
    """The free plan dips to z0; with a floor 0.1 m above z0 (below the start by more than
    the clearance) the plan stays above floor + clearance wherever a link point is."""
    model = puma()
    start = [0.0, 0.0, 0.0, 0.3, 0.5, 0.0]        # upper arm level, forearm up
    args = ('--duration', '4', '--rate', '50', '--iterations', '0', '--start', *map(str, start))
    code, _, err = run(*args, '--output', str(tmp_path / 'free.yaml'))
    assert code == 0, err
    free = arrays(load(tmp_path / 'free.yaml'))[1]
    z_free = lowest_z(model, free)
    floor = z_free + 0.1
    assert lowest_z(model, np.array([start])) > floor + 0.05      # the start is well clear
    code, out, err = run(*args, '--floor', str(floor), '--output', str(tmp_path / 'floor.yaml'))
    assert code == 0, err
    assert f'floor at z = {floor:g} m: all met' in out
    q = arrays(load(tmp_path / 'floor.yaml'))[1]
    assert lowest_z(model, q) >= floor + 0.05 - 1e-6
    assert np.min(link_points(model, q)[..., 2]) >= floor + 0.05 - 1e-6
    assert np.all(np.ptp(q, axis=0) > 0.01)                        # it still moves


def test_a_base_on_the_floor_keeps_its_height_and_every_other_point_the_clearance(tmp_path):
    """--floor 0 under a PUMA 560 whose shoulder is at z = 0: the start is accepted; the
    points within twice the clearance of the floor at the start keep half their height
    there, every other point keeps the 0.05 m clearance although the free plan brings some
    of them lower."""
    model = puma()
    start = [0.0, 0.0, 0.0, 0.3, 0.5, 0.0]
    args = ('--duration', '4', '--rate', '50', '--iterations', '0', '--start', *map(str, start))
    code, _, err = run(*args, '--output', str(tmp_path / 'free.yaml'))
    assert code == 0, err
    code, out, err = run(*args, '--floor', '0', '--output', str(tmp_path / 'floor.yaml'))
    assert code == 0, err
    z0 = link_points(model, np.array([start]))[0, :, 2]
    free = link_points(model, arrays(load(tmp_path / 'free.yaml'))[1])[..., 2].min(axis=0)
    low = link_points(model, arrays(load(tmp_path / 'floor.yaml'))[1])[..., 2].min(axis=0)
    # the points fixed in the base frame (link 1's origin, link 2's: the shoulder) are
    # where the robot stands: the floor does not apply to them
    moving = np.array([not name.startswith(('link 1 ', 'link 2 (joint_2) origin'))
                       for name in link_point_names(model, JOINTS)])
    assert np.array_equal(low[~moving], z0[~moving])
    on_floor = (z0 < 0.1) & moving
    assert np.any(on_floor) and np.any(free[~on_floor] < 0.05)
    assert np.all(low[on_floor] >= 0.5 * z0[on_floor] - 1e-6)
    assert np.all(low[~on_floor & moving] >= 0.05 - 1e-6)
    names = np.array(link_point_names(model, JOINTS))
    assert 'as there: ' + ', '.join(sorted(names[on_floor])) in out


def test_the_floor_applies_to_what_moves_whatever_the_start(tmp_path):
    """The PUMA 560's shoulder (links 1 and 2's origins) is at z = 0 whatever the joints
    do: `--floor 0.05` from a start where everything that moves is above it is planned, and
    keeps every moving point above the floor; a start where a moving point is below it is
    refused naming that point."""
    model = puma()
    start = [0.0, 0.6, 0.0, 0.0, 0.5, 0.0]      # upper arm raised, the elbow above the floor
    path = tmp_path / 'plan.yaml'
    code, out, err = run('--duration', '3', '--rate', '50', '--iterations', '0', '--floor',
                         '0.05', '--start', *map(str, start), '--output', str(path))
    assert code == 0, err
    # the file's first line repeats the command: the start and the floor it was planned for
    header = path.read_text().splitlines()[0]
    assert header.startswith('# identify plan --params-file ')
    assert ' --start 0.0 0.6 0.0 0.0 0.5 0.0 ' in header and header.endswith(
        ' --floor 0.05 --clearance 0.05'), header
    x = link_points(model, arrays(load(path))[1])[..., 2]
    names = link_point_names(model, JOINTS)
    moving = [i for i, name in enumerate(names) if not name.startswith(
        ('link 1 ', 'link 2 (joint_2) origin'))]
    assert np.min(x[:, moving]) >= 0.05 - 1e-4
    assert np.max(np.abs(x[:, [names.index('link 1 (joint_1) origin')]])) < 1e-12
    code, _, err = run('--duration', '3', '--iterations', '0', '--floor', '0.05', '--start',
                       '0', '-0.6', '0', '0', '0.5', '0', '--output', str(tmp_path / 'low.yaml'))
    assert code == 2 and 'below the floor at 0.05 m' in err and 'link 1' not in err, err


def test_the_planner_keeps_out_of_a_box_the_free_plan_enters(tmp_path):
    model = puma()
    args = ('--duration', '4', '--rate', '50', '--iterations', '0', '--start', *map(str, START))
    code, _, err = run(*args, '--output', str(tmp_path / 'free.yaml'))
    assert code == 0, err
    free = arrays(load(tmp_path / 'free.yaml'))[1]
    tool = dynamics.forward_kinematics(model, free)[:, -1, :3, 3]
    start_tool = dynamics.forward_kinematics(model, np.array(START))[-1, :3, 3]
    # a box around where the free plan's tool is farthest from its start
    far = tool[np.argmax(np.linalg.norm(tool - start_tool, axis=1))]
    box = np.concatenate((far - 0.05, far + 0.05))
    code, out, err = run(*args, '--keep-out', *map(str, box), '--output',
                         str(tmp_path / 'box.yaml'))
    assert code == 0, err
    q = arrays(load(tmp_path / 'box.yaml'))[1]
    x = link_points(model, q)
    inside = np.all((x > box[:3]) & (x < box[3:]), axis=-1)
    assert not np.any(inside)
    assert np.any(np.all((tool > box[:3]) & (tool < box[3:]), axis=-1))   # the free one did


@pytest.mark.parametrize('arguments, words', [
    (('--start', '0', '0', '0', '0', '0', '0', '--floor', '0.2'),
     ('link 3 (joint_3) origin', 't = 0 s', 'below the floor at 0.2 m')),
    (('--start', '0', '0.5', '0', '0', '0', '0', '--keep-out', '0.3', '-1', '-1', '2', '1', '2'),
     ('link 3 (joint_3) origin', 't = 0 s', 'inside the keep-out box')),
    (('--start', '3', '0', '0', '0', '0', '0'),
     ('joint_1', 't = 0 s', 'position 3 rad beyond its limits', 'robot.position_min/max')),
])
def test_a_start_that_breaks_a_limit_is_refused_in_one_line_and_nothing_written(
        tmp_path, arguments, words):
    path = tmp_path / 'plan.yaml'
    code, out, err = run('--duration', '2', '--iterations', '0', *arguments,
                         '--output', str(path))
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err, err
    assert not path.exists()


@pytest.mark.parametrize('arguments, words', [
    ((), '--output PLAN.yaml, --send ACTION'),
    (('--output', 'x.yaml', '--record', 'bag'), '--record: only with --send'),
    (('--output', 'x.yaml', '--keep-out', '1', '0', '0', '0', '1', '1'), 'min corner'),
    (('--output', 'x.yaml', '--start', '0', '0'), 'expected 6 values'),
])
def test_bad_arguments_exit_2_in_one_line(arguments, words):
    code, out, err = run('--iterations', '0', *arguments)
    assert code == 2
    assert words in err and len(err.strip().splitlines()) == 1, err


def test_a_violation_later_in_the_motion_names_the_point_and_its_first_time():
    """A hand-made motion lowering joint 2 until the tool frame dips below a floor: the
    violation found is the tool frame's, at the first sample where the model's forward
    kinematics puts it below the floor."""
    model = puma()
    t = np.linspace(0.0, 2.0, 201)
    q = np.tile(START, (len(t), 1))
    q[:, 1] = START[1] - 1.5 * t / 2.0
    zero = np.zeros_like(q)
    tool_z = dynamics.forward_kinematics(model, q)[:, -1, 2, 3]
    floor = 0.5 * (tool_z[0] + tool_z.min())
    found = first_violation(model, JOINTS, t, q, zero, zero, Workspace(floor=floor))
    first = int(np.argmax(tool_z < floor))
    origins_z = link_points(model, q)[..., 2]
    names = link_point_names(model, JOINTS)
    # the tool frame, or a point that went below the floor no later than it
    assert found is not None and found.time <= t[first]
    k = int(np.argmin(np.abs(t - found.time)))
    i = names.index(found.where)
    assert origins_z[k, i] < floor and np.all(origins_z[:k, i] >= floor)
    assert f'{found.where} at t = {found.time:.6g} s' in found.text
    assert 'below the floor' in found.text


def test_velocity_and_acceleration_violations_name_the_joint_and_time():
    model = puma().__class__.from_params(dict(puma().to_params(), velocity_max=[1.0] * 6))
    t = np.linspace(0.0, 1.0, 11)
    q = np.tile(START, (11, 1))
    qd, qdd = np.zeros_like(q), np.zeros_like(q)
    qd[7, 4] = 1.5
    found = first_violation(model, JOINTS, t, q, qd, qdd)
    assert found.where == 'joint_5' and math.isclose(found.time, 0.7)
    assert 'velocity 1.5 rad/s beyond its limit 1 rad/s' in found.text
    bound, _ = acceleration_limits(model)
    qdd[3, 2] = -2.0 * bound[2]
    found = first_violation(model, JOINTS, t, q, qd, qdd)
    assert found.where == 'joint_3' and math.isclose(found.time, 0.3)
    assert 'acceleration' in found.text and 'joint_3 at t = 0.3 s' in found.text


def test_optimal_excitation_keeps_every_sample_within_its_constraint():
    """The Python API: a constraint on the positions (here: joint 2 + joint 3 stays below
    a bound the free motion exceeds) holds on a fine grid; one the start breaks is refused."""
    from robot_dynamics.identification.arm import optimal_excitation
    model = puma()
    start = np.array(START)
    free = optimal_excitation(model, 4.0, start, iterations=0)
    fine = np.linspace(0.0, 4.0, 4001)
    bound = start[1] + start[2] + 0.5 * (np.max(free.sample(fine)[0][:, 1:3].sum(axis=1))
                                         - start[1] - start[2])

    def constraint(q):
        return max(0.0, float(np.max(q[:, 1] + q[:, 2])) - bound)

    kept = optimal_excitation(model, 4.0, start, iterations=0, constraint=constraint)
    q = kept.sample(fine)[0]
    assert constraint(free.sample(fine)[0]) > 0.0
    assert np.max(q[:, 1] + q[:, 2]) <= bound + 1e-6     # kept at 2000 samples a period
    assert np.all(np.ptp(q, axis=0) > 0.01)
    with pytest.raises(ValueError, match='violates the constraint'):
        optimal_excitation(model, 4.0, start, iterations=0, constraint=lambda q: 1.0)


def test_repeated_params_files_are_all_kept_in_order():
    """`identify plan --params-file A --params-file B` layers both, as estimate does (a
    repeated option replaced the earlier files)."""
    from robot_dynamics.nodes.identify import parse_arguments
    for flags in (['--params-file', 'a.yaml', '--params-file', 'b.yaml', 'c.yaml'],
                  ['--params-file', 'a.yaml', 'b.yaml', '--params-file', 'c.yaml']):
        args = parse_arguments(['plan', *flags, '--output', 'plan.yaml'])
        assert args.params_files == ['a.yaml', 'b.yaml', 'c.yaml'], flags
