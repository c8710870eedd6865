"""Simulation helpers of the tests and benchmarks: a consistently perturbed "true" arm,
plausible drive terms, and a closed-loop recording with measurement noise."""

import math
from typing import NamedTuple

import numpy as np

from robot_dynamics.dynamics import algorithms
from robot_dynamics import dynamics, simulation
from robot_dynamics.identification.arm.base import _random_states
from robot_dynamics.identification.arm.models import _payload_parameters, model_with_parameters
from robot_dynamics.identification.arm.parameters import _per_index, _urdf6, arm_parameters


def perturbed_model(model, fraction=0.3, seed=0, armature=None, viscous=None, coulomb=None):
    """A consistently perturbed copy of `model` (the "true" arm of a simulation study):
    each link's mass × (1 + u), its centre of mass moved by u·max(|c|, 0.05 m) per axis,
    its centroidal principal moments × (1 + u) (then pulled back inside the triangle
    inequality) and its principal axes turned by up to `fraction`·0.5 rad, every u uniform
    in ±`fraction` (generator seeded with `seed`); armature, viscous and Coulomb friction
    (per joint, or scalars) replace the model's when given. Links that are not physical to
    start with (e.g. textbook data with zero mass) are scaled as a whole instead."""
    rng = np.random.default_rng(seed)
    n = model.n
    mass = np.array(model.mass, dtype=float)
    com = np.array(model.com, dtype=float)
    inertia = np.array(model.inertia, dtype=float)
    for i in range(n):
        u = rng.uniform(-fraction, fraction, size=8)
        moments, axes = np.linalg.eigh(inertia[i])
        physical = mass[i] > 0.0 and moments[0] > 0.0 and \
            moments[2] <= moments[0] + moments[1]
        if not physical:
            mass[i] *= 1.0 + u[0]
            inertia[i] *= 1.0 + u[0]
            continue
        mass[i] *= 1.0 + u[0]
        com[i] = com[i] + u[1:4] * max(float(np.linalg.norm(com[i])), 0.05)
        moments = moments * (1.0 + u[4:7])
        largest = int(np.argmax(moments))
        others = float(np.sum(moments) - moments[largest])
        if moments[largest] > 0.98 * others:
            moments[largest] = 0.98 * others
        angle = 0.5 * fraction * u[7] / max(fraction, 1e-12)
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        K = algorithms.skew(axis)
        turn = np.eye(3) + math.sin(angle) * K + (1.0 - math.cos(angle)) * K @ K
        axes = turn @ axes
        inertia[i] = (axes * moments) @ axes.T
    joints = np.column_stack([
        np.broadcast_to(np.asarray(value if value is not None else default, dtype=float), (n,))
        for value, default in ((armature, model.armature), (viscous, model.viscous_friction),
                               (coulomb, model.coulomb_friction))])
    links = np.column_stack((mass, mass[:, None] * com,
                             [_urdf6(inertia[i] + algorithms.steiner(mass[i], com[i]))
                              for i in range(n)]))
    # link frame parameters of the rigid links; the payload (if any) is added back
    links[-1] += _payload_parameters(model)
    phi = arm_parameters(model).reshape(model.n, -1)
    phi[:, :13] = np.column_stack((links, joints))
    return model_with_parameters(model, phi.reshape(-1))


def drive_terms(model, armature=0.5, viscous=0.05, coulomb=0.05, acceleration=2.0,
                seed=0):
    """Per-joint armature, viscous and Coulomb friction of a plausible drive for `model`,
    relative to the arm: armature = `armature` × joint j's mean diagonal inertia over
    random configurations; Coulomb = `coulomb` × S_j and viscous = `viscous` × S_j per
    rad/s (m/s), with the effort scale S_j = max(RMS gravity effort, mean diagonal
    inertia × `acceleration`). Returns a dict for `perturbed_model`."""
    rng = np.random.default_rng(seed)
    q = _random_states(model, 40, rng)[0]
    rigid = model_with_parameters(model, arm_parameters(model) * np.tile(
        np.r_[np.ones(10), np.zeros(_per_index(model, False) - 10)], model.n))
    M = np.mean(np.diagonal(dynamics.mass_matrix(rigid, q), axis1=1, axis2=2), axis=0)
    g = np.sqrt(np.mean(dynamics.gravity_torques(rigid, q) ** 2, axis=0))
    scale = np.maximum(g, M * acceleration)
    return {'armature': armature * M, 'viscous': viscous * scale, 'coulomb': coulomb * scale}


class Experiment(NamedTuple):
    """A simulated recording at the control instants: t (K,); q, qd, tau (K, n) as
    measured (noisy states, noisy efforts); q_true, qd_true, tau_true (the plant's state
    and the applied effort); qdd_true: the plant's acceleration at the start of each
    control period (forward dynamics of the true state and effort)."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    q_true: np.ndarray
    qd_true: np.ndarray
    tau_true: np.ndarray
    qdd_true: np.ndarray


def closed_loop_experiment(plant, model, reference, duration, q0, kp=100.0, kd=20.0,
                           control_period=0.001, plant_step=0.001, sigma_q=1e-3,
                           sigma_qd=0.01, effort_noise=0.01, seed=0):
    """Computed torque with `model` tracking `reference` (t -> q_d, q̇_d, q̈_d) on `plant`
    in simulated time (`simulation.simulate_closed_loop`), the controller seeing states
    with Gaussian noise (sigma_q [rad | m], sigma_qd [rad/s | m/s]); the recorded efforts
    carry Gaussian noise of `effort_noise` × each joint's RMS applied effort. Returns an
    `Experiment` sampled every control period."""
    rng = np.random.default_rng(seed)
    n = plant.n
    measured = []

    def measurement(q, qd):
        qm = q + rng.normal(0.0, sigma_q, n) if sigma_q else q
        qdm = qd + rng.normal(0.0, sigma_qd, n) if sigma_qd else qd
        measured.append((qm, qdm))
        return qm, qdm

    controller = simulation.computed_torque(model, kp, kd, reference)
    run = simulation.simulate_closed_loop(plant, controller, reference, duration,
                                          control_period, plant_step, q0, np.zeros(n),
                                          measurement=measurement)
    every = int(round(control_period / plant_step))
    index = np.arange(0, run.t.size - 1, every)
    q_m = np.array([m[0] for m in measured])
    qd_m = np.array([m[1] for m in measured])
    tau_true = run.tau[index]
    rms = np.sqrt(np.mean(tau_true ** 2, axis=0))
    tau_m = tau_true + rng.normal(size=tau_true.shape) * (effort_noise * rms)
    qdd = dynamics.forward_dynamics(plant, run.q[index], run.qd[index], tau_true)
    return Experiment(t=run.t[index], q=q_m, qd=qd_m, tau=tau_m, q_true=run.q[index],
                      qd_true=run.qd[index], tau_true=tau_true, qdd_true=qdd)
