"""The 1 kHz loop under the Cartesian impedance law, loaded, with the real-time options on,
beside the computed-torque loop in the same run.

    PYTHONPATH=. .venv-kilted/bin/python benchmarks/compliant_loop.py [--duration S] [--repeats N]

(doc/performance.md shows a run.) Each row is the 1 kHz bring-up of closed_loop.py (plant
free-running on the wall clock, RK4 at 1 ms, /joint_states every 1 ms; controller on_state;
demo_move; three processes, the shipped executables) under the condition of
under_load.py's "loaded, options on": one busy process pinned to each CPU, and
`realtime.priority` 80 with `realtime.lock_memory` for the plant and the controller. Rows:

1. computed_torque, PUMA 560 (config/puma560.yaml, config/sim_puma560.yaml,
   config/sim_1khz.yaml): the existing row of the table, as `run.py` measures it;
2. computed_torque, Panda (config/panda.yaml, then START and a demo move from START to GOAL
   in a temporary file, config/sim_1khz.yaml);
3. cartesian_impedance, Panda: the same with `control_law: cartesian_impedance` given at
   start-up (its default stiffness and damping ratio, holding the start tool pose: the
   law's cycle costs the same at rest as moving). demo_move's joint trajectory is then
   refused, naming the law: the controller's log line that the Cartesian law is the one
   in effect (the row fails without it).

The rows run in turn, `--repeats` times (interleaved, so that a change of the machine's
other load falls on all of them). Target for every row: late ticks <= 1 % (real-time
factor >= 0.98 too). The machine's load average is printed before each run: other jobs on
the machine are part of the conditions.
"""

import argparse
import os

import closed_loop   # noqa: I100 - sets a private ROS_DOMAIN_ID before rclpy is used
import under_load

PANDA = os.path.join(closed_loop.CONFIG, 'panda.yaml')
START = [0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8]    # rad: the Panda's pose of the law tests
GOAL = [0.3, -0.1, -0.2, -2.0, 0.2, 2.2, 1.0]    # rad: the demo move's goal (2 s, quintic)
LATE_LIMIT = under_load.LATE_LIMIT              # late ticks / ticks
RTF_LIMIT = under_load.RTF_LIMIT
# name, robot, more --ros-args of the plant and the controller
ROWS = (
    ('computed_torque, PUMA 560', 'puma560', ()),
    ('computed_torque, Panda', 'panda', ()),
    ('cartesian_impedance, Panda', 'panda',
     ('-p', 'computed_torque_controller:control_law:=cartesian_impedance')),
)
_PANDA_DEMO = []


def params_files(robot):
    """The bring-up's parameter files: the PUMA 560's (closed_loop.py's); the Panda's:
    config/panda.yaml, its start pose and demo move (a temporary file, as
    config/sim_puma560.yaml is the PUMA's), config/sim_1khz.yaml."""
    if robot == 'puma560':
        return None
    if not _PANDA_DEMO:
        import atexit
        import tempfile
        import yaml
        document = {'/**/plant_simulator': {'ros__parameters': {'initial_positions': list(START)}},
                    '/**/demo_move': {'ros__parameters': {'start_positions': list(START),
                                                          'goal_positions': GOAL}}}
        handle, path = tempfile.mkstemp(prefix='compliant_loop_', suffix='.yaml')
        with os.fdopen(handle, 'w', encoding='utf-8') as stream:
            yaml.safe_dump(document, stream)
        atexit.register(lambda: os.path.exists(path) and os.remove(path))
        _PANDA_DEMO.append(path)
    return (PANDA, _PANDA_DEMO[0], closed_loop.SIM_1KHZ)


def law_in_effect(name, loop):
    """The row ran its law: computed torque took the demo's trajectory; the Cartesian law
    refused it naming itself."""
    if name.startswith('cartesian_impedance'):
        return 'control_law is cartesian_impedance' in loop['controller_log']
    return loop['moved']


def passed(name, loop):
    return (loop['closed_loop'] and law_in_effect(name, loop)
            and under_load.fraction(loop) <= LATE_LIMIT
            and loop['real_time_factor'] >= RTF_LIMIT)


def measure(duration, repeats=1, busy_limit=None, log=print):
    """{row name: [statistics of each repeat]} (closed_loop.bringup_real_time's, loaded,
    options on), the rows interleaved."""
    busy_limit = duration + 90.0 if busy_limit is None else busy_limit
    results = {name: [] for name, _, _ in ROWS}
    for repeat in range(repeats):
        for name, robot, args in ROWS:
            log(f'# {name}, run {repeat + 1}: load average {under_load.load_average()}')
            with under_load.busy_processes(True, busy_limit):
                loop = closed_loop.bringup_real_time(
                    duration, (*under_load.realtime_args(True), *args),
                    params_files=params_files(robot))
            results[name].append(loop)
    return results


def describe(name, loop):
    late = under_load.fraction(loop) * 100.0
    return (f'{name}: late {late:.2f} % of {loop["ticks"]} ticks ({loop["dropped"]} dropped), '
            f'real-time factor {loop["real_time_factor"]:.4f}, {loop["unanswered"]} states '
            f'unanswered; loop closed {loop["closed_loop"]}, law in effect '
            f'{law_in_effect(name, loop)}: {closed_loop.verdict(passed(name, loop))}')


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--duration', type=float, default=10.0,
                        help='wall seconds of each bring-up run (10)')
    parser.add_argument('--repeats', type=int, default=2,
                        help='runs of each row, interleaved (2)')
    args = parser.parse_args()
    print(f'# {len(os.sched_getaffinity(0))} CPUs, load average {under_load.load_average()}; '
          f'loaded: one busy process per CPU; options on: realtime.priority '
          f'{under_load.PRIORITY} + realtime.lock_memory (plant, controller)', flush=True)
    results = measure(args.duration, args.repeats,
                      log=lambda line: print(line, flush=True))
    for name, loops in results.items():
        for loop in loops:
            print(describe(name, loop))
    print('| row (1 kHz bring-up, loaded, options on) | late ticks per run | real-time factor '
          '| target | result |')
    print('|---|---|---|---|---|')
    for name, loops in results.items():
        late = ', '.join(f'{under_load.fraction(loop) * 100:.2f} % of {loop["ticks"]}'
                         for loop in loops)
        rtf = ', '.join(f'{loop["real_time_factor"]:.4f}' for loop in loops)
        ok = all(passed(name, loop) for loop in loops)
        print(f'| {name} | {late} | {rtf} | ≤ {LATE_LIMIT * 100:g} % | '
              f'{closed_loop.verdict(ok)} |')


if __name__ == '__main__':
    main()
