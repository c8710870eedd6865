"""plant_simulator (the executable `plant`, and in `sim`): its own parameters (the robot
block and the shared ones: robot.py, common.py)."""

from robot_dynamics.parameters.schema import FROM_MODEL, Parameter

INTEGRATION_METHODS = ('rk4', 'euler')
ENGINES = ('own', 'mujoco')                     # robot_dynamics.engines'
COMMAND_MESSAGES = ('float64_multi_array', 'joint_state')   # nodes/common/effort_command's
PLANT = (
    Parameter('initial_positions', 'double[]', default=FROM_MODEL, per_joint=True,
              description=(
        'initial joint positions [rad | m]; default 0, or the nearest position limit '
        'where 0 is outside the limits')),
    Parameter('initial_velocities', 'double[]', default=0.0, per_joint=True,
              description=(
        'initial joint velocities [rad/s | m/s]')),
    Parameter('integration_step', 'double', default=0.001, minimum=1e-06, maximum=1.0,
              description=(
        'fixed integration step [s]')),
    Parameter('integration_method', 'string', default='rk4',
              choices=INTEGRATION_METHODS,
              description=(
        'rk4 (classical Runge-Kutta) or euler (semi-implicit)')),
    Parameter('publish_rate', 'double', default=100.0, minimum=0.01, maximum=1000000.0,
              description=(
        '/joint_states rate in simulated time [Hz]; rounded to a whole number of '
        'integration steps')),
    Parameter('command_topic', 'string', default='/effort_controller/commands',
              nonempty=True,
              description=(
        'effort command topic (command_message says the message; N m | N)')),
    Parameter('command_message', 'string', default='float64_multi_array',
              choices=COMMAND_MESSAGES,
              description=(
        'message on command_topic: float64_multi_array (std_msgs/Float64MultiArray, one '
        'effort per joint in joints order) or joint_state (sensor_msgs/JointState, efforts '
        'mapped by name, every joint once, as topic_based_ros2_control sends its '
        'commands)')),
    Parameter('stamp_joint', 'string', default='',
              description=(
        'a name to add to each published state as one more joint whose position is the '
        'state\'s stamp [s] (velocity 1, effort 0); \'\' = none. Behind joint_state_'
        'broadcaster, which restamps every state with the controller_manager cycle that '
        'read it, this carries the time the state was measured to the controller (its '
        'stamp_joint). A JointState command may name it too (topic_based_ros2_control '
        'sends every joint of its block): its effort is ignored')),
    Parameter('publish_on_command', 'bool', default=False,
              description=(
        'free-running: publish the state at a tick only if an effort command arrived since '
        'the last one (every 0.1 s while none does), and move the ticks (not their period) '
        'to fall just after the commands arrive, so a hardware interface that takes one '
        'state per cycle from a queue (topic_based_ros2_control) reads each state at a '
        'steady age; a tick whose command (a JointState stamped on the same clock) was '
        'written before the last state was sent publishes none, as does one answered tick '
        'in 10: no backlog in that queue. With publish_clock: no effect')),
    Parameter('command_timeout', 'double', default=0.1, minimum=0.0, maximum=3600.0,
              description=(
        'apply zero effort when the last command is older than this [s of plant time]; '
        '0 = never')),
    Parameter('publish_clock', 'bool', default=False,
              description=(
        'own simulated time and publish it on /clock (run the other nodes with '
        'use_sim_time)')),
    Parameter('lockstep', 'bool', default=True,
              description=(
        'with publish_clock: advance only after the command answering the last '
        'published state has arrived')),
    Parameter('domain_check_wait', 'double', default=1.0, minimum=0.0, maximum=3600.0,
              description=(
        'with publish_clock, the plant executable: discovery time at start to find '
        'another /clock publisher on the ROS domain (another simulation), which makes '
        'it refuse to run in one line [wall s]; 0 = no check')),
    Parameter('lockstep_timeout', 'double', default=1.0, minimum=0.001, maximum=3600.0,
              description=(
        'with lockstep: advance anyway after waiting this long for a command [wall s]')),
    Parameter('real_time_factor', 'double', default=1.0, minimum=0.0, maximum=1000000.0,
              description=(
        'with publish_clock: simulated s per wall s at most [1]; 0 = as fast as '
        'possible')),
    Parameter('drives_compensate_gravity', 'bool', default=False,
              description=(
        "the simulated drives add the gravity torques g(q) to every command, as a robot"
        " that compensates gravity in its firmware (pair with the controller's "
        "compensate_gravity: false); the published effort is the command")),
    Parameter('divergence_velocity', 'double', default=1000.0, minimum=1e-06,
              description=(
        'stop integrating when any |qd| exceeds this [rad/s | m/s]')),
    Parameter('measurement_noise.position_stddev', 'double', default=0.0, minimum=0.0,
              maximum=1000.0,
              description=(
        'standard deviation of the Gaussian noise added to the published positions [rad'
        ' | m]; 0 = none')),
    Parameter('measurement_noise.velocity_stddev', 'double', default=0.0, minimum=0.0,
              maximum=1000.0,
              description=(
        'standard deviation of the Gaussian noise added to the published velocities '
        '[rad/s | m/s]; 0 = none')),
    Parameter('measurement_noise.seed', 'integer', default=-1, minimum=-1,
              description=(
        'seed of the noise generator (>= 0: the same noise on every run); -1 = seeded '
        'from the operating system')),
    Parameter('joint_stops', 'bool', default=True,
              description=(
        'robot.position_min/max act as mechanical stops (a stiff spring-damper beyond '
        'each finite limit); false: the joints pass them (for studies)')),
    Parameter('engine', 'string', default='own', choices=ENGINES,
              description=(
        "the physics that moves the arm: own (this package's forward dynamics, "
        "integration_method, joint_stops) or mujoco (MuJoCo's mj_step, pip install "
        "mujoco; its joint limits and contacts)")),
    Parameter('mujoco.model_file', 'string', default='',
              description=(
        "with engine mujoco: the MJCF file of the arm (joints named as the "
        "controller's); empty = MJCF generated from the robot model (no collision "
        "geometry, joint limits when joint_stops)")),
    Parameter('brakes', 'bool', default=True,
              description=(
        'hold every joint still until the first effort command and while the last one '
        'is older than command_timeout, as the holding brakes of a real arm; false: '
        'zero effort then, the arm falls')),
)
