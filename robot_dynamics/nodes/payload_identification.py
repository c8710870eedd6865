"""Payload identification in the computed-torque controller: the node side of
robot_dynamics.identification.

While `identification.enabled` is true, every control cycle hands its measured (q, q̇) and
the effort it commanded (after clipping) to `record` — an append to a list, nothing else
on the hot path. A timer at `identification.publish_rate` (node clock) feeds the recorded
samples to the `PayloadEstimator` (where the regressor is evaluated, in blocks) and
publishes the estimate:

    ~/payload_estimate            geometry_msgs/Inertia (mass, com, inertia about the com in
                                  the payload frame: the last DH link frame, or the URDF tip
                                  link's frame), when the least squares has a solution
    ~/payload_estimate/quality    diagnostic_msgs/DiagnosticStatus: OK when excited and
                                  physically consistent, else WARN with the reason; values:
                                  the standard deviations, condition number, samples, ...

Both are latched (transient local, depth 1). Services (std_srvs/Trigger):

    ~/apply_payload_estimate      sets robot.payload.{mass,com,inertia} to the estimate (one
                                  atomic parameter change: the law takes it at the next
                                  cycle) if it is excited and consistent; else refuses and
                                  says why. A mass within 3 standard deviations of zero is
                                  "no payload": mass, com and inertia are set to 0
    ~/reset_payload_estimate      forgets every sample

Switching identification on starts from no samples (the motion before does not count);
switching it off stops recording and keeps the estimate (it can still be applied). The
estimate is absolute: it replaces the payload the controller's model has, so it stays valid
after it is applied. User procedure: doc/payload-identification.md.
"""

import inspect
import math
import threading

from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from geometry_msgs.msg import Inertia, Vector3
import numpy as np
from rcl_interfaces.msg import SetParametersResult
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile
from std_srvs.srv import Trigger

from robot_dynamics.identification.payload import PayloadEstimator
from robot_dynamics.nodes.common.ros_params import ConfigurationError, declare, validated
from robot_dynamics.nodes.common.throttled_log import log_throttled

__all__ = ['PayloadIdentification', 'estimate_messages']

# PayloadEstimator keywords = parameters identification.<keyword> (descriptions: the
# controller's parameter table)
ESTIMATOR_OPTIONS = ('cutoff_frequency', 'max_condition', 'max_mass_std')
QUALITY_NAME = 'payload_identification'
# A usable estimate whose mass is within this many standard deviations of zero means no
# payload: its centre of mass (first moment / mass) and inertia are then noise divided by
# almost nothing, so "no payload" is reported and applying sets mass, com and inertia to 0.
NO_PAYLOAD_SIGMAS = 3.0


def no_payload(estimate):
    """Whether `estimate` is usable and its mass not distinguishable from zero (within
    NO_PAYLOAD_SIGMAS mass standard deviations)."""
    return bool(estimate.excited and estimate.consistent and math.isfinite(estimate.mass)
                and abs(estimate.mass) <= NO_PAYLOAD_SIGMAS * estimate.mass_std)


def no_payload_message(estimate):
    return (f'no payload: the estimated mass {estimate.mass:.3g} kg is within '
            f'{NO_PAYLOAD_SIGMAS:g} standard deviations ({estimate.mass_std:.3g} kg) of zero')


def estimate_messages(estimate, enabled):
    """(geometry_msgs/Inertia or None if the estimate has no numbers,
    diagnostic_msgs/DiagnosticStatus) of a PayloadEstimate."""
    inertia = None
    if math.isfinite(estimate.mass) and np.all(np.isfinite(estimate.com)) \
            and np.all(np.isfinite(estimate.inertia)):
        ixx, ixy, ixz, iyy, iyz, izz = (float(v) for v in estimate.inertia)
        inertia = Inertia(m=float(estimate.mass), com=Vector3(
            x=float(estimate.com[0]), y=float(estimate.com[1]), z=float(estimate.com[2])),
            ixx=ixx, ixy=ixy, ixz=ixz, iyy=iyy, iyz=iyz, izz=izz)
    usable = estimate.excited and estimate.consistent
    empty = no_payload(estimate)
    values = {
        'enabled': str(enabled).lower(),
        'excited': str(estimate.excited).lower(),
        'consistent': str(estimate.consistent).lower(),
        'no_payload': str(empty).lower(),
        'samples': str(estimate.samples),
        'condition_number': f'{estimate.condition_number:.6g}',
        'mass': f'{estimate.mass:.6g}',
        'mass_std': f'{estimate.mass_std:.6g}',
        'com': ' '.join(f'{v:.6g}' for v in estimate.com),
        'com_std': ' '.join(f'{v:.6g}' for v in estimate.com_std),
        'inertia': ' '.join(f'{v:.6g}' for v in estimate.inertia),
        'parameters': ' '.join(f'{v:.6g}' for v in estimate.parameters),
        'parameters_std': ' '.join(f'{v:.6g}' for v in estimate.parameters_std),
    }
    status = DiagnosticStatus(
        level=DiagnosticStatus.OK if usable else DiagnosticStatus.WARN, name=QUALITY_NAME,
        message=(f'excited and consistent: {no_payload_message(estimate)}; applying sets '
                 'mass 0' if empty else 'excited and consistent: can be applied' if usable
                 else estimate.reason),
        values=[KeyValue(key=key, value=value) for key, value in values.items()])
    return inertia, status


class PayloadIdentification:
    """Owns the estimator, the identification.* parameters, the two topics and the two
    services of `node` (a ComputedTorqueController once its law exists)."""

    def __init__(self, node, model):
        self._node = node
        options = {}
        defaults = inspect.signature(PayloadEstimator).parameters
        for name in ESTIMATOR_OPTIONS:     # the estimator's defaults (the table's too)
            options[name] = validated(node, f'identification.{name}', declare(
                node, f'identification.{name}', float(defaults[name].default)))
        options['method'] = validated(node, 'identification.method', declare(
            node, 'identification.method', defaults['method'].default))
        self.enabled = validated(node, 'identification.enabled',
                                 declare(node, 'identification.enabled'))
        rate = validated(node, 'identification.publish_rate',
                         declare(node, 'identification.publish_rate'))
        try:
            self.estimator = PayloadEstimator(model, **options)
        except ValueError as error:
            raise ConfigurationError(f'identification: {error}') from None
        self.estimate = None          # the latest PayloadEstimate
        self._samples = []            # (t, q, q̇, τ) recorded since the last update
        self._last_t = None           # t of the last recorded sample
        self._lock = threading.Lock()
        self._dirty = False           # samples or a state change not yet published
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._estimate_pub = node.create_publisher(Inertia, '~/payload_estimate', latched)
        self._quality_pub = node.create_publisher(DiagnosticStatus,
                                                  '~/payload_estimate/quality', latched)
        node.create_service(Trigger, '~/apply_payload_estimate', self._on_apply)
        node.create_service(Trigger, '~/reset_payload_estimate', self._on_reset)
        node.create_timer(1.0 / rate, self._on_timer)
        node.add_on_set_parameters_callback(self._on_set_parameters)

    # ------------------------------------------------------------------ hot path

    def record(self, t, q, qd, tau, reference=None):
        """One control cycle: the measured state at t, the effort commanded from t on and
        the reference (q_d, q̇_d, q̈_d) tracked (needed by method 'iv').
        A cycle at the same t as the last (a state published again, e.g. by a lock-step
        simulator that waited for its command) is the same sample: skipped."""
        if self.enabled and t != self._last_t:
            self._last_t = t
            if reference is not None:
                reference = tuple(np.array(value, dtype=float) for value in reference)
            self._samples.append((t, q.copy(), qd.copy(), tau.copy(), reference))

    # ------------------------------------------------------------------ estimator

    def update(self):
        """Feed the recorded samples to the estimator and refresh `estimate`; returns it."""
        with self._lock:
            samples, self._samples = self._samples, []
            for t, q, qd, tau, reference in samples:
                try:
                    self.estimator.add(t, q, qd, tau, reference)
                except ValueError as error:   # time went back (clock reset): start again
                    self._node.get_logger().warning(
                        f'payload identification: {error}; samples so far dropped')
                    self.estimator.reset()
                    self.estimator.add(t, q, qd, tau, reference)
            if samples or self.estimate is None:
                self.estimate = self.estimator.estimate()
            return self.estimate

    def _on_timer(self):
        try:
            if not (self.enabled or self._dirty or self._samples):
                return
            self._dirty = False
            self.publish(self.update())
        except Exception as error:  # noqa: B902 - the controller must keep running
            log_throttled(
                self._node, 'error',
                f'payload identification: unexpected {type(error).__name__}: {error}', 2.0)

    def publish(self, estimate):
        inertia, status = estimate_messages(estimate, self.enabled)
        if inertia is not None:
            self._estimate_pub.publish(inertia)
        self._quality_pub.publish(status)

    def reset(self):
        with self._lock:
            self._samples = []
            self.estimator.reset()
            self.estimate = None
        self._dirty = True

    # ------------------------------------------------------------------ parameters

    def _on_set_parameters(self, parameters):
        for parameter in parameters:
            if parameter.name == 'identification.enabled':
                try:
                    enabled = validated(self._node, parameter.name, parameter.value)
                except ConfigurationError as error:
                    return SetParametersResult(successful=False, reason=str(error))
                if enabled and not self.enabled:
                    self.reset()
                self.enabled = enabled
                self._dirty = True
                self._node.get_logger().info(
                    'payload identification ' + ('on: recording every control cycle'
                                                 if enabled else 'off'))
        return SetParametersResult(successful=True)

    # ------------------------------------------------------------------ services

    def _on_reset(self, request, response):
        self.reset()
        response.success = True
        response.message = 'payload estimate reset: no samples'
        return response

    def _on_apply(self, request, response):
        """Apply the estimate as robot.payload.* if it is excited and consistent."""
        try:
            estimate = self.update()
            response.success, response.message = self._apply(estimate)
        except Exception as error:  # noqa: B902 - answer the caller, keep the node running
            response.success = False
            response.message = f'unexpected {type(error).__name__}: {error}'
        if response.success:       # two calls: rclpy ties a log call site to one severity
            self._node.get_logger().info(f'apply_payload_estimate: {response.message}')
        else:
            self._node.get_logger().warning(f'apply_payload_estimate: {response.message}')
        return response

    def _apply(self, estimate):
        if estimate.samples == 0:
            return False, ('refused: no samples (set identification.enabled true and run '
                           'an exciting trajectory first)')
        if not (estimate.excited and estimate.consistent):
            return False, f'refused: {estimate.reason}'
        if no_payload(estimate):
            result = self._node.set_parameters_atomically([
                Parameter('robot.payload.mass', value=0.0),
                Parameter('robot.payload.com', value=[0.0] * 3),
                Parameter('robot.payload.inertia', value=[0.0] * 6)])
            if not result.successful:
                return False, f'refused by the controller: {result.reason}'
            return True, (f'{no_payload_message(estimate)}: applied mass 0 (com and inertia '
                          f'0), from {estimate.samples} samples')
        com = [float(v) for v in estimate.com]
        inertia = [float(v) for v in estimate.inertia]
        result = self._node.set_parameters_atomically([
            Parameter('robot.payload.mass', value=float(estimate.mass)),
            Parameter('robot.payload.com', value=com),
            Parameter('robot.payload.inertia', value=inertia)])
        if not result.successful:
            return False, f'refused by the controller: {result.reason}'
        return True, (f'applied payload {estimate.mass:.4g} kg (std {estimate.mass_std:.2g}), '
                      f'com [{", ".join(f"{v:.4g}" for v in com)}] m, inertia '
                      f'[{", ".join(f"{v:.3g}" for v in inertia)}] kg m^2, from '
                      f'{estimate.samples} samples (condition number '
                      f'{estimate.condition_number:.3g})')
