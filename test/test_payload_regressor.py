"""The payload regressor Y: τ(with payload) = τ(without) + Y π, for every kind of chain."""

import os
import warnings

import numpy as np
import pytest

from conftest import REPO, random_chain_params, random_inertia, random_state, urdf6
from robot_dynamics.dynamics import algorithms
from robot_dynamics import dynamics
from robot_dynamics.identification import (payload_from_parameters, payload_parameters,
                                           payload_regressor)
from robot_dynamics.model import ModelWarning, RobotModel
from robot_dynamics.model.urdf import model_from_urdf


def load(name):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        return RobotModel.from_yaml(os.path.join(REPO, 'config', name))


def urdf_model(name, **options):
    with open(os.path.join(REPO, 'test', 'data', name), encoding='utf-8') as stream:
        return model_from_urdf(stream.read(), **options)


def random_payload(rng):
    mass = float(rng.uniform(0.5, 4.0))
    return dict(mass=mass, com=rng.uniform(-0.15, 0.15, size=3).tolist(),
                inertia=urdf6(random_inertia(rng, mass)))


def build_model(name, rng):
    """Both DH conventions, revolute and prismatic joints, friction and armature, the
    presets and the URDF test models."""
    builders = {
        'standard_RPR': lambda: RobotModel.from_params(random_chain_params(
            rng, 3, 'standard', [False, True, False], friction=True, armature=True)),
        'modified_PRRP': lambda: RobotModel.from_params(random_chain_params(
            rng, 4, 'modified', [True, False, False, True], friction=True)),
        'modified_last_prismatic': lambda: RobotModel.from_params(random_chain_params(
            rng, 3, 'modified', [False, False, True])),
        'puma560': lambda: load('puma560.yaml'),
        'panda': lambda: load('panda.yaml'),
        'stanford': lambda: load('stanford.yaml'),
        'ur5_urdf': lambda: urdf_model('ur5.urdf', tip_link='tool0'),
        'skewed_urdf': lambda: urdf_model('skewed_arm.urdf', tip_link='tool'),
    }
    return builders[name]()


MODEL_NAMES = ['standard_RPR', 'modified_PRRP', 'modified_last_prismatic', 'puma560',
               'panda', 'stanford', 'ur5_urdf', 'skewed_urdf']


@pytest.mark.parametrize('name', MODEL_NAMES)
def test_regressor_times_parameters_is_the_payload_effort(rng, dynamics_backend, name):
    """The contract on every backend (generated kernels and the reference recursion)."""
    model = build_model(name, rng)
    q, qd, qdd = random_state(rng, model.n, size=6)
    for _ in range(3):
        payload = random_payload(rng)
        pi = payload_parameters(**payload)
        loaded = model.with_payload(**payload)
        for k in range(q.shape[0]):
            expected = dynamics.inverse_dynamics(loaded, q[k], qd[k], qdd[k]) \
                - dynamics.inverse_dynamics(model.with_payload(), q[k], qd[k], qdd[k])
            got = payload_regressor(model, q[k], qd[k], qdd[k]) @ pi
            np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize('name', MODEL_NAMES)
def test_regressor_columns_are_finite_differences_in_the_parameters(rng, name):
    """Column j of Y = ∂τ/∂π_j, by central differences of inverse_dynamics around a
    payload (τ is linear in π, so the differences are exact up to rounding)."""
    model = build_model(name, rng)
    q, qd, qdd = random_state(rng, model.n)
    pi0 = payload_parameters(**random_payload(rng))
    step = 1e-3
    Y = payload_regressor(model, q, qd, qdd)
    for j in range(10):
        taus = []
        for sign in (1.0, -1.0):
            pi = pi0.copy()
            pi[j] += sign * step
            mass, com, inertia = payload_from_parameters(pi)
            with warnings.catch_warnings():
                warnings.simplefilter('ignore', ModelWarning)
                loaded = model.with_payload(mass=mass, com=com, inertia=inertia)
            taus.append(dynamics.inverse_dynamics(loaded, q, qd, qdd))
        column = (taus[0] - taus[1]) / (2.0 * step)
        np.testing.assert_allclose(Y[:, j], column, rtol=1e-6, atol=1e-7,
                                   err_msg=f'column {j}')


def test_regressor_matches_the_reference_recursion_on_a_unit_body(rng):
    """Y π for the payload alone equals the reference RNEA (`algorithms.rnea`) of a chain
    whose only mass is that payload, merged into the last body by hand."""
    model = RobotModel.from_params(random_chain_params(rng, 4, 'standard',
                                                       [False, True, False, False]))
    q, qd, qdd = random_state(rng, model.n, size=5)
    payload = random_payload(rng)
    ch = model.chain
    mass = np.zeros(model.n)
    com = np.zeros((model.n, 3))
    inertia = np.zeros((model.n, 3, 3))
    mass[-1] = payload['mass']
    com[-1] = ch.p_tip + ch.R_tip @ np.asarray(payload['com'])
    inertia[-1] = ch.R_tip @ np.array(
        [[payload['inertia'][0], payload['inertia'][1], payload['inertia'][2]],
         [payload['inertia'][1], payload['inertia'][3], payload['inertia'][4]],
         [payload['inertia'][2], payload['inertia'][4], payload['inertia'][5]]]) @ ch.R_tip.T
    bare = type(ch)(**{**ch.__dict__, 'mass': mass, 'com': com, 'inertia': inertia})
    expected = algorithms.rnea(bare, q, qd, qdd, model.gravity)
    got = payload_regressor(model, q, qd, qdd) @ payload_parameters(**payload)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_batch_regressor_equals_the_single_state_ones(rng):
    model = load('panda.yaml')
    q, qd, qdd = random_state(rng, model.n, size=7)
    batch = payload_regressor(model, q, qd, qdd)
    assert batch.shape == (7, model.n, 10)
    for k in range(7):
        single = payload_regressor(model, q[k], qd[k], qdd[k])
        assert single.shape == (model.n, 10)
        np.testing.assert_allclose(batch[k], single, rtol=0.0, atol=1e-13)


def test_regressor_ignores_masses_friction_armature_and_payload(rng):
    """Y depends only on the kinematics and gravity."""
    block = random_chain_params(rng, 5, 'modified', [False, False, True, False, False])
    plain = RobotModel.from_params(block)
    heavy = RobotModel.from_params(random_chain_params(
        np.random.default_rng(1), 5, 'modified', [False, False, True, False, False],
        friction=True, armature=True, payload=True) | {
            key: block[key] for key in ('a', 'alpha', 'd', 'theta', 'gravity')})
    q, qd, qdd = random_state(rng, 5, size=4)
    np.testing.assert_allclose(payload_regressor(heavy, q, qd, qdd),
                               payload_regressor(plain, q, qd, qdd), rtol=0.0, atol=1e-12)


def test_regressor_identifies_the_models_own_last_link(rng):
    """A model with a massless last link plus the link's parameters as a payload is the
    original model: the regressor of the last link is the payload regressor."""
    block = random_chain_params(rng, 4, 'standard')
    model = RobotModel.from_params(block)
    link = dict(mass=block['mass'][-1], com=block['com'][-3:], inertia=block['inertia'][-6:])
    stripped = RobotModel.from_params(block | {
        'mass': block['mass'][:-1] + [0.0], 'inertia': block['inertia'][:-6] + [0.0] * 6})
    q, qd, qdd = random_state(rng, 4, size=3)
    expected = dynamics.inverse_dynamics(model, q, qd, qdd) \
        - dynamics.inverse_dynamics(stripped, q, qd, qdd)
    got = payload_regressor(model, q, qd, qdd) @ payload_parameters(**link)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_parameters_round_trip_and_parallel_axis(rng):
    payload = random_payload(rng)
    pi = payload_parameters(**payload)
    assert pi[0] == payload['mass']
    np.testing.assert_allclose(pi[1:4], payload['mass'] * np.asarray(payload['com']))
    c = np.asarray(payload['com'])
    # I_xx about the origin = I_xx about the com + m (c_y² + c_z²); I_xy gets − m c_x c_y
    assert pi[4] == pytest.approx(payload['inertia'][0] + payload['mass'] * (c[1]**2 + c[2]**2))
    assert pi[5] == pytest.approx(payload['inertia'][1] - payload['mass'] * c[0] * c[1])
    mass, com, inertia = payload_from_parameters(pi)
    assert mass == pytest.approx(payload['mass'])
    np.testing.assert_allclose(com, payload['com'], atol=1e-14)
    np.testing.assert_allclose(inertia, payload['inertia'], atol=1e-14)


def test_regressor_rejects_mismatched_shapes():
    model = load('puma560.yaml')
    with pytest.raises(ValueError, match='qd'):
        payload_regressor(model, np.zeros(6), np.zeros(5), np.zeros(6))
