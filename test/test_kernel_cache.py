"""The per-model kernel cache (robot_dynamics.model.kernel_cache): attached on first use,
shared code across payload copies, nothing shared across gravity copies or pickles; and the
one backend dispatcher: the integrator's RK4 step is the dynamics module's choice."""

import pickle

import numpy as np
import pytest
from conftest import assert_same, random_chain_params, random_state

from robot_dynamics import dynamics
from robot_dynamics.dynamics import _fast_numba
from robot_dynamics.model import RobotModel
from robot_dynamics.model.kernel_cache import KernelCache
from robot_dynamics.simulation import integration


@pytest.fixture
def backend():
    previous = dynamics.get_backend()
    yield dynamics.set_backend
    dynamics.set_backend(previous)


def _model(rng, n=4):
    return RobotModel.from_params(random_chain_params(rng, n, 'standard', friction=True))


def test_the_cache_is_attached_on_first_use_with_the_runner_of_the_backend(rng, backend):
    backend('generated')
    model = _model(rng)
    assert KernelCache.peek(model) is None
    q, qd, qdd = random_state(rng, model.n)
    dynamics.inverse_dynamics(model, q, qd, qdd)
    cache = KernelCache.peek(model)
    assert isinstance(cache, KernelCache) and KernelCache.of(model) is cache
    assert 'rnea' in cache.runners_for('generated')
    assert ('rnea', 'scalar') in cache                       # the bound generated kernel


def test_payload_copies_share_the_code_gravity_copies_and_pickles_share_nothing(rng, backend):
    backend('generated')
    model = _model(rng)
    q, qd, qdd = random_state(rng, model.n)
    dynamics.inverse_dynamics(model, q, qd, qdd)
    shared = KernelCache.of(model).shared
    assert shared                                            # the generated code is there
    loaded = model.with_payload(mass=1.5, com=(0.0, 0.01, 0.05))
    assert KernelCache.peek(loaded) is None                  # per-model values rebuilt...
    assert KernelCache.of(loaded).shared is shared           # ...on the shared code
    assert len(KernelCache.of(loaded)) == 0
    upside_down = model.with_gravity((0.0, 0.0, 9.81))
    assert KernelCache.peek(upside_down) is None
    assert KernelCache.of(upside_down).shared is not shared
    assert not KernelCache.of(upside_down).shared
    copy = pickle.loads(pickle.dumps(model))
    assert KernelCache.peek(copy) is None and '_kernel_code' not in copy.__dict__
    assert_same(dynamics.inverse_dynamics(copy, q, qd, qdd),
                dynamics.inverse_dynamics(model, q, qd, qdd))


def _rk4_by_hand(model, q, qd, tau, dt):
    """Classical RK4 on the reference forward dynamics, written out here."""
    def f(q_, qd_):
        return qd_, dynamics.forward_dynamics(model, q_, qd_, tau)
    k1 = f(q, qd)
    k2 = f(q + 0.5 * dt * k1[0], qd + 0.5 * dt * k1[1])
    k3 = f(q + 0.5 * dt * k2[0], qd + 0.5 * dt * k2[1])
    k4 = f(q + dt * k3[0], qd + dt * k3[1])
    return tuple(x + dt / 6.0 * (a + 2.0 * b + 2.0 * c + d)
                 for x, a, b, c, d in zip((q, qd), k1, k2, k3, k4))


@pytest.mark.parametrize('name', ['generated', 'numba'])
def test_the_rk4_step_is_the_dispatchers_kernel_of_the_backend(rng, backend, name):
    if name == 'numba' and not _fast_numba.available():
        pytest.skip('numba not installed (pip install numba)')
    model = _model(rng)
    q, qd, tau = random_state(rng, model.n)
    dt = 1.0e-3
    backend('reference')
    expected = _rk4_by_hand(model, q, qd, tau, dt)
    assert dynamics.rk4_step_one(model, q, qd, tau, dt) is None   # no kernel: general path
    backend(name)
    q_next, qd_next = integration.rk4_step(model, q, qd, tau, dt)
    assert 'rk4' in KernelCache.of(model).runners_for(name)
    assert_same(q_next, expected[0])
    assert_same(qd_next, expected[1])
    assert_same(dynamics.rk4_step_one(model, q, qd, tau, dt)[1], expected[1])
