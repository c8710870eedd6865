"""model_from_mjcf: the controller's model of an MJCF arm. The reference is MuJoCo itself:
`mj_inverse` on the file gives the generalised forces of the driven joints, which the
converted model's recursive Newton–Euler must reproduce (inertials merged, anchors off the
body origins, classes, quaternions and full inertias resolved, a base placed and turned,
armature and damping); the parameter file it writes is one rcl reads, layered after a
robot file."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import yaml

mujoco = pytest.importorskip('mujoco')

from robot_dynamics import dynamics  # noqa: E402
from robot_dynamics.model import RobotModel  # noqa: E402
from robot_dynamics.parameters.layering import layered_parameters  # noqa: E402
from robot_dynamics.parameters.params_file import check_params_file  # noqa: E402
from robot_dynamics.simulation import mujoco_engine  # noqa: E402
from robot_dynamics.simulation.mjcf_model import (arm_of_mjcf, MjcfModelWarning,  # noqa: E402
                                                  parameter_file_text)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PANDA = os.path.join(REPO, 'config', 'panda.yaml')

# An arm written the way hand-made and Menagerie files are: a placed and turned base body
# without a joint, defaults classes, quaternions, full inertias, a joint anchored off its
# body's origin, a fixed body after the last joint, a gripper with two slide joints and an
# equality between them, actuators with force ranges and gears, no meshes.
ARM = """
<mujoco model="test_arm">
  <compiler angle="radian" autolimits="true"/>
  <option gravity="0.3 -0.2 -9.7"/>
  <default>
    <default class="arm">
      <joint armature="0.05" damping="0.7" axis="0 0 1" range="-2.5 2.5"/>
      <default class="finger"><joint type="slide" axis="0 1 0" range="0 0.04"/></default>
    </default>
  </default>
  <worldbody>
    <body name="base" pos="0.1 -0.2 0.4" quat="0.9659258 0 0.2588190 0" childclass="arm">
      <inertial mass="2.0" pos="0 0 0.05" diaginertia="0.01 0.01 0.01"/>
      <body name="upper" pos="0 0 0.3">
        <joint name="shoulder"/>
        <inertial mass="3.1" pos="0.01 0.02 -0.05"
                  fullinertia="0.04 0.05 0.03 0.002 -0.001 0.003"/>
        <body name="fore" pos="0.05 0 0.1" quat="0.7071068 -0.7071068 0 0">
          <joint name="elbow" pos="0 0.02 -0.03" range="-1.7 1.2" armature="0.2"/>
          <inertial mass="1.7" pos="0.2 -0.01 0.02" quat="0.9 0.1 0.3 0.2"
                    diaginertia="0.002 0.03 0.031"/>
          <body name="wrist" pos="0.4 0 0" quat="0.7071068 0.7071068 0 0">
            <joint name="wrist" axis="0 1 0" damping="0.1" frictionloss="0.3"/>
            <inertial mass="0.6" pos="0 0.01 0.05" diaginertia="0.001 0.002 0.0015"/>
            <body name="flange" pos="0 0 0.1" quat="0.9238795 0 0 -0.3826834">
              <body name="hand" pos="0 0 0.02">
                <inertial mass="0.7" pos="-0.01 0 0.03" diaginertia="0.001 0.0025 0.0017"/>
                <body name="finger_l" pos="0 0.01 0.06">
                  <joint name="finger_l" class="finger"/>
                  <inertial mass="0.05" pos="0 0 0.01" diaginertia="1e-5 1e-5 5e-6"/>
                </body>
                <body name="finger_r" pos="0 -0.01 0.06" quat="0 0 0 1">
                  <joint name="finger_r" class="finger"/>
                  <inertial mass="0.05" pos="0 0 0.01" diaginertia="1e-5 1e-5 5e-6"/>
                </body>
              </body>
            </body>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <equality><joint joint1="finger_l" joint2="finger_r"/></equality>
  <actuator>
    <motor joint="shoulder" forcerange="-40 40" gear="2"/>
    <motor joint="elbow" forcerange="-30 25"/>
    <position joint="finger_l" kp="100"/>
  </actuator>
</mujoco>
"""
JOINTS = ['shoulder', 'elbow', 'wrist']


def converted(text, joints=None):
    mj = mujoco_engine.compile_mjcf(text)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter('always', MjcfModelWarning)
        arm = arm_of_mjcf(mj, joints)
    return mj, arm, [str(w.message) for w in said]


def model_of(arm):
    return RobotModel.from_params({'source': 'urdf', 'urdf': arm['urdf'],
                                   'gravity': arm['gravity'], 'armature': arm['armature'],
                                   'viscous_friction': arm['viscous_friction'],
                                   'coulomb_friction': [0.0] * len(arm['joints'])})


def mujoco_inverse(mj, joints, q, qd, qdd):
    """MuJoCo's generalised forces of `joints` at (q, qd, qdd), the other joints at qpos0
    and at rest; frictionloss off (a constraint, not an inverse-dynamics term)."""
    mj.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_FRICTIONLOSS) | int(
        mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    qadr, dadr = mujoco_engine.joint_addresses(mj, joints)
    data = mujoco.MjData(mj)
    data.qpos[:] = mj.qpos0
    data.qpos[qadr], data.qvel[dadr], data.qacc[dadr] = q, qd, qdd
    mujoco.mj_inverse(mj, data)
    return data.qfrc_inverse[dadr].copy()


def assert_the_test_arm(layered, seed):
    """The model of the layered parameters {name: value} has ARM's inverse dynamics (as
    MuJoCo computes it, with the wrist's frictionloss as Coulomb friction fc sign(q̇)) at
    one random state; the model."""
    model = RobotModel.from_params({key[len('robot.'):]: value for key, value in layered.items()
                                    if key.startswith('robot.')})
    q, qd, qdd = (row[0] for row in states(3, seed=seed))
    expected = (mujoco_inverse(mujoco_engine.compile_mjcf(ARM), JOINTS, q, qd, qdd)
                + np.array([0.0, 0.0, 0.3]) * np.sign(qd))
    assert np.allclose(dynamics.inverse_dynamics(model, q, qd, qdd), expected, rtol=1e-9,
                       atol=1e-9)
    return model


def states(n, count=20, seed=3):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1.2, 1.2, (count, n)), rng.uniform(-2.0, 2.0, (count, n)),
            rng.uniform(-5.0, 5.0, (count, n)))


def test_the_converted_arm_has_mujocos_inverse_dynamics():
    mj, arm, _ = converted(ARM)
    assert arm['joints'] == JOINTS                   # the hinges; the fingers are not driven
    model = model_of(arm)
    for q, qd, qdd in zip(*states(3)):
        expected = mujoco_inverse(mj, JOINTS, q, qd, qdd)
        tau = dynamics.inverse_dynamics(model, q, qd, qdd)
        assert np.allclose(tau, expected, rtol=1e-9, atol=1e-9), (q, tau, expected)


def test_the_drive_terms_gravity_and_effort_limits_are_carried_over():
    mj, arm, _ = converted(ARM)
    assert arm['armature'] == [0.05, 0.2, 0.05]
    assert arm['viscous_friction'] == [0.7, 0.7, 0.1]
    assert arm['coulomb_friction'] == [0.0, 0.0, 0.3]
    assert arm['gravity'] == [0.3, -0.2, -9.7]
    model = model_of(arm)
    # the shoulder's motor: 40 N at gear 2; the elbow's: the larger side of its range
    assert list(model.effort_max[:2]) == [80.0, 30.0]
    assert model.effort_max[2] == np.inf             # no actuator: no limit
    assert list(model.position_min) == [-2.5, -1.7, -2.5]
    assert list(model.position_max) == [2.5, 1.2, 2.5]


def test_what_the_model_cannot_hold_is_said():
    _, _, said = converted(ARM)
    assert any("['finger_l', 'finger_r'] have joints the controller does not drive" in s
               for s in said), said
    spring = ARM.replace('<joint name="wrist" axis="0 1 0"',
                         '<joint name="wrist" axis="0 1 0" stiffness="3"')
    spring = spring.replace('<body name="hand" pos="0 0 0.02">',
                            '<body name="hand" pos="0 0 0.02" gravcomp="1">')
    spring = spring.replace('<equality><joint joint1="finger_l" joint2="finger_r"/>',
                            '<equality><joint joint1="finger_l" joint2="finger_r"/>'
                            '<joint joint1="elbow" joint2="wrist"/>')
    _, _, said = converted(spring)
    assert any("joints ['wrist'] have a spring" in s for s in said), said
    assert any("bodies ['hand'] have gravcomp" in s for s in said), said
    assert any("joints ['elbow', 'wrist'] are coupled" in s for s in said), said


def test_named_joints_in_any_order_become_the_chain_base_first():
    _, arm, _ = converted(ARM, ['wrist', 'shoulder', 'elbow'])
    assert arm['joints'] == JOINTS


@pytest.mark.parametrize('joints, message', [
    (['shoulder', 'nowhere'], "joint 'nowhere' is not in the MJCF (its joints: shoulder, "
                              "elbow, wrist, finger_l, finger_r)"),
    (JOINTS + ['finger_l', 'finger_r'], "joint 'finger_r' is not below joint 'finger_l'"),
    (['shoulder', 'wrist'], "body 'fore' between the driven joints 'shoulder' and 'wrist'"),
    (['elbow', 'elbow'], 'named twice'),
])
def test_joints_that_are_not_one_chain_are_refused_naming_them(joints, message):
    with pytest.raises(ValueError) as raised:
        converted(ARM, joints)
    assert message in str(raised.value)


def test_a_free_base_is_refused():
    free = ARM.replace('<inertial mass="2.0" pos="0 0 0.05"',
                       '<freejoint/><inertial mass="2.0" pos="0 0 0.05"')
    with pytest.raises(ValueError, match="body 'base' between the world and the first "
                                         "driven joint 'shoulder'"):
        converted(free)


def test_the_generated_mjcf_of_a_robot_file_comes_back_as_that_model():
    """config/panda.yaml with drive terms and a payload, written as MJCF by the plant's
    generator and read back: the same inverse dynamics (DH body frames, payload merged)."""
    original = RobotModel.from_params({
        **_robot_block(PANDA), 'armature': [0.3, 0.3, 0.2, 0.2, 0.1, 0.1, 0.05],
        'viscous_friction': [1.0, 1.0, 0.8, 0.8, 0.5, 0.5, 0.2],
        'payload': {'mass': 0.8, 'com': [0.01, 0.0, 0.05]}})
    names = [f'panda_joint{i}' for i in range(1, 8)]
    _, arm, _ = converted(mujoco_engine.model_to_mjcf(original, names))
    assert arm['joints'] == names
    model = model_of(arm)
    for q, qd, qdd in zip(*states(7, seed=5)):
        assert np.allclose(dynamics.inverse_dynamics(model, q, qd, qdd),
                           dynamics.inverse_dynamics(original, q, qd, qdd), rtol=1e-9,
                           atol=1e-9)


def _robot_block(path):
    with open(path, encoding='utf-8') as stream:
        return yaml.safe_load(stream)['/**']['ros__parameters']['robot']


def test_the_command_writes_a_parameter_file_that_replaces_the_robot_files_model(tmp_path):
    """The executable on a file: a parameter file rcl reads; layered after
    config/panda.yaml-like robot file (other joint names, a DH model, limits) its model and
    joints win; the robot file's other settings stay."""
    mjcf = tmp_path / 'test_arm.xml'
    mjcf.write_text(ARM)
    out = tmp_path / 'arm.yaml'
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get('PYTHONPATH', '')]))
    done = subprocess.run([sys.executable, '-m', 'robot_dynamics.nodes.model_from_mjcf',
                           str(mjcf), '--output', str(out)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "joints ['shoulder', 'elbow', 'wrist']" in done.stderr
    assert "['finger_l', 'finger_r'] have joints the controller does not drive" in done.stderr
    check_params_file(str(out))                      # what rcl would refuse, refused here
    robot_file = tmp_path / 'robot.yaml'
    robot_file.write_text(
        '/**:\n  ros__parameters:\n    joints: [j1, j2, j3]\n    robot:\n'
        '      a: [0.0, 0.3, 0.3]\n      alpha: [1.5707963267948966, 0.0, 0.0]\n'
        '      d: [0.3, 0.0, 0.0]\n      theta: [0.0, 0.0, 0.0]\n      mass: [1.0, 1.0, 1.0]\n'
        '      com: [0.0, 0.0, 0.0, -0.15, 0.0, 0.0, -0.15, 0.0, 0.0]\n'
        '      inertia: [0.01, 0.0, 0.0, 0.01, 0.0, 0.01, 0.01, 0.0, 0.0, 0.01, 0.0, 0.01,\n'
        '                0.01, 0.0, 0.0, 0.01, 0.0, 0.01]\n'
        '      velocity_max: [2.0, 2.0, 3.0]\n'
        '    gains:\n      kp: [100.0, 100.0, 100.0]\n')
    layered = layered_parameters([str(robot_file), str(out)])
    model = assert_the_test_arm(layered, seed=11)
    assert list(model.velocity_max) == [2.0, 2.0, 3.0]     # the robot file's limits stay
    assert layered['joints'] == JOINTS and layered['gains.kp'] == [100.0] * 3


def test_a_file_mujoco_cannot_load_exits_1_in_one_line(tmp_path):
    bad = tmp_path / 'bad.xml'
    bad.write_text('<mujoco><worldbody><body><joint name="j"/></body></worldbody>')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get('PYTHONPATH', '')]))
    done = subprocess.run([sys.executable, '-m', 'robot_dynamics.nodes.model_from_mjcf',
                           str(bad)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('model_from_mjcf: MuJoCo cannot load'), \
        done.stderr


def test_the_file_reads_back_as_rcl_types_it(tmp_path):
    _, arm, _ = converted(ARM)
    path = tmp_path / 'arm.yaml'
    path.write_text(parameter_file_text(arm, 'test_arm.xml'))
    read = layered_parameters([str(path)])
    assert read['robot.source'] == 'urdf' and read['robot.urdf'] == arm['urdf']
    for key in ('gravity', 'armature', 'viscous_friction', 'coulomb_friction'):
        assert read[f'robot.{key}'] == arm[key]
        assert all(isinstance(v, float) for v in read[f'robot.{key}']), key


def test_an_output_that_cannot_be_written_exits_1_naming_it(tmp_path, capsys):
    from robot_dynamics.nodes import model_from_mjcf
    mjcf = tmp_path / 'test_arm.xml'
    mjcf.write_text(ARM)
    target = mjcf / 'arm.yaml'                          # under a file: not writable
    assert model_from_mjcf.main([str(mjcf), '--output', str(target)]) == 1
    assert mjcf.read_text() == ARM
    assert f'--output: cannot write {target}' in capsys.readouterr().err


@pytest.mark.parametrize('urdf_option', [False, True], ids=['inline', 'urdf_file'])
def test_after_a_urdf_robot_file_the_mjcf_arm_replaces_it(tmp_path, urdf_option):
    """A URDF robot file (the UR5 of test/data, its own base and tip links, URDF friction
    on, the URDF as a file) and then the converted file: the model is the MJCF arm, none of
    the first file's URDF settings applies to it. With --urdf the URDF is its own file,
    named by the parameter file."""
    from robot_dynamics.nodes import model_from_mjcf
    mjcf = tmp_path / 'test_arm.xml'
    mjcf.write_text(ARM)
    out, urdf = tmp_path / 'arm.yaml', tmp_path / 'arm.urdf'
    extra = ['--urdf', str(urdf)] if urdf_option else []
    assert model_from_mjcf.main([str(mjcf), '--output', str(out), *extra]) == 0
    robot_file = tmp_path / 'ur5.yaml'
    robot_file.write_text(
        '/**:\n  ros__parameters:\n    robot:\n      source: urdf\n'
        f'      urdf_file: {os.path.join(REPO, "test", "data", "ur5.urdf")}\n'
        '      base_link: base_link\n      tip_link: tool0\n      use_urdf_friction: true\n')
    layered = layered_parameters([str(robot_file), str(out)])
    if urdf_option:
        assert layered['robot.urdf'] == '' and layered['robot.urdf_file'] == str(urdf)
        assert urdf.read_text() == converted(ARM)[1]['urdf'].replace(
            '<robot name="mjcf_arm">', '<robot name="test_arm">')      # named after the file
    else:
        assert layered['robot.urdf_file'] == '' and layered['robot.urdf'].startswith('<?xml')
    assert_the_test_arm(layered, seed=13)
