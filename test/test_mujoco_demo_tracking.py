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


def run_demo(folder, engine, extra_files=()):
    """The demo's largest |q_ref - q| per joint (rad) and the engines the plant made."""
    table = os.path.join(folder, f'{engine}.csv')
    ros_args = ['--ros-args', '-p', f'plant_simulator:engine:={engine}']
    for path in extra_files:
        ros_args += ['--params-file', path]
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
