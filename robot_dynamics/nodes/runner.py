"""The `main()` shared by the node executables: spin one node, exit 1 with one log line
(no traceback) on a bad parameter file, shut down quietly on Ctrl-C or SIGTERM."""

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

from robot_dynamics.nodes.ros_params import ConfigurationError


def spin(node, executor):
    """The default: the executor runs every callback of the node."""
    executor.spin()


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
