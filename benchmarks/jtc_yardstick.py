"""The joint_trajectory_controller yardstick: ros2_controllers' JTC (effort command
interface, PID gains) and this package's controller on the same simulated arm behind the
same ros2_control stack (topic_based_ros2_control, controller_manager at 1 kHz, the plant
free-running at 1 kHz), the same trajectory. Run locally with ros2_control,
joint_trajectory_controller and topic_based_ros2_control installed (never in CI):

    python3 benchmarks/jtc_yardstick.py [--robot puma560] [--durations 2.0 1.0]
                                        [--omegas 10 20 40 80] [--integral 0 0.2]
                                        [--repeat 3]

Per trial the script starts, as its own processes: this package's robot_description
publisher (the URDF with the <ros2_control> block of launch/ros2_control_sim.launch.py),
ros2_control_node, the spawner (joint_state_broadcaster and either
`joint_trajectory_controller` or `effort_controller`), the plant (command_message
joint_state) and, for this controller, the controller. It sends one JointTrajectory (the
quintic from the start pose to the goal, 20 points with positions, velocities and
accelerations, as the demo move) stamped to start 1 s ahead, records the plant's own state
and prints, per joint: the largest and RMS tracking error q_d(t) - q(t) over the move and
1 s after (q_d: the quintic, t: the plant's stamps, both on this machine's clock), the
largest |effort| the plant applied, and the settling time after the end of the move (the
last time any |error| exceeded `--settle` rad).

JTC gains: for each ωn of `--omegas` [rad/s] (damping ratio 1) and each integral factor c
of `--integral`, per joint p = m ωn², d = 2 m ωn, i = c ωn p, where m is the joint's
diagonal mass-matrix entry at the start pose (the inertia the PID drives); the trial with the
smallest largest error on the first duration is then run on the others. With `--repeat N`
each trial runs N times and the run with the median largest error stands for it (all N
largest errors are printed).
"""

import argparse
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from robot_dynamics import dynamics  # noqa: E402
from robot_dynamics.model import RobotModel  # noqa: E402
from robot_dynamics.nodes.common import bringup, ros2_control_sim  # noqa: E402
from robot_dynamics.parameters.layering import layered_parameters  # noqa: E402

CONFIG = os.path.join(REPO, 'config')
POINTS = 20
TRIALS = itertools.count(1)   # each trial's logs in a folder of their own
LISTEN_PERIOD = 2e-3          # s: the probe takes its messages this often


def quintic(s):
    s = np.clip(s, 0.0, 1.0)
    return s ** 3 * (10.0 - 15.0 * s + 6.0 * s * s)


def robot_files(robot):
    files = [os.path.join(CONFIG, f'{robot}.yaml')]
    own = os.path.join(CONFIG, f'sim_{robot}.yaml')
    if os.path.exists(own):
        files.append(own)
    return files


def write(path, document):
    with open(path, 'w', encoding='utf-8') as stream:
        yaml.safe_dump(document, stream, sort_keys=False)
    return path


class Stack:
    """The processes of one trial (started here, stopped here by their process groups)."""

    def __init__(self, folder):
        self.folder, self.processes = folder, []

    def start(self, name, command):
        log = open(os.path.join(self.folder, f'{name}.log'), 'w')
        env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
        # cwd: `python -m` puts the working directory first on the path, before PYTHONPATH:
        # started from another checkout, the nodes were that checkout's code
        self.processes.append((name, subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env,
            cwd=REPO)))

    def stop(self):
        for _, process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGINT)
        for _, process in reversed(self.processes):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def demo_move(robot):
    """(joints, start, goal) of the robot's demo move (its own demo file, or the derived one)."""
    files = robot_files(robot)
    plant_values = layered_parameters(files, '/plant_simulator')
    demo = layered_parameters(files, '/demo_move')
    model = RobotModel.from_yaml(files[0])
    joints = list(plant_values.get('joints') or model.joint_names)
    start = np.array(demo.get('start_positions') or plant_values['initial_positions'])
    return joints, start, np.array(demo['goal_positions'])


def start_stack(args, which, gains, folder, probe=None):
    """Start the processes of `which` ('jtc', 'ours' or 'direct', see `trial`) and a probe
    node; `probe(node)` adds its subscriptions first. Returns (stack, node) once
    /joint_states flows and the controller listens."""
    import rclpy
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory
    os.makedirs(folder, exist_ok=True)
    files = robot_files(args.robot)
    joints, start, _ = demo_move(args.robot)
    stamp_joint = layered_parameters(files + [os.path.join(CONFIG, 'ros2_control_sim.yaml')],
                                     '/plant_simulator').get('stamp_joint', '')
    urdf = ros2_control_sim.description(bringup.robot_description(files[0]), joints,
                                        start.tolist(), stamp_joint=stamp_joint)
    manager = {'update_rate': 1000, 'joint_state_broadcaster': {
        'type': ros2_control_sim.BROADCASTER}}
    controllers = {'controller_manager': {'ros__parameters': manager}}
    if which == 'jtc':
        name = 'joint_trajectory_controller'
        manager[name] = {'type': 'joint_trajectory_controller/JointTrajectoryController'}
        controllers[name] = {'ros__parameters': {
            'joints': joints, 'command_interfaces': ['effort'],
            'state_interfaces': ['position', 'velocity'],
            'gains': {j: {'p': float(g[0]), 'd': float(g[1]), 'i': float(g[2])}
                      for j, g in zip(joints, gains)}}}
        topic = f'/{name}/joint_trajectory'
    else:
        name = 'effort_controller'
        manager[name] = {'type': ros2_control_sim.EFFORT_CONTROLLER}
        controllers[name] = {'ros__parameters': {'joints': joints}}
        topic = '/computed_torque_controller/joint_trajectory'
    direct = which == 'direct'
    controllers_file = write(os.path.join(folder, 'controllers.yaml'), controllers)
    description_file = write(os.path.join(folder, 'description.yaml'), {
        'robot_description_publisher': {'ros__parameters': {'robot_description': urdf}}})
    py = sys.executable
    settings = 'sim_1khz.yaml' if direct else 'ros2_control_sim.yaml'
    params = [a for f in files + [os.path.join(CONFIG, settings)]
              for a in ('--params-file', f)]
    if args.realtime:
        params += ['-p', f'realtime.priority:={args.realtime}', '-p',
                   'realtime.lock_memory:=true']
    stack = Stack(folder)
    rclpy.init()
    node = rclpy.create_node('yardstick_probe')
    seen = []
    counting = node.create_subscription(JointState, '/joint_states', lambda m: seen.append(1),
                                        qos_profile_sensor_data)
    node.trajectory_publisher = node.create_publisher(JointTrajectory, topic, 10)
    if probe is not None:
        probe(node)
    try:
        if direct:
            stack.start('plant', [py, '-m', 'robot_dynamics.nodes.plant', '--ros-args']
                        + params + ['-p', 'publish_clock:=false'])
        else:
            stack.start('description', [py, '-m', 'robot_dynamics.nodes.robot_description',
                                        '--ros-args', '--params-file', description_file])
            stack.start('plant', [py, '-m', 'robot_dynamics.nodes.plant', '--ros-args']
                        + params + ['-p', 'command_message:=joint_state', '-p',
                                    f'command_topic:={ros2_control_sim.COMMANDS_TOPIC}',
                                    '-p', 'publish_clock:=false',
                                    '-p', f'publish_rate:={args.plant_rate:g}',
                                    '-r', f'joint_states:={ros2_control_sim.STATES_TOPIC}']
                        + [a for item in args.plant_param for a in ('-p', item)])
            # with --realtime: controller_manager's every thread at SCHED_FIFO just below
            # the plant and the controller (its update loop then sets its own 50); its
            # executor, which takes the effort commands, and the broadcaster's publishing
            # thread would otherwise wait behind every other job of a loaded machine
            rt = ['chrt', '-f', str(max(1, args.realtime - 10))] if args.realtime else []
            stack.start('controller_manager', rt + [
                'ros2', 'run', 'controller_manager', 'ros2_control_node', '--ros-args',
                '--params-file', controllers_file,
                '-r', '~/robot_description:=/robot_description'])
            stack.start('spawner', ['ros2', 'run', 'controller_manager', 'spawner',
                                    'joint_state_broadcaster', name, '-c', '/controller_manager'])
        if which != 'jtc':
            stack.start('controller', [py, '-m', 'robot_dynamics.nodes.controller',
                                       '--ros-args'] + params
                        + [a for item in args.controller_param for a in ('-p', item)])
        deadline = time.monotonic() + 90.0
        publisher = node.trajectory_publisher
        while time.monotonic() < deadline and (
                len(seen) < 500 or publisher.get_subscription_count() == 0):
            rclpy.spin_once(node, timeout_sec=0.01)
        if publisher.get_subscription_count() == 0:
            raise RuntimeError(f'{topic}: no subscriber (see the logs in {folder})')
        node.destroy_subscription(counting)
    except BaseException:
        stop_stack(stack, node)
        raise
    return stack, node


def stop_stack(stack, node):
    import rclpy
    node.destroy_node()
    rclpy.shutdown()
    stack.stop()


def trial(args, which, duration, gains, folder):
    """One run of `which`: 'jtc' (with `gains`, rows p, d, i per joint), 'ours' (this
    controller through the same ros2_control stack) or 'direct' (plant <-> controller, no
    ros2_control: the 1 kHz bring-up of config/sim_1khz.yaml); a dict of figures."""
    from std_msgs.msg import Float64MultiArray
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState
    from robot_dynamics.nodes.send_trajectory import trajectory_message
    from robot_dynamics.trajectories.profiles import sample_profile
    joints, start, goal = demo_move(args.robot)
    n = len(joints)                     # the plant's joints (then its stamp_joint's time)
    direct = which == 'direct'
    truth, seen, errors, commands, hardware = [], [], [], [], []
    listening = []

    def stamp(m):
        return m.header.stamp.sec + m.header.stamp.nanosec * 1e-9

    def arm_only(m, values):
        """(names, values) of the arm's joints in a JointState (not the stamp joint)."""
        kept = [k for k, name in enumerate(m.name) if name in joints]
        return [m.name[k] for k in kept], np.array(values)[kept]

    def probe(node):
        def listen(message_type, topic, qos, handler):
            listening.append((node.create_subscription(message_type, topic, lambda m: None,
                                                       qos), message_type, handler))
        listen(JointState, '/joint_states' if direct else ros2_control_sim.STATES_TOPIC, 1000,
               lambda m, when: truth.append((stamp(m), np.array(m.position[:n]),
                                             np.array(m.effort[:n]), when)))
        listen(JointState, '/computed_torque_controller/error', 1000, lambda m, when:
               errors.append((stamp(m), np.array(m.position))))
        if args.latency:
            listen(JointState, '/joint_states', qos_profile_sensor_data, lambda m, when:
                   seen.append((when, *arm_only(m, m.position), stamp(m))))
            listen(Float64MultiArray, '/effort_controller/commands', 1000,
                   lambda m, when: commands.append((when, np.array(m.data))))
            listen(JointState, ros2_control_sim.COMMANDS_TOPIC, 1000, lambda m, when:
                   hardware.append((when, *arm_only(m, m.effort))))
    stack, node = start_stack(args, which, gains, folder, probe)
    try:
        listen_until(listening, time.monotonic() + 2.0)   # let the controller take the arm
        if which != 'jtc':              # this controller holds it: ~/error comes (a move
            #                             sent before it has every joint is refused)
            listen_until(listening, time.monotonic() + 60.0, lambda: errors)
            if not errors:
                raise RuntimeError(f'the controller never took the arm (logs in {folder})')
        command = sample_profile('quintic', start, goal, duration, POINTS, joints)
        message = trajectory_message(command)
        t0 = node.get_clock().now().nanoseconds * 1e-9 + 1.0
        message.header.stamp.sec, message.header.stamp.nanosec = int(t0), int(
            round((t0 - int(t0)) * 1e9)) % 1_000_000_000
        first = len(truth)
        del seen[:], commands[:], hardware[:]
        node.trajectory_publisher.publish(message)
        listen_until(listening, time.monotonic() + 1.0 + duration + 1.0 + 0.5)
    finally:
        stop_stack(stack, node)
    if len(truth) <= first:
        raise RuntimeError(f'no state after the trajectory was sent (logs in {folder})')
    t = np.array([s[0] for s in truth[first:]])
    q = np.array([s[1] for s in truth[first:]])
    tau = np.array([s[2] for s in truth[first:]])
    window = (t >= t0) & (t <= t0 + duration + 1.0)
    q_d = start + np.outer(quintic((t[window] - t0) / duration), goal - start)
    error = q_d - q[window]
    beyond = np.flatnonzero(np.any(np.abs(error) > args.settle, axis=1))
    t_w = t[window]
    settle = max(0.0, t_w[beyond[-1]] - (t0 + duration)) if beyond.size else 0.0
    if beyond.size and beyond[-1] == len(t_w) - 1:
        settle = float('inf')                          # not settled within 1 s
    seen_error = np.array([e[1] for e in errors if t0 <= e[0] <= t0 + duration + 1.0])
    result = {'max': np.abs(error).max(axis=0), 'rms': np.sqrt((error ** 2).mean(axis=0)),
              'effort': np.abs(tau[window]).max(axis=0), 'settle': settle,
              'states': int(window.sum()),
              'seen_max': np.abs(seen_error).max(axis=0) if len(seen_error) else None,
              'series': (t_w - t0, error, tau[window]), 't0': t0}
    if args.latency:
        result['hops'] = hops(direct, truth[first:], seen, commands, hardware)
    result['logs'] = stack_summary(folder, manager=not direct)
    return result


def listen_until(listening, until, done=None):
    """Take every message waiting on the probe's subscriptions `listening` ((subscription,
    type, handler(message, receive time [s]))) until `until` (steady s) or `done()`,
    polling every LISTEN_PERIOD. The receive time is the middleware's (the system clock), not when this
    loop got to it. (rclpy's executor rebuilds a wait set per message: at the loop's 4-5 kHz
    of messages on a 2-CPU machine it fell behind, lost two states in three and took the
    CPU time of the loop it measured.)"""
    while time.monotonic() < until and not (done and done()):
        for subscription, message_type, handler in listening:
            with subscription.handle:
                taken = subscription.handle.take_message(message_type, False)
                while taken is not None:
                    received = taken[1].get('received_timestamp')
                    handler(taken[0], received * 1e-9 if received else time.time())
                    taken = subscription.handle.take_message(message_type, False)
        time.sleep(LISTEN_PERIOD)


def repeated(args, which, duration, gains, folder):
    """`trial` run `args.repeat` times: the run with the median largest error (its figures),
    with 'runs', the largest error of every run [rad]. The loop through controller_manager
    has runs where the plant's state misses the cycle that should read it and every state
    is read a cycle late: one run alone can land in either mode."""
    results = [trial(args, which, duration, gains, os.path.join(
        folder, f'{which}_{duration:g}s_{next(TRIALS)}')) for _ in range(args.repeat)]
    largest = [float(r['max'].max()) for r in results]
    chosen = dict(results[int(np.argsort(largest)[(len(largest) - 1) // 2])])
    chosen['runs'] = largest
    return chosen


def stack_summary(folder, manager=True):
    """What the run's logs say of the loop: controller_manager's overruns (count, the
    longest; `manager` False: none ran) and the plant's loop statistics line."""
    import re
    out = []
    try:
        if not manager:
            raise OSError('no controller_manager in this trial')
        with open(os.path.join(folder, 'controller_manager.log'), encoding='utf-8') as f:
            took = [float(m.group(1)) for m in re.finditer(
                r'loop took ([0-9.]+) ms \(missed cycles : ([0-9]+)\)', f.read())]
        if took:
            out.append(f'controller_manager: {len(took)} overruns, longest {max(took):.1f} ms')
        else:
            out.append('controller_manager: no overrun')
    except OSError:
        pass
    try:
        with open(os.path.join(folder, 'plant.log'), encoding='utf-8') as f:
            loop = [line for line in f if 'free-running loop' in line]
        if loop:
            out.append('plant: ' + loop[-1].split('free-running loop', 1)[1].strip())
    except OSError:
        pass
    return out


def _after(first, second):
    """Delays [ms] from each entry of `second` back to the latest entry of `first` before it
    (receive times, entry[0])."""
    times = np.array([f[-1] if len(f) == 4 else f[0] for f in first])
    out = []
    for entry in second:
        k = np.searchsorted(times, entry[0]) - 1
        if k >= 0:
            out.append(entry[0] - times[k])
    return np.array(out) * 1e3


def _same_values(first, key_first, second, key_second, when_first):
    """Delays [ms] from the first arrival of a value in `first` to its first arrival in
    `second` (the same floats: one message copied on by the next hop)."""
    index, repeated = {}, set()
    for entry in first:
        key = key_first(entry)
        if key in index:
            repeated.add(key)            # at rest: the same values again, not one message
        index.setdefault(key, when_first(entry))
    for key in repeated:
        del index[key]
    out = []
    for entry in second:
        when = index.get(key_second(entry))
        if when is not None and entry[0] >= when:
            out.append(entry[0] - when)
    return np.array(out) * 1e3


def _stamp_ages(truth, seen):
    """[ms] per /joint_states whose positions are those of a plant state: its stamp (the
    controller_manager cycle that read it) minus the plant's stamp of that state."""
    stamps, repeated = {}, set()
    for entry in truth:
        key = tuple(np.round(entry[1], 12))
        if key in stamps:
            repeated.add(key)            # at rest: the same values again
        stamps.setdefault(key, entry[0])
    for key in repeated:
        del stamps[key]
    out = [s[3] - stamps[key] for s in seen
           if (key := tuple(np.round(s[2], 12))) in stamps]   # the plant's joint order
    return np.array(out) * 1e3


def hops(direct, truth, seen, commands, hardware):
    """Median and p99 [ms] of each hop of the loop, timed by this probe's receive times."""
    if direct:
        out = {'plant state -> effort command': _after(truth, commands)}
    else:
        names = seen[0][1] if seen else []

        def ordered(names_of, values):
            return tuple(np.round(values[[names_of.index(n) for n in names]], 12))
        out = {
            'plant state -> /joint_states': _same_values(
                truth, lambda e: tuple(np.round(e[1], 12)), seen,
                lambda e: ordered(e[1], e[2]), lambda e: e[3]),
            '/joint_states -> effort command': _after([(s[0],) for s in seen], commands),
            'state age at /joint_states (stamps)': _stamp_ages(truth, seen),
            'effort command -> plant command': _same_values(
                commands, lambda e: tuple(np.round(e[1], 12)), hardware,
                lambda e: ordered(e[1], e[2]), lambda e: e[0]),
        }
    return {k: (float(np.median(v)), float(np.percentile(v, 99)), len(v))
            for k, v in out.items() if len(v)}


def add_common_options(parser):
    parser.add_argument('--realtime', type=int, default=0, metavar='PRIORITY',
                        help="the plant's and the controller's realtime.priority (SCHED_FIFO, "
                        'with realtime.lock_memory); 0: off. controller_manager runs its '
                        'loop at SCHED_FIFO 50 whenever it may')
    parser.add_argument('--probe-priority', type=int, default=0,
                        help='SCHED_FIFO priority of this probe (0: normal scheduling)')
    parser.add_argument('--plant-rate', type=float, default=1000.0,
                        help="through ros2_control: the plant's publish_rate [Hz] (the "
                        "launch file's: 1000)")
    parser.add_argument('--controller-param', action='append', default=[], metavar='NAME:=VALUE',
                        help="a parameter of this controller after the files (e.g. "
                        "latency_compensation:=0.0 to see what the compensation gives)")
    parser.add_argument('--plant-param', action='append', default=[], metavar='NAME:=VALUE',
                        help="a parameter of the plant after the files (e.g. "
                        "publish_on_command:=false)")
    parser.add_argument('--latency', action='store_true',
                        help='also time the hops of the loop (probe receive times)')


def set_probe_priority(args):
    if args.probe_priority:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(args.probe_priority))


def jtc_gains(model, q, omega, integral):
    m = np.diag(dynamics.mass_matrix(model, q))
    p = m * omega ** 2
    return np.stack([p, 2.0 * m * omega, integral * omega * p], axis=1)


def show(label, result):
    runs = result.get('runs', ())
    print(f'{label}: largest error {1e3 * result["max"].max():.3g} mrad (rms '
          f'{1e3 * np.sqrt((result["rms"] ** 2).mean()):.3g}), settling '
          f'{result["settle"]:.3f} s, {result["states"]} states'
          + (f'; the median of {len(runs)} runs: '
             + ', '.join(f'{1e3 * v:.3g}' for v in sorted(runs)) + ' mrad'
             if len(runs) > 1 else ''))
    print('    max error [mrad] ' + ' '.join(f'{1e3 * v:8.4f}' for v in result['max']))
    print('    max |effort|     ' + ' '.join(f'{v:8.2f}' for v in result['effort']))
    if result.get('seen_max') is not None:
        print('    ~/error max      ' + ' '.join(f'{1e3 * v:8.4f}' for v in result['seen_max']))
    for hop, (median, p99, count) in result.get('hops', {}).items():
        print(f'    hop {hop:34s} median {median:.3f} ms, p99 {p99:.3f} ms ({count})')
    for line in result.get('logs', ()):
        print(f'    {line}')
    sys.stdout.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--robot', default='puma560')
    parser.add_argument('--durations', type=float, nargs='+', default=[2.0, 1.0])
    parser.add_argument('--omegas', type=float, nargs='+', default=[10.0, 20.0, 40.0, 80.0])
    parser.add_argument('--integral', type=float, nargs='+', default=[0.0, 0.2])
    parser.add_argument('--settle', type=float, default=1e-3)
    parser.add_argument('--repeat', type=int, default=1,
                        help='runs per trial; the run with the median largest error is '
                        'shown and compared')
    add_common_options(parser)
    args = parser.parse_args(argv)
    files = robot_files(args.robot)
    model = RobotModel.from_yaml(files[0])
    plant_values = layered_parameters(files, '/plant_simulator')
    q0 = np.array(plant_values.get('initial_positions', np.zeros(model.n)))
    set_probe_priority(args)
    folder = tempfile.mkdtemp(prefix='jtc_yardstick_')
    print(f'logs in {folder}; load average {os.getloadavg()[0]:.1f}')
    best = None
    for omega in args.omegas:
        for c in args.integral:
            gains = jtc_gains(model, q0, omega, c)
            try:
                result = repeated(args, 'jtc', args.durations[0], gains, folder)
            except RuntimeError as error:
                print(f'JTC wn={omega:g} c={c:g}: {error}')
                continue
            show(f'JTC wn={omega:g} rad/s, i factor {c:g}, T={args.durations[0]:g} s', result)
            if np.isfinite(result['max'].max()) and (
                    best is None or result['max'].max() < best[0]):
                best = (result['max'].max(), omega, c, gains)
    if best is None:
        print('no JTC trial ran')
        return 1
    _, omega, c, gains = best
    print(f'best JTC gains: wn={omega:g} rad/s, i factor {c:g}: p = '
          f'{np.round(gains[:, 0], 2).tolist()}, d = {np.round(gains[:, 1], 2).tolist()}, '
          f'i = {np.round(gains[:, 2], 2).tolist()}')
    for duration in args.durations:
        show(f'this controller, T={duration:g} s',
             repeated(args, 'ours', duration, None, folder))
        if duration != args.durations[0]:
            show(f'JTC (best gains), T={duration:g} s',
                 repeated(args, 'jtc', duration, gains, folder))
    return 0


if __name__ == '__main__':
    sys.exit(main())
