"""The robot block (README.md, "Presets"; doc/conventions.md), `robot_description` and
`joints`: declared alike by the controller and the plant. Read-only (the model is built
once) but for `robot.payload.*` (the nodes rebuild the model)."""

from robot_dynamics.parameters.schema import Parameter

ROBOT = (
    Parameter('robot.dh_convention', 'string',
              description=(
        'DH convention: standard (distal) or modified (Craig)')),
    Parameter('robot.joint_types', 'string[]',
              description=(
        'per joint: revolute or prismatic')),
    Parameter('robot.a', 'double[]',
              description=(
        'DH link lengths a_i [m]')),
    Parameter('robot.alpha', 'double[]',
              description=(
        'DH link twists alpha_i [rad]')),
    Parameter('robot.d', 'double[]',
              description=(
        'DH link offsets d_i [m] (constant part for prismatic joints)')),
    Parameter('robot.theta', 'double[]',
              description=(
        'DH joint angle offsets theta_i [rad] (constant part for revolute joints)')),
    Parameter('robot.mass', 'double[]',
              description=(
        'link masses [kg]')),
    Parameter('robot.com', 'double[]',
              description=(
        'centres of mass, 3 per link, in the link frame [m]')),
    Parameter('robot.inertia', 'double[]',
              description=(
        'inertia about the centre of mass, 6 per link (ixx ixy ixz iyy iyz izz), '
        'link-frame axes [kg m^2]')),
    Parameter('robot.gravity', 'double[]',
              description=(
        'gravitational acceleration in the base frame [m/s^2], default 0 0 -9.81')),
    Parameter('robot.armature', None,
              description=(
        'per joint, reflected rotor inertia [kg m^2 | kg], default 0')),
    Parameter('robot.viscous_friction', None,
              description=(
        'per joint [N m s/rad | N s/m], default 0')),
    Parameter('robot.coulomb_friction', None,
              description=(
        'per joint [N m | N], default 0')),
    Parameter('robot.friction_model', None,
              description=(
        'per joint friction law: coulomb (default), asymmetric, tanh, stribeck')),
    Parameter('robot.coulomb_friction_negative', None,
              description=(
        'per joint Coulomb level for negative velocity of asymmetric joints [N m | N]')),
    Parameter('robot.stribeck_friction', None,
              description=(
        'per joint extra friction at rest of stribeck joints [N m | N]')),
    Parameter('robot.stribeck_velocity', None,
              description=(
        'per joint velocity scale of tanh and stribeck joints [rad/s | m/s], default '
        '0.01')),
    Parameter('robot.effort_offset', None,
              description=(
        'per joint bias of the effort sensor [N m | N] (identified; the command does '
        'not add it)')),
    Parameter('robot.position_min', 'double[]',
              description=(
        'per joint lower position limit [rad | m]')),
    Parameter('robot.position_max', 'double[]',
              description=(
        'per joint upper position limit [rad | m]')),
    Parameter('robot.velocity_max', 'double[]',
              description=(
        'per joint velocity limit [rad/s | m/s]')),
    Parameter('robot.effort_max', 'double[]',
              description=(
        'per joint effort limit [N m | N]; efforts are clipped to +-effort_max')),
    Parameter('robot.continuous', None,
              description=(
        'per joint true/false (DH models; a URDF says it with its joint types): a '
        'revolute joint without position limits that turns without end; its position '
        'error is wrapped into (-pi, pi], a trajectory takes the short way to its first'
        ' point')),
    Parameter('robot.payload.mass', 'double', default=0.0, minimum=0.0, live=True,
              description=(
        'payload on the last link [kg]; settable at runtime')),
    Parameter('robot.payload.com', 'double[]', default=(0.0, 0.0, 0.0), length=3, live=True,
              description=(
        'payload centre of mass in the last link frame (DH: the last DH frame; URDF: '
        'the tip_link frame) [m]; settable at runtime')),
    Parameter('robot.payload.inertia', 'double[]', default=(0.0,) * 6, length=6, live=True,
              description=(
        'payload inertia about its centre of mass (ixx ixy ixz iyy iyz izz) [kg m^2]; '
        'settable at runtime')),
    Parameter('robot.accept_nonphysical_inertia', None,
              description=(
        'true: the inertias are known to be non-physical (textbook data kept on '
        'purpose); said once at info level instead of a warning; needed to load an '
        'inertia with a negative principal moment (refused otherwise)')),
    Parameter('robot.source', None,
              description=(
        'dh (default) or urdf')),
    Parameter('robot.urdf', None,
              description=(
        'with source urdf: the URDF text')),
    Parameter('robot.urdf_file', None,
              description=(
        'with source urdf: the URDF file: absolute path, relative to the working '
        'directory, file:// or package:// URI')),
    Parameter('robot.base_link', None,
              description=(
        'with source urdf: first link of the chain')),
    Parameter('robot.tip_link', None,
              description=(
        'with source urdf: last link of the chain')),
    Parameter('robot_description', None,
              description=(
        'URDF text (XML), e.g. what robot_state_publisher takes; the model when '
        'robot.source is urdf and neither robot.urdf nor robot.urdf_file is given')),
    Parameter('joints', 'string[]',
              description=(
        'controlled joint names; the order of every per-joint array and of the effort '
        'command; with robot.source urdf default: the joints of the URDF chain')),
)
