"""The models the benchmarks time, in one place for run.py and closed_loop.py: the robot
presets of config/ and general random chains."""

import os
import sys
import warnings

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from robot_dynamics.model import ModelWarning, RobotModel  # noqa: E402


def load_preset(name):
    """config/<name>.yaml as a RobotModel (the textbook-inertia warnings silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        return RobotModel.from_yaml(os.path.join(REPO, 'config', name + '.yaml'))


def random_chain(n, seed=0):
    """A general n-joint chain: random twists and lengths, full inertias, no zeros for the
    generator to fold (the worst case for generated code)."""
    rng = np.random.default_rng(seed)
    mass = rng.uniform(0.5, 5.0, n)
    inertia = []
    for m in mass:
        Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        moments = m / 5.0 * rng.uniform(0.01, 0.05, 3)
        moments = moments + moments.sum() * 0.1       # keep the triangle inequality
        tensor = Q @ np.diag(moments) @ Q.T
        inertia += [tensor[0, 0], tensor[0, 1], tensor[0, 2], tensor[1, 1], tensor[1, 2],
                    tensor[2, 2]]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        return RobotModel.from_params({
            'dh_convention': 'standard', 'joint_types': ['revolute'] * n,
            'a': rng.uniform(-0.3, 0.3, n).tolist(), 'alpha': rng.uniform(-3, 3, n).tolist(),
            'd': rng.uniform(-0.3, 0.3, n).tolist(), 'theta': rng.uniform(-1, 1, n).tolist(),
            'mass': mass.tolist(), 'com': rng.uniform(-0.1, 0.1, 3 * n).tolist(),
            'inertia': [float(v) for v in inertia]})
