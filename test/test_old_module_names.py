"""The flat module names of earlier versions import the moved modules themselves (one module
object, so monkeypatching either name patches both), without a file at the old path."""

import importlib
import os
import subprocess
import sys

import pytest

from robot_dynamics import _moved

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUBLIC = ['model', 'dynamics', 'control', 'kinematics', 'urdf', 'simulation', 'integration',
          'engines', 'mujoco_engine', 'trajectory', 'profiles', 'lagrange']


@pytest.mark.parametrize('old, new', sorted(_moved.MOVED.items()))
def test_an_old_name_is_the_new_module(old, new):
    module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    parent, _, name = old.rpartition('.')
    assert getattr(importlib.import_module(parent), name) is module
    assert not os.path.exists(os.path.join(REPO, *old.split('.')) + '.py')


def test_a_submodule_of_a_moved_package_is_the_moved_submodule():
    """robot_dynamics.arm_identification.recording is identification.arm.recording itself
    (tests monkeypatch its attributes through either name), not a second copy."""
    from robot_dynamics.arm_identification import recording as old
    from robot_dynamics.arm_identification.libraries import _require
    from robot_dynamics.identification.arm import libraries, recording
    assert old is recording and _require is libraries._require
    assert importlib.import_module('robot_dynamics.arm_identification.study') is \
        importlib.import_module('robot_dynamics.identification.arm.study')


def test_the_public_names_import():
    for name in PUBLIC:
        assert importlib.import_module(f'robot_dynamics.{name}').__name__.startswith(
            'robot_dynamics.')


def test_the_split_trajectory_module_holds_both_halves():
    from robot_dynamics import trajectory
    from robot_dynamics.trajectories import sampler, splines
    for name in sampler.__all__:
        assert getattr(trajectory, name) is getattr(sampler, name)
    for name in splines.__all__ + ['STOP_RAMP_SHARE', 'STOP_RAMP_TIME']:
        assert getattr(trajectory, name) is getattr(splines, name)


def test_an_unknown_name_still_fails():
    with pytest.raises(ImportError):
        importlib.import_module('robot_dynamics.no_such_module')


def test_python_m_on_the_old_urdf_name_prints_the_urdf():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
    result = subprocess.run([sys.executable, '-m', 'robot_dynamics.urdf',
                             os.path.join(REPO, 'config', 'puma560.yaml')],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert '<robot name="puma560">' in result.stdout
