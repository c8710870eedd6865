"""The free-running plant keeps its simulated arm on the wall clock. With publish_on_command
its tick grid follows the commands' arrivals (phase_shift), so the time between two ticks is
not always one period: each tick integrates the wall time since the previous one (the
engines' `stretch`), and a state is stamped with the time its tick was due, not with the
moment the loop woke up for it. Checked on the engines without ROS and on the plant node with
a stand-in steady clock (no DDS traffic, no wall-time window)."""

import types

import numpy as np
import pytest

from robot_dynamics import dynamics
from robot_dynamics.model import RobotModel
from robot_dynamics.simulation import engines, integration

from ros_testing import PUMA   # noqa: I100 - sets ROS_DOMAIN_ID first

DT = 1e-3
Q0 = np.array([1.5707963267948966, 0.0, 1.5707963267948966, 0.0, 0.0, 0.0])


def _puma():
    return RobotModel.from_yaml(PUMA)


def _own(model, dt, kind):
    if kind == 'stops':      # joint 2 starts beyond its upper stop: the stop pushes back
        return engines.OwnEngine(model, dt, stops=integration.JointStops(
            np.full(6, -10.0), np.where(np.arange(6) == 1, -0.01, 10.0)))
    engine = engines.OwnEngine(model, dt)
    if kind == 'wrench':
        engine.set_wrench('link_6', [5.0, -3.0, 8.0], [0.2, 0.1, -0.3])
    return engine


@pytest.mark.parametrize('kind', ['plain', 'stops', 'wrench'])
@pytest.mark.parametrize('stretch', [0.37e-3, -0.45e-3])
def test_a_stretched_advance_is_one_step_of_dt_plus_stretch_then_steps_of_dt(kind, stretch):
    """advance(steps=3, stretch=s) on the own engine: the state, the stop effort at the end
    and the largest |stop effort| are those of one step of dt + s (an engine of that step)
    then two of dt; and they differ from three steps of dt (the stretch acted)."""
    model = _puma()
    tau = dynamics.gravity_torques(model, Q0) + np.array([3.0, -2.0, 1.0, 0.5, -0.4, 0.2])
    qd0 = np.array([0.3, 0.2, -0.4, 0.5, 0.1, -0.2])
    got = _own(model, DT, kind).advance(model, Q0, qd0, tau, 3, stretch)
    q1, qd1, stop1, peak1 = _own(model, DT + stretch, kind).advance(model, Q0, qd0, tau, 1)
    q3, qd3, stop3, peak3 = _own(model, DT, kind).advance(model, q1, qd1, tau, 2)
    np.testing.assert_array_equal(got[0], q3)
    np.testing.assert_array_equal(got[1], qd3)
    if kind == 'stops':
        assert peak1 is not None and peak1.any()
        np.testing.assert_array_equal(got[2], stop3)
        np.testing.assert_array_equal(got[3], np.maximum(peak1, peak3))
    else:
        assert got[2] is None and got[3] is None
    plain = _own(model, DT, kind).advance(model, Q0, qd0, tau, 3)
    assert np.max(np.abs(plain[0] - got[0])) > 1e-6


@pytest.mark.parametrize('wrench', [False, True])
def test_a_stretched_mujoco_advance_is_one_step_of_dt_plus_stretch_then_steps_of_dt(wrench):
    """The same on the MuJoCo engine: one mj_step of dt + s, then dt again (the model's
    timestep is back to dt afterwards); compared with two engines compiled at those steps."""
    pytest.importorskip('mujoco')
    from robot_dynamics.simulation import mujoco_engine as me
    model, joints, stretch = _puma(), [f'j{i}' for i in range(6)], 0.41e-3
    tau = dynamics.gravity_torques(model, Q0) + np.array([3.0, -2.0, 1.0, 0.5, -0.4, 0.2])
    qd0 = np.array([0.3, 0.2, -0.4, 0.5, 0.1, -0.2])

    def engine(dt):
        made = me.MujocoEngine.from_robot_model(model, joints, dt, limits=False)
        if wrench:
            made.set_wrench('link_6', [5.0, -3.0, 8.0], [0.2, 0.1, -0.3])
        return made
    stretched = engine(DT)
    q, qd, _, _ = stretched.advance(model, Q0, qd0, tau, 3, stretch)
    assert stretched.mj.opt.timestep == DT
    q1, qd1, _, _ = engine(DT + stretch).advance(model, Q0, qd0, tau, 1)
    q3, qd3, _, _ = engine(DT).advance(model, q1.copy(), qd1.copy(), tau, 2)
    np.testing.assert_allclose(q, q3, rtol=0, atol=1e-12)
    np.testing.assert_allclose(qd, qd3, rtol=0, atol=1e-12)
    plain, _, _, _ = engine(DT).advance(model, Q0, qd0, tau, 3)
    assert np.max(np.abs(plain - q)) > 1e-6


class SteadyClock:
    """Stands in for the plant module's `time`: a steady clock the test sets (sleeping
    moves it on)."""

    def __init__(self, now):
        import time
        self.now, self.time = now, time.time

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


@pytest.fixture
def plant(monkeypatch):
    rclpy = pytest.importorskip('rclpy')   # noqa: F841
    from std_msgs.msg import Float64MultiArray
    from robot_dynamics.nodes import plant as plant_module
    from ros_testing import RosHarness, WIDE_LIMITS
    clock = SteadyClock(100.0)
    monkeypatch.setattr(plant_module, 'time', types.SimpleNamespace(
        monotonic=clock.monotonic, time=clock.time, sleep=clock.sleep))
    harness = RosHarness(PUMA, overrides=(
        f'initial_positions:={Q0.tolist()}', 'publish_clock:=false', 'publish_rate:=1000.0',
        'integration_step:=0.001', 'publish_on_command:=true', 'command_timeout:=0.0') + WIDE_LIMITS)
    try:
        node = harness.add(plant_module.PlantSimulator(context=harness.context))
        node._timer.cancel()                # the test ticks it
        node._wall_start = node._wall_origin = clock.now
        node._grid_stamps = True            # as in the plant executable's own loop
        node.steady = clock
        node.published = []                 # (stamp [ns], q, effort) of each state
        node._publish = lambda clock_ns=None: node.published.append(
            (clock_ns, node.q.copy(), node._tau_applied.copy()))
        held = types.SimpleNamespace(nanoseconds=5_000_000_000)   # the node clock, held
        node.get_clock = lambda: types.SimpleNamespace(now=lambda: held)
        node.command = lambda tau: node._on_command(Float64MultiArray(
            data=[float(v) for v in tau]))
        yield node
    finally:
        harness.close()


def test_the_arm_keeps_to_the_wall_clock_when_the_phase_lock_moves_the_ticks(plant):
    """Commands arriving 0.3 period after each tick would be due: the phase lock moves the
    grid 0.4 period later over the first ticks. After 300 ticks the arm is where the same
    command held for the grid's wall time puts it (the grid's time of the next tick less
    that of the first), not where 300 periods put it."""
    period = plant.tick_period
    model = plant.model
    tau = dynamics.gravity_torques(model, Q0) + np.array([2.0, -1.5, 1.0, 0.01, -0.01, 0.005])
    plant.command(tau)
    origin = plant._wall_start
    first = None                                 # when tick 0 was due: the brakes let go
    for k in range(300):
        arrival = origin + (k - 0.7) * period    # the last command before tick k is due
        plant._lock_phase(arrival)
        first = plant._wall_start if first is None else first
        plant.steady.now = plant._wall_start + plant.ticks * period + 0.02 * period
        plant._free_running_tick()
    assert plant.ticks == 300
    moved = plant._wall_start - origin
    assert moved == pytest.approx(0.4 * period, abs=0.01 * period)   # the lock acted
    wall = plant._wall_start + plant.ticks * period - first
    reference = engines.OwnEngine(model, wall / 3000)
    q, _, _, _ = reference.advance(model, Q0, np.zeros(6), tau, 3000)
    unstretched, _, _, _ = engines.OwnEngine(model, period / 10).advance(
        model, Q0, np.zeros(6), tau, 3000)
    assert np.max(np.abs(plant.q - q)) < 1e-9
    assert np.max(np.abs(plant.q - unstretched)) > 1e-5       # 0.4 ms of motion apart
    assert plant.loop_statistics()['simulated'] == pytest.approx(
        wall + (first - origin), abs=1e-12)     # from the first tick's first due time


def test_each_state_is_the_arm_at_its_stamp_while_the_phase_lock_moves_the_ticks(plant):
    """Commands arriving 0.4 and 0.1 period before the ticks are due, in turn: the lock
    moves the grid earlier at every other tick (0.3 period of error: 15 µs), and a tick that
    comes earlier integrates that much less, but only once its state has gone out. Each
    state is still the arm at its stamp: the command held from the first state's stamp to
    its own (stamped on the moved grid, every other state was the arm 15 µs after its
    stamp)."""
    period, model = plant.tick_period, plant.model
    tau = dynamics.gravity_torques(model, Q0) + np.array([2.0, -1.5, 1.0, 0.01, -0.01, 0.005])
    plant.command(tau)
    origin = plant._wall_start
    plant.get_clock = lambda: types.SimpleNamespace(now=lambda: types.SimpleNamespace(
        nanoseconds=_ns(plant.steady.now)))                 # the node clock runs with it
    for k in range(120):
        early = 0.4 if k % 2 else 0.1
        plant._lock_phase(plant._wall_start + plant.ticks * period - early * period)
        plant.steady.now = plant._wall_start + plant.ticks * period + 0.02 * period
        plant._free_running_tick()
    assert origin - plant._wall_start > 0.5 * period             # the lock acted
    first, states = plant.published[0][0], plant.published[1:]
    for stamp, q, _ in states[-20:]:
        held = (stamp - first) * 1e-9
        steps = 10 * round(held / period)
        expected, _, _, _ = engines.OwnEngine(model, held / steps).advance(
            model, Q0, np.zeros(6), tau, steps)
        np.testing.assert_allclose(q, expected, rtol=0, atol=1e-9)


def _ns(seconds):
    return round(seconds * 1e9)


def test_a_preemption_between_the_clock_readings_does_not_move_the_stamp(plant):
    """The loop is preempted for 30 µs right after it read the node clock (a busy machine):
    the state is still stamped when its tick was due (the node clock is read again between
    two steady readings no more than 5 µs apart), not 30 µs before."""
    period = plant.tick_period
    plant.command(dynamics.gravity_torques(plant.model, Q0))
    preempted = []

    def node_now():
        now = _ns(plant.steady.now)
        if not preempted:
            preempted.append(True)
            plant.steady.now += 30e-6
        return types.SimpleNamespace(nanoseconds=now)
    plant.get_clock = lambda: types.SimpleNamespace(now=node_now)
    plant.steady.now = plant._wall_start + 0.3 * period
    plant._free_running_tick()
    assert preempted
    assert [p[0] for p in plant.published] == [_ns(plant._wall_start)]


def test_a_state_is_stamped_when_its_tick_was_due_not_when_the_loop_woke(plant):
    """The loop wakes 0.3 period after the tick was due: the state's stamp is the node
    clock (held at 5 s) less those 0.3 ms."""
    period = plant.tick_period
    plant.command(dynamics.gravity_torques(plant.model, Q0))
    plant.steady.now = plant._wall_start + 0.3 * period
    plant._free_running_tick()
    assert [p[0] for p in plant.published] == [5_000_000_000 - _ns(0.3 * period)]


def test_a_state_is_the_arm_at_its_stamp_and_a_command_acts_from_the_tick_that_took_it(
        plant):
    """Ticks on time, a command before ticks 0 and 2: each state is the arm when its tick
    was due, with the effort that acted until then; a command taken at a tick acts from
    that tick on (the state it answers does not show it yet, the next one does)."""
    period, model = plant.tick_period, plant.model
    first = dynamics.gravity_torques(model, Q0) + np.array([1.0, -1.0, 0.5, 0.01, 0.0, 0.0])
    second = first + np.array([-2.0, 1.5, -1.0, 0.0, 0.01, 0.0])
    plant.command(first)
    for k in range(4):
        if k == 2:
            plant.command(second)
        plant.steady.now = plant._wall_start + k * period
        plant._free_running_tick()
    engine = engines.OwnEngine(model, DT)
    q, qd = Q0, np.zeros(6)
    expected = [(Q0, np.zeros(6))]                   # tick 0: as it started, on the brakes
    for tau in (first, first, second):
        q, qd, _, _ = engine.advance(model, q, qd, tau, 1)
        expected.append((q, tau))
    for (_, q_published, effort), (q_expected, tau) in zip(plant.published, expected):
        np.testing.assert_allclose(q_published, q_expected, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(effort, tau)
    assert len(plant.published) == 4


def test_a_tick_without_a_command_passes_at_once_and_publishes_no_state(plant):
    """publish_on_command, the loop closed, the plant executable's loop: the command of
    tick 1 comes late. Tick 1 does not wait for it: it passes when due, publishes no state
    and integrates under the first command; the late command is heard and acts from tick 2,
    whose state is the arm after two ticks of the first command."""
    period, model = plant.tick_period, plant.model
    first = dynamics.gravity_torques(model, Q0) + np.array([1.0, -1.0, 0.5, 0.01, 0.0, 0.0])
    second = first + np.array([-2.0, 1.5, -1.0, 0.0, 0.01, 0.0])
    plant.command(first)
    plant._free_running_tick()                        # tick 0, on time
    assert len(plant.published) == 1
    plant._command_heard = False                      # as the real _publish leaves them
    plant._last_publish_wall = plant.steady.now
    plant._take_commands = lambda: None               # none waiting at tick 1
    executor = types.SimpleNamespace(spin_once=lambda timeout_sec=None: None)

    def one_pass():
        passes = iter([True, False])
        plant.spin_free_running(executor, lambda: next(passes))
    due = plant._wall_start + plant.ticks * period
    one_pass()
    assert plant.ticks == 2 and plant.steady.now == pytest.approx(due, abs=1e-12)
    assert len(plant.published) == 1                  # no state at tick 1
    plant.command(second)                             # arrives late, between the ticks
    one_pass()
    engine = engines.OwnEngine(model, DT)
    q, qd, _, _ = engine.advance(model, Q0, np.zeros(6), first, 2)
    assert len(plant.published) == 2
    _, q_published, effort = plant.published[-1]
    np.testing.assert_allclose(q_published, q, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(effort, first)
    np.testing.assert_array_equal(plant._tau_applied, second)      # acts from tick 2 on


def test_one_answered_tick_in_the_drain_period_publishes_no_state(plant):
    """publish_on_command with a command before every tick: every tick publishes a state
    but one in QUEUE_DRAIN_PERIOD (the arm moves on in that one too)."""
    from robot_dynamics.nodes.plant import QUEUE_DRAIN_PERIOD
    period = plant.tick_period
    tau = dynamics.gravity_torques(plant.model, Q0)
    for k in range(3 * QUEUE_DRAIN_PERIOD):
        plant.command(tau)
        plant.steady.now = plant._wall_start + k * period
        plant._free_running_tick()
    assert plant.ticks == 3 * QUEUE_DRAIN_PERIOD
    assert len(plant.published) == 3 * QUEUE_DRAIN_PERIOD - 3
    assert plant.loop_statistics()['simulated'] == pytest.approx(
        3 * QUEUE_DRAIN_PERIOD * period, abs=1e-12)
