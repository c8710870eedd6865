"""computed_torque_controller (the executables `controller`, `controller_managed`, and in
`sim`): its own parameters (the robot block and the shared ones: robot.py, common.py)."""

from robot_dynamics.parameters.schema import FROM_MODEL, Parameter

CONTROL_MODES = ('timer', 'on_state')
LAWS = ('computed_torque', 'gravity_compensation', 'joint_impedance', 'cartesian_impedance')
FEEDFORWARDS = ('none', 'coriolis', 'inverse_dynamics')
INTERPOLATION_METHODS = ('splines', 'none')       # robot_dynamics.trajectory's
CONTROLLER = (
    Parameter('control_rate', 'double', default=100.0, minimum=0.1, maximum=10000.0,
              description=(
        'control loop rate in timer mode [Hz]')),
    Parameter('control_mode', 'string', default='timer', choices=CONTROL_MODES,
              description=(
        'timer: a cycle every 1/control_rate s of the node clock; on_state: a cycle on '
        'every /joint_states message (lock-step with a simulator)')),
    Parameter('command_topic', 'string', default='/effort_controller/commands',
              nonempty=True,
              description=(
        'effort command topic (std_msgs/Float64MultiArray, joints order, N m | N)')),
    Parameter('command_controller', 'string', default='',
              description=(
        'the ros2_control controller taking command_topic (its joints must equal '
        'joints, in order, or no effort is published); empty: the node command_topic '
        'belongs to when it ends in /commands')),
    Parameter('check_command_controller', 'bool', default=True,
              description=(
        'ask the command controller for its joints before the first effort and publish '
        'nothing on a mismatch; false: never ask (efforts in joints order, unchecked)')),
    Parameter('gains.kp', 'double[]', default=100.0, per_joint=True, minimum=0.0,
              exclusive_minimum=True, live=True,
              description=(
        'position gains per joint, acceleration level [1/s^2] (not effort gains); > 0')),
    Parameter('gains.kd', 'double[]', default=20.0, per_joint=True, minimum=0.0, live=True,
              description=(
        'velocity gains per joint, acceleration level [1/s]; >= 0; critical damping: kd'
        ' = 2 sqrt(kp)')),
    Parameter('compensate_gravity', 'bool', default=True,
              description=(
        "include the gravity torques g(q) in the effort; false for a robot whose drives"
        " compensate gravity themselves (e.g. Franka's firmware; the plant's "
        "drives_compensate_gravity)")),
    Parameter('effort_limits', 'double[]', per_joint=True, minimum=0.0,
              exclusive_minimum=True, empty=True, live=True,
              description=(
        'per joint effort limits [N m | N], > 0 and at most robot.effort_max; empty: '
        'robot.effort_max (none given: unlimited)')),
    Parameter('control_law', 'string', default='computed_torque', choices=LAWS, live=True,
              description=(
        'the control law: computed_torque (gains.*), gravity_compensation, '
        'joint_impedance (joint_impedance.*), cartesian_impedance (cartesian.*, '
        '~/target_pose); switched at the next cycle without an effort jump at rest')),
    Parameter('effort_rate_limit', 'double[]', default=0.0, per_joint=True, minimum=0.0,
              empty=True, live=True,
              description=(
        'per joint bound on the change rate of the commanded effort, under every law, '
        'after the effort limits [N m/s | N/s]; 0 = none')),
    Parameter('gravity_compensation.damping', 'double[]', default=0.0, per_joint=True, minimum=0.0,
              live=True,
              description=(
        'gravity_compensation: per joint viscous damping D in tau = g(q) - D qd [N m '
        's/rad | N s/m]; >= 0')),
    Parameter('joint_impedance.stiffness', 'double[]', default=FROM_MODEL, per_joint=True,
              minimum=0.0, live=True,
              description=(
        'joint_impedance: per joint stiffness [N m/rad | N/m], >= 0; default: 10^2 '
        '1/s^2 times the mass matrix diagonal at the middle of the position limits')),
    Parameter('joint_impedance.damping', 'double[]', default=(), per_joint=True,
              minimum=0.0, empty=True, live=True,
              description=(
        'joint_impedance: per joint damping [N m s/rad | N s/m], >= 0; empty: from '
        'joint_impedance.damping_ratio')),
    Parameter('joint_impedance.damping_ratio', 'double', default=1.0, minimum=0.0,
              exclusive_minimum=True,
              live=True,
              description=(
        'joint_impedance: damping ratio of each joint (with its mass matrix diagonal) '
        'when joint_impedance.damping is empty [1]; > 0, 1 = critical')),
    Parameter('joint_impedance.feedforward', 'string', default='none', choices=FEEDFORWARDS,
              live=True,
              description=(
        'joint_impedance: none (spring-damper plus g(q)), coriolis (plus C(q, qd) qd), '
        'inverse_dynamics (plus M(q) qdd_d and C(q, qd_d) qd_d of the reference)')),
    Parameter('cartesian.base_frame', 'string', default='', live=True,
              description=(
        "cartesian_impedance: the frame of ~/target_pose and ~/tool_pose (the robot's "
        "base); empty: robot.base_link of a URDF model, else base_link. A target pose "
        "with an empty frame_id is taken in this frame")),
    Parameter('cartesian.tool', 'double[]', default=(), length=7, empty=True, live=True,
              description=(
        "cartesian_impedance: the controlled frame in the model's tip frame, x y z [m] "
        "qx qy qz qw; empty: the tip frame itself")),
    Parameter('cartesian.stiffness', 'double[]', default=FROM_MODEL, length=6, minimum=0.0,
              live=True,
              description=(
        'cartesian_impedance: stiffness along x y z [N/m] and about x y z [N m/rad] of '
        'the base frame, >= 0; default: 10^2 1/s^2 times the smallest mass (inertia) 1 '
        '/ (J M^-1 J^T)_ii the tool feels along (about) the axes at the middle of the '
        'position limits')),
    Parameter('cartesian.damping', 'double[]', default=(), length=6, minimum=0.0,
              empty=True, live=True,
              description=(
        'cartesian_impedance: damping along x y z [N s/m] and about x y z [N m s/rad]; '
        'empty: from cartesian.damping_ratio')),
    Parameter('cartesian.damping_ratio', 'double', default=1.0, minimum=0.0,
              exclusive_minimum=True,
              live=True,
              description=(
        'cartesian_impedance: damping ratio when cartesian.damping is empty [1]; > 0, '
        '1 = critical')),
    Parameter('cartesian.nullspace_posture', 'double[]', default=(), per_joint=True,
              empty=True, live=True,
              description=(
        'cartesian_impedance: joint posture [rad | m] pulled towards in the nullspace '
        'of the task (redundant arms); empty: none')),
    Parameter('cartesian.nullspace_stiffness', 'double[]', default=FROM_MODEL, per_joint=True,
              minimum=0.0, live=True,
              description=(
        'cartesian_impedance: per joint stiffness towards cartesian.nullspace_posture '
        '[N m/rad | N/m], >= 0, damped with ratio 1; default: as '
        'joint_impedance.stiffness')),
    Parameter('cartesian.nullspace_damping', 'double[]', default=(), per_joint=True,
              minimum=0.0, empty=True, live=True,
              description=(
        "cartesian_impedance: per joint damping of the self-motion [N m s/rad | N s/m],"
        " >= 0, also without a posture (a redundant arm's self-motion then comes to "
        "rest); empty: none without a posture, ratio 1 with one")),
    Parameter('cartesian.max_target_step', 'double[]', default=(0.1, 0.5), length=2,
              minimum=0.0, exclusive_minimum=True, live=True,
              description=(
        'cartesian_impedance: the target is followed at most this far from the current '
        'pose: translation [m], rotation [rad]; > 0')),
    Parameter('latency_compensation', 'double', default=0.0, minimum=0.0, maximum=0.1,
              live=True,
              description=(
        'the dead time of the loop [s]: from the measurement of the state a cycle answers '
        'to the moment its effort acts on the arm (state transport, the cycle, the command '
        'path). The state is predicted to then (q + (qd + qdd_d d / 2) d, qd + qdd_d d, '
        'qdd_d the reference\'s acceleration in the middle of the d: its mean over it) and '
        'the reference sampled there; ~/error is then against the prediction. 0 = none')),
    Parameter('measure_latency', 'bool', default=False, live=True,
              description=(
        'measure latency_compensation while running from the efforts /joint_states '
        'reports: a simulated arm that reports the effort it applied (this package\'s '
        'plant, also behind topic_based_ros2_control and joint_state_broadcaster) shows '
        'in each state which command acted over the tick before it (a state after a gap '
        'also stands for the ticks without a state before it, each with the command that '
        'most likely acted in it); the running mean (over about 100 states) of those dead '
        'times replaces latency_compensation, '
        'which is its start value. A real arm reports measured torques, which equal no '
        'command: then latency_compensation stays as set (said once)')),
    Parameter('state_age', 'double', default=0.0, minimum=0.0, maximum=0.1, live=True,
              description=(
        'how long before its header stamp a /joint_states was measured [s]: 0 when the '
        'stamp is the measurement time (this package\'s plant, most drivers); '
        'joint_state_broadcaster stamps with the controller_manager cycle that read it. '
        'The state is taken as measured at stamp - state_age: the reference is sampled '
        'at stamp - state_age + latency_compensation. (on_state: a moving state repeated '
        'value for value under a newer stamp, as the broadcaster sends one when the '
        'hardware had nothing new, is taken at its first stamp)')),
    Parameter('stamp_joint', 'string', default='',
              description=(
        'the name of a joint in /joint_states whose position is the time [s, on the node '
        'clock] at which that message\'s state was measured (this package\'s plant writes '
        'one with its stamp_joint, and joint_state_broadcaster passes it on while it '
        'restamps the message); \'\' = none. When present, each state is taken as '
        'measured then (state_age is not used) and predicted over latency_compensation '
        'plus how much older it is than the running mean of those ages, so a state read '
        'late is predicted further')),
    Parameter('state_timeout', 'double', default=0.1, minimum=0.0, maximum=3600.0, live=True,
              description=(
        'zero effort when a controlled joint has not been heard from for this long [s '
        'of node clock], or when its moving state has been sent again unchanged for this '
        'long after its velocity implied 0.01 rad (or m) of motion (frozen hardware behind '
        'joint_state_broadcaster); 0 = never')),
    Parameter('constraints.goal_tolerance', 'double', default=0.01, minimum=0.0, maximum=1000.0,
              live=True,
              description=(
        'goal reached when every |q - q_goal| <= this after the last point [rad | m]; 0'
        ' = not checked')),
    Parameter('constraints.stopped_velocity_tolerance', 'double', default=0.01, minimum=0.0,
              maximum=1000.0, live=True,
              description=(
        'goal reached only when every |qd| <= this [rad/s | m/s]; 0 = not checked')),
    Parameter('constraints.<joint>.trajectory', 'double', default=0.0, minimum=0.0, maximum=1000.0,
              live=True,
              description=(
        'path tolerance on the position of the joint while an action goal runs, unless '
        'the goal gives one [rad | m]; 0 = not checked')),
    Parameter('constraints.<joint>.goal', 'double', default=0.0, minimum=0.0, maximum=1000.0,
              live=True,
              description=(
        'goal tolerance on the position of the joint after the last point, unless the '
        'goal gives one [rad | m]; 0 = constraints.goal_tolerance')),
    Parameter('constraints.decelerate_on_cancel', 'bool', default=False,
              description=(
        'on a cancel, a tolerance violation, cmd_timeout or an empty trajectory: bring '
        'every joint to rest at its constraints.<joint>.max_deceleration_on_cancel '
        'instead of holding at once')),
    Parameter('constraints.<joint>.max_deceleration_on_cancel', 'double', default=0.0, minimum=0.0,
              maximum=1000000.0,
              description=(
        'deceleration of the joint when it stops with constraints.decelerate_on_cancel '
        '[rad/s^2 | m/s^2]; > 0 for that')),
    Parameter('feasibility.check', 'bool', default=True, live=True,
              description=(
        'refuse trajectories whose reference exceeds robot.velocity_max or needs '
        'efforts beyond effort_limits (inverse dynamics along the reference), naming '
        'the joint, the time and the excess')),
    Parameter('feasibility.allow_time_scaling', 'bool', default=False, live=True,
              description=(
        'run such a trajectory slower (time stretched until it fits) instead of '
        'refusing it; the new duration is logged and in the goal result')),
    Parameter('allow_partial_joints_goal', 'bool', default=False, live=True,
              description=(
        'accept trajectories naming a subset of joints (the others hold their '
        'reference)')),
    Parameter('publish_state', 'bool', default=True,
              description=(
        'publish ~/reference, ~/feedback, ~/error and ~/output (at most '
        'state_publish_rate)')),
    Parameter('state_publish_rate', 'double', default=0.0, minimum=0.0, maximum=1000000.0,
              description=(
        'at most this rate of the cycle time for ~/reference, ~/feedback, ~/error and '
        '~/output [Hz]; 0 = every cycle')),
    Parameter('interpolation_method', 'string', default='splines',
              choices=INTERPOLATION_METHODS,
              description=(
        'splines: polynomial segments through the points; none: no interpolation, the '
        'reference jumps to each next point')),
    Parameter('allow_nonzero_velocity_at_trajectory_end', 'bool', default=False, live=True,
              description=(
        'accept trajectories whose last point has a non-zero velocity')),
    Parameter('allow_integration_in_goal_trajectories', 'bool', default=False, live=True,
              description=(
        'accept points without positions (or velocities): integrated from their '
        'velocities (accelerations)')),
    Parameter('cmd_timeout', 'double', default=0.0, minimum=0.0, maximum=1000000.0, live=True,
              description=(
        'hold the measured position (or decelerate) when no new trajectory came this '
        'long after the last point of the current one [s]; 0 = never; must exceed '
        'constraints.goal_time')),
    Parameter('speed_scaling.initial_scaling_factor', 'double', default=1.0, minimum=0.0,
              maximum=1.0,
              description=(
        'speed scaling factor at start-up (the trajectory time advances at this '
        'fraction of the clock); [0, 1], 1 = normal speed, 0 = pause. Changed on '
        '~/speed_scaling_input')),
    Parameter('speed_scaling.rate_limit', 'double', default=2.0, minimum=0.001, maximum=1000.0,
              description=(
        'the factor moves to a new value at this rate [1/s] (a ramp: the reference '
        'acceleration stays bounded)')),
    Parameter('speed_scaling.state_interface', 'string', default='',
              description=(
        'JTC: a ros2_control hardware interface for the factor; not applicable here '
        '(leave empty)')),
    Parameter('speed_scaling.command_interface', 'string', default='',
              description=(
        'JTC: a ros2_control hardware interface for the factor; not applicable here '
        '(leave empty)')),
    Parameter('action_monitor_rate', 'double', default=20.0, minimum=0.1, maximum=1000000.0,
              description=(
        'feedback rate of ~/follow_joint_trajectory goals [Hz of the cycle time]; '
        'outcomes are checked every control cycle')),
    Parameter('constraints.goal_time', 'double', default=0.0, minimum=0.0, maximum=1000000.0,
              live=True,
              description=(
        'default goal_time_tolerance of action goals: GOAL_TOLERANCE_VIOLATED when the '
        'goal tolerance is not met this long after the last point [s]; 0 = wait for '
        'ever')),
    Parameter('identification.cutoff_frequency', 'double', default=5.0, minimum=0.0,
              exclusive_minimum=True,
              maximum=1000000000.0,
              description=(
        'low-pass cut-off of the regressor rows [Hz] (instead of differentiating the '
        'measured velocity); lower on noisy joint states (2.5 Hz: less noise bias, and '
        'rows kept every 1/(4 cut-off) s, so excite 15 s or more)')),
    Parameter('identification.max_condition', 'double', default=300.0, minimum=0.0,
              exclusive_minimum=True,
              maximum=1000000000.0,
              description=(
        'largest condition number of the scaled regressor that counts as excited [1]')),
    Parameter('identification.max_mass_std', 'double', default=0.05, minimum=0.0,
              exclusive_minimum=True,
              maximum=1000000000.0,
              description=(
        'largest mass standard deviation that counts as excited [kg]')),
    Parameter('identification.method', 'string', default='ls', choices=('ls', 'iv'),
              description=(
        "'ls' (least squares) or 'iv' (instrumental variables: the tracked reference as"
        " instrument, robust to noise on the measured q and q̇)")),
    Parameter('identification.enabled', 'bool', default=False, live=True,
              description=(
        'record every control cycle and publish the payload estimate; switching on '
        'starts from no samples; settable at runtime')),
    Parameter('identification.publish_rate', 'double', default=2.0, minimum=0.01, maximum=1000.0,
              description=(
        'rate of ~/payload_estimate and ~/payload_estimate/quality while identifying '
        '[Hz of the node clock]')),
)
