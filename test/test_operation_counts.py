"""Operation counts of the generated code (codegen.operation_counts walks its AST): the
PUMA 560 inverse dynamics stays far below the papers' general recursions ([TML] Table 1:
108n − 12 = 636 multiplications at n = 6; [LEE] Table 2: 690; [ANG] (7.43): 800)."""

import math
import os
import warnings

import numpy as np
import pytest
from conftest import REPO, random_chain_params

from robot_dynamics.dynamics import codegen
from robot_dynamics import dynamics
from robot_dynamics.model import ModelWarning, RobotModel

HALF_PI = math.pi / 2.0


def puma560():
    """PUMA 560 rigid-body data as tabulated by Corke & Armstrong-Hélouvry [COR] (Corke &
    Armstrong-Hélouvry 1994), standard DH, no drive model."""
    inertia = [(0.0, 0.35, 0.0), (0.13, 0.524, 0.539), (0.066, 0.086, 0.0125),
               (1.8e-3, 1.3e-3, 1.8e-3), (0.3e-3, 0.4e-3, 0.3e-3), (0.15e-3, 0.15e-3, 0.04e-3)]
    block = {
        'dh_convention': 'standard', 'joint_types': ['revolute'] * 6,
        'a': [0.0, 0.4318, 0.0203, 0.0, 0.0, 0.0],
        'alpha': [HALF_PI, 0.0, -HALF_PI, HALF_PI, -HALF_PI, 0.0],
        'd': [0.0, 0.0, 0.15005, 0.4318, 0.0, 0.0], 'theta': [0.0] * 6,
        'mass': [0.0, 17.4, 4.8, 0.82, 0.34, 0.09],
        'com': [0.0, 0.0, 0.0, -0.3638, 0.006, 0.2275, -0.0203, -0.0141, 0.070,
                0.0, 0.019, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.032],
        'inertia': [v for ixx, iyy, izz in inertia for v in (ixx, 0.0, 0.0, iyy, 0.0, izz)],
    }
    with pytest.warns(ModelWarning):
        return RobotModel.from_params(block)


def test_counting_matches_a_hand_count():
    text = 'def f(a, b):\n    t = a * b + a - b / 2.0\n    return (t * (-1.5), -a, sin(b))\n'
    counts = codegen.operation_counts(text)
    assert counts == {'mul': 2, 'add': 2, 'div': 1, 'neg': 1, 'call': 1}


def test_pendulum_gravity_torque_is_counted_exactly():
    """One link, gravity across the joint axis. The last body's first moment h = m·c is a
    runtime input of the kernels (payload changes reuse the code), so nothing about it folds:
    τ = h_x·(g cos q) − h_y·(g sin q) is 4 multiplications, 1 subtraction, cos and sin."""
    m, l, g = 2.0, 0.3, 9.81
    model = RobotModel.from_params({
        'dh_convention': 'modified', 'joint_types': ['revolute'], 'a': [0.0],
        'alpha': [0.0], 'd': [0.0], 'theta': [0.0], 'mass': [m], 'com': [l, 0.0, 0.0],
        'inertia': [0.0] * 6, 'gravity': [0.0, -g, 0.0]})
    counts = codegen.operation_counts(codegen.source(model, 'gravity'))
    assert (counts['mul'], counts['add'], counts['div'], counts['call']) == (4, 1, 0, 2)
    np.testing.assert_allclose(dynamics.gravity_torques(model, [0.4]),
                               [m * g * l * math.cos(0.4)], rtol=1e-12)


def test_puma560_inverse_dynamics_needs_at_most_250_multiplications():
    counts = codegen.operation_counts(codegen.source(puma560(), 'rnea'))
    assert counts['mul'] <= 250
    assert counts['add'] <= 250
    assert counts['div'] == 0


def test_puma560_count_is_below_every_general_recursion_in_the_seeds():
    mul = codegen.operation_counts(codegen.source(puma560(), 'rnea'))['mul']
    n = 6
    general = {'[TML] NE': 108 * n - 12, '[TML] modified NE': 90 * n - 27,
               '[LEE] Table 2': 119 * n - 24, '[ANG] (7.43)': 137 * n - 22}
    assert all(mul < value for value in general.values()), (mul, general)


def test_generated_cost_grows_linearly_with_the_number_of_links():
    rng = np.random.default_rng(3)
    counts = {}
    for n in (9, 18, 36):
        model = RobotModel.from_params(random_chain_params(rng, n, 'standard'))
        counts[n] = {name: codegen.operation_counts(codegen.source(model, name))['mul']
                     for name in ('rnea', 'aba')}
    for name in ('rnea', 'aba'):
        per_link_short = (counts[18][name] - counts[9][name]) / 9.0
        per_link_long = (counts[36][name] - counts[18][name]) / 18.0
        assert per_link_long <= 1.05 * per_link_short, (name, counts)


def test_regrouped_parameters_need_fewer_operations(monkeypatch):
    """Regrouping the inertial parameters (codegen.regroup) pays on every arm preset: fewer
    multiplications and additions than Newton–Euler on the bodies as given."""
    models = {'puma560': puma560()}
    for name in ('panda', 'stanford', 'sasaki6'):
        models[name] = load_preset(name)
    counts = {}
    for regrouped in (True, False):
        if not regrouped:
            monkeypatch.setattr(codegen, 'regroup', lambda links: links)
        for name, model in models.items():
            model.__dict__.pop('_kernel_code', None)
            c = codegen.operation_counts(codegen.source(model, 'rnea'))
            counts[name, regrouped] = (c['mul'], c['add'])
    for name in models:
        assert counts[name, True][0] < counts[name, False][0], counts
        assert counts[name, True][1] < counts[name, False][1], counts


def load_preset(name):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        return RobotModel.from_yaml(os.path.join(REPO, 'config', f'{name}.yaml'))
