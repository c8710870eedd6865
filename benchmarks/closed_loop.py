"""Closed-loop rows of the performance table (doc/performance.md): controller reaction
latency and the 1 kHz loop in real time.

    PYTHONPATH=. .venv-kilted/bin/python benchmarks/closed_loop.py [--skip-scaling]

(.venv-kilted: made by `python3 tools/dev.py test` or `bench`.)

Every node runs as the shipped executable (`python -m robot_dynamics.nodes.<node>`, its own
process, spun by its `main()`), with the parameter files the bring-up passes
(config/puma560.yaml, its demo config/sim_puma560.yaml, then config/sim_1khz.yaml), under
a private ROS_DOMAIN_ID with ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST. With these settings
the controller's `main()` runs its on_state loop (a wait set of its two subscriptions) and
the plant's its free-running loop (sleep to the next tick, take the commands); the relay's
`main()` is the plain rclpy executor.

1. Reaction latency at 1 kHz input. A probe (this process) publishes /joint_states every
   1 ms and times the answer: the controller's effort command (control_mode on_state,
   diagnostics as configured), or the answer of a bare rclpy relay (`--relay`: subscribe a
   JointState topic, publish its positions as Float64MultiArray, spun by the same `main()`
   runner as the nodes, with its default spin: `executor.spin_once()` in a loop). Blocks of 250
   messages alternate between the two; the first block of each is warm-up. Target:
   controller median <= 1.25 x relay median.
2. Real-time factor of the shipped bring-up at 1 kHz: plant_simulator (free-running on the
   wall clock, RK4 at 1 ms, /joint_states every 1 ms), computed_torque_controller
   (on_state) and demo_move as separate processes, as `sim.launch.py
   sim_params_file:=config/sim_1khz.yaml use_sim_time:=false` starts them. --duration
   wall seconds after the loop closed (the controller has seen every joint) the plant is
   stopped and prints its loop statistics, counted from the first command (before it the
   plant holds its initial state):
   real-time factor = simulated / wall time; tick k is due at start + k ms on the steady
   clock, and a late tick is one processed more than one period (1 ms) after it was due.
   Targets: real-time factor >= 0.98, late ticks <= 1.5 % (doc/performance.md).
3. The same loop in one process, one executor (the `sim` entry point's lock-step mode, as
   fast as it goes): simulated / wall time.
4. Scaling with the number of joints: the controller's state callback (one cycle, publish
   included, no DDS round trip) and the plant's tick, timed in-process, per model.
"""

import argparse
import contextlib
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
os.environ.setdefault('ROS_DOMAIN_ID', str(100 + os.getpid() % 100))
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'

import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.qos import qos_profile_sensor_data, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

CONFIG = os.path.join(REPO, 'config')
PUMA = os.path.join(CONFIG, 'puma560.yaml')
SIM_1KHZ = os.path.join(CONFIG, 'sim_1khz.yaml')
PUMA_DEMO = os.path.join(CONFIG, 'sim_puma560.yaml')   # [LEE]'s start pose, widened limits
JOINTS = [f'joint_{i}' for i in range(1, 7)]
START = [1.5707963267948966, 0.0, 1.5707963267948966, 0.0, 0.0, 0.0]
RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
PERIOD = 0.001       # s: 1 kHz
BLOCK = 250          # messages per block
ANSWER_LIMIT = 0.02  # s: an answer later than this is counted as missing
START_LIMIT = 120.0  # wall s: the bring-up's loop must have closed by then
CLOSED = 'all joints seen'   # the controller's log line once the loop is closed


class Relay(Node):
    """The yardstick: /relay/joint_states in, a Float64MultiArray of the positions out,
    with the controller's QoS (sensor data in, reliable depth 10 out)."""

    def __init__(self):
        super().__init__('bare_relay')
        self.pub = self.create_publisher(Float64MultiArray, '/relay/commands', 10)
        self.create_subscription(JointState, '/relay/joint_states', self.relay,
                                 qos_profile_sensor_data)

    def relay(self, msg):
        self.pub.publish(Float64MultiArray(data=msg.position.tolist()))


class Probe(Node):
    """Publishes states to one target at a time and times the answers."""

    def __init__(self):
        super().__init__('latency_probe')
        self.targets = {
            'controller': (self.create_publisher(JointState, '/joint_states', RELIABLE),
                           '/effort_controller/commands'),
            'relay': (self.create_publisher(JointState, '/relay/joint_states', RELIABLE),
                      '/relay/commands')}
        self.answers = 0
        for _, topic in self.targets.values():
            self.create_subscription(Float64MultiArray, topic, self.answer, RELIABLE)
        self.msg = JointState(name=JOINTS, position=START, velocity=[0.0] * 6)

    def answer(self, msg):
        self.answers += 1

    def matched(self):
        return all(pub.get_subscription_count() > 0 for pub, _ in self.targets.values())

    def block(self, executor, target, count):
        """`count` messages at 1 kHz to `target`; the latencies [s] (None: no answer)."""
        pub = self.targets[target][0]
        latencies = []
        start = time.perf_counter()
        for k in range(count):
            wait = start + k * PERIOD - time.perf_counter()
            if wait > 0.0:
                time.sleep(wait)
            self.msg.header.stamp = self.get_clock().now().to_msg()
            self.answers = 0
            sent = time.perf_counter()
            pub.publish(self.msg)
            while not self.answers and time.perf_counter() - sent < ANSWER_LIMIT:
                executor.spin_once(timeout_sec=ANSWER_LIMIT)
            latencies.append(time.perf_counter() - sent if self.answers else None)
            if not self.answers:          # drain a late answer, restart the schedule
                executor.spin_once(timeout_sec=0.05)
                start = time.perf_counter() - (k + 1) * PERIOD
        return latencies


def node_command(module, *extra, params_files=None):
    """`python -m module --ros-args` with the bring-up's parameter files (`params_files`:
    others instead of the PUMA 560's), then `extra`."""
    files = (PUMA, PUMA_DEMO, SIM_1KHZ) if params_files is None else params_files
    args = [arg for path in files for arg in ('--params-file', path)]
    return [sys.executable, '-m', module, '--ros-args', *args, *extra]


def start(command, log=None):
    """The process, its output into the file `log` (else a pipe)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]), PYTHONUNBUFFERED='1')
    process = subprocess.Popen(command, env=env, stdout=log or subprocess.PIPE,   # cwd: see
                               stderr=subprocess.STDOUT, text=True, cwd=REPO)   # jtc_yardstick
    process.log = log
    return process


def output(process):
    """What the process has written so far to its `log` file."""
    with open(process.log.name, encoding='utf-8', errors='replace') as stream:
        return stream.read()


def stop(process, timeout=10.0):
    """SIGINT (as launch does), then the process's output."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
    if process.log is None:
        return out
    out = output(process)
    process.log.close()
    return out


def wait_for_output(process, text, limit):
    """Wait up to `limit` wall s until `process` (started with a log) has printed `text`."""
    deadline = time.monotonic() + limit
    while text not in output(process) and process.poll() is None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return text in output(process)


@contextlib.contextmanager
def fifo_priority(priority):
    """The calling thread under SCHED_FIFO `priority` (0: unchanged) inside the block; the
    threads it creates meanwhile (rclpy.init's middleware threads) inherit it."""
    if not priority:
        yield
        return
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    try:
        yield
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def reaction_latency(count, node_args=(), priority=0):
    """(median, p99, missing answers, messages) of the controller's and the relay's
    latencies [s]. `node_args`: more --ros-args for the controller; `priority`: SCHED_FIFO
    priority of the relay and of this probe (all their threads), 0 = normal."""
    controller = start(node_command('robot_dynamics.nodes.controller',
                                    '-p', 'use_sim_time:=false',
                                    '-p', 'computed_torque_controller:state_timeout:=2.0',
                                    *node_args))
    relay = start([sys.executable, os.path.abspath(__file__), '--relay', str(priority)])
    with fifo_priority(priority):
        try:
            samples = _probe(count)
        finally:
            logs = {'controller': stop(controller), 'relay': stop(relay)}
    result = {}
    for target, values in samples.items():
        answered = [v for v in values if v is not None]
        if not answered:
            raise RuntimeError(f'{target} never answered:\n{logs[target][-2000:]}')
        result[target] = (statistics.median(answered), float(np.percentile(answered, 99)),
                          len(values) - len(answered), len(values))
    return result


def _probe(count):
    """Blocks of BLOCK states to the controller and the relay in turn; their latencies."""
    rclpy.init()
    try:
        probe = Probe()
        executor = SingleThreadedExecutor()
        executor.add_node(probe)
        deadline = time.monotonic() + 60.0
        while not probe.matched() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        if not probe.matched():
            raise RuntimeError('the controller or the relay did not come up')
        samples = {'controller': [], 'relay': []}
        blocks = max(1, count // BLOCK)
        for b in range(blocks + 1):
            for target in ('controller', 'relay'):
                latencies = probe.block(executor, target, BLOCK)
                if b > 0:                         # block 0: warm-up
                    samples[target].extend(latencies)
        executor.shutdown()
        probe.destroy_node()
    finally:
        rclpy.try_shutdown()
    return samples


PLANT_LINE = re.compile(
    r'free-running loop \(closed_loop=(\w+)\): (\d+) ticks, ([\d.]+) s simulated in '
    r'([\d.]+) s wall \(real-time factor ([\d.]+)\), (\d+) late .*?, (\d+) dropped, (\d+) '
    r'states unanswered')


def bringup_real_time(duration, node_args=(), rate=None, params_files=None):
    """The bring-up's three processes for `duration` wall s after the loop closed (the
    controller saw every joint; start-up may take long on a loaded machine: up to
    START_LIMIT s); the plant's statistics (and the controller's output, 'controller_log').
    `node_args`: more --ros-args for the plant and the controller; `rate`: the control rate
    [Hz] instead of sim_1khz.yaml's 1000 (the plant publishes at it, integrating one RK4
    step of min(1 ms, 1/rate) at a time); `params_files`: the parameter files of every
    process instead of the PUMA 560's (node_command)."""
    if rate is not None:
        step = min(PERIOD, 1.0 / rate)
        # node-specific: a plain -p loses against sim_1khz.yaml's /**/plant_simulator
        node_args = ('-p', f'plant_simulator:publish_rate:={float(rate)}', '-p',
                     f'plant_simulator:integration_step:={step!r}', *node_args)
    with tempfile.TemporaryDirectory() as logs:
        def log(name):
            return open(os.path.join(logs, name + '.log'), 'w+', encoding='utf-8')
        plant = start(node_command('robot_dynamics.nodes.plant', '-p', 'publish_clock:=false',
                                   *node_args, params_files=params_files), log('plant'))
        controller = start(node_command('robot_dynamics.nodes.controller', '-p',
                                        'use_sim_time:=false', *node_args,
                                        params_files=params_files), log('controller'))
        ros_args = node_command('', '-p', 'use_sim_time:=false',
                                params_files=params_files)[3:]   # from --ros-args on
        demo = start([sys.executable, '-c', 'import sys; from robot_dynamics.nodes.sim import '
                      'demo_main; sys.exit(demo_main())', *ros_args], log('demo'))
        try:
            if wait_for_output(controller, CLOSED, START_LIMIT):
                time.sleep(duration)
        finally:
            controller_log = stop(controller)   # the plant first would leave it stale
            plant_log = stop(plant)
            demo_log = stop(demo)
    match = PLANT_LINE.search(plant_log)
    if match is None:
        raise RuntimeError(f'no loop statistics from the plant:\n{plant_log[-3000:]}\n'
                           f'{controller_log[-2000:]}\n{demo_log[-1000:]}')
    closed, ticks, simulated, wall, rtf, late, dropped, unanswered = match.groups()
    return {'closed_loop': closed == 'True', 'ticks': int(ticks), 'simulated': float(simulated),
            'wall': float(wall), 'real_time_factor': float(rtf), 'late': int(late),
            'dropped': int(dropped), 'unanswered': int(unanswered),
            'moved': 'joint_trajectory accepted' in controller_log,
            'controller_log': controller_log}


def one_process_lockstep(duration):
    """The `sim` entry point's loop at 1 kHz (lock-step on /clock, as fast as it goes)."""
    out = subprocess.run(
        [sys.executable, '-m', 'robot_dynamics.nodes.sim', '--duration', str(duration),
         '--control-rate', '1000'], capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=REPO))
    started = re.findall(r'\[(\d+\.\d+)\] \[plant_simulator\]: .* joints,', out.stderr)
    simulated = re.search(r'simulated ([\d.]+) s', out.stdout)
    return (float(simulated.group(1)) if simulated else float('nan')), out, started


def scaling_models():
    """(name, params file) of the models timed for the scaling rows."""
    from robot_dynamics.model import RobotModel
    from benchmark_models import random_chain   # the chains run.py times too
    import yaml
    models = [('planar2', os.path.join(CONFIG, 'planar2.yaml')), ('PUMA 560', PUMA),
              ('Panda (7)', os.path.join(CONFIG, 'panda.yaml'))]
    for n in (20, 50):
        model = random_chain(n)
        assert isinstance(model, RobotModel)
        path = os.path.join(tempfile.gettempdir(), f'closed_loop_random{n}_{os.getpid()}.yaml')
        with open(path, 'w') as stream:
            yaml.safe_dump({'/**': {'ros__parameters': {
                'joints': [f'joint_{i}' for i in range(1, n + 1)],
                'robot': model.to_params()}}}, stream)
        models.append((f'random n={n}', path))
    return models


def time_calls(function, count):
    function()
    samples = []
    for _ in range(5):
        begin = time.perf_counter()
        for _ in range(count):
            function()
        samples.append((time.perf_counter() - begin) / count)
    return min(samples)


def callback_costs(params_file):
    """(joints, controller cycle [s], plant tick [s]) in-process on `params_file`'s robot."""
    from rclpy.parameter import Parameter
    from robot_dynamics.nodes.controller import ComputedTorqueController
    from robot_dynamics.nodes.plant import PlantSimulator
    context = rclpy.Context()
    rclpy.init(args=['scaling', '--ros-args', '--params-file', params_file], context=context)
    try:
        controller = ComputedTorqueController(context=context, parameter_overrides=[
            Parameter('control_mode', value='on_state'),
            Parameter('state_publish_rate', value=100.0)])
        plant = PlantSimulator(context=context, parameter_overrides=[
            Parameter('publish_rate', value=1000.0)])
        n = controller.model.n
        msg = JointState(name=list(controller.joints), position=[0.1] * n, velocity=[0.0] * n)
        clock = controller.get_clock()

        def cycle():
            # stamped with the node clock, as a live plant does: stamps running ahead of it
            # (1 ms per call) would end in dropped states and warnings after a second
            msg.header.stamp = clock.now().to_msg()
            controller._on_joint_states(msg)

        command = Float64MultiArray(data=[0.0] * n)

        def tick():
            plant._on_command(command)      # as a live loop: a fresh command per tick
            plant._advance()

        controller_cost = time_calls(cycle, 300)
        plant_cost = time_calls(tick, 100)
        for node in (controller, plant):
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
    return n, controller_cost, plant_cost


def relay_main(priority):
    from robot_dynamics.nodes.common.runner import run
    with fifo_priority(priority):
        return run(Relay, 'bare_relay', ['relay'] + sys.argv[3:])


def verdict(ok):
    return 'MET' if ok else 'NOT MET'


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--count', type=int, default=2000,
                        help='latency samples per node (2000, blocks of 250)')
    parser.add_argument('--duration', type=float, default=12.0,
                        help='wall seconds of the bring-up run (12)')
    parser.add_argument('--skip-one-process', action='store_true')
    parser.add_argument('--skip-scaling', action='store_true')
    args = parser.parse_args()
    print(f'# ROS_DOMAIN_ID {os.environ["ROS_DOMAIN_ID"]}, python {sys.version.split()[0]}, '
          f'rclpy from {os.path.dirname(rclpy.__file__)}')
    latency = reaction_latency(args.count)
    (c_med, c_p99, c_miss, c_n), (r_med, r_p99, r_miss, _) = (
        latency['controller'], latency['relay'])
    ratio = c_med / r_med
    print(f'reaction latency at 1 kHz input, {c_n} messages each: controller median '
          f'{c_med * 1e6:.0f} µs (p99 {c_p99 * 1e6:.0f}, {c_miss} unanswered), bare relay '
          f'{r_med * 1e6:.0f} µs (p99 {r_p99 * 1e6:.0f}, {r_miss} unanswered): ratio '
          f'{ratio:.2f}, target <= 1.25: {verdict(ratio <= 1.25)}')
    loop = bringup_real_time(args.duration)
    late = loop['late'] / max(1, loop['ticks'])
    print(f'bring-up at 1 kHz (3 processes, plant free-running): {loop["simulated"]:.3f} s '
          f'simulated in {loop["wall"]:.3f} s wall since the loop closed: real-time factor '
          f'{loop["real_time_factor"]:.4f} (target >= 0.98), {loop["late"]} of '
          f'{loop["ticks"]} ticks late ({late * 100:.2f} %, target <= 1.5 %), '
          f'{loop["dropped"]} dropped, {loop["unanswered"]} states unanswered before the next '
          f'tick; demo move accepted: {loop["moved"]}: '
          f'{verdict(loop["closed_loop"] and loop["real_time_factor"] >= 0.98 and late <= 0.015)}')
    if not args.skip_one_process:
        start_time = time.monotonic()
        simulated, out, _ = one_process_lockstep(3.0)
        wall = time.monotonic() - start_time
        print(f'one process (`sim --duration 3 --control-rate 1000`, lock-step, start-up '
              f'included): {simulated:.2f} s simulated in {wall:.2f} s wall, real-time '
              f'factor {simulated / wall:.2f}')
    if not args.skip_scaling:
        print('scaling (in-process, one call each; no DDS round trip):')
        print(f'(rates: 1 / (callback + the relay round trip {r_med * 1e6:.0f} µs measured '
              'above, i.e. rclpy + DDS per message))')
        print('| model | joints | controller cycle | controller-limited rate | '
              'plant tick (RK4, 1 step) | plant-limited rate |')
        print('|---|---|---|---|---|---|')
        for name, path in scaling_models():
            n, controller_cost, plant_cost = callback_costs(path)
            if path.startswith(tempfile.gettempdir()):
                os.remove(path)
            print(f'| {name} | {n} | {controller_cost * 1e6:.0f} µs | '
                  f'{1.0 / (controller_cost + r_med):.0f} Hz | {plant_cost * 1e6:.0f} µs | '
                  f'{1.0 / (plant_cost + r_med):.0f} Hz |')


if __name__ == '__main__':
    if sys.argv[1:2] == ['--relay']:
        sys.exit(relay_main(int(sys.argv[2])))
    main()
