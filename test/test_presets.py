"""The robot presets in config/: they load, are physically sensible, and reproduce the
numbers their sources print (doc/verification.md, doc/conventions.md)."""

import math
import os
import re
import warnings

import numpy as np
import pytest
import yaml

from robot_dynamics import dynamics
from robot_dynamics.model import ModelWarning, RobotModel

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRESETS = ('planar2', 'puma560', 'stanford', 'sasaki6', 'panda')
FLOAT_KEYS = ('a', 'alpha', 'd', 'theta', 'mass', 'com', 'inertia', 'gravity', 'armature',
              'viscous_friction', 'coulomb_friction', 'position_min', 'position_max',
              'velocity_max', 'effort_max')
DEG = math.pi / 180.0


def path_of(name):
    return os.path.join(REPO, 'config', name + '.yaml')


def parameters_of(name):
    with open(path_of(name), encoding='utf-8') as stream:
        return yaml.safe_load(stream)['/**']['ros__parameters']


def load(name):
    """The model and the warnings raised while loading it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        model = RobotModel.from_yaml(path_of(name))
    return model, [w for w in caught if issubclass(w.category, ModelWarning)]


def random_configurations(model, rng, count):
    low = np.where(np.isfinite(model.position_min), model.position_min, -math.pi)
    high = np.where(np.isfinite(model.position_max), model.position_max, math.pi)
    return rng.uniform(low, high, size=(count, model.n))


# ---------------------------------------------------------------- every preset

@pytest.mark.parametrize('name', PRESETS)
def test_preset_loads_and_joint_count_matches_joint_names(name):
    model, _ = load(name)
    joints = parameters_of(name)['joints']
    assert model.n == len(joints)
    assert len(set(joints)) == len(joints)
    assert all(isinstance(j, str) and j for j in joints)


@pytest.mark.parametrize('name', PRESETS)
def test_preset_numbers_are_written_as_floats(name):
    """ROS 2 double parameters must be doubles in the file (`100.0`, `4.0e-05`)."""
    robot = parameters_of(name)['robot']
    for key in FLOAT_KEYS:
        for i, value in enumerate(robot.get(key, [])):
            assert type(value) is float, f'{name}: robot.{key}[{i}] = {value!r}'


def test_presets_load_as_ros_parameters_with_double_and_string_arrays(monkeypatch):
    """Through rcl's own parameter-file parser (`--ros-args --params-file`, as the nodes
    get it), every numeric list is a double array and the names are string arrays. (A
    list mixing ints and floats would be refused or mistyped.) No DDS traffic: the node
    only reads its parameter overrides, in the module's private domain (conftest)."""
    rclpy = pytest.importorskip('rclpy')
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    monkeypatch.setenv('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    for name in PRESETS:
        context = rclpy.Context()
        rclpy.init(args=['--ros-args', '--params-file', path_of(name)], context=context)
        node = None
        try:
            node = Node('preset_check', context=context,
                        automatically_declare_parameters_from_overrides=True)
            names = node.list_parameters([], 0).names
            kinds = {p.name: p.type_ for p in node.get_parameters(names)}
            assert kinds['joints'] == Parameter.Type.STRING_ARRAY
            assert kinds['robot.joint_types'] == Parameter.Type.STRING_ARRAY
            numeric = [k for k in kinds if k.split('.', 1)[-1] in FLOAT_KEYS]
            assert len(numeric) >= 8
            for key in numeric:
                assert kinds[key] == Parameter.Type.DOUBLE_ARRAY, f'{name}: {key}'
        finally:
            if node is not None:
                node.destroy_node()
            rclpy.shutdown(context=context)


@pytest.mark.parametrize('name', PRESETS)
def test_preset_mass_matrix_is_symmetric_positive_definite(name):
    model, _ = load(name)
    M = dynamics.mass_matrix(model, random_configurations(model, np.random.default_rng(7), 50))
    assert np.allclose(M, np.swapaxes(M, 1, 2), rtol=0.0, atol=1e-12 * np.abs(M).max())
    assert np.all(np.linalg.eigvalsh(M)[:, 0] > 0.0)


@pytest.mark.parametrize('name', PRESETS)
def test_only_the_puma_has_non_physical_inertias_and_its_preset_marks_them_as_known(name):
    """Corke's PUMA link 1 (m = 0, I = diag(0, 0.35, 0)) and link 3 (moments 0.066, 0.086,
    0.0125, triangle inequality violated) are published data, kept on purpose: the preset
    says so (robot.accept_nonphysical_inertia), so loading it warns about nothing; every
    other preset is physically valid."""
    model, caught = load(name)
    assert not caught, [str(w.message) for w in caught]
    if name != 'puma560':
        assert model.nonphysical_inertia == () and not model.nonphysical_inertia_accepted
        return
    links = {int(re.search(r'link (\d+)', line).group(1)) for line in model.nonphysical_inertia}
    assert links == {1, 3} and model.nonphysical_inertia_accepted


def test_without_the_mark_the_puma_warns_once_for_all_its_non_physical_links():
    block = dict(parameters_of('puma560')['robot'])
    del block['accept_nonphysical_inertia']
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        model = RobotModel.from_params(block)
    (warning,) = [w for w in caught if issubclass(w.category, ModelWarning)]
    message = str(warning.message)
    assert 'link 1' in message and 'link 3' in message
    assert 'accept_nonphysical_inertia' in message
    assert not model.nonphysical_inertia_accepted and len(model.nonphysical_inertia) == 3
    assert 'accept_nonphysical_inertia' not in model.to_params()


def test_the_mark_survives_to_params():
    model, _ = load('puma560')
    block = model.to_params()
    assert block['accept_nonphysical_inertia'] is True
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert RobotModel.from_params(block).nonphysical_inertia_accepted


@pytest.mark.parametrize('name', ['puma560', 'stanford', 'sasaki6', 'panda'])
def test_vertical_first_joint_carries_no_gravity_torque(name):
    """Joint 1 of these arms turns about the base z axis, parallel to gravity."""
    model, _ = load(name)
    q = random_configurations(model, np.random.default_rng(3), 20)
    g = dynamics.gravity_torques(model, q)
    assert np.max(np.abs(g[:, 0])) < 1e-9 * np.max(np.abs(g))


# ---------------------------------------------------------------- planar 2R

PLANAR_TABLE = [  # doc/verification.md: q, q̇, q̈, τ
    ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (39.7305, 6.867)),
    ((0.3, -0.7), (0.0, 0.0), (0.0, 0.0), (37.72062656, 6.32492585)),
    ((0.3, -0.7), (1.1, -0.4), (0.0, 0.0), (37.39594084, 5.77927346)),
    ((0.3, -0.7), (1.1, -0.4), (0.5, 2.0), (41.15335944, 6.83446823)),
    ((math.pi / 2, 0.0), (0.0, 0.0), (1.0, 0.0), (4.4425, 1.015)),
]


@pytest.mark.parametrize('q,qd,qdd,tau', PLANAR_TABLE)
def test_planar2_reproduces_the_closed_form_torque_table(q, qd, qdd, tau):
    model, _ = load('planar2')
    assert np.allclose(dynamics.inverse_dynamics(model, q, qd, qdd), tau, rtol=0.0, atol=1e-8)


def test_planar2_reproduces_the_closed_form_mass_matrix():
    model, _ = load('planar2')
    expected = [[4.11327906, 0.85038953], [0.85038953, 0.315]]
    assert np.allclose(dynamics.mass_matrix(model, [0.3, -0.7]), expected, rtol=0.0, atol=1e-8)


def test_planar2_matches_closed_form_dynamics_at_random_states():
    """Craig Ex. 6.6 / Spong closed form (doc/verification.md) with the preset's numbers."""
    l1, lc1, lc2, m1, m2, i1, i2, g = 1.0, 0.45, 0.35, 3.0, 2.0, 0.12, 0.07, 9.81
    model, _ = load('planar2')
    rng = np.random.default_rng(11)
    q, qd, qdd = (rng.uniform(-3.0, 3.0, size=(30, 2)) for _ in range(3))
    c2, h = np.cos(q[:, 1]), -m2 * l1 * lc2 * np.sin(q[:, 1])
    M11 = m1 * lc1 ** 2 + m2 * (l1 ** 2 + lc2 ** 2 + 2 * l1 * lc2 * c2) + i1 + i2
    M12 = m2 * (lc2 ** 2 + l1 * lc2 * c2) + i2
    M22 = m2 * lc2 ** 2 + i2
    g1 = (m1 * lc1 + m2 * l1) * g * np.cos(q[:, 0]) + m2 * lc2 * g * np.cos(q.sum(axis=1))
    g2 = m2 * lc2 * g * np.cos(q.sum(axis=1))
    tau1 = M11 * qdd[:, 0] + M12 * qdd[:, 1] + h * qd[:, 1] ** 2 \
        + 2 * h * qd[:, 0] * qd[:, 1] + g1
    tau2 = M12 * qdd[:, 0] + M22 * qdd[:, 1] - h * qd[:, 0] ** 2 + g2
    tau = dynamics.inverse_dynamics(model, q, qd, qdd)
    assert np.allclose(tau, np.stack([tau1, tau2], axis=1), rtol=1e-12, atol=1e-10)


# ---------------------------------------------------------------- Sasaki six-link arm

SASAKI_A = np.array([2.7533, 0.1502, 85.7259, -33.7722, -85.0428, 33.6731]) * DEG
SASAKI_B = np.array([10.4705, 8.7346, 44.3932, -17.1186, -51.8741, 13.6195]) * DEG
SASAKI_POINTS = [  # [SAS] §4 joint values, printed hand position, gravity of doc/conventions.md
    (SASAKI_A, (-0.1, 0.35, 1.63), (0.0, -58.8056, -58.4331, 5.6840, 0.0, 0.0)),
    (SASAKI_B, (-0.10, 0.35, 1.83), (0.0, -68.6659, -47.0869, 1.9061, 0.0, 0.0)),
]


@pytest.mark.parametrize('q,position,_', SASAKI_POINTS, ids=['A', 'B'])
def test_sasaki_arm_reaches_printed_points_with_printed_orientation(q, position, _):
    model, _ = load('sasaki6')
    tip = dynamics.forward_kinematics(model, q)[-1]
    assert np.allclose(tip[:3, 3], position, rtol=0.0, atol=1e-5)
    assert np.allclose(tip[:3, 0], (0.0, 0.0, 1.0), rtol=0.0, atol=1e-5)    # n
    assert np.allclose(tip[:3, 1], (1.0, 0.0, 0.0), rtol=0.0, atol=1e-5)    # o


@pytest.mark.parametrize('q,_,tau_g', SASAKI_POINTS, ids=['A', 'B'])
def test_sasaki_static_gravity_torques_match_the_reconstruction(q, _, tau_g):
    """The reconstruction's numbers (doc/conventions.md) assume COM at the link midpoints
    and g = 9.8, as the preset."""
    model, _ = load('sasaki6')
    assert np.allclose(dynamics.gravity_torques(model, q), tau_g, rtol=0.0, atol=1e-4)


def test_sasaki_points_lie_within_joint_limits():
    model, _ = load('sasaki6')
    for q in (SASAKI_A, SASAKI_B):
        assert np.all(model.position_min <= q) and np.all(q <= model.position_max)


def test_sasaki_centres_of_mass_are_link_midpoints_and_gravity_is_9_8():
    """The preset's stated assumption ([SAS] eq. 3.26, corrected): COM_i halfway between
    the origins of frames i-1 and i, checked in the base frame at random poses."""
    model, _ = load('sasaki6')
    assert np.allclose(model.gravity, (0.0, 0.0, -9.8))
    for q in random_configurations(model, np.random.default_rng(5), 5):
        T = dynamics.forward_kinematics(model, q)
        origins = np.vstack([np.zeros(3), T[:, :3, 3]])
        coms = np.einsum('nij,nj->ni', T[:, :3, :3], model.com) + T[:, :3, 3]
        assert np.allclose(coms, 0.5 * (origins[:-1] + origins[1:]), rtol=0.0, atol=1e-12)


# ---------------------------------------------------------------- Stanford arm, Panda

def test_stanford_prismatic_joint_holds_the_weight_of_the_links_it_carries():
    """Statics of the prismatic joint 3: the holding force along its axis z_2 balances the
    gravity on links 3..6, τ3 = −(m3 + m4 + m5 + m6) gᵀ z_2 [N]."""
    model, _ = load('stanford')
    for q in random_configurations(model, np.random.default_rng(9), 10):
        z2 = dynamics.forward_kinematics(model, q)[1, :3, 2]
        expected = -model.mass[2:].sum() * model.gravity @ z2
        assert dynamics.gravity_torques(model, q)[2] == pytest.approx(expected, rel=1e-12)


def test_panda_link7_frame_at_zero_pose_matches_franka_kinematics():
    """Franka's documented kinematics: at q = 0, panda_link7 sits at (0.088, 0, 1.033) m
    with x along the base x axis and z pointing down (the flange is 0.107 m below it,
    at the familiar 0.926 m)."""
    model, _ = load('panda')
    T = dynamics.forward_kinematics(model, np.zeros(7))[-1]
    assert np.allclose(T[:3, 3], (0.088, 0.0, 1.033), rtol=0.0, atol=1e-12)
    assert np.allclose(T[:3, :3], np.diag([1.0, -1.0, -1.0]), rtol=0.0, atol=1e-12)


def test_panda_limits_are_franka_datasheet_values():
    model, _ = load('panda')
    assert np.allclose(model.effort_max, [87.0] * 4 + [12.0] * 3)
    assert np.allclose(model.velocity_max, [2.175] * 4 + [2.61] * 3)
    assert model.position_max[3] < 0.0 < model.position_max[5]
