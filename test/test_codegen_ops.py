"""The operation-saving steps of the traced Newton–Euler (robot_dynamics.codegen): the body
moment from the entries of U = ω̇× + ω×ω×, the regrouping of inertial parameters (base
parameters: the Lagrangian, so every joint torque, is unchanged) and the absence of unary
negations of variables in the generated code. The kernels themselves are checked against
the reference algorithms in test_fast_paths.py."""

import ast
import math
import os
import warnings

import numpy as np
import pytest
from conftest import preset_paths, random_chain_params, random_inertia

from robot_dynamics.dynamics import codegen
from robot_dynamics.model import ModelWarning, RobotModel


def _presets():
    models = []
    for path in preset_paths():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter('ignore', ModelWarning)
                models.append(pytest.param(RobotModel.from_yaml(path),
                                           id=os.path.basename(path)))
        except ValueError:
            continue
    return models


def _random_models():
    rng = np.random.default_rng(11)
    models = []
    for convention in ('standard', 'modified'):
        for mask in ([0] * 6, [1, 0, 0, 1, 0, 1], [0, 1, 1, 0]):
            block = random_chain_params(rng, len(mask), convention, mask, payload=True)
            label = ''.join('P' if p else 'R' for p in mask)
            models.append(pytest.param(RobotModel.from_params(block),
                                       id=f'{convention}-{label}'))
    return models


MODELS = _presets() + _random_models()


def test_euler_moment_is_the_body_moment_of_newton_euler():
    rng = np.random.default_rng(0)
    for _ in range(20):
        J = random_inertia(rng, rng.uniform(0.5, 5.0))
        w, wd = rng.normal(size=3), rng.normal(size=3)
        rows = J.tolist()
        moment = codegen.euler_moment(rows, codegen.moment_differences(rows), w.tolist(),
                                      wd.tolist(), codegen.omega_matrix(w.tolist(),
                                                                        wd.tolist()))
        np.testing.assert_allclose(moment, J @ wd + np.cross(w, J @ w), rtol=1e-12,
                                   atol=1e-14)


def _rz(theta):
    c, s = math.cos(theta), math.sin(theta)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _energies(model, links, q, qd):
    """Kinetic energy and potential energy of the bodies `links` (mass, first moment and
    inertia about the body origin, body axes) moving with the chain: forward kinematics
    written out here in world coordinates, independent of the code under test."""
    ch = model.chain
    g = np.asarray(model.gravity, dtype=float)
    R, o, w, v = np.eye(3), np.zeros(3), np.zeros(3), np.zeros(3)
    kinetic = potential = 0.0
    for i, L in enumerate(links):
        prismatic = bool(ch.prismatic[i])
        theta = ch.theta0[i] + (0.0 if prismatic else q[i])
        d = ch.d0[i] + (q[i] if prismatic else 0.0)
        placement = R @ ch.R0[i]
        origin = o + R @ ch.p0[i] + placement @ np.array([0.0, 0.0, d])
        v = v + np.cross(w, origin - o) + (placement[:, 2] * qd[i] if prismatic else 0.0)
        w = w + (0.0 if prismatic else placement[:, 2] * qd[i])
        R, o = placement @ _rz(theta), origin
        wb, vb = R.T @ w, R.T @ v
        m, h, Io = float(L.m), np.array(L.h, dtype=float), np.array(L.Io, dtype=float)
        kinetic += 0.5 * m * vb @ vb + vb @ np.cross(wb, h) + 0.5 * wb @ Io @ wb
        potential -= m * g @ o + g @ (R @ h)
    return kinetic, potential


@pytest.mark.parametrize('model', MODELS)
def test_regrouping_leaves_the_lagrangian_unchanged(model):
    """Same kinetic energy in every state and the same potential energy up to a constant,
    so the same equations of motion and joint torques."""
    original = codegen.links_of(model)
    regrouped = codegen.regroup(codegen.links_of(model))
    rng = np.random.default_rng(5)
    q_ref = rng.uniform(-1.0, 1.0, model.n)
    _, potential_ref = _energies(model, original, q_ref, np.zeros(model.n))
    _, potential_ref_r = _energies(model, regrouped, q_ref, np.zeros(model.n))
    for _ in range(5):
        q, qd = rng.uniform(-2.0, 2.0, model.n), rng.uniform(-2.0, 2.0, model.n)
        kinetic, potential = _energies(model, original, q, qd)
        kinetic_r, potential_r = _energies(model, regrouped, q, qd)
        assert kinetic_r == pytest.approx(kinetic, rel=1e-10, abs=1e-12)
        assert potential_r - potential_ref_r == pytest.approx(
            potential - potential_ref, rel=1e-10, abs=1e-10)


@pytest.mark.parametrize('model', MODELS)
def test_regrouped_revolute_bodies_keep_no_mass_and_no_axial_first_moment(model):
    links = codegen.regroup(codegen.links_of(model))
    for i, L in enumerate(links[:-1]):
        if not model.chain.prismatic[i]:
            assert L.m == 0.0 and L.h[2] == 0.0 and L.c is None
        else:
            assert L.Io == [[0.0] * 3 for _ in range(3)]
    original = codegen.links_of(model)
    assert links[-1].m == original[-1].m and links[-1].Io == original[-1].Io


def _negated_expressions(text):
    return [ast.unparse(node) for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
            and not isinstance(node.operand, (ast.Constant, ast.Name))]


@pytest.mark.parametrize('model', MODELS)
def test_inverse_dynamics_code_negates_no_expression(model):
    """Signs are folded into constants or turned into subtractions (a unary minus is an
    extra operation in CPython; negative literals cost nothing at run time). What may
    remain is the negation of a shared variable that is also an output (one operation
    either way)."""
    for name in ('rnea', 'rnea_wrench', 'bias', 'gravity'):
        assert _negated_expressions(codegen.source(model, name)) == [], name
    assert '(-t' not in codegen.source(model, 'rnea')
