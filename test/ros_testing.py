"""Helpers for the tests that talk over DDS: localhost discovery, one rclpy context per
test, spinning until something has happened, service calls that survive a lost response.

Each test module runs on a DDS domain of its own (conftest.py's `private_dds_domain`);
importing this module also sets a ROS_DOMAIN_ID per process and
ROS_AUTOMATIC_DISCOVERY_RANGE before any rclpy.init, for use outside pytest.
"""

import os
import time

import pytest

rclpy = pytest.importorskip('rclpy')
pytest.importorskip('rclpy.executors')

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUMA = os.path.join(REPO, 'config', 'puma560.yaml')
PANDA = os.path.join(REPO, 'config', 'panda.yaml')
SIM_SETTINGS = os.path.join(REPO, 'config', 'sim.yaml')           # any arm's node settings
PUMA_DEMO = os.path.join(REPO, 'config', 'sim_puma560.yaml')    # the PUMA's [LEE] demo


def _merged_params_file(*paths):
    """One parameter file holding `paths` layered in order (section by section, key by
    key), written to the temporary folder and removed when the tests end."""
    import atexit
    import tempfile
    import yaml

    def merge(into, update):
        for key, value in update.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            else:
                into[key] = value
    merged = {}
    for path in paths:
        with open(path, encoding='utf-8') as stream:
            merge(merged, yaml.safe_load(stream) or {})
    handle, path = tempfile.mkstemp(prefix='ros_testing_sim_', suffix='.yaml')
    with os.fdopen(handle, 'w', encoding='utf-8') as stream:
        yaml.safe_dump(merged, stream)
    atexit.register(lambda: os.path.exists(path) and os.remove(path))
    return path


# The PUMA 560 demo's node settings as `sim` layers them after config/puma560.yaml:
# config/sim_puma560.yaml ([LEE]'s start pose and move, widened limits), config/sim.yaml.
SIM = _merged_params_file(PUMA_DEMO, SIM_SETTINGS)
# -p overrides widening config/puma560.yaml's position limits to +-2 pi, as
# config/sim_puma560.yaml does for the plant and the controller: [LEE]'s start pose (q3 =
# 90 deg) is beyond the preset's joint-3 range, where the plant's mechanical stops would
# refuse to start.
TWO_PI = 6.283185307179586
WIDE_LIMITS = (f'robot.position_min:={[-TWO_PI] * 6}', f'robot.position_max:={[TWO_PI] * 6}')
WALL_LIMIT = 120.0  # s: a safety net against hangs (generous: a loaded CI machine), not a timing assertion

# Unique per test process (pytest-xdist workers and parallel runs included).
os.environ['ROS_DOMAIN_ID'] = str(1 + os.getpid() % 200)
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'


class ProcessOutput:
    """The output of a child process read as it comes, by a thread (a pipe nobody reads
    fills up at 64 KiB and then blocks the child's next log line), each line with the
    wall time since the start: `text()`, `seen(part)`, `timeline()` for a failure
    message."""

    def __init__(self, process):
        import threading
        self.start = time.monotonic()
        self.lines = []            # (seconds since start, line)
        self._process = process
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        for line in self._process.stdout:
            self.lines.append((time.monotonic() - self.start, line.rstrip('\n')))

    def seen(self, part):
        return any(part in line for _, line in self.lines)

    def text(self, timeout=20.0):
        """Everything printed; waits up to `timeout` s for the end of the output once the
        process has ended."""
        if self._process.poll() is not None:
            self._thread.join(timeout)
        return '\n'.join(line for _, line in self.lines)

    def timeline(self):
        return '\n'.join(f'{t:8.2f} s  {line}' for t, line in self.lines) or '(nothing)'


RESEND = 2.0
"""[s] after which an unanswered idempotent service request is sent again (`call_service`)."""


def call_service(harness, client, request, what, resend_after=None, while_waiting=None):
    """The response to `request`. A client sees a service ready once its requests reach the
    server, which may be before the server's responses can reach the client (a response
    sent before then is lost): an idempotent request may be sent again every
    `resend_after` s until one is answered. `while_waiting()` runs at every spin (e.g. a
    robot that keeps publishing its state)."""
    future, sent = client.call_async(request), time.monotonic()

    def answered():
        nonlocal future, sent
        if while_waiting is not None:
            while_waiting()
        if future.done():
            return True
        if resend_after is not None and time.monotonic() - sent > resend_after:
            client.remove_pending_request(future)
            future, sent = client.call_async(request), time.monotonic()
        return False
    harness.spin_until(answered, what)
    return future.result()


def layered_params_file(param_files, items):
    """A params file giving each 'name:=value' item to every node a file names with the
    parameter set (so the item wins there too), or None if no item needs it."""
    import copy
    import tempfile
    import yaml
    sections = {}
    for path in param_files:
        with open(path, encoding='utf-8') as stream:
            document = yaml.safe_load(stream) or {}
        for node, body in document.items():
            if node != '/**' and isinstance(body, dict):
                sections.setdefault(node, []).append(body.get('ros__parameters') or {})
    layered = {}
    for item in items:
        name, _, text = item.partition(':=')
        value = yaml.safe_load(text)
        if isinstance(value, str):          # PyYAML reads 4e-05 as a string, rcl a double
            try:
                value = float(value)
            except ValueError:
                pass
        for node, bodies in sections.items():
            if any(_has_parameter(body, name.split('.')) for body in bodies):
                target = layered.setdefault(node, {'ros__parameters': {}})['ros__parameters']
                *parents, leaf = name.split('.')
                for part in parents:
                    target = target.setdefault(part, {})
                target[leaf] = copy.deepcopy(value)     # no YAML alias: rcl refuses them
    if not layered:
        return None
    handle, path = tempfile.mkstemp(prefix='ros_testing_', suffix='.yaml')
    with os.fdopen(handle, 'w', encoding='utf-8') as stream:
        yaml.safe_dump(layered, stream)
    return path


def _has_parameter(body, parts):
    for part in parts:
        if not isinstance(body, dict) or part not in body:
            return False
        body = body[part]
    return True


class RosHarness:
    """One rclpy context and executor; nodes added with `add` are destroyed at the end."""

    def __init__(self, *param_files, ros_args=(), overrides=(), layer_overrides=True):
        """`overrides`: 'name:=value' items, each passed as `-p` after the files. A `-p`
        item (here or in `ros_args`) wins over the files: rcl lets a file's node-specific
        value (config/sim.yaml's `/**/plant_simulator: real_time_factor`) win over a global
        `-p`, so such items are also layered in a file of their own under those nodes
        (`layer_overrides` False: rcl's own order, as a node sees it)."""
        args = ['test', '--ros-args']
        for path in param_files:
            args += ['--params-file', path]
        items = list(overrides)
        ros_args = list(ros_args)
        items += [ros_args[k + 1] for k, arg in enumerate(ros_args[:-1]) if arg == '-p']
        self._layered = layered = (layered_params_file(param_files, items)
                                   if layer_overrides else None)
        if layered is not None:
            args += ['--params-file', layered]
        args += ros_args
        for item in overrides:
            args += ['-p', item]
        self.context = rclpy.Context()
        rclpy.init(context=self.context, args=args)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
        self.nodes = []

    def add(self, node):
        self.nodes.append(node)
        self.executor.add_node(node)
        return node

    def spin_until(self, predicate, what, wall_limit=WALL_LIMIT):
        start = time.monotonic()
        while not predicate():
            if time.monotonic() - start > wall_limit:
                raise AssertionError(f'gave up waiting for {what} after {wall_limit} s')
            self.executor.spin_once(timeout_sec=0.05)

    def spin_for(self, iterations):
        for _ in range(iterations):
            self.executor.spin_once(timeout_sec=0.01)

    def close(self):
        self.executor.shutdown()
        for node in self.nodes:
            node.destroy_node()
        rclpy.try_shutdown(context=self.context)
        if self._layered is not None and os.path.exists(self._layered):
            os.remove(self._layered)


def lockstep_loop(integration_step):
    """The shipped closed loop in a new harness: plant_simulator and
    computed_torque_controller with config/puma560.yaml and config/sim.yaml (on_state,
    lock-step on simulated time), as fast as the CPU allows; (harness, plant, controller)."""
    from rclpy.parameter import Parameter
    from robot_dynamics.nodes.controller import ComputedTorqueController
    from robot_dynamics.nodes.plant import PlantSimulator
    harness = RosHarness(PUMA, SIM)
    # parameter_overrides, not `-p`: a file's node-specific value wins over a global `-p`
    plant = harness.add(PlantSimulator(context=harness.context, parameter_overrides=[
        Parameter('real_time_factor', value=0.0),
        Parameter('integration_step', value=integration_step)]))
    controller = harness.add(ComputedTorqueController(
        context=harness.context, parameter_overrides=[Parameter('use_sim_time', value=True)]))
    return harness, plant, controller


def edited_puma_file(tmp_path, edit):
    """config/puma560.yaml, parsed, edited by `edit(ros__parameters)` and written to
    tmp_path/params.yaml; its path."""
    import yaml
    with open(PUMA, encoding='utf-8') as stream:
        document = yaml.safe_load(stream)
    edit(document['/**']['ros__parameters'])
    path = tmp_path / 'params.yaml'
    path.write_text(yaml.safe_dump(document))
    return str(path)


# Messages a robot and an operator send.

def resting_state(joints, q, node):
    """sensor_msgs/JointState: the arm at rest at `q`, stamped with `node`'s clock."""
    from sensor_msgs.msg import JointState
    msg = JointState(name=list(joints), position=[float(v) for v in q],
                     velocity=[0.0] * len(joints))
    msg.header.stamp = node.get_clock().now().to_msg()
    return msg


def move_to(joints, goal, seconds):
    """trajectory_msgs/JointTrajectory: one point, `goal` after `seconds` (whole s)."""
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
    point = JointTrajectoryPoint(positions=[float(v) for v in goal])
    point.time_from_start.sec = seconds
    return JointTrajectory(joint_names=list(joints), points=[point])


# rcl_interfaces Parameter messages, as `ros2 param set` sends them.

def _parameter(name, **value):
    from rcl_interfaces.msg import Parameter, ParameterValue
    return Parameter(name=name, value=ParameterValue(**value))


def double(name, value):
    from rcl_interfaces.msg import ParameterType
    return _parameter(name, type=ParameterType.PARAMETER_DOUBLE, double_value=float(value))


def doubles(name, values):
    from rcl_interfaces.msg import ParameterType
    return _parameter(name, type=ParameterType.PARAMETER_DOUBLE_ARRAY,
                      double_array_value=list(values))


def integers(name, values):
    from rcl_interfaces.msg import ParameterType
    return _parameter(name, type=ParameterType.PARAMETER_INTEGER_ARRAY,
                      integer_array_value=list(values))


def string(name, value):
    from rcl_interfaces.msg import ParameterType
    return _parameter(name, type=ParameterType.PARAMETER_STRING, string_value=value)
