"""The `main()` shared by the node executables: spin one node, exit 1 with one log line
(no traceback) on a bad parameter file, shut down quietly on Ctrl-C or SIGTERM."""

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

from robot_dynamics.nodes.ros_params import ConfigurationError


def spin(node, executor):
    """The default: the executor runs every callback of the node."""
    executor.spin()


def own_loop_after_the_model(loop_of):
    """A `spin_node` for a node with its own loop: the executor until the node's model
    exists (it may come on robot_description), then ``loop_of(node)`` (a function of the
    executor, or None when this configuration keeps the executor), then the executor
    (e.g. after that loop returned: the integration stopped)."""
    def spin_node(node, executor):
        while node.model is None and node.context.ok():
            executor.spin_once(timeout_sec=0.1)
        loop = loop_of(node) if node.model is not None else None
        if loop is not None:
            loop(executor)
        executor.spin()
    return spin_node


def run(node_class, node_name, args=None, spin_node=spin):
    """`spin_node(node, executor)` drives the node (a node with its own loop passes one)."""
    rclpy.init(args=args)
    logger = rclpy.logging.get_logger(node_name)
    try:
        node = node_class()
    except ConfigurationError as error:
        logger.error(f'bad parameter: {error}')
        rclpy.try_shutdown()
        return 1
    code = 0
    executor = SingleThreadedExecutor()
    try:
        executor.add_node(node)
        spin_node(node, executor)
    except ConfigurationError as error:   # start-up after the URDF came on robot_description
        logger.error(f'bad parameter: {error}')
        code = 1
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        try:
            executor.shutdown()
            node.destroy_node()
        except KeyboardInterrupt:         # a second Ctrl-C while shutting down
            pass
        rclpy.try_shutdown()
    return code
