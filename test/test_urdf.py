"""URDF models: reading a chain from URDF, exporting any model to URDF, and Pinocchio.

Independent references: Pinocchio (`pin.buildModelFromUrdf`, its own URDF parser and
algorithms) live when installed, and test/data/urdf_pinocchio_reference.json, written by
Pinocchio from the committed fixtures, so the check also runs without it. Regenerate with
``python test/test_urdf.py --write-reference`` (needs pin).
"""

import json
import math
import os
import sys
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import yaml

from conftest import preset_paths, random_chain_params, random_state
from robot_dynamics import dynamics
from robot_dynamics.model import ModelWarning, RobotModel
from robot_dynamics.model.urdf import (main, matrix_rpy, model_from_urdf, model_to_urdf,
                                       rpy_matrix, urdf_from_parameter_file)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, 'test', 'data')
REFERENCE = os.path.join(DATA, 'urdf_pinocchio_reference.json')
FIXTURES = {'ur5.urdf': 'tool0', 'skewed_arm.urdf': 'tool'}


def fixture_text(name):
    with open(os.path.join(DATA, name), encoding='utf-8') as stream:
        return stream.read()


def fixture_model(name, **options):
    options.setdefault('tip_link', FIXTURES[name])
    return model_from_urdf(fixture_text(name), **options)


def assert_close(actual, expected, tol, what=''):
    """max |actual − expected| <= tol · max(1, max |expected|)."""
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    assert actual.shape == expected.shape, what
    error = float(np.max(np.abs(actual - expected)))
    scale = max(1.0, float(np.max(np.abs(expected))))
    assert error <= tol * scale, f'{what}: error {error:.3e} > {tol:.0e} * {scale:.3g}'


def assert_same_dynamics(a, b, rng, tol=1e-12, samples=5):
    """Inverse dynamics, mass matrix, forward dynamics, tip pose and Jacobian agree."""
    q, qd, qdd = random_state(rng, a.n, size=samples)
    tau = dynamics.inverse_dynamics(a, q, qd, qdd)
    assert_close(dynamics.inverse_dynamics(b, q, qd, qdd), tau, tol, 'inverse dynamics')
    assert_close(dynamics.mass_matrix(b, q), dynamics.mass_matrix(a, q), tol, 'mass matrix')
    assert_close(dynamics.forward_dynamics(b, q, qd, tau),
                 dynamics.forward_dynamics(a, q, qd, tau), tol, 'forward dynamics')
    assert_close(dynamics.forward_kinematics(b, q)[:, -1],
                 dynamics.forward_kinematics(a, q)[:, -1], tol, 'tip pose')
    assert_close(dynamics.jacobian(b, q), dynamics.jacobian(a, q), tol, 'jacobian')


def round_trip(model, joint_names=None, **options):
    """Export to URDF and read back (tip = the exported tool frame)."""
    return model_from_urdf(model_to_urdf(model, joint_names), gravity=model.gravity, **options)


def preset_model_and_joints(path):
    with open(path, encoding='utf-8') as stream:
        params = yaml.safe_load(stream)['/**']['ros__parameters']
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        return RobotModel.from_yaml(path), params.get('joints')


# ---------------------------------------------------------------------- DH -> URDF -> model


@pytest.mark.filterwarnings('ignore::robot_dynamics.model.ModelWarning')
@pytest.mark.parametrize('path', preset_paths(), ids=os.path.basename)
def test_exported_preset_reads_back_with_same_dynamics_and_tip_pose(path, rng):
    model, joints = preset_model_and_joints(path)
    back = round_trip(model, joints, use_urdf_friction=True,
                      armature=model.armature.tolist())    # URDF has no armature
    assert back.joint_names == tuple(joints or [f'joint_{i + 1}' for i in range(model.n)])
    assert_same_dynamics(model, back, rng)
    np.testing.assert_array_equal(back.effort_max[np.isfinite(model.effort_max)],
                                  model.effort_max[np.isfinite(model.effort_max)])


@pytest.mark.parametrize('convention', ['standard', 'modified'])
@pytest.mark.parametrize('seed', range(4))
def test_random_dh_chain_with_prismatic_joints_and_payload_survives_urdf_round_trip(
        convention, seed):
    rng = np.random.default_rng(seed)
    n = 3 + seed
    mask = rng.random(n) < 0.4
    params = random_chain_params(rng, n, convention, prismatic_mask=mask, friction=True,
                                 payload=True)
    params['gravity'] = rng.normal(size=3).tolist()
    model = RobotModel.from_params(params)
    back = round_trip(model, use_urdf_friction=True)
    assert back.joint_types == model.joint_types
    assert_same_dynamics(model, back, rng)
    q, qd, _ = random_state(rng, n, size=3)
    assert_close(dynamics.bias_forces(back, q, qd), dynamics.bias_forces(model, q, qd), 1e-12,
                 'bias forces with friction')


def test_round_trip_keeps_finite_limits_and_unlimited_revolute_becomes_continuous(rng):
    params = random_chain_params(rng, 3, 'standard', prismatic_mask=[False, True, False])
    params.update(position_min=[-1.0, -0.2, -math.inf], position_max=[2.0, 0.4, math.inf],
                  velocity_max=[1.5, 0.3, 2.5], effort_max=[40.0, 300.0, 7.0])
    model = RobotModel.from_params(params)
    text = model_to_urdf(model, ['a', 'b', 'c'])
    types = {j.get('name'): j.get('type') for j in ET.fromstring(text).findall('joint')}
    assert types == {'a': 'revolute', 'b': 'prismatic', 'c': 'continuous',
                     'tool0_joint': 'fixed'}
    back = model_from_urdf(text)
    for key in ('position_min', 'position_max', 'velocity_max', 'effort_max'):
        np.testing.assert_array_equal(getattr(back, key), getattr(model, key))


@pytest.mark.filterwarnings('ignore::robot_dynamics.model.ModelWarning')
def test_urdf_of_a_parameter_file_names_joints_after_its_joints_list(tmp_path, rng):
    params = random_chain_params(rng, 3, 'modified', prismatic_mask=[0, 0, 1])
    names = ['waist', 'shoulder', 'slide']
    path = tmp_path / 'arm.yaml'
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': {'joints': names,
                                                                'robot': params}}}))
    text = urdf_from_parameter_file(path)
    assert ET.fromstring(text).get('name') == 'arm'
    back = model_from_urdf(text)
    assert back.joint_names == tuple(names)
    assert_same_dynamics(RobotModel.from_params(params), back, rng)


def test_command_line_prints_urdf_and_reports_bad_input(tmp_path, capsys):
    assert main([]) == 2
    assert main([str(tmp_path / 'missing.yaml')]) == 1
    assert 'error:' in capsys.readouterr().err
    if preset_paths():
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', ModelWarning)
            assert main([preset_paths()[0], 'demo']) == 0
        assert ET.fromstring(capsys.readouterr().out).get('name') == 'demo'


def test_export_writes_large_finite_limits_when_the_model_has_none(rng):
    model = RobotModel.from_params(random_chain_params(rng, 2, 'modified',
                                                       prismatic_mask=[True, False]))
    for joint in ET.fromstring(model_to_urdf(model)).findall('joint'):
        limit = joint.find('limit')
        if joint.get('type') == 'fixed':
            continue
        values = [float(v) for v in limit.attrib.values()]
        assert all(math.isfinite(v) for v in values) and float(limit.get('effort')) > 1e3


def test_exported_urdf_has_inertial_and_visual_on_every_arm_link(rng):
    model = RobotModel.from_params(random_chain_params(rng, 4, 'standard'))
    root = ET.fromstring(model_to_urdf(model, robot_name='arm'))
    assert root.get('name') == 'arm'
    links = {link.get('name'): link for link in root.findall('link')}
    assert set(links) == {'base_link', 'link_1', 'link_2', 'link_3', 'link_4', 'tool0'}
    for i in range(1, 5):
        link = links[f'link_{i}']
        assert float(link.find('inertial/mass').get('value')) == pytest.approx(model.mass[i - 1])
        assert link.findall('visual/geometry/cylinder')


def test_export_refuses_wrong_number_of_joint_names(rng):
    model = RobotModel.from_params(random_chain_params(rng, 2, 'standard'))
    with pytest.raises(ValueError, match='joint_names'):
        model_to_urdf(model, ['only_one'])


def test_urdf_model_exports_and_reads_back_unchanged(rng):
    model = fixture_model('skewed_arm.urdf')
    back = round_trip(model)
    assert back.joint_names == model.joint_names
    assert_same_dynamics(model, back, rng)


@pytest.mark.parametrize('seed', range(200))
def test_rpy_of_a_rotation_rebuilds_it(seed):
    rng = np.random.default_rng(seed)
    angles = rng.uniform(-math.pi, math.pi, size=3)
    if seed % 4 == 0:                      # at and near gimbal lock
        angles[1] = math.copysign(math.pi / 2, angles[1]) - 10.0 ** -(seed % 9)
    R = rpy_matrix(*angles)
    assert np.max(np.abs(rpy_matrix(*matrix_rpy(R)) - R)) < 1e-15 * 8


# ---------------------------------------------------------------------- Pinocchio


def pinocchio_results(pin, path, tip_link, q, v, a):
    """Pinocchio's rnea, crba, aba and tip pose at our joint coordinates (continuous
    joints are (cos, sin) pairs in Pinocchio: q_pin = integrate(neutral, q))."""
    model = pin.buildModelFromUrdf(path)
    data = model.createData()
    out = {key: [] for key in ('tau', 'M', 'qdd', 'tip_pose')}
    for qi, vi, ai in zip(q, v, a):
        q_pin = pin.integrate(model, pin.neutral(model), qi)
        out['tau'].append(pin.rnea(model, data, q_pin, vi, ai).copy())
        M = pin.crba(model, data, q_pin)
        out['M'].append(np.triu(M) + np.triu(M, 1).T)
        out['qdd'].append(pin.aba(model, data, q_pin, vi, out['tau'][-1] + 1.0).copy())
        pin.framesForwardKinematics(model, data, q_pin)
        out['tip_pose'].append(data.oMf[model.getFrameId(tip_link)].homogeneous.copy())
    return {key: np.array(value) for key, value in out.items()}


def assert_matches_pinocchio(model, q, v, a, expected, tol=1e-9):
    tau = dynamics.inverse_dynamics(model, q, v, a)
    assert_close(tau, expected['tau'], tol, 'rnea')
    assert_close(dynamics.mass_matrix(model, q), expected['M'], tol, 'crba')
    assert_close(dynamics.forward_dynamics(model, q, v, tau + 1.0), expected['qdd'], tol, 'aba')
    assert_close(dynamics.forward_kinematics(model, q)[:, -1], expected['tip_pose'], tol,
                 'tip pose')


def xyz(values):
    return ' '.join(repr(float(v)) for v in values)


def reference_states(n, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-2.0, 2.0, size=(3, 4, n))


def write_reference():
    import pinocchio as pin
    out = {'generator': f'pinocchio {pin.__version__}: rnea(q, v, a), crba(q), '
                        'aba(q, v, rnea + 1), tip frame pose; gravity (0, 0, -9.81)',
           'fixtures': {}}
    for index, (name, tip) in enumerate(FIXTURES.items()):
        n = fixture_model(name).n
        q, v, a = reference_states(n, index)
        results = pinocchio_results(pin, os.path.join(DATA, name), tip, q, v, a)
        out['fixtures'][name] = {'tip_link': tip, 'q': q.tolist(), 'v': v.tolist(),
                                 'a': a.tolist(),
                                 **{key: value.tolist() for key, value in results.items()}}
    with open(REFERENCE, 'w', encoding='utf-8') as stream:
        json.dump(out, stream, indent=1)
        stream.write('\n')


@pytest.mark.parametrize('name', sorted(FIXTURES))
def test_fixture_matches_committed_pinocchio_reference(name):
    with open(REFERENCE, encoding='utf-8') as stream:
        reference = json.load(stream)['fixtures'][name]
    model = fixture_model(name)
    q, v, a = (np.array(reference[key]) for key in ('q', 'v', 'a'))
    expected = {key: np.array(reference[key]) for key in ('tau', 'M', 'qdd', 'tip_pose')}
    assert_matches_pinocchio(model, q, v, a, expected)


@pytest.mark.parametrize('name', sorted(FIXTURES))
def test_fixture_matches_live_pinocchio(name):
    pin = pytest.importorskip('pinocchio')
    model = fixture_model(name)
    q, v, a = reference_states(model.n, 99)
    expected = pinocchio_results(pin, os.path.join(DATA, name), FIXTURES[name], q, v, a)
    assert_matches_pinocchio(model, q, v, a, expected)


def example_robot_data_path(relative):
    """A URDF shipped by the example-robot-data wheel (installed under cmeel.prefix)."""
    pytest.importorskip('pinocchio')
    for entry in sys.path:
        candidate = os.path.join(entry, 'cmeel.prefix', 'share', 'example-robot-data',
                                 'robots', relative)
        if os.path.isfile(candidate):
            return candidate
    pytest.skip('example-robot-data is not installed')


def test_ur5_from_example_robot_data_matches_pinocchio():
    path = example_robot_data_path('ur_description/urdf/ur5_robot.urdf')
    import pinocchio as pin
    with open(path, encoding='utf-8') as stream:
        model = model_from_urdf(stream.read(), tip_link='tool0')
    q, v, a = reference_states(model.n, 7)
    assert_matches_pinocchio(model, q, v, a,
                             pinocchio_results(pin, path, 'tool0', q, v, a))


def test_panda_with_locked_fingers_matches_pinocchio_reduced_model():
    path = example_robot_data_path('panda_description/urdf/panda.urdf')
    import pinocchio as pin
    with open(path, encoding='utf-8') as stream:
        text = stream.read()
    with pytest.warns(ModelWarning, match='panda_finger_joint1'):
        model = model_from_urdf(text, tip_link='panda_hand', lock_side_joints=True)
    full = pin.buildModelFromUrdf(path)
    fingers = [full.getJointId(f'panda_finger_joint{k}') for k in (1, 2)]
    reduced = pin.buildReducedModel(full, fingers, pin.neutral(full))
    data = reduced.createData()
    q, v, a = reference_states(model.n, 8)
    for qi, vi, ai in zip(q, v, a):
        tau = dynamics.inverse_dynamics(model, qi, vi, ai)
        assert_close(tau, pin.rnea(reduced, data, qi, vi, ai), 1e-9, 'rnea')
        assert_close(dynamics.mass_matrix(model, qi), pin.crba(reduced, data, qi), 1e-9, 'crba')
        assert_close(dynamics.forward_dynamics(model, qi, vi, tau + 1.0),
                     pin.aba(reduced, data, qi, vi, tau + 1.0), 1e-9, 'aba')


def test_exported_dh_urdf_gives_pinocchio_the_same_dynamics(rng, tmp_path):
    pin = pytest.importorskip('pinocchio')
    params = random_chain_params(rng, 5, 'standard', prismatic_mask=[0, 1, 0, 0, 1],
                                 payload=True)
    model = RobotModel.from_params(params)
    path = tmp_path / 'arm.urdf'
    path.write_text(model_to_urdf(model), encoding='utf-8')
    q, v, a = reference_states(model.n, 3)
    assert_matches_pinocchio(model, q, v, a, pinocchio_results(pin, str(path), 'tool0', q, v, a))


# ---------------------------------------------------------------------- reading rules

ONE_LINK = '''<robot name="r">
  <link name="base"/>
  <joint name="j1" type="{type}">
    <parent link="base"/><child link="l1"/>
    <origin xyz="0.1 0.2 0.3" rpy="0.3 -0.2 0.5"/>
    <axis xyz="{axis}"/>
    <limit lower="{lower}" upper="{upper}" effort="{effort}" velocity="3.0"/>
    <dynamics damping="0.7" friction="1.1"/>
  </joint>
  <link name="l1">{inertial}</link>
  <joint name="j2" type="revolute">
    <parent link="l1"/><child link="l2"/>
    <origin xyz="0.4 0.0 0.1" rpy="0.0 1.0 0.0"/>
    <axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" effort="5" velocity="2"/>
  </joint>
  <link name="l2">{inertial2}</link>
  {extra}
</robot>'''

INERTIAL = '''<inertial><origin xyz="{xyz}" rpy="{rpy}"/><mass value="{mass}"/>
  <inertia ixx="0.02" ixy="0.001" ixz="0.002" iyy="0.03" iyz="-0.001" izz="0.04"/></inertial>'''


def two_joint_urdf(type='revolute', axis='0 0 1', lower='-1', upper='2', effort='50',
                   inertial=None, inertial2=None, extra=''):
    if inertial is None:
        inertial = INERTIAL.format(xyz='0.1 0.05 0.2', rpy='0.2 0.1 -0.3', mass='2.0')
    if inertial2 is None:
        inertial2 = INERTIAL.format(xyz='0.0 0.1 0.1', rpy='0 0 0', mass='1.0')
    return ONE_LINK.format(type=type, axis=axis, lower=lower, upper=upper, effort=effort,
                           inertial=inertial, inertial2=inertial2, extra=extra)


def test_unnormalised_axis_gives_the_same_model_as_the_unit_axis(rng):
    unit = model_from_urdf(two_joint_urdf(axis='0.6 0 0.8'))
    scaled = model_from_urdf(two_joint_urdf(axis='1.5 0 2.0'))
    assert_same_dynamics(unit, scaled, rng, tol=1e-14)


def test_reversed_axis_is_the_same_joint_with_negated_coordinate(rng):
    forward = model_from_urdf(two_joint_urdf(axis='0.3 -0.5 0.2'))
    reverse = model_from_urdf(two_joint_urdf(axis='-0.3 0.5 -0.2'))
    S = np.diag([-1.0, 1.0])
    q, qd, qdd = random_state(rng, 2, size=4)
    assert_close(dynamics.inverse_dynamics(reverse, q, qd, qdd),
                 dynamics.inverse_dynamics(forward, q @ S, qd @ S, qdd @ S) @ S, 1e-12)


def test_mass_on_a_fixed_child_link_equals_the_same_inertial_on_the_parent(rng):
    # a fixed child at (xyz, yaw a) carrying an inertial at (xyz', yaw b) is the parent
    # carrying it at (xyz + Rz(a) xyz', yaw a + b)
    a, b = 0.4, -1.1
    p, p2 = np.array([0.1, -0.2, 0.05]), np.array([0.03, 0.07, -0.02])
    c = np.cos(a) * p2[0] - np.sin(a) * p2[1], np.sin(a) * p2[0] + np.cos(a) * p2[1], p2[2]
    combined = p + np.array(c)
    inertial = INERTIAL.format(xyz=xyz(combined), rpy=f'0 0 {a + b!r}',
                               mass='1.5')
    direct = model_from_urdf(two_joint_urdf(inertial=inertial))
    extra = f'''<joint name="fix" type="fixed"><parent link="l1"/><child link="lump"/>
      <origin xyz="{xyz(p)}" rpy="0 0 {a!r}"/></joint>
      <link name="lump">{INERTIAL.format(xyz=xyz(p2), rpy=f'0 0 {b!r}',
                                         mass='1.5')}</link>'''
    with pytest.warns(ModelWarning, match="'l1'"):
        merged = model_from_urdf(two_joint_urdf(inertial='', extra=extra), tip_link='l2')
    assert_same_dynamics(direct, merged, rng)


def test_fixed_links_after_the_last_joint_move_the_tip_frame_not_the_dynamics(rng):
    text = fixture_text('skewed_arm.urdf')
    at_tool = model_from_urdf(text, tip_link='tool')
    at_gripper = model_from_urdf(text, tip_link='gripper')
    q, qd, qdd = random_state(rng, at_tool.n, size=3)
    assert_close(dynamics.inverse_dynamics(at_gripper, q, qd, qdd),
                 dynamics.inverse_dynamics(at_tool, q, qd, qdd), 1e-14)
    tool_in_gripper = np.eye(4)
    tool_in_gripper[:3, :3] = rpy_matrix(3.14159, 0.0, 0.0)
    tool_in_gripper[:3, 3] = (0.0, 0.01, 0.1)
    assert_close(dynamics.forward_kinematics(at_tool, q)[:, -1],
                 dynamics.forward_kinematics(at_gripper, q)[:, -1] @ tool_in_gripper, 1e-14)


def test_jacobian_of_urdf_model_is_the_derivative_of_the_tip_position(rng):
    model = fixture_model('skewed_arm.urdf')
    q = random_state(rng, model.n)[0]
    J = dynamics.jacobian(model, q)
    h = 1e-6
    for j in range(model.n):
        dq = np.zeros(model.n)
        dq[j] = h
        dp = (dynamics.forward_kinematics(model, q + dq)[-1, :3, 3]
              - dynamics.forward_kinematics(model, q - dq)[-1, :3, 3]) / (2 * h)
        assert_close(J[:3, j], dp, 1e-8, f'column {j}')


def test_urdf_model_forward_dynamics_inverts_inverse_dynamics_in_a_batch(rng):
    model = fixture_model('skewed_arm.urdf', use_urdf_friction=True,
                          armature=[0.1, 0.2, 0.0, 0.05, 0.01])
    q, qd, qdd = random_state(rng, model.n, size=6)
    tau = dynamics.inverse_dynamics(model, q, qd, qdd)
    assert tau.shape == (6, model.n)
    assert_close(dynamics.forward_dynamics(model, q, qd, tau), qdd, 1e-10)
    M = dynamics.mass_matrix(model, q)
    assert np.all(np.linalg.eigvalsh(M) > 0.0)


def test_limits_are_read_and_continuous_joints_have_no_position_limits():
    model = fixture_model('skewed_arm.urdf')
    assert model.joint_names == ('j1', 'j2', 'j3', 'j4', 'j5')
    assert model.joint_types == ('revolute', 'revolute', 'prismatic', 'revolute', 'revolute')
    np.testing.assert_array_equal(model.position_min, [-2.5, -1.5, -0.2, -np.inf, -3.0])
    np.testing.assert_array_equal(model.position_max, [2.5, 2.0, 0.3, np.inf, 3.0])
    np.testing.assert_array_equal(model.effort_max, [80.0, 60.0, 200.0, 20.0, 10.0])
    np.testing.assert_array_equal(model.velocity_max, [2.0, 2.5, 0.5, 4.0, 5.0])
    assert model.source == 'urdf' and model.a is None and model.dh_convention is None


def test_urdf_friction_is_off_by_default_and_read_when_asked():
    assert not fixture_model('skewed_arm.urdf').has_friction
    model = fixture_model('skewed_arm.urdf', use_urdf_friction=True)
    assert model.viscous_friction[0] == 0.5 and model.coulomb_friction[0] == 1.5
    assert not np.any(model.viscous_friction[1:])


def test_zero_range_limit_means_no_position_limit_with_a_warning():
    with pytest.warns(ModelWarning, match='no position range'):
        model = model_from_urdf(two_joint_urdf(lower='0', upper='0', effort='0'))
    assert model.position_min[0] == -np.inf and model.effort_max[0] == np.inf


def test_link_without_inertial_is_massless_with_a_warning():
    with pytest.warns(ModelWarning, match="'l2'.*massless"):
        model = model_from_urdf(two_joint_urdf(inertial2=''))
    assert model.mass[1] == 0.0


def test_payload_on_urdf_model_equals_a_fixed_link_at_the_tip(rng):
    inertial = INERTIAL.format(xyz='0.05 -0.02 0.1', rpy='0 0 0', mass='0.8')
    extra = f'''<joint name="tool_joint" type="fixed"><parent link="l2"/><child link="tool"/>
      <origin xyz="0.0 0.0 0.2" rpy="0.5 0.0 0.0"/></joint><link name="tool"/>
      <joint name="load_joint" type="fixed"><parent link="tool"/><child link="load"/></joint>
      <link name="load">{inertial}</link>'''
    with_load = model_from_urdf(two_joint_urdf(extra=extra), tip_link='tool')
    bare = model_from_urdf(two_joint_urdf(extra=extra.replace(inertial, '')), tip_link='tool')
    inertia = [0.02, 0.001, 0.002, 0.03, -0.001, 0.04]
    loaded = bare.with_payload(0.8, (0.05, -0.02, 0.1), inertia)
    assert_same_dynamics(with_load, loaded, rng)


# ---------------------------------------------------------------------- refusals


def test_ambiguous_tip_names_the_leaves():
    with pytest.raises(ValueError, match=r"tip_link.*\['camera', 'tool'\]"):
        model_from_urdf(fixture_text('skewed_arm.urdf'))


def test_movable_side_branch_is_refused_unless_locked(rng):
    branch = '''<joint name="finger" type="prismatic"><parent link="l1"/><child link="f"/>
      <origin xyz="0 0.1 0"/><axis xyz="0 1 0"/>
      <limit lower="0" upper="0.04" effort="10" velocity="0.1"/></joint>
      <link name="f">''' + INERTIAL.format(xyz='0 0 0.02', rpy='0 0 0', mass='0.3') + '</link>'
    with pytest.raises(ValueError, match="'finger'.*branches off.*lock_side_joints"):
        model_from_urdf(two_joint_urdf(extra=branch), tip_link='l2')
    with pytest.warns(ModelWarning, match='finger'):
        locked = model_from_urdf(two_joint_urdf(extra=branch), tip_link='l2',
                                 lock_side_joints=True)
    rigid = model_from_urdf(two_joint_urdf(extra=branch.replace('prismatic', 'fixed')),
                            tip_link='l2')
    assert_same_dynamics(rigid, locked, rng)


def test_mimic_joint_on_the_chain_is_refused():
    text = two_joint_urdf().replace('<dynamics', '<mimic joint="j2"/><dynamics')
    with pytest.raises(ValueError, match="'j1'.*mimic"):
        model_from_urdf(text)


@pytest.mark.parametrize('kind', ['floating', 'planar'])
def test_floating_and_planar_joints_are_refused(kind):
    with pytest.raises(ValueError, match=f"'j1'.*{kind} joints are not supported"):
        model_from_urdf(two_joint_urdf(type=kind))


@pytest.mark.parametrize('base, tip, message', [
    ('nowhere', 'l2', r"base_link: no link 'nowhere'"),
    ('base', 'nowhere', r"tip_link: no link 'nowhere'"),
    ('l2', 'l1', r"'l1' is not below base link 'l2'"),
    ('l1', 'l1', 'no movable joint'),
])
def test_bad_base_or_tip_link_is_named(base, tip, message):
    with pytest.raises(ValueError, match=message):
        model_from_urdf(two_joint_urdf(), base_link=base, tip_link=tip)


@pytest.mark.parametrize('text, message', [
    ('<robot name="r"><link name="a"/>', 'not well-formed'),
    ('<model name="r"/>', r'root element is <model>'),
    (two_joint_urdf().replace('<child link="l2"/>', '<child link="l9"/>'), "'l9' is not defined"),
    (two_joint_urdf(axis='0 0 0'), 'zero axis'),
    (two_joint_urdf(axis='0 1'), r"'j1' <axis>: expected 3 finite numbers"),
    (two_joint_urdf(lower='2', upper='1'), 'lower 2.0 > upper 1.0'),
    (two_joint_urdf(type='screw'), "unknown joint type 'screw'"),
    (two_joint_urdf(inertial2='<inertial><mass value="-1"/></inertial>'), 'negative mass'),
    (two_joint_urdf(extra='<link name="l1"/>'), "link 'l1' is defined twice"),
    (two_joint_urdf(extra='''<joint name="j3" type="fixed"><parent link="base"/>
        <child link="l2"/></joint>'''), "'l2' has two parent joints"),
    (two_joint_urdf(extra='''<link name="a"/><link name="b"/><joint name="ab" type="fixed">
        <parent link="a"/><child link="b"/></joint><joint name="ba" type="fixed">
        <parent link="b"/><child link="a"/></joint>'''), 'loop through links'),
])
def test_malformed_urdf_gets_a_clear_error(text, message):
    with pytest.raises(ValueError, match=message):
        model_from_urdf(text)


# ---------------------------------------------------------------------- parameters


def test_parameter_file_with_relative_urdf_file_and_gravity(tmp_path, rng):
    (tmp_path / 'arm.urdf').write_text(fixture_text('ur5.urdf'), encoding='utf-8')
    params = {'/**': {'ros__parameters': {'robot': {
        'source': 'urdf', 'urdf_file': 'arm.urdf', 'tip_link': 'tool0',
        'gravity': [0.0, 9.81, 0.0], 'effort_max': [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        'dh_convention': 'standard', 'a': [1.0]}}}}      # DH keys ignored for source urdf
    (tmp_path / 'params.yaml').write_text(yaml.safe_dump(params), encoding='utf-8')
    model = RobotModel.from_yaml(tmp_path / 'params.yaml')
    direct = model_from_urdf(fixture_text('ur5.urdf'), tip_link='tool0',
                             gravity=[0.0, 9.81, 0.0])
    assert_same_dynamics(direct, model, rng, tol=0.0)
    np.testing.assert_array_equal(model.effort_max, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    np.testing.assert_array_equal(model.gravity, [0.0, 9.81, 0.0])


def test_robot_description_string_as_parameter_and_to_params_round_trip(rng):
    block = {'source': 'urdf', 'urdf': fixture_text('skewed_arm.urdf'), 'tip_link': 'tool',
             'payload.mass': 0.5, 'payload.com': [0.0, 0.0, 0.05]}
    model = RobotModel.from_params(block)
    assert model.payload.mass == 0.5
    again = RobotModel.from_params(model.to_params())
    assert_same_dynamics(model, again, rng, tol=0.0)


def test_dh_parameter_block_ignores_urdf_keys(rng):
    params = random_chain_params(rng, 2, 'standard')
    model = RobotModel.from_params(params)
    with_keys = RobotModel.from_params({**params, 'source': 'dh', 'urdf_file': 'x.urdf',
                                        'tip_link': 'tool0'})
    assert_same_dynamics(model, with_keys, rng, tol=0.0)


@pytest.mark.parametrize('block, message', [
    ({'source': 'urdf'}, 'robot.urdf_file: no URDF given'),
    ({'source': 'urdf', 'urdf': '<robot/>', 'urdf_file': 'a.urdf'}, 'both given'),
    ({'source': 'urdf', 'urdf_file': '/nonexistent/arm.urdf'}, 'cannot read'),
    ({'source': 'urdf', 'urdf': '<robot/>', 'tip': 'x'}, r'robot.tip: unknown key'),
    ({'source': 'urdf', 'urdf': '<robot/>', 'lock_side_joints': 'yes'}, 'true or false'),
    ({'source': 'sdf'}, "unknown model source 'sdf'"),
])
def test_bad_urdf_parameters_are_named(block, message):
    with pytest.raises(ValueError, match=message):
        RobotModel.from_params(block)


if __name__ == '__main__':
    if sys.argv[1:] == ['--write-reference']:
        write_reference()
        print(f'wrote {REFERENCE}')
    else:
        print(__doc__)
