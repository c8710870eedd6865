"""The check of the effort path into ros2_control (doc/safety.md, "Under ros2_control").

The controller's efforts go out on `command_topic` as one std_msgs/Float64MultiArray in
`joints` order, which is what ros2_controllers' `effort_controllers/JointGroupEffortController`
and `forward_command_controller` (with `interface_name: effort`) take on their `~/commands`.
The message carries no names: an effort controller whose `joints` lists the same joints in
another order would send each torque to another joint, silently. So, at start and on each
activation, before the first effort goes out:

- the command controller is `command_controller`, or else the node `command_topic` belongs
  to when its last name is `commands` (`/effort_controller/commands` -> `/effort_controller`);
- when that node subscribes to `command_topic` and answers `<controller>/get_parameters`
  for `joints` (every ros2_control controller declares it), its list must equal `joints`,
  names and order: else no effort is published at all (one error line names both lists);
- when it cannot be asked (no such node among the topic's subscribers, e.g. the simulated
  plant; no parameter service; no answer within SERVICE_WAIT; no `joints` parameter), one
  info line says so and the efforts flow unchecked.

The check runs in the control cycle (a graph query at most every POLL_PERIOD while it is
undecided, the answer taken when the executor delivered it): it never blocks the loop.
While it is undecided, efforts are held back (nothing is published): from the first effort
the controller would send (all joints seen), at most SERVICE_WAIT while nobody subscribes
the topic, not at all while only other nodes (a plant) subscribe it. Decided without an
answer, the check starts again when the topic gets a new subscriber (an effort controller
spawned late, or discovered after a recorder of the topic).
"""

import time

from rcl_interfaces.msg import ParameterType
from rcl_interfaces.srv import GetParameters

COMMANDS = 'commands'       # forward_command_controller's input topic: ~/commands
SERVICE_WAIT = 2.0          # s (monotonic): wait this long for the controller's answer
POLL_PERIOD = 0.05          # s (monotonic): graph queries at most this often while undecided
RESEND = 0.5                # s: a request unanswered this long is sent again (a response
#                             sent before the server could reach the client is lost)

PENDING, MATCHED, MISMATCH, UNCHECKED, OFF = (
    'pending', 'matched', 'mismatch', 'unchecked', 'off')


def controller_of(topic):
    """The node whose `~/commands` is `topic` ('/effort_controller/commands' ->
    '/effort_controller'), or None when the topic's last name is not `commands`."""
    head, _, last = topic.rstrip('/').rpartition('/')
    if last != COMMANDS or not head:
        return None
    return head


def split_name(fqn):
    """'/ns/name' -> ('/ns', 'name'); 'name' -> ('/', 'name')."""
    head, _, name = fqn.rpartition('/')
    return (head or '/'), name


class CommandControllerCheck:
    """The joint-order check of the controller `node` against the ros2_control controller
    that takes its efforts. `allows()` (each cycle, before publishing) says whether
    efforts may go out; `start()` begins a new check (start-up, activation)."""

    def __init__(self, node, publisher, joints, controller='', enabled=True):
        self.node = node
        self.joints = list(joints)
        self.topic = publisher.topic_name
        self._publisher = publisher
        self.controller = (controller or controller_of(self.topic) or '').rstrip('/')
        if self.controller and not self.controller.startswith('/'):
            namespace = node.get_namespace().rstrip('/')
            self.controller = f'{namespace}/{self.controller}'
        self.state = OFF
        self.controller_joints = None
        self._client = None
        self._future = None
        self._started = None
        self._polled = self._sent = -float('inf')
        self._subscribers = 0           # subscriptions of the topic when it was decided
        self._quiet = False             # a re-check: its "not checked" line at debug level
        if not enabled:
            node.get_logger().info('check_command_controller is false: the joint order of '
                                   'the effort controller is not checked')
            return
        if not self.controller:
            node.get_logger().info(
                f'{self.topic} is not a ros2_control controller\'s ~/commands and '
                'command_controller is empty: the joint order of the effort controller is '
                'not checked')
            return
        self._client = node.create_client(GetParameters, f'{self.controller}/get_parameters')
        self.start()

    def start(self, quiet=False):
        """A new check: efforts are held back until it is decided."""
        if self._client is None:
            return
        self._quiet = quiet
        if self._future is not None:
            self._client.remove_pending_request(self._future)
        self.state, self.controller_joints, self._future = PENDING, None, None
        self._started = None            # the wait starts with the first effort to publish
        self._polled = -float('inf')

    def allows(self):
        """True when efforts may be published now (the check is decided and did not find a
        mismatch, or there is nothing to check)."""
        state = self.state
        if state is UNCHECKED and self._publisher.get_subscription_count() > self._subscribers:
            self.start(quiet=True)      # a new subscriber (the effort controller, late?)
            state = self.state
        if state is PENDING:
            now = time.monotonic()
            if self._started is None:
                self._started = now
            if now - self._polled >= POLL_PERIOD or (self._future is not None
                                                     and self._future.done()):
                self._polled = now
                self._poll(now)
            state = self.state
        return state is not PENDING and state is not MISMATCH

    # ------------------------------------------------------------------ the check

    def _poll(self, now):
        future = self._future
        if future is not None:
            if future.done():
                self._answer(future.result())
            elif now - self._started > SERVICE_WAIT:
                self._unchecked(f'{self.controller}/get_parameters did not answer within '
                                f'{SERVICE_WAIT:g} s')
            elif now - self._sent > RESEND:
                self._client.remove_pending_request(future)
                self._ask(now)
            return
        if self._client.service_is_ready():
            self._ask(now)
            return
        subscribers = [self._fqn(info) for info in
                       self.node.get_subscriptions_info_by_topic(self.topic)]
        if subscribers and self.controller not in subscribers:
            self._unchecked(f'{self.topic} is taken by {sorted(set(subscribers))}, not by a '
                            f'controller {self.controller}')
        elif now - self._started > SERVICE_WAIT:
            self._unchecked(f'no {self.controller}/get_parameters within {SERVICE_WAIT:g} s'
                            + ('' if subscribers else f' and nobody subscribes {self.topic}'))

    def _ask(self, now):
        self._future = self._client.call_async(GetParameters.Request(names=['joints']))
        self._sent = now

    @staticmethod
    def _fqn(info):
        namespace = info.node_namespace.rstrip('/')
        return f'{namespace}/{info.node_name}'

    def _answer(self, response):
        values = list(getattr(response, 'values', []) or [])
        if not values or values[0].type != ParameterType.PARAMETER_STRING_ARRAY:
            self._unchecked(f'{self.controller} has no string-array parameter joints')
            return
        theirs = list(values[0].string_array_value)
        self.controller_joints = theirs
        if theirs == self.joints:
            self.state = MATCHED
            self.node.get_logger().info(
                f'effort controller {self.controller} takes the same joints in the same '
                f'order: {theirs}')
            return
        self.state = MISMATCH
        how = ('the same joints in another order' if sorted(theirs) == sorted(self.joints)
               else 'other joints')
        self.node.get_logger().error(
            f'no efforts published: {self.controller} joints {theirs} != joints '
            f'{self.joints} ({how}); a Float64MultiArray on {self.topic} carries no names, '
            'each effort would reach the joint at its index there: make the two lists equal '
            'and restart (or deactivate and activate) this node')

    def _unchecked(self, why):
        """Decided without an answer: efforts flow; asked again when the topic gets a new
        subscriber (which may be the effort controller, spawned late or discovered after
        a recorder of the topic)."""
        self.state = UNCHECKED
        self._future = None
        self._subscribers = self._publisher.get_subscription_count()
        log = self.node.get_logger()
        (log.debug if self._quiet else log.info)(
            f'joint order of the effort controller not checked: {why}; efforts on '
            f'{self.topic} in joints order {self.joints} (asked again when a new subscriber '
            'appears)')
