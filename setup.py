from glob import glob
import os

from setuptools import find_packages, setup

package_name = 'robot_dynamics'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*', 'tools']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        (os.path.join('share', package_name, 'launch'), glob('launch/*.launch.py')),
        (os.path.join('share', package_name, 'config'),
         glob('config/*.yaml') + glob('config/*.rviz')),
    ],
    install_requires=['setuptools', 'numpy', 'pyyaml'],
    extras_require={'test': ['pytest', 'hypothesis', 'mujoco', 'pin'], 'plot': ['matplotlib'],
                    'identification': ['scipy', 'cvxpy'], 'bags': ['rosbags']},
    zip_safe=True,
    maintainer='Seed c3c1a8f9 maintainers',
    maintainer_email='maintainers@users.noreply.a-seed-c3c1a8f9.example',
    description='Newton-Euler computed-torque controller and forward-dynamics plant nodes '
                'for serial arms described by a DH table or a URDF',
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'controller = robot_dynamics.nodes.controller:main',
            'controller_managed = robot_dynamics.nodes.managed_controller:main',
            'plant = robot_dynamics.nodes.plant:main',
            'sim = robot_dynamics.nodes.sim:main',
            'demo_move = robot_dynamics.nodes.sim:demo_main',
            'send_trajectory = robot_dynamics.nodes.send_trajectory:main',
            'excite = robot_dynamics.nodes.excite:main',
            'identify = robot_dynamics.nodes.identify:main',
            'robot_description = robot_dynamics.nodes.robot_description:main',
            'model_from_mjcf = robot_dynamics.nodes.model_from_mjcf:main',
        ],
    },
)
