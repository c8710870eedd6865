"""demo_move (`sim`: it sends the demo move)."""

from robot_dynamics.parameters.schema import Parameter

DEMO_MOVE = (
    Parameter('joints', 'string[]',
              description=(
        "joint names (default: the controller's)")),
    Parameter('controller', 'string', default='computed_torque_controller', nonempty=True,
              description=(
        'controller node name')),
    Parameter('start_positions', 'double[]', per_joint=True,
              description=(
        "where the move starts (the plant's initial_positions) [rad | m]")),
    Parameter('goal_positions', 'double[]', per_joint=True,
              description=(
        'goal of the move [rad | m]')),
    Parameter('move_duration', 'double', default=2.0, minimum=0.01, maximum=3600.0,
              description=(
        'duration of the quintic move [s]')),
)
