"""RobotModel input validation: bad input is refused with a ValueError that names the key
(and the index), doubtful textbook data is accepted with a ModelWarning, and the two ways
parameters reach the model (a ROS 2 parameter file, a flattened parameter dict) agree."""

import math
import pickle
import re
import warnings

import numpy as np
import pytest
import yaml
from conftest import random_chain_params, random_state

from robot_dynamics import dynamics
from robot_dynamics.model import ModelWarning, RobotModel

REQUIRED = ('dh_convention', 'joint_types', 'a', 'alpha', 'd', 'theta', 'mass', 'com',
            'inertia')


@pytest.fixture
def block(rng):
    return random_chain_params(rng, 3, 'standard', (0, 1, 0))


def _raises(block, pattern):
    with pytest.raises(ValueError, match=pattern):
        RobotModel.from_params(block)


def _with(block, key, index, value):
    values = list(block[key])
    values[index] = value
    return dict(block, **{key: values})


# ------------------------------------------------------------------ refused input


@pytest.mark.parametrize('key', REQUIRED)
def test_missing_required_key_is_named(block, key):
    _raises({k: v for k, v in block.items() if k != key},
            rf'robot\.{key}: missing required key')


@pytest.mark.parametrize('key, length', [('a', 3), ('alpha', 3), ('d', 3), ('theta', 3),
                                         ('mass', 3), ('com', 9), ('inertia', 18),
                                         ('gravity', 3), ('armature', 3),
                                         ('viscous_friction', 3), ('effort_max', 3)])
@pytest.mark.parametrize('change', [-1, +1])
def test_wrong_list_length_is_named_with_expected_count(block, key, length, change):
    values = list(block.get(key, [1.0] * length))
    values = values[:length + change] if change < 0 else values + [1.0]
    _raises(dict(block, **{key: values}),
            rf'robot\.{key}: expected {length} values, got {length + change}')


@pytest.mark.parametrize('key, index', [('a', 2), ('alpha', 0), ('d', 1), ('theta', 2),
                                        ('mass', 1), ('com', 7), ('inertia', 11),
                                        ('gravity', 2)])
@pytest.mark.parametrize('bad', [math.nan, math.inf, -math.inf])
def test_non_finite_number_is_named_with_its_index(block, key, index, bad):
    _raises(_with(block, key, index, bad), rf'robot\.{key}\[{index}\]: non-finite')


@pytest.mark.parametrize('bad', ['4e-05', None, True, [1.0]])
def test_non_number_is_named_with_its_index(block, bad):
    _raises(_with(block, 'mass', 2, bad), r'robot\.mass\[2\]: expected a number')


def test_scalar_instead_of_list_is_named(block):
    _raises(dict(block, a=0.5), r'robot\.a: expected a list of 3 numbers')


def test_negative_mass_is_named_with_its_index(block):
    _raises(_with(block, 'mass', 1, -0.5), r'robot\.mass\[1\]: negative mass')


def test_unknown_convention_is_refused(block):
    _raises(dict(block, dh_convention='craig'),
            r"robot\.dh_convention: unknown convention 'craig'")


@pytest.mark.parametrize('bad', ['continuous', 'Revolute', 'R'])
def test_unknown_joint_type_is_named_with_its_index(block, bad):
    _raises(_with(block, 'joint_types', 2, bad),
            rf"robot\.joint_types\[2\]: unknown joint type '{bad}'")


@pytest.mark.parametrize('bad', [[], 'revolute'])
def test_empty_or_string_joint_types_are_refused(block, bad):
    _raises(dict(block, joint_types=bad), r'robot\.joint_types')


def test_unknown_key_is_named(block):
    _raises(dict(block, masses=block['mass']), r'robot\.masses: unknown key')


@pytest.mark.parametrize('key', ['armature', 'viscous_friction', 'coulomb_friction'])
def test_negative_per_joint_coefficient_is_named_with_its_index(block, key):
    _raises(dict(block, **{key: [0.1, -0.2, 0.3]}), rf'robot\.{key}\[1\]: must be >= 0')


@pytest.mark.parametrize('key', ['velocity_max', 'effort_max'])
def test_non_positive_limit_is_named_with_its_index(block, key):
    _raises(dict(block, **{key: [1.0, 2.0, 0.0]}), rf'robot\.{key}\[2\]: must be > 0')


def test_position_min_not_below_position_max_is_named(block):
    _raises(dict(block, position_min=[-1.0, 0.5, -1.0], position_max=[1.0, 0.5, 1.0]),
            r'robot\.position_min\[1\] >= robot\.position_max\[1\]')


@pytest.mark.parametrize('key', ['armature', 'viscous_friction', 'coulomb_friction',
                                 'coulomb_friction_negative', 'stribeck_friction',
                                 'stribeck_velocity', 'effort_offset'])
def test_an_infinite_friction_level_or_offset_is_named_with_its_index(block, key):
    """Unlike a limit, an infinite friction level makes the efforts at rest NaN (and the
    generated code fail): refused, as is a velocity scale whose reciprocal overflows."""
    laws = {'friction_model': ['asymmetric', 'stribeck', 'tanh']}
    _raises(dict(block, **laws, **{key: [0.1, math.inf, 0.3]}),
            rf'robot\.{key}\[1\]: non-finite value inf')
    if key == 'stribeck_velocity':
        _raises(dict(block, **laws, stribeck_velocity=[0.1, 0.1, 1e-320]),
                r'robot\.stribeck_velocity\[2\]: 1e-320 is too small')


def test_infinite_limits_are_accepted(block):
    model = RobotModel.from_params(dict(block, position_min=[-math.inf] * 3,
                                        effort_max=[math.inf, 10.0, math.inf]))
    assert model.effort_max[1] == 10.0 and math.isinf(model.position_min[0])


@pytest.mark.parametrize('payload, pattern', [
    ({'mass': -1.0}, r'robot\.payload\.mass: negative mass'),
    ({'mass': math.nan}, r'robot\.payload\.mass: non-finite'),
    ({'mass': 'heavy'}, r'robot\.payload\.mass: expected a number'),
    ({'mass': 1.0, 'com': [0.0, 0.1]}, r'robot\.payload\.com: expected 3 values'),
    ({'mass': 1.0, 'com': [0.0, math.inf, 0.0]}, r'robot\.payload\.com\[1\]: non-finite'),
    ({'mass': 1.0, 'inertia': [0.1] * 5}, r'robot\.payload\.inertia: expected 6 values'),
    ({'mass': 1.0, 'inertia': [[0.1, 0.02, 0.0], [0.0, 0.1, 0.0], [0.0, 0.0, 0.1]]},
     r'robot\.payload\.inertia: inertia tensor is not symmetric'),
    ({'mass': 1.0, 'radius': 0.1}, r'robot\.payload\.radius: unknown key'),
    (2.5, r'robot\.payload: expected a mapping'),
])
def test_bad_payload_is_refused_naming_the_field(block, payload, pattern):
    _raises(dict(block, payload=payload), pattern)


def test_non_symmetric_payload_inertia_is_refused_by_with_payload(block):
    model = RobotModel.from_params(block)
    with pytest.raises(ValueError, match=r'robot\.payload\.inertia: .*not symmetric'):
        model.with_payload(1.0, inertia=[[0.1, 0.0, 0.03], [0.0, 0.1, 0.0], [0.0, 0.0, 0.1]])


def test_non_mapping_block_is_refused():
    with pytest.raises(ValueError, match=r'robot: expected a mapping'):
        RobotModel.from_params([1.0, 2.0])


@pytest.mark.parametrize('first', ['value', 'group'])
@pytest.mark.parametrize('key', ['payload', 'mass'])
def test_value_and_group_under_one_name_is_refused_in_either_order(block, first, key):
    value = {'payload': 1.0, 'mass': block['mass']}[key]
    pairs = [(key, value), (key + '.extra', 2.0)]
    rest = {k: v for k, v in block.items() if k != key}
    mixed = dict(pairs if first == 'value' else pairs[::-1])
    mixed.update(rest)
    _raises(mixed, rf'robot\.{key}: given both as a value and as a group')


# ------------------------------------------------------------------ accepted with a warning


PUMA_LINK_1 = [0.0, 0.0, 0.0, 0.35, 0.0, 0.0]     # Corke: m = 0, I = diag(0, 0.35, 0)


def puma560_block():
    """Corke & Armstrong-Hélouvry's PUMA 560, standard DH ([COR], [RTB])."""
    half = math.pi / 2
    return {
        'dh_convention': 'standard', 'joint_types': ['revolute'] * 6,
        'a': [0.0, 0.4318, 0.0203, 0.0, 0.0, 0.0],
        'alpha': [half, 0.0, -half, half, -half, 0.0],
        'd': [0.0, 0.0, 0.15005, 0.4318, 0.0, 0.0], 'theta': [0.0] * 6,
        'mass': [0.0, 17.4, 4.8, 0.82, 0.34, 0.09],
        'com': [0, 0, 0, -0.3638, 0.006, 0.2275, -0.0203, -0.0141, 0.070,
                0, 0.019, 0, 0, 0, 0, 0, 0, 0.032],
        'inertia': PUMA_LINK_1 + [0.13, 0, 0, 0.524, 0, 0.539, 0.066, 0, 0, 0.086, 0, 0.0125,
                                  1.8e-3, 0, 0, 1.3e-3, 0, 1.8e-3, 0.3e-3, 0, 0, 0.4e-3, 0,
                                  0.3e-3, 0.15e-3, 0, 0, 0.15e-3, 0, 0.04e-3],
    }


def test_corke_puma_link_1_is_accepted_with_a_model_warning_naming_link_1(rng):
    with pytest.warns(ModelWarning) as record:
        model = RobotModel.from_params(puma560_block())
    messages = [str(w.message) for w in record]
    assert any('link 1' in m and 'zero mass' in m for m in messages)
    assert any('link 1' in m and 'triangle' in m for m in messages)
    assert model.mass[0] == 0.0 and model.inertia[0][1, 1] == 0.35
    q, _, _ = random_state(rng, 6, size=20)
    np.linalg.cholesky(dynamics.mass_matrix(model, 3.0 * q))     # still SPD


def test_physical_inertias_raise_no_warning(block):
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        RobotModel.from_params(block)


def test_indefinite_inertia_is_accepted_with_a_warning(block):
    inertia = list(block['inertia'])
    inertia[6:12] = [0.1, 0.0, 0.0, 0.1, 0.0, -0.05]
    with pytest.warns(ModelWarning, match=r'link 2.*not positive semi-definite'):
        RobotModel.from_params(dict(block, inertia=inertia))


# ------------------------------------------------------------------ parameter sources


def _same_dynamics(m1, m2, rng):
    q, qd, qdd = random_state(rng, m1.n, size=5)
    np.testing.assert_allclose(dynamics.inverse_dynamics(m1, q, qd, qdd),
                               dynamics.inverse_dynamics(m2, q, qd, qdd), rtol=0, atol=0)


def _flatten(mapping, prefix=''):
    flat = {}
    for key, value in mapping.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f'{prefix}{key}.'))
        else:
            flat[prefix + key] = value
    return flat


def test_from_params_accepts_flattened_dotted_keys(rng):
    block = random_chain_params(rng, 3, 'modified', (1, 0, 0), friction=True, payload=True)
    flat = _flatten(block)
    assert 'payload.mass' in flat and 'payload' not in flat
    nested = RobotModel.from_params(block)
    dotted = RobotModel.from_params(flat)
    assert dotted.payload == nested.payload and dotted.payload.mass > 0.0
    _same_dynamics(nested, dotted, rng)


def test_to_params_rebuilds_the_same_model(rng):
    block = random_chain_params(rng, 4, 'standard', (0, 1, 1, 0), friction=True,
                                armature=True, payload=True)
    model = RobotModel.from_params(block)
    _same_dynamics(model, RobotModel.from_params(model.to_params()), rng)


def _write(tmp_path, document):
    path = tmp_path / 'robot.yaml'
    path.write_text(yaml.safe_dump(document), encoding='utf-8')
    return path


def test_from_yaml_reads_the_wildcard_block(tmp_path, rng):
    block = random_chain_params(rng, 3, 'standard', (0, 1, 0), payload=True)
    path = _write(tmp_path, {'/**': {'ros__parameters': {'joints': ['j1', 'j2', 'j3'],
                                                         'robot': block}}})
    _same_dynamics(RobotModel.from_yaml(path), RobotModel.from_params(block), rng)


@pytest.mark.parametrize('section', ['plant_simulator', '/plant_simulator'])
def test_from_yaml_node_section_overrides_wildcard_key_by_key(tmp_path, rng, section):
    block = random_chain_params(rng, 3, 'standard', (0, 1, 0), payload=True)
    heavier = [2.0 * m for m in block['mass']]
    document = {'/**': {'ros__parameters': {'robot': block}},
                section: {'ros__parameters': {'robot': {'mass': heavier,
                                                        'payload': {'mass': 9.0}}}}}
    path = _write(tmp_path, document)
    plain = RobotModel.from_yaml(path)
    node = RobotModel.from_yaml(path, 'plant_simulator')
    other = RobotModel.from_yaml(path, 'computed_torque_controller')
    np.testing.assert_array_equal(plain.mass, block['mass'])
    np.testing.assert_array_equal(other.mass, block['mass'])
    np.testing.assert_array_equal(node.mass, heavier)
    # the override replaced payload.mass only; com and inertia still come from /**
    assert node.payload.mass == 9.0
    assert node.payload.com == plain.payload.com and node.payload.inertia == plain.payload.inertia


def test_from_yaml_without_robot_block_names_the_expected_location(tmp_path):
    path = _write(tmp_path, {'/**': {'ros__parameters': {'joints': ['j1']}}})
    with pytest.raises(ValueError, match=re.escape('robot.yaml: no robot block under')):
        RobotModel.from_yaml(path)


def test_from_yaml_reads_exponent_without_dot_as_a_number(tmp_path, block):
    """PyYAML alone reads `4e-05` (no dot) as a string; rcl's parameter-file parser reads a
    double, so from_yaml must too."""
    text = yaml.safe_dump({'/**': {'ros__parameters': {'robot': block}}})
    text = re.sub(r'mass:\n(\s*)- [^\n]+\n', r'mass:\n\1- 4e-05\n', text, count=1)
    path = tmp_path / 'robot.yaml'
    path.write_text(text, encoding='utf-8')
    assert RobotModel.from_yaml(path).mass[0] == 4e-05


def test_from_yaml_quoted_number_is_refused_naming_the_key(tmp_path, block):
    """A quoted number is a string, as rcl reads it: one among numbers makes a list of
    mixed types, which rcl refuses (named with the file, line and key); a list of quoted
    numbers is a list of strings, which the model refuses naming the index."""
    text = yaml.safe_dump({'/**': {'ros__parameters': {'robot': block}}})
    one = re.sub(r'mass:\n(\s*)- [^\n]+\n', "mass:\n\\1- '4.0'\n", text, count=1)
    path = tmp_path / 'robot.yaml'
    path.write_text(one, encoding='utf-8')
    with pytest.raises(ValueError, match=r'robot\.yaml: line \d+: robot\.mass: a list of '
                                         r'mixed types'):
        RobotModel.from_yaml(path)
    every = dict(block, mass=[f'{m}' for m in block['mass']])
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': {'robot': every}}}),
                    encoding='utf-8')
    with pytest.raises(ValueError, match=r"robot\.mass\[0\]: expected a number, got "
                                         rf"'{block['mass'][0]}'"):
        RobotModel.from_yaml(path)


def test_integers_are_accepted_as_floats(block, rng):
    as_ints = dict(block, mass=[1, 2, 3], gravity=[0, 0, -10])
    as_floats = dict(block, mass=[1.0, 2.0, 3.0], gravity=[0.0, 0.0, -10.0])
    _same_dynamics(RobotModel.from_params(as_ints), RobotModel.from_params(as_floats), rng)


def test_to_params_survives_a_yaml_file_round_trip_with_tiny_values(tmp_path, rng):
    """PyYAML writes 4e-05 as `4.0e-05`, which it reads back as a float."""
    block = random_chain_params(rng, 3, 'modified', (0, 1, 0), friction=True, payload=True)
    block['viscous_friction'][0] = 4e-05
    model = RobotModel.from_params(block)
    path = _write(tmp_path, {'/**': {'ros__parameters': {'robot': model.to_params()}}})
    assert '4.0e-05' in path.read_text(encoding='utf-8')
    _same_dynamics(RobotModel.from_yaml(path), model, rng)


def test_model_arrays_are_read_only(block):
    model = RobotModel.from_params(block)
    for array in (model.a, model.mass, model.inertia, model.chain.com):
        with pytest.raises(ValueError):
            array[0] = 1.0


def test_a_model_that_has_been_used_pickles_and_gives_the_same_dynamics(block, rng):
    model = RobotModel.from_params(block)
    q, qd, qdd = rng.normal(size=(3, model.n))
    tau = dynamics.inverse_dynamics(model, q, qd, qdd)      # compiles and caches kernels
    copy = pickle.loads(pickle.dumps(model))
    np.testing.assert_allclose(dynamics.inverse_dynamics(copy, q, qd, qdd), tau, rtol=1e-12)
