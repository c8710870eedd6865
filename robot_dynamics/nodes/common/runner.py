"""The `main()` shared by the node executables: spin one node, exit 1 with one log line
(no traceback) on a bad parameter file, shut down in order on Ctrl-C or SIGTERM.

In order means: rclpy's own signal handler is not installed. That handler shuts the
context down from a thread of its own the moment the signal arrives, while the main
thread may be in the middle of a wait, a take or a publish on it; the node's next rcl
call then fails (e.g. RCLError "failed to initialize wait set: the given context is not
valid" out of `executor.spin_once`). Here the signal only sets a flag and wakes the
executor (a guard condition); the main thread finishes what it is doing, leaves its loop
and then destroys the node and shuts the context down itself.

Under `ros2 launch` a node often gets SIGINT twice: launch forwards the SIGINT it got to
each process, and the same Ctrl-C (or a script's kill of the process group) reached the
node directly. Signals within STOP_GRACE_PERIOD of the first are the same stop (exit 0,
the node leaves the graph in order). A signal after that, while the orderly shutdown
hangs, ends the process at once (exit status 128 + signal number)."""

import atexit
import contextlib
import os
import re
import signal
import sys
import tempfile
import threading
import time

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation
from rclpy.signals import SignalHandlerOptions

from robot_dynamics.nodes.common import realtime
from robot_dynamics.parameters.layering import layered_arguments
from robot_dynamics.parameters.params_file import (check_params_files, command_line_parameters,
                                                   layered_origin, mixed_list_problem,
                                                   node_name_of, node_sections, params_files,
                                                   ParamsFileError, section_applies)
from robot_dynamics.nodes.common.ros_params import closest_name, ConfigurationError

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
STOP_GRACE_PERIOD = 2.0   # s: further signals within this of the first are the same stop


class StartRefused(Exception):
    """A node that must not run (e.g. a second simulated clock on the ROS domain): its
    message is logged as one error line and the executable exits with status 1."""


def domain_in_use_message(topics, found=None):
    """The one line refusing a second simulation on a ROS domain: `topics` published by
    another process, or what else was `found`."""
    domain = os.environ.get('ROS_DOMAIN_ID', '0') or '0'
    found = found or f'{", ".join(topics)} published by another process'
    return (f'ROS_DOMAIN_ID {domain} already has a simulation or a robot ({found}): '
            'two on one domain drive each other\'s '
            f'controllers; run this one on a domain of its own, e.g. ROS_DOMAIN_ID='
            f'{int(domain) + 1 if domain.isdigit() and int(domain) < 101 else 1} (or '
            'ROS_AUTOMATIC_DISCOVERY_RANGE=OFF to keep it to this process)')


def domain_lock_path(domain=None):
    """The lock file of a ROS domain's simulation: robot_dynamics_sim_domain_<id>.lock in
    the temporary folder."""
    domain = (os.environ.get('ROS_DOMAIN_ID', '0') or '0') if domain is None else domain
    return os.path.join(tempfile.gettempdir(), f'robot_dynamics_sim_domain_{domain}.lock')


def lock_domain():
    """Hold the ROS domain's simulation lock (`domain_lock_path`) for the rest of the
    process (the returned open file; the system releases it when the process ends, however
    it ends) and return it; None where nothing is to be held (ROS_AUTOMATIC_DISCOVERY_RANGE
    OFF: no other process sees this one) or the lock file cannot be opened. Raises
    StartRefused (`domain_in_use_message`) while another process holds it: two simulations
    started at the same moment, before either publishes what the DDS check looks for."""
    import fcntl
    if os.environ.get('ROS_AUTOMATIC_DISCOVERY_RANGE', '').upper() == 'OFF':
        return None
    path = domain_lock_path()
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)
    except OSError:
        return None           # e.g. another user's file: the DDS check still looks
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        raise StartRefused(domain_in_use_message(
            (), f'another simulation on this machine holds {path}')) from None
    return os.fdopen(descriptor, 'rb')


class StopRequest:
    """SIGINT/SIGTERM as a flag (`requested`), set from a watcher thread.

    Python runs its signal handlers in the main thread between bytecodes, which a main
    thread blocked in an rmw wait does not execute; but the C-level handler writes the
    signal number to the wakeup fd, from whichever thread the signal lands on. The
    watcher thread reads that fd, sets the flag and calls the `on_stop` callbacks (which
    wake the executor). Signal handlers belong to the main thread: created in another
    thread it only stands by (no signal sets the flag). A signal more than
    `grace_period` s after the first ends the process at once."""

    def __init__(self, grace_period=STOP_GRACE_PERIOD):
        self.grace_period = grace_period
        self._first = None                   # monotonic time of the first stop signal
        self._event = threading.Event()
        self._callbacks = []
        self._lock = threading.Lock()
        self._thread = None
        if threading.current_thread() is not threading.main_thread():
            return
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        self._handlers = {s: signal.signal(s, self._in_main_thread) for s in STOP_SIGNALS}
        self._wakeup_fd = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._watch, name='stop_request', daemon=True)
        self._thread.start()

    @property
    def requested(self):
        return self._event.is_set()

    def running(self):
        return not self._event.is_set()

    def on_stop(self, callback):
        """Call `callback()` (from the watcher thread) when the stop is requested."""
        with self._lock:
            self._callbacks.append(callback)
        if self.requested:               # it came before: wake up now
            callback()

    def _in_main_thread(self, signum, frame):
        """The Python-level handler: the watcher has done (or will do) the work."""

    def _watch(self):
        while True:
            data = os.read(self._read_fd, 1)
            if not data or data[0] == 0:               # closed
                return
            signum = data[0]
            if signum not in STOP_SIGNALS:
                continue
            if self._first is not None:
                if not self._in_grace_period():        # the shutdown hangs
                    os._exit(128 + signum)
                continue                               # e.g. launch's copy of a Ctrl-C
            self._first = time.monotonic()
            self.signum = signum                       # the first stop signal
            self._event.set()
            with self._lock:
                callbacks = list(self._callbacks)
            for callback in callbacks:
                try:
                    callback()
                except Exception:  # noqa: B902 - e.g. the node's guard condition is gone
                    pass

    def _in_grace_period(self):
        return (self._first is not None
                and time.monotonic() - self._first <= self.grace_period)

    def close(self):
        """Restore the previous handlers and stop the watcher. Within the grace period of
        a stop, the restored handlers first ignore what is left of it (the orderly stop
        may end before launch's copy of the signal arrives)."""
        if self._thread is None:
            return
        signal.set_wakeup_fd(self._wakeup_fd)
        for signum, handler in self._handlers.items():
            signal.signal(signum, self._after_the_stop(handler) if self._in_grace_period()
                          else handler)
        if self._in_grace_period():   # the process may end before the grace period does
            atexit.register(self._ignore_at_exit)
        with self._lock:
            self._callbacks.clear()
        os.write(self._write_fd, b'\0')
        self._thread.join(timeout=1.0)
        if not self._thread.is_alive():
            os.close(self._read_fd)
        os.close(self._write_fd)

    def _after_the_stop(self, previous):
        """A handler that ignores a stop signal within the grace period and then hands
        it to `previous` (restored for the signals after)."""
        def handler(signum, frame):
            if self._in_grace_period():
                return
            signal.signal(signum, previous)
            if callable(previous):
                previous(signum, frame)
            elif previous == signal.SIG_DFL:
                signal.raise_signal(signum)
        return handler

    def _ignore_at_exit(self):
        """At interpreter exit, within the grace period: ignore the stop signals (Python
        resets its handlers to the default action while it finalises: a late copy of the
        SIGINT would end the stopped process with -2 instead of 0)."""
        if self._in_grace_period():
            for signum in STOP_SIGNALS:
                signal.signal(signum, signal.SIG_IGN)


def logger_name(node_name, args):
    """The name rcl gives the logger of node `node_name` under the remap rules in `args`
    (``-r __node:=ctrl2`` logs under ctrl2, ``-r __ns:=/arm`` under arm.ctrl2)."""
    namespace, name = node_name_of(node_name, args)
    return '.'.join([part for part in namespace.split('/') if part] + [name])


def sections_hint(node_name, args):
    """For a node that got no robot parameters: the parameter files' sections that name
    other nodes ('' if none), e.g. a `ros2 param dump` keyed by the name before a
    remap (the sections for `node_name` apply after a rename: `layered_arguments`)."""
    namespace, name = node_name_of(node_name, args)
    fqn, usual = f'{namespace}/{name}', f'{namespace}/{node_name}'
    others = []
    for path in params_files(args):
        keys = [key for key in node_sections(path)
                if not (section_applies(key, fqn) or section_applies(key, usual))]
        if keys:
            others.append(f'{path} has only {", ".join(repr(k + ":") for k in keys)}'
                          if len(keys) == len(node_sections(path)) else
                          f'{path} also has {", ".join(repr(k + ":") for k in keys)}')
    if not others:
        return ''
    return f' ({"; ".join(others)}: not for {fqn})'


def unknown_parameters(node, args):
    """The parameters given to `node` on the command line (``-p``) or in a parameter
    file section for it by name (not "/**", which all nodes share) that it did not
    declare, in order: they have no effect."""
    fqn = node.get_fully_qualified_name()
    given = command_line_parameters(args, node.get_name())
    for path in params_files(args):
        for key, names in node_sections(path).items():
            if key != '/**' and section_applies(key, fqn):
                given += names
    unknown = []
    for name in given:
        if not node.has_parameter(name) and name not in unknown:
            unknown.append(name)
    return unknown


def _package_names():
    """Every parameter name a node of the package declares (`<joint>`: any joint name)."""
    from robot_dynamics.parameters import catalogue
    return sorted({name for names in catalogue().values() for name in names})


def declared_by_the_package(name):
    """True when some node of the package (controller, plant, sim's demo move) declares
    a parameter `name`."""
    for known in _package_names():
        if known == name or ('<joint>' in known and re.fullmatch(
                re.escape(known).replace(re.escape('<joint>'), r'[^.]+'), name)):
            return True
    return False


def unknown_shared_parameters(node, args):
    """[(file, name)] of the keys in the parameter files' "/**" sections (read by every
    node) that neither `node` nor any other node of the package declares: misspelt, or
    for no node at all. robot.* keys are left to the model, which names unknown ones. The
    file is the user's one a key came from when a launch file layered the files into one
    (`params_file.layered_origin`)."""
    unknown = []
    for path in params_files(args):
        for name in node_sections(path).get('/**', ()):
            origin = layered_origin(path, name) or path
            if (name.startswith('robot.') or node.has_parameter(name)
                    or declared_by_the_package(name) or (origin, name) in unknown):
                continue
            unknown.append((origin, name))
    return unknown


_WARNED_SHARED = set()      # (file, name) already warned by a node of this process


def _closest(node, name):
    closest = closest_name(name, list(node._parameters) + _package_names())
    return f' (closest: {closest})' if closest else ''


def warn_unknown_parameters(node, args):
    """One warning naming each parameter given to `node` that it does not have, and one
    for each file's "/**" keys that no node of the package has, with the closest names."""
    unknown = unknown_parameters(node, args)
    if unknown:
        hints = ((name, _closest(node, name)) for name in unknown)
        node.get_logger().warning(
            f'unknown parameter{"s" if len(unknown) > 1 else ""} {", ".join(unknown)}: '
            f'{node.get_fully_qualified_name()} has no such parameter, ignored'
            + ''.join(f'; {name}{closest}' for name, closest in hints if closest)
            + f' (`ros2 param list {node.get_fully_qualified_name()}` lists its parameters)')
    shared = [item for item in unknown_shared_parameters(node, args)
              if item not in _WARNED_SHARED]
    for path in dict.fromkeys(path for path, _ in shared):
        names = [name for where, name in shared if where == path]
        _WARNED_SHARED.update((path, name) for name in names)
        node.get_logger().warning(
            f'params file {path}: "/**" key{"s" if len(names) > 1 else ""} '
            + ', '.join(f'{name}{_closest(node, name)}' for name in names)
            + ': no node of robot_dynamics declares '
            + ('these' if len(names) > 1 else 'it') + ', ignored (doc/parameters.md lists '
            'every parameter)')
    return unknown


def spin(node, executor, running):
    """The default: the executor runs every callback of the node."""
    while running() and node.context.ok():
        executor.spin_once()


def spin_applying_realtime(node, executor, running):
    """`spin` for a node whose model comes later and may come again (a managed node's
    configure): the executor, `realtime.enter_loop` once each new model is in place and
    `realtime.leave_loop` once it is gone (cleanup: unconfigured, normal priority)."""
    model = None
    while running() and node.context.ok():
        executor.spin_once()
        if node.model is not model:
            if model is not None:
                realtime.leave_loop(node)
            model = node.model
            if model is not None:
                _parameters_declared(node)
                realtime.enter_loop(node)


def own_loop_after_the_model(loop_of):
    """A `spin_node` for a node with its own loop: the executor until the node's model
    exists (it may come on robot_description), then ``loop_of(node)`` (a function of the
    executor and `running`, or None when this configuration keeps the executor), then
    the executor (e.g. after that loop returned: the integration stopped)."""
    def spin_node(node, executor, running):
        while node.model is None and running() and node.context.ok():
            executor.spin_once(timeout_sec=0.1)
        if node.model is not None and running():
            _parameters_declared(node)
            realtime.enter_loop(node)      # gc frozen; realtime.* applied to this thread
        loop = loop_of(node) if node.model is not None else None
        if loop is not None and running():
            loop(executor, running)
        spin(node, executor, running)
    return spin_node


def _parameters_declared(node):
    """The unknown-parameter warning of a node whose parameters came with its model
    (robot_description topic, a managed node's first configure)."""
    argv = getattr(node, '_command_line', None)
    if argv is not None:
        node._command_line = None
        warn_unknown_parameters(node, argv)


def check_command_line_parameters(args):
    """Raise ParamsFileError, in one line naming the parameter and the fix, for a ``-p``
    (``--param``) list rcl refuses: items of more than one type, e.g.
    ``-p "gains.kp:=[150, 150.5]"`` (rcl: "Sequence should be of same type"; rclpy.init
    raises it as a 20-line traceback)."""
    from robot_dynamics.parameters.params_file import command_line_items
    for node, name, value, _ in command_line_items(args):
        problem = mixed_list_problem(value) if isinstance(value, list) else None
        if problem is not None:
            target = f'{node}:{name}' if node else name
            raise ParamsFileError(f'-p {target}[{problem[0]}]: {problem[1]}')


def _init_error(error):
    """rcl's refusal of the command line (out of rclpy.init) as one ParamsFileError line:
    rcl's own message without the C source locations."""
    text = str(error).replace('failed to initialize rcl: ', '')
    return ParamsFileError('command line: ' + text.split(', at /')[0])


@contextlib.contextmanager
def ros_session(args=None):
    """rclpy initialised with `args` but without its signal handler; yields the
    StopRequest that stands in for it; shuts rclpy down at the end. Raises
    ParamsFileError, before rcl reads them, for a parameter file or a ``-p`` list rcl would
    refuse (and, after it, for anything else on the command line rcl refused)."""
    check_params_files(sys.argv if args is None else args)
    check_command_line_parameters(sys.argv if args is None else args)
    stop = StopRequest()
    try:
        try:
            rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
        except rclpy_implementation.RCLError as error:
            raise _init_error(error) from None
        yield stop
    finally:
        rclpy.try_shutdown()
        stop.close()


def run(node_class, node_name, args=None, spin_node=spin):
    """`spin_node(node, executor, running)` drives the node while `running()` (a node
    with its own loop passes one). Errors before the node exists are logged under the
    name the node gets (remap rules included); parameters given to it that it does not
    have are named in one warning once its parameters are declared. Its parameter files
    reach rcl layered (`layering.layered_arguments`): later files win whatever section
    each value is under, sections for `node_name` still apply after a ``__node:=``
    rename, and ``-p`` wins over every file."""
    argv = sys.argv if args is None else list(args)
    name = logger_name(node_name, argv)
    merged = None
    try:
        check_params_files(argv)
        rcl_args, merged = layered_arguments(argv, node_name)
        with ros_session(rcl_args) as stop:
            merged = _removed(merged)            # rcl has read it (rclpy.init)
            return _run_node(node_class, node_name, spin_node, stop, argv)
    except ParamsFileError as error:
        rclpy.logging.get_logger(name).error(str(error))
        return 1
    finally:
        _removed(merged)


def _removed(path):
    """Remove the file at `path` (if any); None."""
    if path:
        with contextlib.suppress(OSError):
            os.remove(path)


def _run_node(node_class, node_name, spin_node, stop, argv=()):
    logger = rclpy.logging.get_logger(logger_name(node_name, argv))
    try:
        node = node_class()
    except ConfigurationError as error:
        hint = sections_hint(node_name, argv) if str(error).startswith('robot:') else ''
        from robot_dynamics.parameters.params_file import error_source   # which file
        namespace, name = node_name_of(node_name, argv)
        logger.error(f'bad parameter: {error}'
                     f'{error_source(argv, name, error, f"{namespace}/{name}")}{hint}')
        return 1
    code = 0
    executor = SingleThreadedExecutor()
    wake = node.create_guard_condition(lambda: None)    # the executor wakes up on a stop
    stop.on_stop(wake.trigger)
    node._command_line = argv           # for the unknown-parameter warning, once declared
    declared = getattr(node, 'parameters_declared', None)   # a managed node says so
    if declared is None:
        declared = getattr(node, 'model', True) is not None
    if declared:
        warn_unknown_parameters(node, argv)
        node._command_line = None
    try:
        executor.add_node(node)
        spin_node(node, executor, stop.running)
    except ConfigurationError as error:   # start-up after the URDF came on robot_description
        logger.error(f'bad parameter: {error}')
        code = 1
    except StartRefused as error:
        logger.error(str(error))
        code = 1
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown()
        node.destroy_node()
    return code
