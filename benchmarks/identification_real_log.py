"""Whole-arm identification on a real arm's public log, against its published model.

    git clone https://github.com/marcocognetti/FrankaEmikaPandaDynModel /tmp/panda-log
    PYTHONPATH=. <python with numpy, scipy, cvxpy, rosbags> \\
        benchmarks/identification_real_log.py \\
        /tmp/panda-log/matlab/data/Exciting_Traj/Trajectory_1/rbt_log \\
        [--friction tanh stribeck coulomb] [--keep-bag DIR]

The log: C. Gaz, M. Cognetti, A. Oliva, P. Robuffo Giordano, A. De Luca, "Dynamic
identification of the Franka Emika Panda robot with retrieval of feasible parameters using
penalty-based optimization", IEEE RA-L 4(4), 2019: an excitation of a Franka Emika Panda,
21 s of measured positions, velocities and link-side torques (exciting_traj_*.txt, seven
values per sample), stamped around 1 ms with a logger's jitter. It is not part of this
repository (its licence is the GPL); this script reads it where you cloned it.

The log is written as a rosbag2 folder of sensor_msgs/JointState (as a robot's
``ros2 bag record /joint_states``), read back with `read_joint_states`, its last 20 % held
out (as `identify estimate` does without --validate), and estimated from the first 80 %
with config/panda.yaml (Gaz et al.'s published inertial parameters) as the prior,
effort offsets and each friction law given. Printed: the held-out relative RMS torque
error per joint of the published model (config/panda.yaml plus its published sigmoidal
friction, `PUBLISHED_FRICTION`), of the robot file without friction, of the unconstrained
least-squares fit and of the identified model, and the targets: at least 30 % below the
published model (mean over the joints), within 1.05x of the least-squares fit.
"""

import argparse
import math
import os
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, 'benchmarks'))

import realistic_recordings as rr  # noqa: E402
from robot_dynamics import dynamics  # noqa: E402
from robot_dynamics.identification import arm as ai  # noqa: E402
from robot_dynamics.identification.recordings import (  # noqa: E402
    JointStateBagWriter, read_joint_states)
from robot_dynamics.nodes.identify import pieces  # noqa: E402

# Gaz et al.'s identified friction per joint (their Table, also in config/panda.yaml):
# tau_f = phi1 / (1 + exp(-phi2 (qd + phi3))) - phi1 / (1 + exp(-phi2 phi3))
PUBLISHED_FRICTION = (
    np.array([0.54615, 0.87224, 0.64068, 1.2794, 0.83904, 0.30301, 0.56489]),
    np.array([5.1181, 9.0657, 10.136, 5.5903, 8.3469, 17.133, 10.336]),
    np.array([0.039533, 0.025882, -0.04607, 0.036194, 0.026226, -0.021047, 0.0035526]))


def published_friction(qd):
    phi1, phi2, phi3 = PUBLISHED_FRICTION
    return phi1 / (1.0 + np.exp(-phi2 * (qd + phi3))) - phi1 / (1.0 + np.exp(-phi2 * phi3))


def read_log(folder):
    """t (K,), q, qd, tau (K, 7) of the log's text files."""
    t = np.loadtxt(os.path.join(folder, 'exciting_traj_time.txt'))
    q, qd, tau = (np.loadtxt(os.path.join(folder, f'exciting_traj_{name}.txt')).reshape(-1, 7)
                  for name in ('positions', 'velocity', 'torques'))
    return t, q, qd, tau


def write_bag(folder, joints, t, q, qd, tau, start=1000.0):
    with JointStateBagWriter(folder) as writer:
        for k in range(len(t)):
            writer.write(start + t[k], joints, q[k], qd[k], tau[k],
                         received=start + t[k] + 3e-4)


def published_errors(prior, t, q, qd, tau, accelerations='velocity'):
    """Held-out relative errors of the published model: config/panda.yaml's inverse
    dynamics plus the published friction, computed from the filtered full-rate velocity
    and filtered like the efforts (as `identify_arm` prepares every friction column), q̈
    from `accelerations` (the estimate's)."""
    data = ai._prepare(prior, t, q, qd, tau, 10.0, 100.0, 0.02, 'instant',
                       [(published_friction, list(range(prior.n)))], accelerations)
    error = data.tau - (dynamics.inverse_dynamics(prior, data.q, data.qd, data.qdd)
                        + data.features[0])
    return np.array([math.sqrt(np.mean(error[data.mask[:, j], j] ** 2)
                               / np.mean(data.tau[data.mask[:, j], j] ** 2))
                     for j in range(prior.n)])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('log', help='the folder of exciting_traj_*.txt')
    parser.add_argument('--friction', nargs='+', default=['tanh', 'stribeck', 'coulomb'])
    parser.add_argument('--keep-bag', default=None, dest='keep_bag', metavar='DIR',
                        help='write the bag to DIR (a new folder) and keep it')
    args = parser.parse_args(argv)
    t, q, qd, tau = read_log(args.log)
    steps = np.diff(t)
    print(f'log: {t.size} samples, {t[-1] - t[0]:.1f} s, steps {1e3 * steps.min():.2f}–'
          f'{1e3 * steps.max():.2f} ms (median {1e3 * np.median(steps):.3f} ms)')
    prior = rr.load('panda')
    joints = rr.joint_names('panda')
    with tempfile.TemporaryDirectory() as temporary:
        bag = args.keep_bag or os.path.join(temporary, 'bag')
        write_bag(bag, joints, t, q, qd, tau)
        estimation, held = read_joint_states(bag, joints).split(0.8)
    et, eq, eqd, etau = (list(c) for c in zip(*pieces([estimation])))
    vt, vq, vqd, vtau = (list(c) for c in zip(*pieces([held])))
    percent = {'float_kind': lambda v: f'{100 * v:6.2f}'}

    def row(label, values):
        print(f'  {label:44s}' + np.array2string(values, formatter=percent)
              + f'   mean {100 * np.mean(values):.2f} %')
    results = {friction: ai.identify_arm(prior, et, eq, eqd, etau, offset=True,
                                         friction=friction) for friction in args.friction}
    print('held-out relative RMS torque error, % per joint (the last 20 % of the log)')
    published = {}
    for friction, result in results.items():
        source = result.accelerations
        if source not in published:
            fit = ', '.join(f'{k} {100 * v:.2f} %' for k, v in result.acceleration_fit.items())
            print(f' accelerations from the recorded {source}s (relative residual of a '
                  f'least-squares fit: {fit})'.replace('velocitys', 'velocities'))
            published[source] = published_errors(prior, vt, vq, vqd, vtau, source)
            row('published model (with its friction)', published[source])
            row('robot file (config/panda.yaml, no friction)',
                ai.validation_errors(prior, vt, vq, vqd, vtau, accelerations=source)[1])
        least = ai.identify_arm(prior, et, eq, eqd, etau, offset=True, friction=friction,
                                constrained=False, accelerations=source)
        identified = ai.validation_errors(result.model, vt, vq, vqd, vtau,
                                          accelerations=source)[1]
        fit = rr.predicted_errors(prior, friction, True, least.phi, least.stribeck_velocity,
                                  vt, vq, vqd, vtau, accelerations=source)
        row(f'--offset --friction {friction}: least squares', fit)
        row(f'--offset --friction {friction}: identified', identified)
        below = 1.0 - np.mean(identified) / np.mean(published[source])
        ratio = np.mean(identified) / np.mean(fit)
        consistent = not result.consistency and not ai.physical_consistency_issues(
            result.model)
        print(f'    {100 * below:.1f} % below the published model (target >= 30 %: '
              f'{"met" if below >= 0.3 else "NOT MET"}); identified / least squares '
              f'{ratio:.3f} (target <= 1.05: {"met" if ratio <= 1.05 else "NOT MET"}); '
              f'physically consistent: {"yes" if consistent else result.consistency}')
    if args.keep_bag:
        print(f'bag kept: {bag}; the executable on it: ros2 run robot_dynamics identify '
              f'estimate --params-file config/panda.yaml --bag {bag} --offset --friction '
              f'tanh --output identified.yaml')


if __name__ == '__main__':
    main()
