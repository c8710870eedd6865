"""Long chains: the generated kernels are cut into chunk functions (codegen.emit) so that no
bytecode operand needs an EXTENDED_ARG prefix; the chunked code gives the reference
algorithms' results to 1e-9 relative for every kernel, on one state and in array mode
(batches), with a payload set by `with_payload`, and the very same floats as the flat code."""

import dis
import math

import numpy as np
import pytest
from conftest import assert_same, both, random_chain_params, random_state, with_backend

from robot_dynamics.dynamics import codegen
from robot_dynamics import dynamics
from robot_dynamics.simulation import integration
from robot_dynamics.model import RobotModel

N = 40
MASK = [i % 5 == 2 for i in range(N)]                  # prismatic joints mixed in


def long_chain(convention, seed=40):
    rng = np.random.default_rng(seed)
    return RobotModel.from_params(random_chain_params(rng, N, convention, MASK, friction=True,
                                                      armature=True, payload=True))


@pytest.fixture(scope='module', params=['standard', 'modified'])
def models(request):
    """A long chain and a copy with another payload (sharing the compiled code)."""
    model = long_chain(request.param)
    return model, model.with_payload(mass=1.3, com=(0.02, -0.04, 0.06),
                                     inertia=[0.005, 0.0002, -0.0003, 0.004, 0.0001, 0.006])


def is_chunked(model, name):
    return '\ndef _' in codegen.source(model, name)


def test_the_kernels_of_a_long_chain_are_chunked(models):
    """(gravity, the smallest kernel, stays one flat function at 40 links)"""
    model, _ = models
    for name in ('rnea', 'rnea_wrench', 'bias', 'aba', 'aba_wrench'):
        assert is_chunked(model, name), name


@pytest.mark.parametrize('length', [N - 1, N + 1])
def test_a_chunked_kernel_rejects_a_sequence_of_the_wrong_length(models, length):
    """The chunks slice their inputs (``q[3:9]``), so the kernel checks the lengths
    itself; through the public functions the general path then names the field."""
    model, _ = models
    good = [0.1] * N
    for name in ('rnea', 'aba'):
        fn = codegen.kernel(model, name)
        for position in range(3):
            args = [good, good, good]
            args[position] = [0.1] * length
            with pytest.raises(ValueError, match='expected'):
                fn(*args)
    with pytest.raises(ValueError, match='qd: expected shape'):
        dynamics.inverse_dynamics(model, np.zeros(N), np.zeros(length), np.zeros(N))
    with pytest.raises(ValueError, match='tau: expected shape'):
        dynamics.forward_dynamics(model, np.zeros(N), np.zeros(N), np.zeros(length))


@pytest.mark.parametrize('size', [None, 4])
def test_long_chain_matches_reference(models, size, rng):
    for model in models:
        q, qd, qdd = random_state(rng, model.n, size)
        wrench = rng.normal(size=6)
        assert_same(*both(dynamics.inverse_dynamics, model, q, qd, qdd))
        assert_same(*both(dynamics.inverse_dynamics, model, q, qd, qdd, wrench=wrench))
        assert_same(*both(dynamics.bias_forces, model, q, qd))
        assert_same(*both(dynamics.gravity_torques, model, q))
        tau = with_backend('reference', dynamics.inverse_dynamics, model, q, qd, qdd)
        assert_same(*both(dynamics.forward_dynamics, model, q, qd, tau))
        assert_same(*both(dynamics.forward_dynamics, model, q, qd, tau, wrench=wrench))
        assert_same(with_backend('generated', dynamics.forward_dynamics, model, q, qd, tau),
                    qdd)


def test_long_chain_rk4_step_matches_reference(models, rng):
    for model in models:
        q, qd, _ = random_state(rng, model.n)
        tau = rng.normal(scale=5.0, size=model.n)
        for fast, reference in zip(*both(integration.rk4_step, model, q, qd, tau, 1e-3)):
            assert_same(fast, reference)


def test_payload_copy_shares_the_chunked_code(models, rng):
    model, loaded = models
    q, qd, qdd = random_state(rng, model.n)
    for m in models:
        dynamics.inverse_dynamics(m, q, qd, qdd)
    assert codegen.kernel(loaded, 'rnea').__code__ is codegen.kernel(model, 'rnea').__code__
    assert not np.allclose(dynamics.gravity_torques(loaded, q),
                           dynamics.gravity_torques(model, q))


ARGS = {'rnea': 3, 'rnea_wrench': 3, 'bias': 2, 'gravity': 1, 'aba': 3, 'aba_wrench': 3}


@pytest.mark.parametrize('name', sorted(ARGS))
def test_array_mode_of_a_chunked_kernel_gives_the_one_state_results(models, name, rng):
    _, model = models
    states = list(random_state(rng, model.n, 3))[:ARGS[name]]
    if name.endswith('wrench'):
        states.append(rng.normal(size=(3, 6)))
    columns = codegen.kernel(model, name, 'array')(*(s.T for s in states))
    batch = np.array(columns).T
    for b in range(3):
        one = codegen.kernel(model, name)(*(s[b].tolist() for s in states))
        np.testing.assert_allclose(batch[b], one, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize('name', sorted(ARGS))
def test_chunked_code_computes_the_same_floats_as_flat_code(name, rng):
    model = RobotModel.from_params(random_chain_params(rng, 20, 'modified', MASK[:20],
                                                       friction=True, armature=True))
    flat, chunked = (codegen.source(model, name, flat=flat) for flat in (True, False))
    assert '\ndef _' not in flat and '\ndef _' in chunked
    assert codegen.operation_counts(flat) == codegen.operation_counts(chunked)
    functions = []
    for text in (flat, chunked):
        namespace = {'sin': math.sin, 'cos': math.cos, 'sign': codegen._sign}
        exec(compile(text, name, 'exec'), namespace)  # noqa: S102 - generated source
        functions.append(codegen.bind(model, namespace[name]))
    states = [rng.normal(size=model.n).tolist() for _ in range(ARGS[name])]
    if name.endswith('wrench'):
        states.append(rng.normal(size=6).tolist())
    assert functions[0](*states) == functions[1](*states)


def test_chunk_functions_need_no_extended_arguments(models):
    model, _ = models
    for name in ('rnea', 'rnea_wrench', 'bias', 'aba', 'aba_wrench'):
        namespace = {}
        exec(compile(codegen.source(model, name), name, 'exec'), namespace)  # noqa: S102
        chunks = [f for key, f in namespace.items() if key.startswith(f'_{name}_')]
        assert len(chunks) > 1
        for function in chunks:
            code = function.__code__
            assert len(code.co_consts) < 256 and code.co_nlocals < 256
            assert all(i.opname != 'EXTENDED_ARG' for i in dis.get_instructions(code))
