"""Reference dynamics from Pinocchio, built independently of robot_dynamics.

Writes test/data/reference_dynamics.npz, which test/test_reference_data.py compares the
package against (Pinocchio is not needed at test time).

How the committed file was made (from the repository root):

    .venv-kilted/bin/python tools/make_reference_data.py

(any Python with pin, numpy and PyYAML; `python3 tools/dev.py bench` puts pin into
.venv-kilted) with pin (Pinocchio) 4.1.0 and numpy 2.4.6 from PyPI, random seed 20260522 (the versions
actually used are also stored in the file under ``meta``). Rerun it after changing a
preset in config/.

Independence: this script does not import robot_dynamics. It reads the preset YAML files
with plain PyYAML, generates random chains itself, and builds each Pinocchio model
directly from the DH numbers (doc/conventions.md):

* standard DH, ``T_{i-1,i} = Rz(θ_i) Tz(d_i) Tx(a_i) Rx(α_i)``: Pinocchio joint i sits on
  the axis z_{i-1}; its placement in joint i-1 is ``Tx(a_{i-1}) Rx(α_{i-1}) Rz(θ0_i) Tz(d0_i)``
  (the constant DH offsets are part of the placement, the joint adds Rz(q) or Tz(q));
  the link inertia, given in DH link frame i = joint frame · Tx(a_i) Rx(α_i), is moved
  into the joint frame with ``SE3.act(Inertia)``;
* modified DH, ``T_{i-1,i} = Rx(α_i) Tx(a_i) Rz(θ_i) Tz(d_i)``: the joint frame is the DH
  link frame, placement ``Rx(α_i) Tx(a_i) Rz(θ0_i) Tz(d0_i)``.

A payload is appended to the last joint at the last DH link frame; gravity is
``model.gravity``; armature is ``model.armature``.

Stored per model (keys ``<name>.<item>``): ``robot`` (the robot block as JSON, for
``RobotModel.from_params``), ``joints``; for ``single`` (one state) and ``batch`` (20 states):
``q, qd, qdd, tau`` and Pinocchio's results ``rnea`` (τ at q, q̇, q̈), ``crba`` (mass matrix,
symmetrised), ``aba`` (q̈ at q, q̇, τ), ``gravity`` (computeGeneralizedGravity),
``frames`` (DH link frames 1..n in the base, 4×4), ``jacobian`` (tip = last DH link frame,
LOCAL_WORLD_ALIGNED, rows [v; ω]), ``kinetic`` (computeKineticEnergy, armature included)
and ``potential`` (computePotentialEnergy).
"""

import json
import math
import os
import platform
import sys

import numpy as np
import pinocchio as pin
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(REPO, 'test', 'data', 'reference_dynamics.npz')
PRESETS = ('planar2', 'puma560', 'stanford', 'sasaki6', 'panda')
SEED = 20260522
BATCH = 20


# ---------------------------------------------------------------- elementary transforms

def rot_x(angle):
    return pin.SE3(pin.utils.rotate('x', angle), np.zeros(3))


def rot_z(angle):
    return pin.SE3(pin.utils.rotate('z', angle), np.zeros(3))


def trans_x(length):
    return pin.SE3(np.eye(3), np.array([length, 0.0, 0.0]))


def trans_z(length):
    return pin.SE3(np.eye(3), np.array([0.0, 0.0, length]))


def matrix3(values6):
    ixx, ixy, ixz, iyy, iyz, izz = values6
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]], dtype=float)


# ---------------------------------------------------------------- Pinocchio model from DH

def build_model(block):
    """Pinocchio model and the frame ids of DH link frames 1..n."""
    n = len(block['joint_types'])
    a, alpha, d, theta = (np.asarray(block[k], dtype=float) for k in ('a', 'alpha', 'd', 'theta'))
    mass = np.asarray(block['mass'], dtype=float)
    com = np.asarray(block['com'], dtype=float).reshape(n, 3)
    inertia = np.asarray(block['inertia'], dtype=float).reshape(n, 6)
    standard = block['dh_convention'] == 'standard'
    model = pin.Model()
    parent = 0
    link_frames = []
    for i in range(n):
        offsets = rot_z(theta[i]) * trans_z(d[i])
        if standard:
            before = trans_x(a[i - 1]) * rot_x(alpha[i - 1]) if i > 0 else pin.SE3.Identity()
            joint_to_link = trans_x(a[i]) * rot_x(alpha[i])
        else:
            before = rot_x(alpha[i]) * trans_x(a[i])
            joint_to_link = pin.SE3.Identity()
        kind = pin.JointModelPZ() if block['joint_types'][i] == 'prismatic' else pin.JointModelRZ()
        joint = model.addJoint(parent, kind, before * offsets, f'joint_{i + 1}')
        body = pin.Inertia(float(mass[i]), com[i], matrix3(inertia[i]))
        model.appendBodyToJoint(joint, joint_to_link.act(body), pin.SE3.Identity())
        link_frames.append(model.addFrame(pin.Frame(f'link_{i + 1}', joint, joint_to_link,
                                                    pin.FrameType.OP_FRAME)))
        parent = joint
    payload = block.get('payload')
    if payload:
        tip = model.frames[link_frames[-1]].placement
        body = pin.Inertia(float(payload['mass']), np.asarray(payload['com'], dtype=float),
                           matrix3(payload['inertia']))
        model.appendBodyToJoint(parent, body, tip)
    model.gravity = pin.Motion(np.asarray(block.get('gravity', [0.0, 0.0, -9.81]), float),
                               np.zeros(3))
    model.armature = np.asarray(block.get('armature', [0.0] * n), dtype=float)
    for key in ('viscous_friction', 'coulomb_friction'):
        if any(block.get(key, [0.0])):
            raise ValueError(f'{key}: friction is not modelled in the reference data')
    return model, link_frames


def reference_results(model, link_frames, q, qd, qdd, tau):
    """Pinocchio's dynamics for one state."""
    data = model.createData()
    out = {'rnea': pin.rnea(model, data, q, qd, qdd).copy()}
    M = pin.crba(model, data, q).copy()
    out['crba'] = np.triu(M) + np.triu(M, 1).T
    out['aba'] = pin.aba(model, data, q, qd, tau).copy()
    out['gravity'] = pin.computeGeneralizedGravity(model, data, q).copy()
    pin.framesForwardKinematics(model, data, q)
    out['frames'] = np.array([data.oMf[f].homogeneous for f in link_frames])
    out['jacobian'] = pin.computeFrameJacobian(
        model, data, q, link_frames[-1], pin.ReferenceFrame.LOCAL_WORLD_ALIGNED).copy()
    # pin 4.x computeKineticEnergy already includes ½ Σ armature q̇² (checked in
    # check_consistency against ½ q̇ᵀ M q̇ with M from crba)
    out['kinetic'] = np.array(pin.computeKineticEnergy(model, data, q, qd))
    out['potential'] = np.array(pin.computePotentialEnergy(model, data, q))
    return out


# ---------------------------------------------------------------- inputs

def random_rotation(rng):
    Q, R = np.linalg.qr(rng.normal(size=(3, 3)))
    Q = Q @ np.diag(np.sign(np.diag(R)))
    return Q if np.linalg.det(Q) > 0.0 else -Q


def random_inertia6(rng, mass):
    """Full centroidal inertia of a box with random sides, randomly turned (physical)."""
    x, y, z = rng.uniform(0.05, 0.4, size=3)
    principal = mass / 12.0 * np.array([y * y + z * z, x * x + z * z, x * x + y * y])
    R = random_rotation(rng)
    I = R @ np.diag(principal) @ R.T
    return [I[0, 0], I[0, 1], I[0, 2], I[1, 1], I[1, 2], I[2, 2]]


def random_chain(rng, convention, n=8):
    """An n-link chain with prismatic joints, non-zero offsets and full inertias."""
    types = ['revolute'] * n
    for i in (2, 5):
        types[i] = 'prismatic'
    mass = rng.uniform(0.5, 6.0, size=n)
    return {
        'dh_convention': convention, 'joint_types': types,
        'a': rng.uniform(-0.4, 0.4, size=n).tolist(),
        'alpha': rng.uniform(-math.pi, math.pi, size=n).tolist(),
        'd': rng.uniform(-0.3, 0.3, size=n).tolist(),
        'theta': rng.uniform(-math.pi, math.pi, size=n).tolist(),
        'mass': mass.tolist(),
        'com': rng.uniform(-0.15, 0.15, size=3 * n).tolist(),
        'inertia': [float(v) for m in mass for v in random_inertia6(rng, m)],
    }


def random_states(rng, block, count):
    n = len(block['joint_types'])
    prismatic = np.array([t == 'prismatic' for t in block['joint_types']])
    low = np.where(prismatic, -0.4, -math.pi)
    high = -low
    if 'position_min' in block:
        low = np.maximum(low, np.asarray(block['position_min'], dtype=float))
        high = np.minimum(high, np.asarray(block['position_max'], dtype=float))
    q = rng.uniform(low, high, size=(count, n))
    qd = rng.uniform(-2.0, 2.0, size=(count, n))
    qdd = rng.uniform(-4.0, 4.0, size=(count, n))
    return q, qd, qdd


def preset_block(name):
    with open(os.path.join(REPO, 'config', name + '.yaml'), encoding='utf-8') as stream:
        params = yaml.safe_load(stream)['/**']['ros__parameters']
    return params['joints'], params['robot']


def cases(rng):
    for name in PRESETS:
        joints, block = preset_block(name)
        yield name, joints, block
    chain = random_chain(rng, 'standard')
    chain['payload'] = {'mass': 1.7, 'com': [0.05, -0.02, 0.11],
                        'inertia': random_inertia6(rng, 1.7)}
    yield 'random8_standard_payload', [f'j{i + 1}' for i in range(8)], chain
    chain = random_chain(rng, 'modified')
    chain['gravity'] = [2.1, -3.5, -8.9]
    chain['armature'] = rng.uniform(0.0, 0.5, size=8).tolist()
    yield 'random8_modified_gravity_armature', [f'j{i + 1}' for i in range(8)], chain


# ---------------------------------------------------------------- main

def make_sets(rng, model, link_frames, block, count):
    q, qd, qdd = random_states(rng, block, count)
    data = model.createData()
    # efforts that give accelerations of a sensible size: τ for other random accelerations
    # plus a random offset
    tau = np.array([pin.rnea(model, data, q[k], qd[k], rng.uniform(-3.0, 3.0, len(q[k])))
                    + rng.uniform(-1.0, 1.0, len(q[k])) for k in range(count)])
    results = [reference_results(model, link_frames, q[k], qd[k], qdd[k], tau[k])
               for k in range(count)]
    stored = {'q': q, 'qd': qd, 'qdd': qdd, 'tau': tau}
    for key in results[0]:
        stored[key] = np.array([r[key] for r in results])
    return stored


def check_consistency(name, model, sets):
    """Pinocchio against itself (aba vs M⁻¹(τ − h)), so a bad build fails loudly here."""
    data = model.createData()
    for k in range(len(sets['q'])):
        q, qd = sets['q'][k], sets['qd'][k]
        h = pin.rnea(model, data, q, qd, np.zeros_like(q))
        qdd = np.linalg.solve(sets['crba'][k], sets['tau'][k] - h)
        err = np.max(np.abs(qdd - sets['aba'][k])) / max(1.0, np.max(np.abs(qdd)))
        if err > 1e-9:
            raise RuntimeError(f'{name}: Pinocchio aba and crba disagree ({err:.2e})')
        kinetic = 0.5 * qd @ sets['crba'][k] @ qd
        if abs(kinetic - sets['kinetic'][k]) > 1e-9 * max(1.0, kinetic):
            raise RuntimeError(f'{name}: kinetic energy and crba disagree')


def main():
    rng = np.random.default_rng(SEED)
    arrays = {}
    names = []
    for name, joints, block in cases(rng):
        model, link_frames = build_model(block)
        names.append(name)
        arrays[f'{name}.robot'] = np.array(json.dumps(block))
        arrays[f'{name}.joints'] = np.array(joints)
        for label, count in (('single', 1), ('batch', BATCH)):
            sets = make_sets(rng, model, link_frames, block, count)
            check_consistency(name, model, sets)
            for key, value in sets.items():
                value = value[0] if label == 'single' else value
                arrays[f'{name}.{label}.{key}'] = np.asarray(value, dtype=float)
    arrays['models'] = np.array(names)
    arrays['meta'] = np.array(json.dumps({
        'pinocchio': pin.__version__, 'numpy': np.__version__,
        'python': platform.python_version(), 'seed': SEED,
        'command': 'python tools/make_reference_data.py'}))
    os.makedirs(os.path.dirname(OUTPUT), exist_ok=True)
    np.savez_compressed(OUTPUT, **arrays)
    print(f'wrote {OUTPUT} ({os.path.getsize(OUTPUT)} bytes): {", ".join(names)}',
          file=sys.stderr)


if __name__ == '__main__':
    main()
