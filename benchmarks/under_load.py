"""The 1 kHz closed loop quiet and under load, with the real-time options off and on.

    PYTHONPATH=. .venv-kilted/bin/python benchmarks/under_load.py [--count N] [--duration S]

(doc/realtime.md explains the options and shows a run.) Four conditions: quiet or loaded
(one busy process per CPU, each pinned to its CPU, started before and stopped after each
measurement, and ending by itself after --busy-limit s whatever happens), each with the
options off or on (`realtime.priority:=PRIORITY`, `realtime.lock_memory:=true` for the
plant and the controller; the relay and the probe of the latency measurement, which stand
for the rest of a real-time stack, then run all their threads under SCHED_FIFO PRIORITY too).
In each condition:

1. the reaction-latency probe of closed_loop.py (1 kHz states to the controller and to a
   bare rclpy relay in alternating blocks): median and p99 latency of both;
2. the 1 kHz bring-up of closed_loop.py (plant, controller, demo move as the shipped
   executables): real-time factor and late ticks.

Targets for loaded with the options on: late ticks <= 1 %, real-time factor >= 0.98, p99
reaction <= 2 x the quiet bare-relay median (options off). Then the highest control rate
(500, 1000, 2000, 4000 Hz) at which the PUMA 560 bring-up keeps <= 1 % late ticks (real-time
factor >= 0.98 too), quiet and loaded, options on. The machine's load average before each
part is printed: other jobs on the machine are part of the conditions.
"""

import argparse
import contextlib
import os
import subprocess
import sys
import time

import closed_loop   # noqa: I100 - sets a private ROS_DOMAIN_ID before rclpy is used

PRIORITY = 80        # SCHED_FIFO priority of the options-on runs
RATES = (500, 1000, 2000, 4000)
LATE_LIMIT = 0.01    # late ticks / ticks
RTF_LIMIT = 0.98
P99_LIMIT = 2.0      # x the quiet bare-relay median
# A busy process: spins until its deadline, checking the clock (bounded in time).
SPIN = 'import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n'


def realtime_args(on):
    if not on:
        return ()
    return ('-p', f'realtime.priority:={PRIORITY}', '-p', 'realtime.lock_memory:=true')


def _normal_on(cpu):
    """preexec_fn of a busy process: normal scheduling (whatever this process runs under)
    on `cpu` alone."""
    def set_up():
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        os.sched_setaffinity(0, {cpu})
    return set_up


@contextlib.contextmanager
def busy_processes(loaded, limit):
    """With `loaded`: one busy process per CPU of this process, each ending by itself after
    `limit` s and stopped at the end of the block."""
    processes = []
    if loaded:
        for cpu in sorted(os.sched_getaffinity(0)):
            processes.append(subprocess.Popen(
                [sys.executable, '-c', SPIN.format(limit=float(limit))],
                preexec_fn=_normal_on(cpu)))
        time.sleep(0.5)             # spinning before the measurement starts
    try:
        yield processes
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def load_average():
    return '/'.join(f'{v:.1f}' for v in os.getloadavg())


def fraction(loop):
    return loop['late'] / max(1, loop['ticks'])


def measure(loaded, on, count, duration, limit):
    """(latency result, bring-up statistics) of one condition."""
    with busy_processes(loaded, limit):
        latency = closed_loop.reaction_latency(count, realtime_args(on),
                                               PRIORITY if on else 0)
    with busy_processes(loaded, limit):
        loop = closed_loop.bringup_real_time(duration, realtime_args(on))
    return latency, loop


def highest_rate(loaded, duration, limit):
    """[(rate, statistics)] for RATES, options on; stops after the first rate missed."""
    results = []
    for rate in RATES:
        with busy_processes(loaded, limit):
            loop = closed_loop.bringup_real_time(duration, realtime_args(True), rate=rate)
        results.append((rate, loop))
        if not (loop['closed_loop'] and fraction(loop) <= LATE_LIMIT
                and loop['real_time_factor'] >= RTF_LIMIT):
            break
    return results


def us(seconds):
    return f'{seconds * 1e6:.0f} µs'


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--count', type=int, default=2000,
                        help='latency samples per target and condition (2000)')
    parser.add_argument('--duration', type=float, default=10.0,
                        help='wall seconds of each bring-up run (10)')
    parser.add_argument('--busy-limit', type=float, default=120.0,
                        help='a busy process ends by itself after this many s (120)')
    parser.add_argument('--skip-rates', action='store_true',
                        help='without the highest-rate search')
    args = parser.parse_args()
    if args.busy_limit < args.duration + 30.0:
        parser.error('--busy-limit must leave 30 s for start-up beyond --duration')
    print(f'# {len(os.sched_getaffinity(0))} CPUs, load average {load_average()}, options on '
          f'= realtime.priority {PRIORITY} + realtime.lock_memory (plant, controller), '
          f'SCHED_FIFO {PRIORITY} for the relay and the probe')
    results = {}
    for loaded in (False, True):
        for on in (False, True):
            print(f'# {"loaded" if loaded else "quiet"}, options {"on" if on else "off"}: '
                  f'load average {load_average()}', flush=True)
            results[loaded, on] = measure(loaded, on, args.count, args.duration,
                                          args.busy_limit)
    quiet_relay = results[False, False][0]['relay'][0]
    print('| condition | options | controller reaction median / p99 | bare relay median / p99 '
          '| unanswered | real-time factor | late ticks | dropped |')
    print('|---|---|---|---|---|---|---|---|')
    for (loaded, on), (latency, loop) in results.items():
        c, r = latency['controller'], latency['relay']
        print(f'| {"loaded" if loaded else "quiet"} | {"on" if on else "off"} | '
              f'{us(c[0])} / {us(c[1])} | {us(r[0])} / {us(r[1])} | {c[2]} / {r[2]} | '
              f'{loop["real_time_factor"]:.4f} | {fraction(loop) * 100:.2f} % of '
              f'{loop["ticks"]} | {loop["dropped"]} |')
    latency, loop = results[True, True]
    p99_ratio = latency['controller'][1] / quiet_relay
    checks = (('late ticks', fraction(loop) * 100, '%', LATE_LIMIT * 100, False),
              ('real-time factor', loop['real_time_factor'], '', RTF_LIMIT, True),
              ('controller p99 reaction / quiet relay median', p99_ratio, 'x', P99_LIMIT,
               False))
    print('targets, loaded with the options on:')
    for what, value, unit, limit, at_least in checks:
        ok = value >= limit if at_least else value <= limit
        print(f'  {what}: {value:.3f}{unit} (target {"≥" if at_least else "≤"} '
              f'{limit:g}{unit}): {closed_loop.verdict(ok and loop["closed_loop"])}')
    if args.skip_rates:
        return
    print('highest control rate with <= 1 % late ticks, PUMA 560, options on:')
    for loaded in (False, True):
        print(f'# {"loaded" if loaded else "quiet"}: load average {load_average()}', flush=True)
        kept = None
        for rate, loop in highest_rate(loaded, args.duration, args.busy_limit):
            ok = (loop['closed_loop'] and fraction(loop) <= LATE_LIMIT
                  and loop['real_time_factor'] >= RTF_LIMIT)
            kept = rate if ok else kept
            print(f'  {"loaded" if loaded else "quiet"} {rate} Hz: late '
                  f'{fraction(loop) * 100:.2f} % of {loop["ticks"]}, real-time factor '
                  f'{loop["real_time_factor"]:.4f}, {loop["unanswered"]} states unanswered: '
                  f'{"kept" if ok else "missed"}')
        print(f'  {"loaded" if loaded else "quiet"}: highest rate kept '
              f'{f"{kept} Hz" if kept else "none of " + str(RATES)}')


if __name__ == '__main__':
    main()
