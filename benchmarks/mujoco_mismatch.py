"""The cost of an arm in MuJoCo that is not the robot file, and `identify` closing it.

A ROS user's question: "my arm in MuJoCo is not my robot file; how much does that cost and
how do I close it?" Answered with the package's own commands (each run as a user would run
it, as a child process on a private ROS domain):

1. a "true" Panda: config/panda.yaml's model perturbed (`arm_identification.perturbed_model`:
   link masses, centres of mass and principal inertias ±`--fraction`, principal axes turned)
   with a drive's rotor inertia, viscous and Coulomb friction per joint
   (`arm_identification.drive_terms`), written as MJCF (`mujoco_engine.model_to_mjcf`:
   armature, damping, frictionloss);
2. the `sim` demo (config/sim.yaml's 2 s quintic move, 100 Hz computed torque, lock-step
   simulated time) with the controller given config/panda.yaml: on the own plant (the
   controller's model), on MuJoCo with the MJCF generated from config/panda.yaml (the
   engine alone), on MuJoCo with the true arm (the mismatch);
3. the `identify` workflow against the running simulation of the true arm: `sim` running
   on MuJoCo (lock-step, `--real-time-factor 0`: the same recording on a loaded machine),
   `identify excite --duration D --iterations 0 --record BAG`, Ctrl-C to the sim,
   `identify estimate --params-file config/panda.yaml --bag BAG --output identified.yaml`;
4. the demo on the true arm again with identified.yaml loaded after the robot file.

Prints the commands and a Markdown table (largest and RMS tracking error over the joints).

    PYTHONPATH=$PWD python3 benchmarks/mujoco_mismatch.py [--out /tmp/mujoco_mismatch]

Needs mujoco, rosbags, scipy, cvxpy and the ROS 2 Python packages (the dev venvs have them).
"""

import argparse
import csv
import os
import shlex
import signal
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from robot_dynamics.identification import arm as ai  # noqa: E402
from robot_dynamics.model import RobotModel  # noqa: E402

PANDA = os.path.join(REPO, 'config', 'panda.yaml')


def joint_names():
    """config/panda.yaml's `joints` (the names the controller and the MJCF share)."""
    import yaml
    with open(PANDA, encoding='utf-8') as stream:
        return yaml.safe_load(stream)['/**']['ros__parameters']['joints']


def true_arm(folder, fraction=0.3, seed=1):
    """The true Panda's MJCF path, and its model."""
    from robot_dynamics.simulation.mujoco_engine import model_to_mjcf
    nominal = RobotModel.from_yaml(PANDA)
    true = ai.perturbed_model(nominal, fraction, seed=seed, **ai.drive_terms(nominal))
    path = os.path.join(folder, 'true_panda.xml')
    with open(path, 'w', encoding='utf-8') as stream:
        stream.write(model_to_mjcf(true, joint_names()))
    return path, nominal, true


def environment(domain):
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain),
               PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get('PYTHONPATH')])))
    env.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    return env


def shown(command):
    return ' '.join(shlex.quote(part) for part in command).replace(sys.executable, 'python3')


def run(command, env, log, timeout=None):
    """`command` to its end (`timeout`: wall s, a net against hangs); its output into `log`."""
    print('$', shown(command), flush=True)
    with open(log, 'w', encoding='utf-8') as stream:
        done = subprocess.run(command, env=env, stdout=stream, stderr=subprocess.STDOUT,
                              timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f'{shown(command)} exited {done.returncode}: see {log}')


def engine_args(model_file=None):
    args = ['-p', 'plant_simulator:engine:=mujoco']
    if model_file:
        args += ['-p', f'plant_simulator:mujoco.model_file:={model_file}']
    return args


def demo(folder, label, env, duration, ros_args=(), timeout=None):
    """The demo's tracking error: (largest |e| over joints and cycles, RMS per joint (n,))."""
    table = os.path.join(folder, f'{label}.csv')
    command = [sys.executable, '-m', 'robot_dynamics.nodes.sim', '--robot', 'panda',
               '--duration', str(duration), '--csv', table]
    if ros_args:
        command += ['--ros-args', *ros_args]
    run(command, env, os.path.join(folder, f'{label}.log'), timeout)
    with open(table, encoding='utf-8', newline='') as stream:
        rows = list(csv.reader(stream))
    header, values = rows[0], np.array(rows[1:], dtype=float)
    error = values[:, [i for i, name in enumerate(header) if name.startswith('error_')]]
    return float(np.max(np.abs(error))), np.sqrt(np.mean(error ** 2, axis=0))


def record(folder, env, model_file, duration, seed, timeout=60.0):
    """`identify excite` against a running `sim` of the true arm (lock-step, as fast as the
    nodes go: the recording does not depend on the machine's load); the bag folder."""
    bag = os.path.join(folder, 'arm_motion')
    sim_command = [sys.executable, '-m', 'robot_dynamics.nodes.sim', '--robot', 'panda',
                   '--real-time-factor', '0', '--ros-args', *engine_args(model_file)]
    print('$', shown(sim_command), '&', flush=True)
    with open(os.path.join(folder, 'sim_running.log'), 'w', encoding='utf-8') as log:
        simulation = subprocess.Popen(sim_command, env=env, stdout=log,
                                      stderr=subprocess.STDOUT)
        try:        # excite waits up to --timeout for the nodes, then runs the motion
            run([sys.executable, '-m', 'robot_dynamics.nodes.identify', 'excite',
                 '--duration', str(duration), '--iterations', '0', '--seed', str(seed),
                 '--timeout', str(timeout), '--record', bag], env,
                os.path.join(folder, 'excite.log'), 4.0 * timeout + duration)
        finally:
            print('$ kill -INT %1   # Ctrl-C to the sim', flush=True)
            simulation.send_signal(signal.SIGINT)
            simulation.wait(timeout=timeout)
    return bag


def estimate(folder, env, bag, timeout=None):
    """`identify estimate` of the bag with config/panda.yaml as the prior; the file."""
    identified = os.path.join(folder, 'identified.yaml')
    run([sys.executable, '-m', 'robot_dynamics.nodes.identify', 'estimate',
         '--params-file', PANDA, '--bag', bag, '--output', identified], env,
        os.path.join(folder, 'estimate.log'), timeout)
    return identified


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--out', default='/tmp/mujoco_mismatch',
                        help='folder for the MJCF, CSVs, logs, bag, identified.yaml')
    parser.add_argument('--fraction', type=float, default=0.3,
                        help='perturbation of the links (default 0.3: ±30 %%)')
    parser.add_argument('--seed', type=int, default=1, help='seed of the perturbation')
    parser.add_argument('--excite', type=float, default=20.0,
                        help='length of the identify excite motion [s] (default 20)')
    parser.add_argument('--demo', type=float, default=3.0,
                        help='simulated seconds of each demo run (default 3)')
    parser.add_argument('--domain', type=int, default=77, help='ROS_DOMAIN_ID of the runs')
    options = parser.parse_args(argv)
    os.makedirs(options.out, exist_ok=True)
    if os.listdir(options.out):
        raise SystemExit(f'--out {options.out} is not empty')
    env = environment(options.domain)
    model_file, nominal, true = true_arm(options.out, options.fraction, options.seed)
    print(f'true arm: {model_file} (masses x {np.round(true.mass / nominal.mass, 2)}, '
          f'armature {np.round(true.armature, 3)}, viscous {np.round(true.viscous_friction, 3)}, '
          f'coulomb {np.round(true.coulomb_friction, 3)})', flush=True)
    rows = [('own plant, the controller\'s model', demo(options.out, 'own', env, options.demo)),
            ('MuJoCo, MJCF generated from config/panda.yaml',
             demo(options.out, 'mujoco_same', env, options.demo, engine_args())),
            ('MuJoCo, the true arm; controller: config/panda.yaml',
             demo(options.out, 'mujoco_true', env, options.demo, engine_args(model_file)))]
    bag = record(options.out, env, model_file, options.excite, 0)
    started = time.monotonic()
    identified = estimate(options.out, env, bag)
    estimate_time = time.monotonic() - started
    rows.append(('MuJoCo, the true arm; controller: + identified.yaml',
                 demo(options.out, 'mujoco_identified', env, options.demo,
                      ['--params-file', identified, *engine_args(model_file)])))
    print(f'\nidentify estimate on {options.excite:g} s: {estimate_time:.1f} s wall')
    print(f'\n| demo ({options.demo:g} s), plant | largest error (mrad) | RMS per joint (mrad) |')
    print('|---|---:|---|')
    for label, (largest, rms) in rows:
        print(f'| {label} | {largest * 1e3:.3g} | '
              f'{", ".join(f"{v * 1e3:.2g}" for v in rms)} |')
    ratio = rows[2][1][0] / rows[3][1][0]
    print(f'\nthe identified model: largest error {ratio:.3g}x smaller than config/panda.yaml\'s')
    return 0


if __name__ == '__main__':
    sys.exit(main())
