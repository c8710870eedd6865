"""The dynamics core against independent reference data from Pinocchio.

test/data/reference_dynamics.npz was made by tools/make_reference_data.py, which builds each
chain in Pinocchio straight from the DH numbers (no robot_dynamics code). Here every model
is rebuilt with `RobotModel.from_params` from the stored robot block and evaluated through
the public functions of `robot_dynamics.dynamics`; Pinocchio is not needed.
"""

import json
import os

import numpy as np
import pytest
import yaml

from robot_dynamics import dynamics
from robot_dynamics.model import RobotModel

pytestmark = pytest.mark.filterwarnings('ignore::robot_dynamics.model.ModelWarning')

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, 'test', 'data', 'reference_dynamics.npz')
PRESETS = ('planar2', 'puma560', 'stanford', 'sasaki6', 'panda')
RANDOM = ('random8_standard_payload', 'random8_modified_gravity_armature')
CASES = [(name, label) for name in PRESETS + RANDOM for label in ('single', 'batch')]
IDS = [f'{name}-{label}' for name, label in CASES]

with np.load(DATA, allow_pickle=False) as _archive:
    REFERENCE = {key: _archive[key] for key in _archive.files}


def model_of(name):
    return RobotModel.from_params(json.loads(str(REFERENCE[f'{name}.robot'])))


def ref(name, label, key):
    return REFERENCE[f'{name}.{label}.{key}']


def assert_relative(actual, expected, rtol, label):
    """Per sample: max |actual − expected| <= rtol · max |expected| (norm-wise relative).
    `label` 'single': the arrays are one sample; 'batch': the first axis indexes samples."""
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    assert actual.shape == expected.shape
    rows = 1 if label == 'single' else expected.shape[0]
    error = np.abs(actual - expected).reshape(rows, -1).max(axis=1)
    scale = np.maximum(np.abs(expected).reshape(rows, -1).max(axis=1), 1e-6)
    worst = float(np.max(error / scale))
    assert worst <= rtol, f'relative error {worst:.3e} > {rtol:.0e}'


def test_reference_file_is_small_and_covers_presets_and_random_chains():
    assert os.path.getsize(DATA) < 1_000_000
    assert set(REFERENCE['models']) == set(PRESETS + RANDOM)
    meta = json.loads(str(REFERENCE['meta']))
    assert meta['pinocchio'].startswith('4.')


@pytest.mark.parametrize('name', PRESETS)
def test_reference_blocks_are_the_current_presets(name):
    """Stale reference data (a preset changed after the data were made) fails here. The
    mark robot.accept_nonphysical_inertia changes what is logged, not the dynamics."""
    with open(os.path.join(REPO, 'config', name + '.yaml'), encoding='utf-8') as stream:
        params = yaml.safe_load(stream)['/**']['ros__parameters']
    stored = json.loads(str(REFERENCE[f'{name}.robot']))
    for block in (stored, params['robot']):
        block.pop('accept_nonphysical_inertia', None)
    assert stored == params['robot']
    assert list(REFERENCE[f'{name}.joints']) == params['joints']


def test_random_chains_exercise_prismatic_joints_offsets_payload_gravity_and_armature():
    for name in RANDOM:
        block = json.loads(str(REFERENCE[f'{name}.robot']))
        assert len(block['joint_types']) == 8 and 'prismatic' in block['joint_types']
        assert all(abs(v) > 0.0 for v in block['theta'] + block['d'])
        inertia = np.array(block['inertia']).reshape(8, 6)
        assert np.all(np.abs(inertia[:, [1, 2, 4]]) > 0.0)    # full tensors
    conventions = {json.loads(str(REFERENCE[f'{n}.robot']))['dh_convention'] for n in RANDOM}
    assert conventions == {'standard', 'modified'}
    assert model_of(RANDOM[0]).payload.mass > 0.0
    assert not np.allclose(model_of(RANDOM[1]).gravity, [0.0, 0.0, -9.81])
    assert model_of(RANDOM[1]).has_armature


@pytest.mark.parametrize('name,label', CASES, ids=IDS)
def test_inverse_dynamics_matches_pinocchio_rnea(name, label):
    model = model_of(name)
    tau = dynamics.inverse_dynamics(model, ref(name, label, 'q'), ref(name, label, 'qd'),
                                    ref(name, label, 'qdd'))
    assert_relative(tau, ref(name, label, 'rnea'), 1e-9, label)


@pytest.mark.parametrize('name,label', CASES, ids=IDS)
def test_mass_matrix_matches_pinocchio_crba(name, label):
    M = dynamics.mass_matrix(model_of(name), ref(name, label, 'q'))
    assert_relative(M, ref(name, label, 'crba'), 1e-9, label)


@pytest.mark.parametrize('name,label', CASES, ids=IDS)
def test_forward_dynamics_matches_pinocchio_aba(name, label):
    qdd = dynamics.forward_dynamics(model_of(name), ref(name, label, 'q'),
                                    ref(name, label, 'qd'), ref(name, label, 'tau'))
    assert_relative(qdd, ref(name, label, 'aba'), 1e-7, label)


@pytest.mark.parametrize('name,label', CASES, ids=IDS)
def test_mass_matrix_forward_dynamics_matches_pinocchio_aba(name, label):
    qdd = dynamics.forward_dynamics_mass_matrix(model_of(name), ref(name, label, 'q'),
                                                ref(name, label, 'qd'), ref(name, label, 'tau'))
    assert_relative(qdd, ref(name, label, 'aba'), 1e-7, label)


@pytest.mark.parametrize('name,label', CASES, ids=IDS)
def test_gravity_torques_match_pinocchio_generalized_gravity(name, label):
    g = dynamics.gravity_torques(model_of(name), ref(name, label, 'q'))
    assert_relative(g, ref(name, label, 'gravity'), 1e-9, label)


@pytest.mark.parametrize('name,label', CASES, ids=IDS)
def test_forward_kinematics_matches_pinocchio_frame_placements(name, label):
    T = dynamics.forward_kinematics(model_of(name), ref(name, label, 'q'))
    assert_relative(T, ref(name, label, 'frames'), 1e-9, label)


@pytest.mark.parametrize('name,label', CASES, ids=IDS)
def test_tip_jacobian_matches_pinocchio_local_world_aligned_jacobian(name, label):
    J = dynamics.jacobian(model_of(name), ref(name, label, 'q'))
    assert_relative(J, ref(name, label, 'jacobian'), 1e-9, label)


@pytest.mark.parametrize('name,label', CASES, ids=IDS)
def test_energies_match_pinocchio(name, label):
    model = model_of(name)
    q, qd = ref(name, label, 'q'), ref(name, label, 'qd')
    assert_relative(np.atleast_1d(dynamics.kinetic_energy(model, q, qd)),
                    np.atleast_1d(ref(name, label, 'kinetic')), 1e-9, label)
    assert_relative(np.atleast_1d(dynamics.potential_energy(model, q)),
                    np.atleast_1d(ref(name, label, 'potential')), 1e-9, label)
