"""decelerate_on_cancel under speed scaling through the nodes: the stop keeps its limit while
the factor changes, and a paused arm stays put after cancel and resume.

In a module of its own: its controller subscribes ~/speed_scaling_input with JTC's
transient-local QoS, so a latched factor left by another module-scoped loop on the same
DDS domain (test_speed_scaling_nodes.py's, which ends at factor 1.0) would reach it
whenever discovery completes, and overwrite the factor the test sets.
"""

import numpy as np
import pytest

pytest.importorskip('control_msgs.msg', reason='control_msgs is not built in this environment '
                                               '(tools/dev.py builds it; needs cmake and a C '
                                               'compiler)')
from action_msgs.msg import GoalStatus  # noqa: E402
from control_msgs.msg import SpeedScalingFactor  # noqa: E402

from test_speed_scaling_nodes import LATCHED, TOPIC  # noqa: E402,I100

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')


def test_decelerate_on_cancel_under_speed_scaling_keeps_its_limit_and_a_paused_arm_still():
    from test_jtc_options_nodes import DECELERATION, Loop, MOVE, TestDecelerateOnCancel
    loop = Loop('constraints.decelerate_on_cancel:=true', 'speed_scaling.rate_limit:=4.0', *(
        f'constraints.joint_{i + 1}.max_deceleration_on_cancel:={a}'
        for i, a in enumerate(DECELERATION)))
    try:
        factor = loop.client.create_publisher(SpeedScalingFactor, TOPIC, LATCHED)
        loop.harness.spin_until(lambda: factor.get_subscription_count() > 0,
                                'the ~/speed_scaling_input subscription')
        # at half speed, cancelled mid-move while the factor starts to fall: within the limit
        handle = loop.send(loop.move([2 * v for v in MOVE], seconds=1.5))
        factor.publish(SpeedScalingFactor(factor=0.5))
        loop.wait_moving(speed=0.3)
        loop.harness.spin_until(lambda: loop.client.states[-1].speed_scaling_factor == 0.5,
                                'half speed')
        sent, before = loop.plant.sim_time, len(loop.client.states)
        cancel = handle.cancel_goal_async()
        factor.publish(SpeedScalingFactor(factor=0.1))         # applies after the stop
        loop.harness.spin_until(cancel.done, 'the cancel response')
        status, result = loop.outcome(handle)
        assert status == GoalStatus.STATUS_CANCELED
        # the result says what the arm does: it decelerates, it does not hold at once
        assert result.error_string == 'canceled; decelerating to rest from the reference'
        loop.settle(1.5)
        TestDecelerateOnCancel.assert_decelerates_to_rest(
            loop, loop.client.states[before - 1:], sent)
        assert loop.client.states[-1].speed_scaling_factor == pytest.approx(0.1)
        # paused mid-move, cancelled, then the factor back to 1: the arm stays
        factor.publish(SpeedScalingFactor(factor=1.0))
        handle = loop.send(loop.move(MOVE, seconds=1.5))
        loop.wait_moving(speed=0.3)
        factor.publish(SpeedScalingFactor(factor=0.0))
        loop.harness.spin_until(lambda: loop.client.states[-1].speed_scaling_factor == 0.0,
                                'the pause')
        loop.settle(0.3)
        held = np.array(loop.client.states[-1].reference.positions)
        cancel = handle.cancel_goal_async()
        loop.harness.spin_until(cancel.done, 'the cancel response')
        assert loop.outcome(handle)[0] == GoalStatus.STATUS_CANCELED
        factor.publish(SpeedScalingFactor(factor=1.0))
        loop.settle(1.0)
        assert loop.client.states[-1].speed_scaling_factor == 1.0
        np.testing.assert_allclose(loop.client.states[-1].reference.positions, held,
                                   atol=1e-12)
        assert np.all(np.abs(np.asarray(loop.plant.q) - held) < 2e-3)
    finally:
        loop.close()
