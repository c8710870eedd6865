"""Whole-arm identification in simulation: the figures of the targets, and the timing.

    PYTHONPATH=. <python with numpy, scipy, cvxpy> benchmarks/identification.py
        [--robots puma560 panda] [--duration 60] [--rate 1000] [--seed 1]
        [--study own|realistic|both|mujoco] [--friction LAW] [--keep DIR] [--closed-loop]

Three studies. "own" (below): recordings whose structure is the estimator's own.
"realistic" (`realistic_study`): recordings that are not (benchmarks/realistic_recordings.py:
friction outside the estimator's laws, effort offsets, coloured noise, quantised encoders,
jittered stamps, dropped messages, written as rosbag2 bags), with the targets: held-out
error within 1.05x of an unconstrained least-squares fit with the same friction law and
offsets, every body physically consistent, 3x better than the robot file where it is
more than 10 % off, and the time to read and estimate 60 s at 1 kHz (<= 5 s).
"mujoco" (`mujoco_study`, not part of "both"): the same targets on recordings of an arm
simulated by MuJoCo (benchmarks/mujoco_recordings.py: arms ur5 and panda, the default
friction law coulomb; needs `pip install mujoco`), and the agreement of MuJoCo's inverse
dynamics with ours.

For each robot preset (the prior model): the "true" arm is the preset with every link's
mass, centre of mass and inertia perturbed by up to ±30 % consistently and a drive added
(`arm_identification.perturbed_model`, `drive_terms`: armature 0.5 × the mean diagonal
inertia, viscous and Coulomb friction 5 % of each joint's effort scale). An optimised
excitation (`optimal_excitation`, at most 60 s) starting at rest is tracked in closed
loop by computed torque with the prior model (Kp = 100, Kd = 20, control and plant step
1/rate, RK4); the recorded states carry Gaussian noise σ_q = 1 mrad, σ_q̇ = 0.01 rad/s,
the recorded efforts 1 % of each joint's RMS effort. `identify_arm` estimates the
parameters from that recording. Printed:

* the relative RMS torque error per joint on a validation motion never seen (another
  excitation, seed + 100, 20 s): against the plant's noise-free efforts at the exact
  states and accelerations, and against the noisy recording as `validation_errors`
  processes it (whose floor, shown by the true model, is set by the noise), for the prior,
  the identified and the true model;
* the identified set's physical consistency (checked: every pseudo-inertia positive
  definite, armature and friction >= 0);
* a move tracked by computed torque (100 Hz, [LEE]'s gains) with the true, the identified
  and the prior model: the maximum error, ratio identified/true (target <= 1.2) and
  prior/identified (target >= 10). PUMA 560: [LEE]'s move (examples/lee_computed_torque.py);
  Panda: a 2 s quintic move through the workspace. With Coulomb friction in the plant the
  maximum error of a joint that starts or stops depends chaotically on the model (it sticks
  anywhere within ±f_c/(M kp)): the same move with the true parameters scaled by 1 ± 3e-4
  is printed too, as the band within which "the true parameters' error" is defined;
* the time `identify_arm` took on the recording and where it went.
"""

import argparse
import math
import os
import sys
import time
import warnings

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, 'benchmarks'))

from robot_dynamics import arm_identification as ai  # noqa: E402
from robot_dynamics import dynamics, simulation  # noqa: E402
from robot_dynamics.trajectories import profiles  # noqa: E402
from robot_dynamics.model import ModelWarning, RobotModel  # noqa: E402

# [LEE] §5's move (examples/lee_computed_torque.py), gains and sampling
LEE_START = np.radians([90.0, 0.0, 90.0, 0.0, 0.0, 0.0])
LEE_FINAL = np.radians([45.0, 30.0, 0.0, 45.0, 60.0, 90.0])
PANDA_START = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8])
PANDA_FINAL = np.array([1.0, 0.3, -0.6, -1.4, 0.7, 2.6, -0.3])
KP, KD = 100.0, 20.0
MOVE_DURATION = 2.0
MOVE_CONTROL_PERIOD = 0.01
MOVE_PLANT_STEP = 0.0025
STARTS = {'puma560': np.zeros(6), 'panda': PANDA_START}
MOVES = {'puma560': (LEE_START, LEE_FINAL), 'panda': (PANDA_START, PANDA_FINAL)}


def load(name):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ModelWarning)
        return RobotModel.from_yaml(os.path.join(REPO, 'config', f'{name}.yaml'))


def relative_errors(model, experiment):
    """Relative RMS error per joint of `model` against the noise-free efforts at the exact
    states and accelerations of a simulated experiment."""
    predicted = dynamics.inverse_dynamics(model, experiment.q_true, experiment.qd_true,
                                          experiment.qdd_true)
    error = predicted - experiment.tau_true
    return (np.sqrt(np.mean(error ** 2, axis=0))
            / np.sqrt(np.mean(experiment.tau_true ** 2, axis=0)))


def move_errors(plant, model, start, final):
    """Max |q_ref − q| per joint of computed torque with `model` on `plant` over a quintic
    rest-to-rest move (MOVE_DURATION) and 0.5 s after it, and the RMS error over all
    joints and samples."""
    def reference(t):
        return profiles.quintic(t, start, final, MOVE_DURATION)
    controller = simulation.computed_torque(model, KP, KD, reference)
    run = simulation.simulate_closed_loop(plant, controller, reference, MOVE_DURATION + 0.5,
                                          MOVE_CONTROL_PERIOD, MOVE_PLANT_STEP, start,
                                          np.zeros(plant.n))
    return simulation.max_tracking_error(run), float(np.sqrt(np.mean(run.error ** 2)))


def move_comparison(plant, identified, prior, start, final, band=3e-4):
    """Max and RMS tracking errors of the move with the true, identified and prior models,
    and with the true parameters scaled by 1 ± `band` (changes ten times below the
    identified model's own torque error): with Coulomb friction in the plant, a joint that
    starts or stops sticks somewhere within ±f_c/(M kp) of its reference, so the maximum
    error of a slow move depends chaotically on imperceptible model changes; the band
    shows how much."""
    phi = ai.arm_parameters(plant)
    models = {'true': plant, 'identified': identified, 'prior': prior,
              'true -band': ai.model_with_parameters(plant, phi * (1.0 - band)),
              'true +band': ai.model_with_parameters(plant, phi * (1.0 + band))}
    return {key: move_errors(plant, model, start, final) for key, model in models.items()}


def study(name, duration=60.0, rate=1000.0, seed=1, validation_duration=20.0,
          iterations=20, moves=True):
    """Every figure for one preset (see the module docstring), as a dict."""
    prior = load(name)
    plant = ai.perturbed_model(prior, 0.3, seed=seed, **ai.drive_terms(prior))
    q0 = STARTS[name]
    out = {'name': name, 'prior': prior, 'plant': plant}
    started = time.perf_counter()
    excitation = ai.optimal_excitation(prior, duration, q0, seed=seed, iterations=iterations)
    out['excitation time'] = time.perf_counter() - started
    out['excitation'] = excitation
    step = 1.0 / rate
    started = time.perf_counter()
    experiment = ai.closed_loop_experiment(plant, prior, excitation.reference, duration, q0,
                                           KP, KD, control_period=step, plant_step=step,
                                           seed=seed)
    validation_motion = ai.optimal_excitation(prior, validation_duration, q0,
                                              seed=seed + 100, iterations=0)
    validation = ai.closed_loop_experiment(plant, prior, validation_motion.reference,
                                           validation_duration, q0, KP, KD,
                                           control_period=step, plant_step=step,
                                           seed=seed + 100)
    out['simulation time'] = time.perf_counter() - started
    out['tracking error during excitation'] = np.max(np.abs(
        experiment.q_true - excitation.sample(experiment.t)[0]), axis=0)
    started = time.perf_counter()
    result = ai.identify_arm(prior, experiment.t, experiment.q, experiment.qd, experiment.tau,
                             effort_timing='held_after')
    out['identify time'] = time.perf_counter() - started
    out['result'] = result
    models = {'prior': prior, 'identified': result.model, 'true': plant}
    out['relative exact'] = {k: relative_errors(m, validation) for k, m in models.items()}
    out['relative noisy'] = {k: ai.validation_errors(m, validation.t, validation.q,
                                                     validation.qd, validation.tau,
                                                     effort_timing='held_after')[1]
                             for k, m in models.items()}
    out['consistency'] = ai.physical_consistency_issues(result.model)   # its own terms
    if moves:
        out['move'] = move_comparison(plant, result.model, prior, *MOVES[name])
    return out


def report(out):
    name, result = out['name'], out['result']
    percent = {'float_kind': lambda v: f'{100 * v:6.3f}'}
    print(f'\n== {name}: {out["plant"].n} joints, excitation {out["excitation"]!r}')
    print(f'   optimised in {out["excitation time"]:.1f} s; tracked by the prior model with '
          f'max error {np.array2string(out["tracking error during excitation"], precision=3)}'
          ' rad')
    print(f'   identify_arm: {result.raw_samples} samples read, {result.samples} used '
          f'({result.rows} joint equations), base parameters {result.base.rank} of '
          f'{len(result.phi)}, condition number {result.condition_number:.4g}, not excited: '
          f'{result.not_excited or "none"}')
    timing = ', '.join(f'{k} {v:.2f} s' for k, v in result.timing.items())
    print(f'   time {out["identify time"]:.2f} s ({timing})')
    print('   relative RMS torque error on the validation motion, % per joint')
    for kind in ('exact', 'noisy'):
        for key, values in out[f'relative {kind}'].items():
            print(f'     {kind:5s} {key:10s} ' + np.array2string(values, formatter=percent))
    print('   physically consistent: ' + ('yes' if not out['consistency'] else
                                           '; '.join(out['consistency'])))
    if 'move' in out:
        move = out['move']
        worst = {k: float(np.max(v[0])) for k, v in move.items()}
        rms = {k: v[1] for k, v in move.items()}
        band = max(worst['true'], worst['true -band'], worst['true +band'])
        print('   move tracked by computed torque, max error [rad]: '
              f'true {worst["true"]:.3e}, identified {worst["identified"]:.3e}, '
              f'prior {worst["prior"]:.3e}; '
              f'identified/true {worst["identified"] / worst["true"]:.3f} (target <= 1.2), '
              f'prior/identified {worst["prior"] / worst["identified"]:.1f} (target >= 10)')
        print(f'     true parameters x (1 -/+ 3e-4): max error {worst["true -band"]:.3e}, '
              f'{worst["true +band"]:.3e}; identified / worst of these '
              f'{worst["identified"] / band:.3f}; '
              f'RMS error identified/true {rms["identified"] / rms["true"]:.3f}')


# ---------------------------------------------------------------------- realistic recordings


def estimated(arm, friction, estimation, validation, keep, folder, write, floor, kept=None):
    """What `identify estimate --offset --friction FRICTION` makes of two recordings of
    `arm` (its `prior`, `joints`), the study's figures: both written as rosbag2 folders
    (`write(bag, recording)`) in KEEP/FOLDER (kept) or a temporary folder, the excitation
    read and estimated (timed), the unconstrained least-squares fit, and the held-out
    relative errors of the robot file, the fit, the identified model and the true arm
    (`floor(t, q, qd, tau, source=...)`) on the validation, q̈ from the estimate's source;
    the errors against the applied efforts at the exact states; consistency; targets.
    `kept(root)`: more files to keep beside the bags (a dict of what was written)."""
    import shutil
    import tempfile
    import realistic_recordings as rr
    from robot_dynamics.joint_state_bag import read_joint_states
    from robot_dynamics.nodes.identify import pieces
    out = {}
    with tempfile.TemporaryDirectory() as temporary:
        root = os.path.join(keep or temporary, folder)
        os.makedirs(root, exist_ok=True)
        bags = {key: os.path.join(root, key) for key in ('excitation', 'validation')}
        for key, recording in (('excitation', estimation), ('validation', validation)):
            if os.path.exists(bags[key]):
                shutil.rmtree(bags[key])
            write(bags[key], recording)
        if keep and kept is not None:
            out.update(kept(root))
        out['bags'] = bags if keep else None
        wall, cpu = time.perf_counter(), time.process_time()
        recording = read_joint_states(bags['excitation'], arm.joints)
        out['reading'] = time.perf_counter() - wall
        t, q, qd, tau = (list(c) for c in zip(*pieces([recording])))
        result = ai.identify_arm(arm.prior, t, q, qd, tau, offset=True, friction=friction,
                                 effort_timing='instant')
        out['identify wall'] = time.perf_counter() - wall
        out['identify cpu'] = time.process_time() - cpu
        held = read_joint_states(bags['validation'], arm.joints)
    out['samples read'] = len(recording)
    out['notes'] = list(recording.notes)
    out['result'] = result
    source = result.accelerations
    fit = ai.identify_arm(arm.prior, t, q, qd, tau, offset=True, friction=friction,
                          effort_timing='instant', constrained=False, accelerations=source)
    out['least squares'] = fit
    vt, vq, vqd, vtau = (list(c) for c in zip(*pieces([held])))
    out['relative'] = {
        'robot file': ai.validation_errors(arm.prior, vt, vq, vqd, vtau,
                                           accelerations=source)[1],
        'least squares': rr.predicted_errors(arm.prior, friction, True, fit.phi,
                                             fit.stribeck_velocity, vt, vq, vqd, vtau,
                                             accelerations=source),
        'identified': ai.validation_errors(result.model, vt, vq, vqd, vtau,
                                           accelerations=source)[1],
        'true arm': floor(vt, vq, vqd, vtau, source=source)}
    out['relative exact'] = {'robot file': rr.exact_errors(arm.prior, validation),
                             'identified': rr.exact_errors(result.model, validation)}
    out['consistency'] = list(result.consistency) + ai.physical_consistency_issues(
        result.model)
    out['targets'] = realistic_targets(out['relative'], out['consistency'])
    return out


def realistic_study(name, duration=60.0, rate=1000.0, seed=1, validation_duration=20.0,
                    friction='stribeck', iterations=0, effects=None, keep=None,
                    closed_loop=False):
    """The targets on recordings that are not the estimator's own
    (benchmarks/realistic_recordings.py: friction outside the estimator's family, effort
    offsets, coloured noise, 2^17-count encoders, stamps jittered by ±40 % of the period,
    0.5 % of the messages dropped), written as rosbag2 folders and estimated as `identify
    estimate --offset --friction FRICTION` does: read with `read_joint_states`, then
    `identify_arm`. `keep`: a folder to keep the bags in (NAME/excitation,
    NAME/validation), else a temporary one. `closed_loop`: the arm integrated by its
    forward dynamics under feedforward + PD control instead of following the motion
    exactly (`realistic_recordings.record`). Returns a dict of every figure."""
    import realistic_recordings as rr
    effects = effects or rr.Effects(rate=rate)
    started = time.perf_counter()
    plant, estimation, validation = rr.recordings(name, duration, validation_duration,
                                                  effects, seed, iterations, closed_loop)
    out = {'name': name, 'plant': plant, 'effects': effects, 'friction': friction,
           'closed loop': closed_loop,
           'duration': duration, 'dropped': estimation.dropped,
           'simulation time': time.perf_counter() - started}
    out.update(estimated(plant, friction, estimation, validation, keep, name,
                         lambda bag, recording: rr.write_bag(bag, plant, recording),
                         lambda *held, source: rr.floor_errors(plant, effects, *held,
                                                                accelerations=source)))
    return out


def realistic_targets(relative, consistency):
    """The targets' figures from the held-out relative errors: the mean over joints of the
    identified model's over the unconstrained least-squares fit's (target <= 1.05), every
    body physically consistent, and the robot file's error over the identified model's on
    every joint where the file is more than 10 % off (target >= 3)."""
    identified, least, prior = (np.asarray(relative[k]) for k in
                                ('identified', 'least squares', 'robot file'))
    off = prior > 0.10
    gain = prior / identified
    out = {'ratio to least squares': float(np.mean(identified) / np.mean(least)),
           'consistent': not consistency,
           'file off': off, 'gain over file': gain,
           'worst gain where off': float(np.min(gain[off])) if np.any(off) else math.inf}
    if 'true arm' in relative:      # joints where not even the true arm is 3x better
        out['unreachable'] = off & (prior < 3.0 * np.asarray(relative['true arm']))
    return out


def realistic_report(out):
    result, plant, effects = out['result'], out['plant'], out['effects']
    targets = out['targets']
    percent = {'float_kind': lambda v: f'{100 * v:6.2f}'}
    print(f'\n== {out["name"]} ({plant.prior.n} joints), a recording that is not the '
          f"estimator's own: {out['duration']:g} s at {effects.rate:g} Hz, stamps ±"
          f'{100 * effects.jitter:g} % of the period, {out["dropped"]} messages dropped, '
          f'{effects.counts}-count encoders, coloured noise ({effects.noise_cutoff:g} Hz); '
          + ('forward dynamics under feedforward + PD control' if out['closed loop']
             else 'the motion followed exactly'))
    print(f'   estimated with --offset --friction {out["friction"]}: {result.raw_samples} '
          f'samples, condition number {result.condition_number:.4g}, not excited: '
          f'{result.not_excited or "none"}'
          + ('; velocity scales found ' + np.array2string(result.stribeck_velocity,
                                                           precision=3)
             if out['friction'] in ('tanh', 'stribeck') else ''))
    fit = ', '.join(f'{k} {100 * v:.2f} %' for k, v in result.acceleration_fit.items())
    words = {'velocity': 'velocities', 'position': 'positions'}
    print(f'   accelerations from the recorded {words[result.accelerations]} (relative '
          f'residual of a least-squares fit: {fit})')
    print('   held-out relative RMS torque error, % per joint (as `identify estimate` '
          'prints it)')
    for key, values in out['relative'].items():
        print(f'     {key:14s}' + np.array2string(values, formatter=percent)
              + f'   mean {100 * np.mean(values):.3f}')
    for key, values in out['relative exact'].items():
        print(f'     {key:14s}' + np.array2string(values, formatter=percent)
              + '   (against the applied efforts at the exact states)')
    print(f'   target: mean identified / mean least squares = '
          f'{targets["ratio to least squares"]:.3f} (<= 1.05: '
          f'{"met" if targets["ratio to least squares"] <= 1.05 else "NOT MET"})')
    print('   target: every body physically consistent: '
          + ('met' if targets['consistent'] else 'NOT MET: ' + '; '.join(out['consistency'])))
    gain = np.array2string(targets['gain over file'], precision=1)
    print(f'   target: robot file / identified >= 3 where the file is > 10 % off: {gain}, '
          f'worst {targets["worst gain where off"]:.2f} ('
          f'{"met" if targets["worst gain where off"] >= 3.0 else "NOT MET"})')
    unreachable = np.flatnonzero(targets.get('unreachable', []))
    if unreachable.size:
        print('     out of reach of any model on joints '
              + ', '.join(str(j + 1) for j in unreachable) + ': the true arm itself is not '
              '3x better than the robot file there (the noise of the recording: the '
              '"true arm" row)')
    stages = result.timing
    groups = {'reading': out['reading'], 'preparation': stages.get('filter', 0.0),
              'regressor': sum(stages.get(k, 0.0) for k in (
                  'base parameters', 'regressor and normal equations', 'velocity scales')),
              'solve': sum(stages.get(k, 0.0) for k in (
                  'imports', 'least squares', 'compression', 'semidefinite program')),
              'uncertainty': stages.get('uncertainty', 0.0)}
    print(f'   time to estimate: {out["identify wall"]:.2f} s wall, '
          f'{out["identify cpu"]:.2f} s CPU (target <= 5 s): '
          + ', '.join(f'{k} {v:.2f} s' for k, v in groups.items()))
    print('     stages of identify_arm: '
          + ', '.join(f'{k} {v:.2f} s' for k, v in stages.items()))
    if out['bags']:
        bags = out['bags']
        print(f'   bags kept: {bags["excitation"]}, {bags["validation"]}')


# ---------------------------------------------------------------------- MuJoCo recordings


def mujoco_study(name, duration=60.0, rate=1000.0, seed=1, validation_duration=20.0,
                 friction='coulomb', iterations=0, effects=None, keep=None):
    """The realistic study's targets on recordings of an arm simulated by MuJoCo
    (benchmarks/mujoco_recordings.py: the URDF read by MuJoCo's compiler and by
    `RobotModel`, MuJoCo's armature, damping and friction loss, feedforward + PD control
    from the robot file that is ±30 % off, the recording's effects of
    `realistic_recordings.Effects`), written as rosbag2 folders and estimated as `identify
    estimate --offset --friction FRICTION` does. Also the agreement of MuJoCo's inverse
    dynamics (``mj_inverse``) with ours on random states. Returns a dict of every figure."""
    import mujoco
    import mujoco_recordings as mr
    import realistic_recordings as rr
    effects = effects or rr.Effects(rate=rate)
    started = time.perf_counter()
    arm, estimation, validation = mr.recordings(name, duration, validation_duration, effects,
                                                seed, iterations)
    out = {'name': name, 'plant': arm, 'effects': effects, 'friction': friction,
           'closed loop': True, 'duration': duration, 'dropped': estimation.dropped,
           'simulation time': time.perf_counter() - started,
           'mujoco': mujoco.__version__,
           'agreement': mr.inverse_agreement(arm)['with drive']}
    out.update(estimated(arm, friction, estimation, validation, keep, f'mujoco_{name}',
                         lambda bag, recording: mr.write_bag(bag, arm, recording),
                         lambda *held, source: mr.floor_errors(arm, effects, validation,
                                                                *held, accelerations=source),
                         kept=lambda root: {'params file': arm.write_params(root)}))
    return out


def mujoco_report(out):
    arm = out['plant']
    vector = {'float_kind': lambda v: f'{v:.3g}'}
    print(f'\n== {out["name"]} simulated by MuJoCo {out["mujoco"]} (the URDF read by '
          f"MuJoCo's compiler and by RobotModel): mj_inverse agrees with ours to "
          f'{out["agreement"]:.1e} (relative, random states, armature and damping included)')
    print('   MuJoCo drive per joint: armature '
          + np.array2string(arm.armature, formatter=vector) + ', damping '
          + np.array2string(arm.damping, formatter=vector) + ', frictionloss '
          + np.array2string(arm.frictionloss, formatter=vector)
          + '; the robot file: links ±30 % off, no drive')
    realistic_report(out)
    model = out['result'].model
    ratio = {'float_kind': lambda v: f'{v:.2f}'}
    print("   MuJoCo's drive as identified (identified / MuJoCo's): Coulomb / frictionloss "
          + np.array2string(model.coulomb_friction / arm.frictionloss, formatter=ratio)
          + ', viscous / damping '
          + np.array2string(model.viscous_friction / arm.damping, formatter=ratio)
          + ', armature ' + np.array2string(model.armature / arm.armature, formatter=ratio))
    if out.get('params file'):
        print(f'   prior kept: {out["params file"]}')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--robots', nargs='+', default=['puma560', 'panda'])
    parser.add_argument('--duration', type=float, default=60.0)
    parser.add_argument('--rate', type=float, default=1000.0)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--study', choices=('own', 'realistic', 'both', 'mujoco'),
                        default='both',
                        help="own: recordings with the estimator's own structure; "
                        'realistic: benchmarks/realistic_recordings.py; mujoco: an arm '
                        'simulated by MuJoCo (benchmarks/mujoco_recordings.py; robots ur5 '
                        'and panda, the default friction law coulomb)')
    parser.add_argument('--friction', default=None,
                        help='the friction law the realistic study (default stribeck) or '
                        'the mujoco study (default coulomb) estimates with')
    parser.add_argument('--keep', default=None, metavar='DIR',
                        help="keep the realistic study's bags in DIR/ROBOT/ (the mujoco "
                        "study's, and the prior, in DIR/mujoco_ROBOT/)")
    parser.add_argument('--closed-loop', action='store_true', dest='closed_loop',
                        help='realistic study: integrate the arm by its forward dynamics '
                        'under feedforward + PD control (slower)')
    args = parser.parse_args(argv)
    if args.study == 'mujoco':
        import mujoco_recordings
        names = (args.robots if args.robots != ['puma560', 'panda']
                 else mujoco_recordings.ARMS)
        unknown = sorted(set(names) - set(mujoco_recordings.ARMS))
        if unknown:
            parser.error(f'--robots: {unknown[0]} has no MuJoCo arm (the mujoco study '
                         f'knows {", ".join(mujoco_recordings.ARMS)})')
        for name in names:
            mujoco_report(mujoco_study(name, args.duration, args.rate, args.seed,
                                       friction=args.friction or 'coulomb', keep=args.keep))
        return
    for name in args.robots:
        if args.study in ('own', 'both'):
            report(study(name, args.duration, args.rate, args.seed))
        if args.study in ('realistic', 'both'):
            realistic_report(realistic_study(name, args.duration, args.rate, args.seed,
                                             friction=args.friction or 'stribeck',
                                             keep=args.keep,
                                             closed_loop=args.closed_loop))


if __name__ == '__main__':
    main()
