"""The plant's measurement-noise option: zero-mean Gaussian noise on the published joint
positions and velocities (the integrated state itself stays exact), seedable for
reproducible runs, off by default.

Parameters (plant_simulator, read-only):
    measurement_noise.position_stddev   sigma on /joint_states position [rad | m], 0 = off
    measurement_noise.velocity_stddev   sigma on /joint_states velocity [rad/s | m/s], 0 = off
    measurement_noise.seed              random seed (>= 0); -1 = a different run every time
"""

import numpy as np

from robot_dynamics.nodes.common.ros_params import ConfigurationError, declare, validated

__all__ = ['MeasurementNoise', 'declare_measurement_noise']


class MeasurementNoise:
    """Adds independent N(0, sigma²) samples to each published position and velocity."""

    def __init__(self, position_stddev=0.0, velocity_stddev=0.0, seed=None):
        for name, value in (('position_stddev', position_stddev),
                            ('velocity_stddev', velocity_stddev)):
            if not (np.isfinite(value) and value >= 0.0):
                raise ConfigurationError(f'measurement_noise.{name}: must be a finite value '
                                         f'>= 0, got {value}')
        self.position_stddev = float(position_stddev)
        self.velocity_stddev = float(velocity_stddev)
        self._random = np.random.default_rng(seed)

    @property
    def enabled(self):
        return self.position_stddev > 0.0 or self.velocity_stddev > 0.0

    def measure(self, q, qd):
        """(q, q̇) as measured: the true values plus noise (new arrays; the inputs are
        untouched). Without noise the inputs are returned as they are."""
        if not self.enabled:
            return q, qd
        n = len(q)
        if self.position_stddev > 0.0:
            q = q + self._random.normal(0.0, self.position_stddev, n)
        if self.velocity_stddev > 0.0:
            qd = qd + self._random.normal(0.0, self.velocity_stddev, n)
        return q, qd

    def describe(self):
        return (f'measurement noise sigma {self.position_stddev:g} rad|m on position, '
                f'{self.velocity_stddev:g} rad/s|m/s on velocity')


def declare_measurement_noise(node):
    """Declare measurement_noise.* on `node` and return its MeasurementNoise;
    ConfigurationError names a bad parameter."""
    position, velocity, seed = (
        validated(node, name, declare(node, name))
        for name in ('measurement_noise.position_stddev', 'measurement_noise.velocity_stddev',
                     'measurement_noise.seed'))
    return MeasurementNoise(position, velocity, None if seed == -1 else seed)
