"""Whole-arm identification: every link's inertial parameters, rotor inertia and friction
from the arm's own motion and efforts. Pure numpy (+ scipy and cvxpy, imported where used);
no ROS.

Model and parameters
--------------------
The inverse dynamics of `robot_dynamics.dynamics` are linear in the parameters

    τ = Y(q, q̇, q̈) φ

(Atkeson, An & Hollerbach 1986; Khalil & Dombre 2002). φ holds, for every index i = 1..n
(`parameter_names`, in this order):

* link i's ten inertial parameters in **link frame i** (the DH link frame; for a URDF
  model the child link frame of movable joint i, the last one the tip link frame — the
  frames of ``model.com`` and ``model.inertia``): m, m·c_x, m·c_y, m·c_z, I_xx, I_xy,
  I_xz, I_yy, I_yz, I_zz with I **about the link frame's origin** (as
  `identification.payload_parameters`); a payload of the model is part of the last link;
* joint i's armature (reflected rotor inertia, τ_i += armature·q̈_i), viscous friction
  (τ_i += b·q̇_i) and Coulomb friction (τ_i += f_c·sign(q̇_i): the model's exact sign,
  not a smooth one, so that Y φ equals `dynamics.inverse_dynamics` exactly; samples of a
  joint moving slower than ``friction_velocity`` are left out of the estimation instead),
  or the level(s) of the joint's other friction law (`RobotModel.friction_model`:
  asymmetric 'coulomb_negative', stribeck 'stribeck'; tanh uses 'coulomb'), linear in
  them for the law's velocity scale (`joint_terms`, `friction_columns`);
* with ``offset=True``, a constant effort offset of joint i (the effort sensor's bias:
  `RobotModel.effort_offset`, which no dynamics function adds).

Public API
----------
``parameter_names(model, offset=False) -> list[str]``
    'link3.m', 'link3.m*c_x', ..., 'link3.I_zz', 'joint3.armature', 'joint3.viscous',
    'joint3.coulomb' [, 'joint3.offset'] (1-based indices), p = n·13 (+ n).
``arm_parameters(model, offset=False) -> (p,)``
    φ of a model (offsets 0).
``arm_regressor(model, q, qd, qdd, offset=False) -> (n, p) | (B, n, p)``
    Y with ``Y @ arm_parameters(model) == dynamics.inverse_dynamics(model, q, qd, qdd)``.
``base_parameters(model, offset=False, samples=None, tolerance=1e-8, seed=0) -> BaseParameters``
    the identifiable combinations β = K φ found numerically; ``.describe()`` prints them.
``model_with_parameters(model, phi) -> RobotModel``
    the model with links' inertials, armature and friction replaced (DH and URDF).
``robot_params_overrides(model) -> dict``
    the `robot` parameter-block keys that a parameter file loaded after the robot's own
    file must hold so that `RobotModel.from_params` of the merged block gives this model.
``physical_consistency_issues(model_or_phi, n=None) -> list[str]``
    what is not physically consistent ([] when all is).
``joint_terms(model, offset=False)``, ``friction_columns(laws, velocities, qd)``
    the joint entries of φ per index, and the friction levels' regressor columns.
``essential_parameters(G_j, h_j, yy, counts, weights, inflation, columns, ratio)``
    the essential parameters (Pham & Gautier 1991).
``identify_arm(prior_model, t, q, qd, tau, offset=False, ..., effort_timing='instant') -> ArmIdentification``
    the estimator (below). t, q, qd, tau: one recording (K,), (K, n)... or lists of them.
    effort_timing: 'instant' (a measured effort), 'held_after' (`closed_loop_experiment`)
    or 'held_before' (the plant node's /joint_states: the effort held over the step that
    ends at the message's time); see `_prepare`.
``validation_errors(model, t, q, qd, tau, ...) -> (rms (n,), relative (n,))``
    RMS effort error of a model on recorded data, and relative to the RMS measured effort.
``optimal_excitation(model, duration, q0, seed=0, ...) -> Excitation``
    an optimised rest-to-rest finite Fourier series (``.condition``, ``.sample(t)``,
    ``.points(period)``).
``excitation_limits(model, ...) -> dict``
    the position, velocity and acceleration bounds `optimal_excitation` respects.
``perturbed_model(model, fraction=0.3, seed=0, ...)``, ``closed_loop_experiment(...)``
    simulation helpers: a consistently perturbed "true" arm, and a closed-loop run with
    measurement noise (what the tests and benchmarks/identification.py use).

Modules
-------
`parameters` (φ's names and order, φ of a model), `regressor` (Y and the friction laws'
columns), `base` (base parameters), `models` (models from φ, physical consistency),
`recording` (recording preparation: gaps, uniform grid, filter, decimation),
`least_squares` (per-joint normal equations, covariance, essential parameters),
`estimator` (`identify_arm`, `validation_errors`), `excitation` (`optimal_excitation`),
`study` (simulation helpers), `libraries` (scipy and cvxpy, imported where used). Every
name of the public API above is importable from the package itself.

Estimator: why a semidefinite program, and what it gives
--------------------------------------------------------
`identify_arm` is a maximum a posteriori estimate under physical-consistency constraints
(Wensing, Kim & Slotine 2018): weighted least squares on the filtered data plus a Gaussian
prior around the user's model, with every link's pseudo-inertia matrix constrained
positive definite and armature and friction non-negative, solved by cvxpy (Clarabel).
Chosen over a log-Cholesky parametrisation with scipy's nonlinear least squares because the
problem is convex: the global optimum, no starting point, no iteration count to tune, and
the friction bounds are plain linear constraints. Its size does not grow with the data:
the rows are reduced to normal equations first (p ≤ 98 unknowns for 7 joints with offsets).
Measured (benchmarks/identification.py, 60 s at 1 kHz, noise σ_q = 1 mrad, σ_q̇ =
0.01 rad/s, 1 % effort noise, plant ±30 % from the prior with drive friction and rotor
inertia): relative RMS torque error on an unseen validation motion 0.01–0.11 % per joint
(PUMA 560) and 0.02–0.43 % (Panda) against the noise-free efforts, every identified set
physically consistent; `identify_arm` on the Panda's 60 000 samples takes about 2 s on a
loaded two-core machine, plus 1–4 s to import scipy.signal and cvxpy in a fresh process
(timing per stage in `ArmIdentification.timing`).

References
----------
C. G. Atkeson, C. H. An, J. M. Hollerbach, "Estimation of inertial parameters of
manipulator loads and links", Int. J. Robotics Research 5(3), 101–119, 1986.
M. Gautier, "Numerical calculation of the base inertial parameters of robots", J. Robotic
Systems 8(4), 485–506, 1991.
M. Gautier, W. Khalil, "Direct calculation of minimum set of inertial parameters of serial
robots", IEEE Trans. Robotics and Automation 6(3), 368–373, 1990.
P. M. Wensing, S. Kim, J.-J. E. Slotine, "Linear matrix inequalities for physically
consistent inertial parameter identification: a statistical perspective on the mass
distribution", IEEE Robotics and Automation Letters 3(1), 60–67, 2018.
J. Swevers, C. Ganseman, D. B. Tükel, J. De Schutter, H. Van Brussel, "Optimal robot
excitation and identification", IEEE Trans. Robotics and Automation 13(5), 730–740, 1997.
M. Gautier, S. Briot, "Global identification of joint drive gains and dynamic parameters
of robots", ASME J. Dynamic Systems, Measurement, and Control 136(5), 051025, 2014.
C. M. Pham, M. Gautier, "Essential parameters of robots", Proc. 30th IEEE Conference on
Decision and Control, 2769–2774, 1991.
W. Khalil, E. Dombre, "Modeling, Identification and Control of Robots", Hermes Penton, 2002.
"""

from robot_dynamics.identification.arm.base import (BaseParameters, _elimination_order, _random_states,
                      base_parameters)
from robot_dynamics.identification.arm.estimator import (VELOCITY_GRID, ArmIdentification, BaseUncertainty,
                           _payload_vector, _prior_std, _solve_sdp, _with_laws,
                           identify_arm, validation_errors)
from robot_dynamics.identification.arm.excitation import (Excitation, _admissible_scale, _null_basis,
                            excitation_limits, optimal_excitation)
from robot_dynamics.identification.arm.least_squares import (_compress, _inverse, _long_run, _noise_shape,
                               _normal_solve, _weighted, _wls_statistics,
                               essential_parameters)
from robot_dynamics.identification.arm.libraries import _require, require_estimator_libraries
from robot_dynamics.identification.arm.models import (_TERM_WORDS, _inertials, _link_inertials, _link_values,
                        _payload_parameters, model_with_parameters,
                        physical_consistency_issues, pseudo_inertia,
                        robot_params_overrides)
from robot_dynamics.identification.arm.parameters import (FRICTION_LEVELS, JOINT_PARAMETERS, LINK_PARAMETERS,
                            _link_to_body, _link_transforms, _move_parameters,
                            _per_index, _sym, _urdf6, arm_parameters, joint_terms,
                            parameter_names)
from robot_dynamics.identification.arm.recording import (EFFORT_TIMINGS, RecordingError, _prepare, _Prepared,
                           _segments, uniform_grid)
from robot_dynamics.identification.arm.regressor import (_feature_functions, _set_friction_columns, arm_regressor,
                           friction_columns)
from robot_dynamics.identification.arm.study import Experiment, closed_loop_experiment, drive_terms, perturbed_model

__all__ = ['parameter_names', 'arm_parameters', 'arm_regressor', 'base_parameters',
           'BaseParameters', 'model_with_parameters', 'robot_params_overrides',
           'physical_consistency_issues', 'identify_arm', 'ArmIdentification',
           'validation_errors', 'optimal_excitation', 'Excitation', 'perturbed_model',
           'closed_loop_experiment', 'Experiment', 'excitation_limits', 'drive_terms', 'pseudo_inertia',
           'LINK_PARAMETERS', 'JOINT_PARAMETERS', 'EFFORT_TIMINGS', 'RecordingError',
           'require_estimator_libraries', 'uniform_grid', 'joint_terms',
           'friction_columns', 'essential_parameters', 'BaseUncertainty', 'VELOCITY_GRID']
