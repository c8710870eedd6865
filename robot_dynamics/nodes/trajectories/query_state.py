"""The controller's `~/query_state` service (control_msgs/srv/QueryTrajectoryState), as
ros2_controllers' joint_trajectory_controller (JTC) offers it: the reference (q_d, q̇_d,
q̈_d) the controller commands at the requested time of its clock, for every controlled
joint; doc/action.md.

JTC's rules: an answer only while the controller is active and follows a trajectory, for a
time from that trajectory's start up to (not including) its last point; otherwise
`success` false, and here `message` says why (JTC logs it). A refusal carries the state JTC
puts in it: at or after the last point, or while holding, the reference held then (the
final positions, zero velocity and acceleration); before the trajectory's start the
measured state (positions and velocities; acceleration empty: there is no acceleration
state, as in JTC without one). Inactive, before all joints are seen or with stale joint
states there is no state to give: the arrays stay empty (JTC: inactive, the same).
The trajectory is sampled without changing anything and without a lock
(JointTrajectorySampler.query), so a query never delays a control cycle.
"""

from robot_dynamics.nodes.common.ros_params import seconds
from robot_dynamics.trajectories.sampler import OutsideTrajectory

try:
    from control_msgs.srv import QueryTrajectoryState
    UNAVAILABLE = None
except ImportError as error:        # a control_msgs built before the service was added
    QueryTrajectoryState = None
    UNAVAILABLE = str(error)

SERVICE_NAME = 'query_state'


def attach(node):
    """The `~/query_state` service of the controller `node` (once its sampler exists), or
    None, with one info line, when this control_msgs lacks the service type."""
    if UNAVAILABLE is not None:
        node.get_logger().info(f'control_msgs.srv cannot be imported ({UNAVAILABLE}): '
                               f'~/{SERVICE_NAME} is off')
        return None
    return node.create_service(QueryTrajectoryState, f'~/{SERVICE_NAME}',
                               lambda request, response: answer(node, request, response))


def refusal(node):
    """Why the controller cannot say now what it commands, or None."""
    state = getattr(node, 'lifecycle_state', 'active')     # controller_managed
    if state != 'active':
        return f'the controller is {state} (activate it first)'
    if not node._ready:
        return 'not all controlled joints seen on /joint_states yet'
    if node._stale:
        return ('no recent /joint_states (state_timeout): zero effort until they return, '
                'then the measured position is held')
    return None


def answer(node, request, response):
    """Fill `response` for `request` (the service callback; never raises)."""
    response.name = list(node.joints)
    try:
        t = seconds(request.time)
        why = refusal(node)
        if why is None:
            reference = node.sampler.query(t)
    except OutsideTrajectory as error:
        why = f'{error}; times are absolute, on the controller clock (now {node._now():.6f} s)'
        if error.reference is not None:     # the reference held then
            _fill(response, error.reference.positions, error.reference.velocities,
                  error.reference.accelerations)
        else:                               # before the start: the measured state
            _fill(response, node._q, node._qd, ())
    except Exception as error:  # noqa: B902 - a query must not stop the node
        why = f'unexpected {type(error).__name__}: {error}'
    if why is not None:
        response.success = False
        response.message = why
        return response
    response.success = True
    response.message = ''
    _fill(response, reference.positions, reference.velocities, reference.accelerations)
    return response


def _fill(response, positions, velocities, accelerations):
    response.position = [float(v) for v in positions]
    response.velocity = [float(v) for v in velocities]
    response.acceleration = [float(v) for v in accelerations]
