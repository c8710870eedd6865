"""Throttled log lines (robot_dynamics.nodes.common.throttled_log): a line is logged once a
period per call site (and level, or an explicit key); the repeats in between never reach
the node's logger (rclpy's own throttle looks up the caller's source on every call, 0.3-0.5 ms,
which a condition repeating every cycle of a 1 kHz loop would pay every cycle); the
controller and the plant clipping every cycle log one line a period; the package calls no
rclpy throttle."""

import os
import re

import numpy as np
import pytest

from robot_dynamics.nodes.common import throttled_log
from robot_dynamics.nodes.common.throttled_log import log_throttled

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       'robot_dynamics')


class Logger:
    def __init__(self):
        self.lines = []

    def __getattr__(self, level):
        if level not in ('debug', 'info', 'warning', 'error', 'fatal'):
            raise AttributeError(level)
        return lambda text, **kwargs: self.lines.append((level, text, kwargs))


class Node:
    """What log_throttled needs of a node: get_logger(), counted."""

    def __init__(self):
        self.logger = Logger()
        self.asked = 0

    def get_logger(self):
        self.asked += 1
        return self.logger

    def texts(self):
        return [text for _, text, _ in self.logger.lines]


@pytest.fixture
def clock(monkeypatch):
    """The throttle's clock, moved by hand [s]."""
    now = [1000.0]
    monkeypatch.setattr(throttled_log, '_clock', lambda: now[0])
    return now


def test_a_line_is_logged_at_once_then_once_a_period(clock):
    node = Node()
    logged = []
    for step in range(9):               # every 0.5 s for 4 s, period 2 s
        logged.append(log_throttled(node, 'warning', f'call {step}', 2.0))
        clock[0] += 0.5
    assert logged == [True, False, False, False, True, False, False, False, True]
    assert node.texts() == ['call 0', 'call 4', 'call 8']
    assert all(level == 'warning' and not kwargs for level, _, kwargs in node.logger.lines)


def test_a_suppressed_repeat_does_not_reach_the_logger(clock):
    node = Node()
    for _ in range(1000):
        log_throttled(node, 'warning', 'again')
        clock[0] += 1e-3
    assert node.asked == 1 and node.texts() == ['again']


def test_call_sites_and_levels_are_throttled_apart(clock):
    node = Node()
    for _ in range(3):
        log_throttled(node, 'warning', 'first site')
        log_throttled(node, 'warning', 'second site')
    for level in ('info', 'warning', 'info'):
        log_throttled(node, level, level)           # one site, two levels
    assert node.texts() == ['first site', 'second site', 'info', 'warning']


def test_a_helper_throttles_per_caller_with_depth_two(clock):
    node = Node()

    def warn(text):
        log_throttled(node, 'warning', text, depth=2)
    warn('from one caller')
    warn('from another caller')                     # not held back by the first
    for _ in range(5):
        warn('in a loop')                           # one caller: once
    assert node.texts() == ['from one caller', 'from another caller', 'in a loop']


def test_an_explicit_key_is_the_line(clock):
    node = Node()
    for what in ('joint_states', 'joint_trajectory', 'joint_states'):
        log_throttled(node, 'error', f'{what}: failed', key=('unexpected error', what))
    assert node.texts() == ['joint_states: failed', 'joint_trajectory: failed']
    clock[0] += throttled_log.THROTTLE
    log_throttled(node, 'error', 'joint_states: again', key=('unexpected error',
                                                              'joint_states'))
    assert node.texts()[-1] == 'joint_states: again'


def test_the_package_calls_no_rclpy_throttle():
    """rclpy's throttle_duration_sec costs a source lookup on every call, logged or not."""
    found = []
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith('.py') and name != 'throttled_log.py':
                with open(os.path.join(folder, name), encoding='utf-8') as source:
                    text = source.read()
                found += [f'{name}: {m.group(0)}'
                          for m in re.finditer(r'throttle_duration_sec\s*=', text)]
    assert not found, found


# ------------------------------------------------------------------ the nodes

def _harness(*overrides):
    pytest.importorskip('rclpy')
    from ros_testing import PUMA, RosHarness
    return RosHarness(PUMA, overrides=overrides)


def test_the_controller_clipping_every_cycle_logs_one_line_a_period(clock, monkeypatch):
    from robot_dynamics.nodes.controller import ComputedTorqueController
    harness = _harness()
    try:
        controller = harness.add(ComputedTorqueController(context=harness.context))
        node = Node()
        monkeypatch.setattr(controller, 'get_logger', node.get_logger)
        tau = 10.0 * np.asarray(controller.effort_limits)
        for _ in range(3000):                   # 3 s of a 1 kHz loop at its limits
            limited = controller._saturate(tau)
            clock[0] += 1e-3
        assert np.array_equal(limited, controller.effort_limits)
        assert controller._saturated_cycles == 3000
        lines = [t for t in node.texts() if 'effort clipped to effort_limits' in t]
        assert len(lines) == 2 and '(1 cycles so far)' in lines[0], lines
        assert node.asked == 2
    finally:
        harness.close()


def test_the_plant_clipping_every_tick_logs_one_line_a_period(clock, monkeypatch):
    from robot_dynamics.nodes.plant import PlantSimulator
    harness = _harness('command_timeout:=0.0')
    try:
        plant = harness.add(PlantSimulator(context=harness.context))
        node = Node()
        monkeypatch.setattr(plant, 'get_logger', node.get_logger)
        plant._tau_command = 10.0 * plant.model.effort_max
        for _ in range(3000):
            tau = plant.effort()
            clock[0] += 1e-3
        assert np.array_equal(tau, plant.model.effort_max)
        assert plant.clipped_steps == 3000
        lines = [t for t in node.texts() if 'clipped to robot.effort_max' in t]
        assert len(lines) == 2 and '(1 ticks so far)' in lines[0], lines
    finally:
        harness.close()


def test_one_node_logs_at_every_level_through_rclpy(clock):
    """rclpy refuses a call site that logs at two levels; the lines of every level go
    through, each once a period."""
    pytest.importorskip('rclpy')
    harness = _harness()
    try:
        from rclpy.node import Node as RclpyNode
        node = harness.add(RclpyNode('throttled_levels', context=harness.context))
        for level in ('debug', 'info', 'warning', 'error', 'fatal', 'info', 'warning'):
            log_throttled(node, level, f'a line at {level}', key=('levels', level))
            log_throttled(node, level, f'the same at {level}')
        clock[0] += throttled_log.THROTTLE
        assert log_throttled(node, 'warning', 'again', key=('levels', 'warning'))
    finally:
        harness.close()
