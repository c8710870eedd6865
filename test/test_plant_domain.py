"""The plant executable in a simulation (publish_clock) as `ros2 launch` starts it: a second
simulated clock on the ROS domain is refused at start in one line naming the domain and
the fix, and a lock-step plant that gets no first command although a node publishes on its
command topic (a controller in control_mode timer on simulated time) says why."""

import os
import subprocess
import sys

import pytest
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from std_msgs.msg import Float64MultiArray

from ros_testing import PUMA, REPO, RosHarness, SIM   # noqa: I100 - sets ROS_DOMAIN_ID first
from robot_dynamics.nodes import plant as plant_module
from robot_dynamics.nodes.common.runner import StartRefused
from robot_dynamics.nodes.plant import PlantSimulator

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
TIMEOUT = 120    # s: a safety net against hangs, not a timing assertion


def plant_process(*items):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]), PYTHONUNBUFFERED='1')
    args = ['--ros-args', '--params-file', PUMA, '-p', 'publish_clock:=true']
    for item in items:
        args += ['-p', item]
    return subprocess.Popen([sys.executable, '-m', 'robot_dynamics.nodes.plant', *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def test_a_second_simulated_clock_on_the_domain_is_refused_in_one_line():
    """Another /clock publisher on the domain (here this test's own, as another simulation's
    plant would be): the plant executable exits 1 with one error line naming
    ROS_DOMAIN_ID and the fix; nothing else is an error."""
    harness = RosHarness()
    other = harness.add(Node('other_simulation', context=harness.context))
    clock = other.create_publisher(Clock, '/clock', 10)
    process = plant_process('domain_check_wait:=60.0')
    try:
        output, _ = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
        other.destroy_publisher(clock)
        harness.close()
    assert process.returncode == 1, output
    errors = [line for line in output.splitlines() if '[ERROR]' in line]
    assert len(errors) == 1, output
    domain = os.environ['ROS_DOMAIN_ID']
    assert f'ROS_DOMAIN_ID {domain} already has a simulation' in errors[0]
    assert '/clock' in errors[0] and 'ROS_DOMAIN_ID=' in errors[0]
    assert 'Traceback' not in output


def test_the_check_passes_with_only_the_plants_own_clock_and_fails_with_another():
    """In-process: `_refuse_a_second_clock` returns after domain_check_wait when the plant's
    /clock is the only one, and raises StartRefused once another appears."""
    harness = RosHarness(PUMA, SIM)
    plant = harness.add(PlantSimulator(context=harness.context, parameter_overrides=[
        Parameter('domain_check_wait', value=0.3)]))
    try:
        assert plant.publish_clock
        plant_module._refuse_a_second_clock(plant, harness.executor, lambda: True)
        other = harness.add(Node('other_simulation', context=harness.context))
        other.create_publisher(Clock, '/clock', 10)
        plant.domain_check_wait = 60.0
        with pytest.raises(StartRefused, match='already has a simulation'):
            plant_module._refuse_a_second_clock(plant, harness.executor, lambda: True)
    finally:
        harness.close()


def test_domain_check_wait_is_checked():
    process = plant_process('domain_check_wait:=-1.0')
    output, _ = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 1
    assert 'domain_check_wait' in output and '-1.0' in output and 'Traceback' not in output


class Silent(Node):
    """A publisher on the plant's command topic that never sends a command (what a
    controller in timer mode on simulated time is to a lock-step plant)."""

    def __init__(self, context, topic):
        super().__init__('silent_controller', context=context)
        self.publisher = self.create_publisher(Float64MultiArray, topic, 10)


def test_no_first_command_in_lockstep_is_explained_once(monkeypatch):
    monkeypatch.setattr(plant_module, 'LOCKSTEP_HINT', 0.2)
    harness = RosHarness(PUMA, SIM)
    plant = harness.add(PlantSimulator(context=harness.context, parameter_overrides=[
        Parameter('real_time_factor', value=0.0)]))
    lines = []
    logger = plant.get_logger()
    original = logger.warning
    monkeypatch.setattr(logger, 'warning', lambda text, **kwargs: (
        lines.append(text), original(text, **kwargs))[1])
    try:
        silent = harness.add(Silent(harness.context, plant.command_topic))
        harness.spin_until(lambda: any('control_mode timer' in line for line in lines),
                           'the explanation')
        harness.spin_for(50)              # more re-sent states: still said once
        assert silent.publisher.get_subscription_count() >= 1
    finally:
        harness.close()
    said = [line for line in lines if 'control_mode timer' in line]
    assert len(said) == 1, lines
    assert plant.command_topic in said[0] and 'on_state' in said[0]
    assert 'lockstep: false' in said[0]
    assert not plant._started and plant.sim_time == 0.0


def test_a_plant_is_refused_while_another_simulation_of_this_machine_holds_the_domain():
    """Another process holds the domain's simulation lock (a `sim` or a plant that has
    just started and publishes nothing yet): the plant executable exits 1 at once with one
    line naming ROS_DOMAIN_ID, the lock file and the fix; once that process is gone, the
    lock is free again (the system released it)."""
    from robot_dynamics.nodes.common import runner
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]), PYTHONUNBUFFERED='1')
    holder = subprocess.Popen(
        [sys.executable, '-c', 'import sys; from robot_dynamics.nodes.common import runner; '
         'lock = runner.lock_domain(); print("held", flush=True); sys.stdin.read()'],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'held'
        with pytest.raises(StartRefused, match='holds'):
            runner.lock_domain()
        process = plant_process()
        try:
            output, _ = process.communicate(timeout=TIMEOUT)
        finally:
            if process.poll() is None:
                process.kill()
    finally:
        holder.communicate(input='', timeout=TIMEOUT)
    assert process.returncode == 1, output
    errors = [line for line in output.splitlines() if '[ERROR]' in line]
    assert len(errors) == 1, output
    domain = os.environ['ROS_DOMAIN_ID']
    assert f'ROS_DOMAIN_ID {domain} already has a simulation' in errors[0]
    assert runner.domain_lock_path() in errors[0] and 'ROS_DOMAIN_ID=' in errors[0]
    lock = runner.lock_domain()            # free again
    assert lock is not None
    lock.close()


def test_a_destroyed_plant_lets_go_of_the_domain_lock():
    from robot_dynamics.nodes.common import runner
    harness = RosHarness(PUMA, SIM)
    try:
        plant = harness.add(PlantSimulator(context=harness.context, parameter_overrides=[
            Parameter('domain_check_wait', value=0.05)]))
        plant_module._refuse_a_second_clock(plant, harness.executor, lambda: True)
        with pytest.raises(StartRefused, match='holds'):
            runner.lock_domain()
    finally:
        harness.close()                    # destroys the plant
    lock = runner.lock_domain()
    assert lock is not None
    lock.close()
