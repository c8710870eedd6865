"""Whole-arm identification core (robot_dynamics.arm_identification): the regressor against
inverse dynamics, base parameters against independent rank computations and a closed-form
count, parameter round trips through models and parameter files (DH and URDF), physical
consistency, the estimator on exact and on non-exciting data, the excitation's constraints.
The targets in closed-loop simulation are in test_arm_identification_targets.py."""

import functools
import math
import os
import warnings

import numpy as np
import pytest
import yaml

pytest.importorskip('scipy')

from robot_dynamics.identification import arm as ai  # noqa: E402
from robot_dynamics import dynamics  # noqa: E402
from robot_dynamics.model import ModelWarning, RobotModel, _flatten  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
UR5 = os.path.join(HERE, 'data', 'ur5.urdf')
SKEWED = os.path.join(HERE, 'data', 'skewed_arm.urdf')


def preset(name):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        return RobotModel.from_yaml(os.path.join(REPO, 'config', f'{name}.yaml'))


def urdf_model(path, **extra):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        return RobotModel.from_params({'source': 'urdf', 'urdf_file': path, **extra})


def ur5():
    return urdf_model(UR5, base_link='base_link', tip_link='tool0')


def random_chain(rng, convention, kinds):
    """A random DH chain with offsets, friction, armature and a payload."""
    n = len(kinds)
    mass = rng.uniform(0.5, 3.0, n)
    inertia = []
    for _ in range(n):
        moments = rng.uniform(0.05, 0.1, 3)      # within the triangle inequality
        inertia += [moments[0], 0.001, -0.002, moments[1], 0.0015, moments[2]]
    return RobotModel(
        convention, kinds, a=rng.uniform(-0.4, 0.4, n), alpha=rng.uniform(-2, 2, n),
        d=rng.uniform(-0.3, 0.3, n), theta=rng.uniform(-1, 1, n), mass=mass,
        com=rng.uniform(-0.2, 0.2, 3 * n), inertia=inertia,
        gravity=rng.normal(size=3) * 5.0, armature=rng.uniform(0, 0.1, n),
        viscous_friction=rng.uniform(0, 1, n), coulomb_friction=rng.uniform(0, 1, n),
        payload={'mass': 1.2, 'com': [0.01, 0.02, 0.05], 'inertia': [0.01, 0, 0, 0.02, 0, 0.015]})


def states(model, count, seed):
    rng = np.random.default_rng(seed)
    return tuple(rng.normal(size=(count, model.n)) for _ in range(3))


@functools.lru_cache(maxsize=None)
def all_models():
    rng = np.random.default_rng(7)
    models = {name: preset(name) for name in ('puma560', 'panda', 'stanford', 'planar2')}
    for convention in ('standard', 'modified'):
        models[f'random {convention} RPRPR'] = random_chain(
            rng, convention, ['revolute', 'prismatic', 'revolute', 'prismatic', 'revolute'])
    models['ur5 urdf'] = ur5()
    models['skewed urdf'] = urdf_model(SKEWED, tip_link='tool')
    return models


# ---------------------------------------------------------------------- regressor


@pytest.mark.parametrize('name', list(all_models()))
def test_regressor_times_parameters_is_inverse_dynamics(name):
    model = all_models()[name]
    q, qd, qdd = states(model, 40, 1)
    for offset in (False, True):
        Y = ai.arm_regressor(model, q, qd, qdd, offset=offset)
        phi = ai.arm_parameters(model, offset=offset)
        assert Y.shape == (40, model.n, len(ai.parameter_names(model, offset)))
        tau = dynamics.inverse_dynamics(model, q, qd, qdd)
        assert np.max(np.abs(Y @ phi - tau)) <= 1e-10 * max(1.0, np.max(np.abs(tau)))
    # one state gives (n, p), equal to the batch row
    single = ai.arm_regressor(model, q[3], qd[3], qdd[3])
    assert single.shape == (model.n, 13 * model.n)
    assert np.allclose(single, ai.arm_regressor(model, q, qd, qdd)[3], rtol=0, atol=1e-12)


def test_regressor_is_exact_for_other_parameters_of_the_same_kinematics():
    """Y depends on the kinematics only: the same Y with another model's φ gives that
    model's efforts (here a perturbed PUMA with a drive)."""
    model = preset('puma560')
    other = ai.perturbed_model(model, 0.3, seed=3, **ai.drive_terms(model))
    q, qd, qdd = states(model, 30, 2)
    Y = ai.arm_regressor(model, q, qd, qdd)
    assert np.allclose(Y @ ai.arm_parameters(other),
                       dynamics.inverse_dynamics(other, q, qd, qdd), rtol=0, atol=1e-10)


def test_urdf_with_locked_side_branch_is_exact():
    """A side joint locked at q = 0 (lumped into its body) keeps the regressor exact."""
    text = open(UR5, encoding='utf-8').read()
    branch = ('<link name="finger"><inertial><origin xyz="0.02 0 0.01"/><mass value="0.3"/>'
              '<inertia ixx="1e-3" ixy="0" ixz="0" iyy="2e-3" iyz="0" izz="1e-3"/></inertial>'
              '</link><joint name="finger_joint" type="prismatic"><parent link="wrist_2_link"/>'
              '<child link="finger"/><origin xyz="0.05 0 0"/><axis xyz="1 0 0"/>'
              '<limit lower="0" upper="0.04" effort="10" velocity="1"/></joint></robot>')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        model = RobotModel.from_params({'source': 'urdf', 'urdf': text.replace('</robot>', branch),
                                        'base_link': 'base_link', 'tip_link': 'tool0',
                                        'lock_side_joints': True})
    plain = ur5()
    assert not np.allclose(model.chain.mass, plain.chain.mass)      # the branch is there
    q, qd, qdd = states(model, 20, 4)
    Y = ai.arm_regressor(model, q, qd, qdd)
    assert np.allclose(Y @ ai.arm_parameters(model), dynamics.inverse_dynamics(model, q, qd, qdd),
                       rtol=0, atol=1e-10)


def test_parameter_names_and_joint_columns():
    model = preset('planar2')
    names = ai.parameter_names(model, offset=True)
    assert names[:14] == ['link1.m', 'link1.m*c_x', 'link1.m*c_y', 'link1.m*c_z', 'link1.I_xx',
                          'link1.I_xy', 'link1.I_xz', 'link1.I_yy', 'link1.I_yz', 'link1.I_zz',
                          'joint1.armature', 'joint1.viscous', 'joint1.coulomb', 'joint1.offset']
    q, qd, qdd = np.array([0.3, -0.2]), np.array([0.5, -2.0]), np.array([1.5, 0.7])
    Y = ai.arm_regressor(model, q, qd, qdd, offset=True)
    column = {name: Y[:, k] for k, name in enumerate(names)}
    assert np.array_equal(column['joint2.armature'], [0.0, 0.7])
    assert np.array_equal(column['joint2.viscous'], [0.0, -2.0])
    assert np.array_equal(column['joint2.coulomb'], [0.0, -1.0])     # sign(q̇), exactly
    assert np.array_equal(column['joint1.offset'], [1.0, 0.0])


# ---------------------------------------------------------------------- base parameters


def independent_rank(model, columns, seed):
    """Numerical rank of the regressor's `columns` stacked at other random states than
    base_parameters uses, by singular values (not the greedy QR of the code)."""
    q, qd, qdd = states(model, 300, seed)
    Y = ai.arm_regressor(model, q, qd, qdd).reshape(-1, 13 * model.n)[:, columns]
    norms = np.linalg.norm(Y, axis=0)
    Y = Y[:, norms > 1e-9 * norms.max()] / norms[norms > 1e-9 * norms.max()]
    singular = np.linalg.svd(Y, compute_uv=False)
    return int(np.sum(singular > 1e-9 * singular[0]))


@pytest.mark.parametrize('name', ['puma560', 'panda', 'stanford', 'ur5 urdf',
                                  'random modified RPRPR'])
def test_base_parameter_count_matches_an_independent_rank(name):
    model = all_models()[name]
    base = ai.base_parameters(model)
    assert base.rank == independent_rank(model, slice(None), seed=11)
    # Y φ = Y_b β at fresh states, for the model's own φ and another one
    q, qd, qdd = states(model, 25, 12)
    Y = ai.arm_regressor(model, q, qd, qdd)
    for phi in (ai.arm_parameters(model), np.random.default_rng(0).normal(size=Y.shape[-1])):
        assert np.allclose(base.regressor(Y) @ base.values(phi), Y @ phi, rtol=0,
                           atol=1e-8 * max(1.0, np.max(np.abs(Y @ phi))))


def test_base_parameters_of_a_planar_two_link_arm_match_the_closed_form():
    """Planar 2R (standard DH, both axes parallel): by hand, the rigid-body efforts depend
    on link 1 only through ZZ1 + m2 a1² (+ armature 1, which multiplies q̈1 alone like it),
    m1 c1x + m2 a1 and m1 c1y, and on link 2 through ZZ2, m2 c2x, m2 c2y: 6 inertial base
    parameters; armature 2 is separate (it multiplies q̈2 in joint 2 only), and each joint
    has a viscous and a Coulomb term: 6 + 1 + 4 = 11."""
    model = preset('planar2')
    base = ai.base_parameters(model)
    assert base.rank == 11
    names = set(base.base_names)
    assert {'joint2.armature', 'joint1.viscous', 'joint1.coulomb', 'joint2.viscous',
            'joint2.coulomb'} <= names
    assert 'joint1.armature' not in names      # grouped with link 1's I_zz


def test_describe_names_the_regrouped_parameters_with_geometric_coefficients():
    """PUMA 560 (standard DH, a2 = 0.4318 m): link 2's first moment along x absorbs the
    masses of links 3..6 times a2 (their joint-3 origin lies a2 along x of link frame 2's
    predecessor), so one line of the description holds them with coefficient 0.4318."""
    model = preset('puma560')
    text = ai.base_parameters(model).describe()
    lines = text.splitlines()
    assert len(lines) == ai.base_parameters(model).rank
    line = next(line for line in lines if line.split('= ')[1].startswith('link 2: m*c_x'))
    for k in (3, 4, 5, 6):
        assert f'0.4318·link{k}.m' in line
    # every line names a link or a joint and only known parameters
    known = set(ai.parameter_names(model))
    for line in lines:
        assert ': ' in line and (' link ' in line or ' joint ' in line)
        for token in line.split(': ', 1)[1].split():
            token = token.split('·')[-1]
            if '.' in token and token[0].isalpha():
                assert token in known


# ---------------------------------------------------------------------- models, files


@pytest.mark.parametrize('name', ['puma560', 'panda', 'stanford', 'ur5 urdf',
                                  'random standard RPRPR'])
def test_model_with_parameters_round_trip(name):
    model = all_models()[name]
    other = ai.perturbed_model(model, 0.3, seed=5, armature=0.02, viscous=0.3, coulomb=0.2)
    phi = ai.arm_parameters(other)
    rebuilt = ai.model_with_parameters(model, phi)
    assert np.allclose(ai.arm_parameters(rebuilt), phi, rtol=1e-12, atol=1e-12)
    assert rebuilt.payload == model.payload and rebuilt.source == model.source
    q, qd, qdd = states(model, 20, 6)
    assert np.allclose(dynamics.inverse_dynamics(rebuilt, q, qd, qdd),
                       dynamics.inverse_dynamics(other, q, qd, qdd), rtol=0, atol=1e-10)


def merged_block(robot_file, overrides_file):
    """The robot block two parameter files give a node, later file winning key by key
    (rcl merges parameter files per parameter name, the flattened key)."""
    block = {}
    for path in (robot_file, overrides_file):
        with open(path, encoding='utf-8') as stream:
            document = yaml.safe_load(stream)
        block.update(_flatten(document['/**']['ros__parameters']['robot']))
    return block


@pytest.mark.parametrize('source', ['dh', 'urdf'])
def test_overrides_file_layered_on_the_robot_file_rebuilds_the_model(tmp_path, source):
    if source == 'dh':
        robot_file = os.path.join(REPO, 'config', 'panda.yaml')
        model = preset('panda')
    else:
        robot_file = tmp_path / 'ur5.yaml'
        robot_file.write_text(yaml.safe_dump({'/**': {'ros__parameters': {'robot': {
            'source': 'urdf', 'urdf_file': UR5, 'base_link': 'base_link',
            'tip_link': 'tool0'}}}}))
        model = ur5()
    identified = ai.perturbed_model(model, 0.3, seed=8, **ai.drive_terms(model))
    overrides = ai.robot_params_overrides(identified)
    path = tmp_path / 'identified.yaml'
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': {'robot': overrides}}}))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        loaded = RobotModel.from_params(merged_block(robot_file, path))
    q, qd, qdd = states(model, 30, 9)
    expected = dynamics.inverse_dynamics(identified, q, qd, qdd)
    assert np.allclose(dynamics.inverse_dynamics(loaded, q, qd, qdd), expected, rtol=0,
                       atol=1e-9)
    assert not np.allclose(dynamics.inverse_dynamics(model, q, qd, qdd), expected, atol=1e-3)
    assert np.allclose(loaded.armature, identified.armature)
    assert np.allclose(loaded.coulomb_friction, identified.coulomb_friction)
    # rcl reads YAML 1.2: every number in the file is a float, never a string; the
    # friction law of every joint is named
    written = _flatten(yaml.safe_load(path.read_text())['/**']['ros__parameters'])
    assert written.pop('robot.friction_model') == ['coulomb'] * model.n
    for value in written.values():
        assert all(isinstance(v, float) for v in value)


@pytest.mark.parametrize('inertials, field', [
    ({'mass': [1.0] * 5, 'com': [0.0] * 18, 'inertia': [0.1] * 36}, 'robot.inertials.mass'),
    ({'mass': [1.0] * 6, 'com': [0.0] * 18}, 'robot.inertials.inertia'),
    ({'mass': [1.0] * 6, 'com': [0.0] * 17 + ['x'], 'inertia': [0.1] * 36},
     'robot.inertials.com[17]'),
    ({'mass': [1.0] * 5 + [-1.0], 'com': [0.0] * 18, 'inertia': [0.1] * 36},
     'robot.inertials.mass[5]'),
    ({'mass': [1.0] * 6, 'com': [0.0] * 18, 'inertia': [0.1] * 36, 'density': 1.0},
     'robot.inertials.density'),
    ('heavy', 'robot.inertials'),
])
def test_urdf_inertials_override_is_validated_naming_the_field(inertials, field):
    with pytest.raises(ValueError, match=field.replace('[', r'\[').replace(']', r'\]')):
        urdf_model(UR5, base_link='base_link', tip_link='tool0', inertials=inertials)


def test_dh_model_refuses_the_urdf_inertials_key():
    block = preset('planar2').to_params()
    block['inertials'] = {'mass': [1.0, 1.0], 'com': [0.0] * 6, 'inertia': [0.1] * 12}
    with pytest.raises(ValueError, match='robot.inertials'):
        RobotModel.from_params(block)


# ---------------------------------------------------------------------- consistency


def test_physical_consistency_issues_find_each_violation():
    model = preset('panda')
    assert ai.physical_consistency_issues(model) == []
    phi = ai.arm_parameters(model)
    k = 13
    bad = phi.copy()
    bad[2 * k] = -0.5                          # link 3 negative mass
    bad[4 * k + 10] = -0.01                    # joint 5 negative armature
    issues = ai.physical_consistency_issues(bad, model.n)
    assert any(i.startswith('link 3') for i in issues)
    assert any(i.startswith('joint 5') and 'armature' in i for i in issues)
    # triangle inequality: link 1 with I_zz > I_xx + I_yy about its centre of mass
    mass, com = 2.0, np.zeros(3)
    flat = np.zeros(10)
    flat[0] = mass
    flat[4:] = [0.01, 0.0, 0.0, 0.01, 0.0, 0.03]
    tri = phi.copy()
    tri[:10] = flat
    assert any(i.startswith('link 1') for i in ai.physical_consistency_issues(tri, model.n))
    # the textbook PUMA 560 (links 1 and 3 non-physical on purpose) is flagged
    puma = ai.physical_consistency_issues(preset('puma560'))
    assert any(i.startswith('link 1') for i in puma) and any(i.startswith('link 3') for i in puma)


# ---------------------------------------------------------------------- estimator


def open_loop_data(model, excitation, rate, noise=None, seed=0):
    """Efforts of `model` along an excitation, sampled at `rate` (no controller)."""
    t = np.arange(int(round(excitation.duration * rate)) + 1) / rate
    q, qd, qdd = excitation.sample(t)
    tau = dynamics.inverse_dynamics(model, q, qd, qdd)
    if noise:
        rng = np.random.default_rng(seed)
        q = q + rng.normal(0, noise[0], q.shape)
        qd = qd + rng.normal(0, noise[1], qd.shape)
        tau = tau + rng.normal(size=tau.shape) * noise[2] * np.sqrt(np.mean(tau ** 2, axis=0))
    return t, q, qd, tau


@pytest.fixture(scope='module')
def panda_case():
    prior = preset('panda')
    true = ai.perturbed_model(prior, 0.3, seed=2, **ai.drive_terms(prior))
    excitation = ai.optimal_excitation(prior, 20.0, [0, -0.3, 0, -2.2, 0, 2.0, 0.8], seed=0,
                                       iterations=3)
    return prior, true, excitation


def test_identify_arm_recovers_the_base_parameters_from_exact_data(panda_case):
    prior, true, excitation = panda_case
    result = ai.identify_arm(prior, *open_loop_data(true, excitation, 200.0))
    base = result.base
    beta_true = base.values(ai.arm_parameters(true))
    # the base parameters are what the data determine; compare their torque effect
    q, qd, qdd = excitation.sample(np.linspace(0, excitation.duration, 400))
    Yb = base.regressor(ai.arm_regressor(prior, q, qd, qdd))
    scale = np.sqrt(np.mean((Yb @ beta_true) ** 2, axis=0))
    error = np.sqrt(np.mean((Yb @ (result.beta - beta_true)) ** 2, axis=0)) / scale
    assert np.all(error < 5e-4), error
    assert result.excited and result.not_excited == []
    assert result.consistency == [] and ai.physical_consistency_issues(result.model) == []
    assert math.isfinite(result.condition_number) and result.condition_number > 1.0
    assert result.samples > 1000 and result.rows <= result.samples * prior.n
    assert set(result.timing) >= {'filter', 'regressor and normal equations',
                                  'semidefinite program'}
    # the identified model predicts the true efforts on a motion it did not see
    other = ai.optimal_excitation(prior, 10.0, excitation.q0, seed=9, iterations=0)
    t, q, qd, tau = open_loop_data(true, other, 200.0)
    _, relative = ai.validation_errors(result.model, t, q, qd, tau)
    _, relative_prior = ai.validation_errors(prior, t, q, qd, tau)
    assert np.all(relative < 2e-3) and np.all(relative_prior > 5 * relative)


def test_identify_arm_with_offsets_and_noise(panda_case):
    prior, true, excitation = panda_case
    data = open_loop_data(true, excitation, 500.0, noise=(1e-3, 0.01, 0.01), seed=3)
    offsets = np.linspace(-0.5, 0.5, prior.n)
    t, q, qd, tau = data
    result = ai.identify_arm(prior, t, q, qd, tau + offsets, offset=True)
    assert len(result.phi) == 14 * prior.n
    # each offset within 1 % of its joint's RMS effort (an offset competes with the
    # gravity and Coulomb terms of the same joint)
    rms = np.sqrt(np.mean(tau ** 2, axis=0))
    assert np.all(np.abs(result.phi[13::14] - offsets) < 0.01 * rms)
    assert result.consistency == []


def _base_torque_error(result, true, excitation):
    """Per joint RMS torque error of the identified base parameters on the excitation,
    relative to the true efforts."""
    q, qd, qdd = excitation.sample(np.linspace(0, excitation.duration, 400))
    Yb = result.base.regressor(ai.arm_regressor(true, q, qd, qdd))
    beta_true = result.base.values(ai.arm_parameters(true))
    scale = np.sqrt(np.mean((Yb @ beta_true) ** 2, axis=0))
    return np.sqrt(np.mean((Yb @ (result.beta - beta_true)) ** 2, axis=0)) / scale


@pytest.mark.parametrize('noisy', ['velocity', 'position'])
def test_identify_arm_takes_the_accelerations_from_the_better_sensor(panda_case, noisy):
    """Noisy velocities and fine encoders: q̈ from the positions; coarse encoders (2^10
    counts per turn) and clean velocities: q̈ from the velocities. The automatic choice
    is the one that identifies the arm better, and each source's fit is reported."""
    prior, true, excitation = panda_case
    t, q, qd, tau = open_loop_data(true, excitation, 500.0)
    rng = np.random.default_rng(4)
    if noisy == 'velocity':
        qd = qd + rng.normal(0.0, 0.05, qd.shape)
    else:
        resolution = 2.0 * math.pi / 2 ** 10
        q = np.round(q / resolution) * resolution
    result = ai.identify_arm(prior, t, q, qd, tau)
    other = 'position' if noisy == 'velocity' else 'velocity'
    assert result.accelerations == other, result.acceleration_fit
    assert set(result.acceleration_fit) == {'velocity', 'position'}
    assert result.acceleration_fit[other] < 0.5 * result.acceleration_fit[noisy]
    forced = ai.identify_arm(prior, t, q, qd, tau, accelerations=noisy)
    assert forced.accelerations == noisy and forced.acceleration_fit == {}
    chosen_error = _base_torque_error(result, true, excitation)
    forced_error = _base_torque_error(forced, true, excitation)
    assert np.mean(chosen_error) < 0.5 * np.mean(forced_error), (chosen_error, forced_error)
    # the validation errors, prepared the same way, tell the same
    held = ai.optimal_excitation(prior, 8.0, excitation.q0, seed=9, iterations=0)
    vt, vq, vqd, vtau = open_loop_data(true, held, 500.0)
    if noisy == 'velocity':
        vqd = vqd + rng.normal(0.0, 0.05, vqd.shape)
    else:
        vq = np.round(vq / resolution) * resolution
    chosen = ai.validation_errors(result.model, vt, vq, vqd, vtau, accelerations=other)[1]
    worse = ai.validation_errors(result.model, vt, vq, vqd, vtau, accelerations=noisy)[1]
    assert np.mean(chosen) < np.mean(worse)


@pytest.mark.parametrize('absent', ['None', 'NaN'])
def test_identify_arm_without_recorded_velocities_uses_the_positions(panda_case, absent):
    """A recording of positions and efforts only (q̇ None, or every value NaN as a reader
    fills a missing field): q̇ and q̈ from the positions, the arm identified as well as
    with them; asking for the velocities is refused in one line."""
    prior, true, excitation = panda_case
    t, q, qd, tau = open_loop_data(true, excitation, 500.0)
    missing = None if absent == 'None' else np.full_like(qd, np.nan)
    result = ai.identify_arm(prior, t, q, missing, tau)
    assert not result.velocities_recorded and result.accelerations == 'position'
    assert result.acceleration_fit == {}
    assert np.all(_base_torque_error(result, true, excitation) < 2e-3)
    _, relative = ai.validation_errors(result.model, t, q, missing, tau,
                                       accelerations='position')
    assert np.all(relative < 2e-3), relative
    with pytest.raises(ai.RecordingError, match='^accelerations: velocity .* no velocities'):
        ai.identify_arm(prior, t, q, missing, tau, accelerations='velocity')
    # NaN in some velocities only is bad data, not a missing field
    partly = qd.copy()
    partly[10, 2] = np.nan
    with pytest.raises(ValueError, match='^qd: non-finite'):
        ai.identify_arm(prior, t, q, partly, tau)


def test_identify_arm_refuses_an_unknown_acceleration_source(panda_case):
    prior, true, excitation = panda_case
    with pytest.raises(ValueError, match='^accelerations:'):
        ai.identify_arm(prior, *open_loop_data(true, excitation, 100.0),
                        accelerations='encoder')


def test_identify_arm_lists_what_data_that_do_not_excite_leave_undetermined(panda_case):
    prior, true, excitation = panda_case
    t, q, qd, tau = open_loop_data(true, excitation, 200.0)
    # only joint 1 moves; the others hold their start position
    frozen = q.copy()
    frozen[:, 1:] = excitation.q0[1:]
    qd_frozen = qd.copy()
    qd_frozen[:, 1:] = 0.0
    tau1 = dynamics.inverse_dynamics(true, frozen, qd_frozen, np.gradient(qd_frozen, t, axis=0))
    result = ai.identify_arm(prior, t, frozen, qd_frozen, tau1)
    assert not result.excited
    for j in range(2, prior.n + 1):
        assert any(entry.startswith(f'joint{j} ') for entry in result.not_excited)
    assert result.consistency == []        # still a physically consistent set (the prior's)
    # holding still: nothing moves
    still = ai.identify_arm(prior, t, np.tile(excitation.q0, (t.size, 1)), np.zeros_like(q),
                            np.tile(dynamics.gravity_torques(true, excitation.q0), (t.size, 1)))
    assert len([e for e in still.not_excited if e.startswith('joint')]) >= prior.n


@pytest.mark.parametrize('field, bad', [('q', 'shape'), ('tau', 'nan')])
def test_identify_arm_refuses_bad_arrays_naming_them(field, bad):
    model = preset('planar2')
    t = np.arange(500) * 0.01
    arrays = {'q': np.zeros((500, 2)), 'qd': np.zeros((500, 2)), 'tau': np.zeros((500, 2))}
    arrays[field] = np.zeros((500, 3)) if bad == 'shape' else np.full((500, 2), np.nan)
    with pytest.raises(ValueError, match=f'^{field}:'):
        ai.identify_arm(model, t, arrays['q'], arrays['qd'], arrays['tau'])


# ---------------------------------------------------------------------- excitation


def test_optimal_excitation_respects_rest_limits_and_improves_the_condition():
    model = preset('panda')
    q0 = np.array([0.5, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
    plain = ai.optimal_excitation(model, 20.0, q0, seed=4, iterations=0)
    tuned = ai.optimal_excitation(model, 20.0, q0, seed=4, iterations=5)
    assert tuned.condition <= plain.condition
    limits = tuned.limits
    t = np.linspace(0.0, tuned.duration, 20001)
    q, qd, qdd = tuned.sample(t)
    assert np.allclose(q[0], q0) and np.allclose(q[-1], q0, atol=1e-9)
    for edge in (0, -1):
        assert np.allclose(qd[edge], 0.0, atol=1e-9) and np.allclose(qdd[edge], 0.0, atol=1e-9)
    assert np.all(q >= limits['position_min'] - 1e-9) and np.all(q <= limits['position_max'] + 1e-9)
    assert np.all(limits['position_min'] > model.position_min)
    assert np.all(np.abs(qd) <= limits['velocity'] * (1 + 1e-3))
    assert np.all(limits['velocity'] < model.velocity_max)
    assert np.all(np.abs(qdd) <= limits['acceleration'] * (1 + 1e-3))
    assert np.all(np.max(np.abs(q - q0), axis=0) > 0.05)          # every joint moves
    times, positions, velocities, accelerations = tuned.points(0.1)
    assert times[0] == 0.0 and math.isclose(times[-1], tuned.duration)
    assert positions.shape == velocities.shape == accelerations.shape == (times.size, 7)
    assert np.allclose(positions, tuned.sample(times)[0])
    assert 'condition' in repr(tuned)


def test_optimal_excitation_refuses_a_start_outside_the_limits():
    model = preset('panda')
    q0 = np.array([0.0, -0.3, 0.0, 0.5, 0.0, 2.0, 0.8])     # joint 4 above its -0.0698 max
    with pytest.raises(ValueError, match=r'q0\[3\]'):
        ai.optimal_excitation(model, 10.0, q0, iterations=0)


def test_perturbed_model_is_physical_and_different():
    model = preset('panda')
    plant = ai.perturbed_model(model, 0.3, seed=1, **ai.drive_terms(model))
    assert ai.physical_consistency_issues(plant) == []
    ratio = plant.mass / model.mass
    assert np.all((ratio >= 0.7 - 1e-12) & (ratio <= 1.3 + 1e-12)) and np.ptp(ratio) > 0.1
    assert np.all(plant.armature > 0) and np.all(plant.coulomb_friction > 0)


def test_held_efforts_are_paired_with_their_interval():
    """Efforts held over a sample period (zero-order hold): with 'held_after' the estimate
    uses the interval's mean state and acceleration and is exact to the filter; pairing the
    same data as 'instant' efforts (half a sample off) or 'held_before' is measurably worse."""
    model = preset('planar2')
    true = ai.perturbed_model(model, 0.3, seed=4, armature=0.05, viscous=0.2, coulomb=0.3)
    excitation = ai.optimal_excitation(model, 20.0, [0.3, -0.4], seed=2, iterations=0)
    rate = 100.0
    t = np.arange(int(20.0 * rate) + 1) / rate
    # a piecewise-constant effort sequence and the motion it produces (fine RK4 steps)
    from robot_dynamics.simulation.integration import rk4_step
    q, qd = excitation.sample(0.0)[:2]
    qs, qds, taus = [], [], []
    for k in range(t.size):
        q_d, qd_d, qdd_d = excitation.sample(t[k])
        tau = dynamics.inverse_dynamics(true, q, qd, qdd_d + 400 * (q_d - q) + 40 * (qd_d - qd))
        qs.append(q), qds.append(qd), taus.append(tau)
        for _ in range(10):
            q, qd = rk4_step(true, q, qd, tau, 0.1 / rate)
    data = (t, np.array(qs), np.array(qds), np.array(taus))
    errors = {}
    for timing in ai.EFFORT_TIMINGS:
        result = ai.identify_arm(model, *data, effort_timing=timing, cutoff_frequency=5.0,
                                 sample_rate=50.0)
        other = ai.optimal_excitation(model, 10.0, [0.3, -0.4], seed=8, iterations=0)
        grid = np.linspace(0, 10, 2001)
        q_v, qd_v, qdd_v = other.sample(grid)
        tau_v = dynamics.inverse_dynamics(true, q_v, qd_v, qdd_v)
        error = dynamics.inverse_dynamics(result.model, q_v, qd_v, qdd_v) - tau_v
        errors[timing] = np.max(np.sqrt(np.mean(error ** 2, axis=0))
                                / np.sqrt(np.mean(tau_v ** 2, axis=0)))
    assert errors['held_after'] < 2e-3
    assert errors['instant'] > 2 * errors['held_after']
    assert errors['held_before'] > 1.3 * errors['instant']
    with pytest.raises(ValueError, match='effort_timing'):
        ai.identify_arm(model, *data, effort_timing='late')


def test_several_recordings_are_filtered_separately(panda_case):
    """Two recordings given as lists (the second starting later, after a pause) give the
    estimate of their concatenation without differentiating across the gap."""
    prior, true, excitation = panda_case
    t, q, qd, tau = open_loop_data(true, excitation, 200.0)
    half = t.size // 2
    parts = ([t[:half], t[half:] + 100.0], [q[:half], q[half:]], [qd[:half], qd[half:]],
             [tau[:half], tau[half:]])
    result = ai.identify_arm(prior, *parts)
    assert result.raw_samples == t.size
    whole = ai.identify_arm(prior, t, q, qd, tau)
    _, relative = ai.validation_errors(result.model, t, q, qd, tau)
    _, relative_whole = ai.validation_errors(whole.model, t, q, qd, tau)
    assert np.all(relative < 0.01) and np.all(relative <= 1.5 * relative_whole + 1e-3)
