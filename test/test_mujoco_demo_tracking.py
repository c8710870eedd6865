"""The `sim` demo on the Panda with the plant on MuJoCo tracks as it does on the own plant.

`sim --robot panda` (plant_simulator + computed_torque_controller + the demo move, closed
loop through the nodes over DDS, lock-step simulated time: the load of the machine changes
nothing) is run twice on the same arm: the plant on its own engine, and the plant on MuJoCo
(`engine: mujoco`, `mujoco.model_file` empty: the MJCF generated from the same robot model
the controller has). The arm is config/panda.yaml as it is, and config/panda.yaml with
rotor inertia and viscous friction per joint (`robot.armature`, `robot.viscous_friction`,
a drive's levels from `arm_identification.drive_terms`), which the generated MJCF must
carry over as MuJoCo's `armature` and `damping`. The check: the largest tracking error on
MuJoCo is within 2x the largest on the own plant (the engines integrate the same model
differently, MuJoCo's RK4 against ours, so a bit-for-bit equality is not expected; a model
MuJoCo got wrong, e.g. an armature dropped, shows as an error many times larger)."""

import csv
import os

import numpy as np
import pytest
import yaml

pytest.importorskip('mujoco')

from ros_testing import PANDA  # noqa: E402,I100 - sets ROS_DOMAIN_ID

from robot_dynamics.identification import arm as arm_identification  # noqa: E402
from robot_dynamics.simulation import engines
from robot_dynamics.model import RobotModel  # noqa: E402
from robot_dynamics.nodes import sim  # noqa: E402

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
DURATION = 3.0          # simulated s: config/sim.yaml's 2 s move and 1 s of settling


def drives_file(folder):
    """A parameter file adding a drive's armature and viscous friction to the Panda."""
    terms = arm_identification.drive_terms(RobotModel.from_yaml(PANDA))
    path = os.path.join(folder, 'drives.yaml')
    with open(path, 'w', encoding='utf-8') as stream:
        yaml.safe_dump({'/**': {'ros__parameters': {'robot': {
            'armature': [float(v) for v in terms['armature']],
            'viscous_friction': [float(v) for v in terms['viscous']]}}}}, stream)
    return path, terms


def run_demo(folder, engine, extra_files=(), extra_args=(), name=None):
    """The demo's largest |q_ref - q| per joint (rad) and the engines the plant made."""
    table = os.path.join(folder, f'{name or engine}.csv')
    ros_args = ['--ros-args', '-p', f'plant_simulator:engine:={engine}']
    for path in extra_files:
        ros_args += ['--params-file', path]
    ros_args += list(extra_args)
    assert sim.main(['--robot', 'panda', '--duration', str(DURATION), '--csv', table,
                     *ros_args]) == 0
    with open(table, encoding='utf-8', newline='') as stream:
        rows = list(csv.reader(stream))
    header, values = rows[0], np.array(rows[1:], dtype=float)
    columns = [i for i, name in enumerate(header) if name.startswith('error_')]
    assert len(columns) == 7
    assert len(values) >= DURATION * 100 - 2            # 100 Hz control cycles
    return np.max(np.abs(values[:, columns]), axis=0)


@pytest.fixture
def engines_made(monkeypatch):
    """The engines the plant builds (a spy on engines.make_engine)."""
    monkeypatch.setattr(sim, 'DOMAIN_CHECK_WAIT', 0.0)
    made, make = [], engines.make_engine

    def spy(name, *args, **kwargs):
        engine = make(name, *args, **kwargs)
        made.append(engine)
        return engine
    monkeypatch.setattr(engines, 'make_engine', spy)
    return made


@pytest.mark.parametrize('drives', [False, True], ids=['panda.yaml', 'with_drives'])
def test_the_panda_demo_on_mujoco_tracks_within_twice_the_own_plant(drives, tmp_path,
                                                                   engines_made):
    extra = ()
    if drives:
        path, terms = drives_file(str(tmp_path))
        extra = (path,)
    own = run_demo(str(tmp_path), 'own', extra)
    mujoco = run_demo(str(tmp_path), 'mujoco', extra)
    assert [type(e).__name__ for e in engines_made] == ['OwnEngine', 'MujocoEngine']
    if drives:                # the drive terms reached MuJoCo's model, as the robot file says
        mj, dof = engines_made[1].mj, engines_made[1].dadr
        np.testing.assert_allclose(mj.dof_armature[dof], terms['armature'], rtol=1e-12)
        np.testing.assert_allclose(mj.dof_damping[dof], terms['viscous'], rtol=1e-12)
    print(f'largest tracking error, own plant {np.max(own) * 1e3:.4f} mrad, MuJoCo '
          f'{np.max(mujoco) * 1e3:.4f} mrad; per joint own {own}, MuJoCo {mujoco}')
    assert np.max(own) > 0.0
    assert np.max(mujoco) <= 2.0 * np.max(own)


def panda_with_hand_mjcf(path):
    """A Panda as arm files in MuJoCo Menagerie's style describe it (written here from
    config/panda.yaml's links): bodies placed by the modified DH parameters, full inertias,
    a joint defaults class with a drive's rotor inertia and damping, a 0.73 kg hand after
    the flange with two slide-joint fingers coupled by an equality, position servos with
    force ranges (which the plant switches off), no meshes. The controller's robot file
    knows none of the hand, the rotor inertia or the damping."""
    with open(PANDA, encoding='utf-8') as stream:
        robot = yaml.safe_load(stream)['/**']['ros__parameters']['robot']
    bodies, close = [], []
    for k in range(7):
        a, alpha, d = robot['a'][k], robot['alpha'][k], robot['d'][k]
        ixx, ixy, ixz, iyy, iyz, izz = robot['inertia'][6 * k:6 * k + 6]
        com = ' '.join(repr(v) for v in robot['com'][3 * k:3 * k + 3])
        y, z = float(-np.sin(alpha) * d), float(np.cos(alpha) * d)
        bodies.append(
            f'<body name="link{k + 1}" pos="{a!r} {y!r} {z!r}" '
            f'euler="{alpha!r} 0 0"><joint name="joint{k + 1}" '
            f'range="{robot["position_min"][k]!r} {robot["position_max"][k]!r}"/>'
            f'<inertial mass="{robot["mass"][k]!r}" pos="{com}" '
            f'fullinertia="{ixx!r} {iyy!r} {izz!r} {ixy!r} {ixz!r} {iyz!r}"/>')
        close.append('</body>')
    fingers = ''.join(
        f'<body name="{side}_finger" pos="0 0 0.0584" euler="0 0 {turn}">'
        f'<joint name="finger_{side}" class="finger"/><inertial mass="0.015" pos="0 0 0" '
        'diaginertia="2.4e-6 2.4e-6 7.5e-7"/></body>' for side, turn in (('left', 0),
                                                                          ('right', 3.14159265)))
    hand = ('<body name="flange" pos="0 0 0.107"><body name="hand" euler="0 0 -0.785398163">'
            '<inertial mass="0.73" pos="-0.01 0 0.03" diaginertia="0.001 0.0025 0.0017"/>'
            f'{fingers}</body></body>')
    servos = ''.join(f'<position joint="joint{k + 1}" kp="3000" forcerange="-{limit} {limit}"/>'
                     for k, limit in enumerate(robot['effort_max']))
    text = f"""<mujoco model="panda_hand">
  <compiler angle="radian" autolimits="true"/>
  <default><default class="arm"><joint armature="0.1" damping="1.0" axis="0 0 1"/>
    <default class="finger"><joint type="slide" axis="0 1 0" range="0 0.04"/></default>
  </default></default>
  <worldbody><body name="link0" childclass="arm">
    <inertial mass="0.63" pos="-0.04 0 0.05" diaginertia="0.003 0.004 0.004"/>
    {''.join(bodies)}{hand}{''.join(close)}
  </body></worldbody>
  <equality><joint joint1="finger_left" joint2="finger_right"/></equality>
  <actuator>{servos}</actuator>
</mujoco>
"""
    with open(path, 'w', encoding='utf-8') as stream:
        stream.write(text)
    return path


def test_the_arm_of_an_mjcf_file_given_to_the_controller_tracks_as_on_the_own_plant(
        tmp_path, engines_made):
    """The plant runs a user's MJCF arm (`mujoco.model_file`); `model_from_mjcf` gives the
    controller that arm: the demo's largest error on MuJoCo within 2x the own plant's on
    the converted model, where config/panda.yaml alone (no hand, rotor inertia or damping)
    is many times worse."""
    from robot_dynamics.nodes import model_from_mjcf
    mjcf = panda_with_hand_mjcf(str(tmp_path / 'panda_hand.xml'))
    converted = str(tmp_path / 'panda_hand.yaml')
    assert model_from_mjcf.main([mjcf, '--output', converted]) == 0
    on_file = ['-p', f'plant_simulator:mujoco.model_file:={mjcf}']
    own = run_demo(str(tmp_path), 'own', (converted,), name='own_converted')
    matched = run_demo(str(tmp_path), 'mujoco', (converted,), on_file, name='mujoco_converted')
    alone = run_demo(str(tmp_path), 'mujoco', (), on_file + [
        '-p', 'joints:=[joint1, joint2, joint3, joint4, joint5, joint6, joint7]'],
        name='mujoco_robot_file')
    assert [type(e).__name__ for e in engines_made] == ['OwnEngine', 'MujocoEngine',
                                                       'MujocoEngine']
    print(f'largest tracking error: own plant, converted model {np.max(own) * 1e3:.4f} mrad; '
          f'MuJoCo, converted {np.max(matched) * 1e3:.4f} mrad; MuJoCo, robot file alone '
          f'{np.max(alone) * 1e3:.4f} mrad')
    assert 0.0 < np.max(matched) <= 2.0 * np.max(own)
    assert np.max(alone) > 10.0 * np.max(matched)
