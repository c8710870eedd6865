"""Parameters the controller and the plant declare alike: diagnostics and real-time
scheduling."""

from robot_dynamics.parameters.schema import Parameter

DIAGNOSTICS_AND_REALTIME = (
    Parameter('realtime.priority', 'integer', default=0,
              description=(
        'SCHED_FIFO priority (1-99) of the control loop thread and the middleware '
        'threads that wake it; 0 = off (normal scheduling)')),
    Parameter('realtime.cpu_affinity', None,
              description=(
        'CPUs the control loop (and the middleware threads) may run on; empty = all')),
    Parameter('realtime.lock_memory', 'bool', default=False,
              description=(
        'lock the process memory in RAM (mlockall, current and future pages)')),
    Parameter('diagnostics.period', 'double', default=1.0, minimum=0.0, maximum=3600.0,
              description=(
        'publish a status on /diagnostics at this period [s of steady clock]; 0 = none')),
    Parameter('diagnostics.late_cycle_warn', 'double', default=0.01, minimum=0.0,
              maximum=1000000.0, live=True,
              description=(
        'WARN when more than this share of the cycles due in a report window were late '
        '(started more than one period after they were due) [fraction, 0.01 = 1 %]; '
        'settable at runtime')),
    Parameter('diagnostics.late_cycle_error', 'double', default=0.1, minimum=0.0,
              maximum=1000000.0, live=True,
              description=(
        'ERROR when more than this share of the cycles due in a report window were late'
        ' [fraction]; settable at runtime')),
    Parameter('diagnostics.cycle_time_warn', 'double', default=0.5, minimum=0.0, maximum=1000000.0,
              live=True,
              description=(
        'WARN when the mean cycle time of a report window exceeds this share of the '
        'nominal period [fraction of the period]; settable at runtime')),
    Parameter('diagnostics.cycle_time_error', 'double', default=0.9, minimum=0.0,
              maximum=1000000.0, live=True,
              description=(
        'ERROR when the mean cycle time of a report window exceeds this share of the '
        'nominal period [fraction of the period]; settable at runtime')),
)
