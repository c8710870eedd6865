"""The flagless `identify estimate` (effort offsets and friction law chosen from the data)
against the documented recipe `--offset --friction tanh`, on kept bags of the realistic
or MuJoCo study (benchmarks/identification.py --keep DIR):

    PYTHONPATH=. python3 benchmarks/identification_defaults.py PRIOR.yaml BAGS_DIR \
        [--recipe LAW] [--also coulomb stribeck]

BAGS_DIR holds `excitation` and `validation` (rosbag2 folders). Printed per setting: the
held-out relative RMS effort error per joint on the validation bag (as `identify
estimate` prints it, q̈ from the estimate's source), its mean, what was chosen, and the
CPU and wall time of `identify_arm` (the choice's share as its own stage)."""

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from robot_dynamics.identification import arm as ai  # noqa: E402
from robot_dynamics.identification.recordings import read_joint_states  # noqa: E402
from robot_dynamics.nodes.identify import pieces, prior_model  # noqa: E402


def columns(folder, joints):
    return tuple(list(c) for c in zip(*pieces([read_joint_states(folder, joints)])))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('prior')
    parser.add_argument('bags')
    parser.add_argument('--recipe', default='tanh', help='the recipe\'s law (default tanh)')
    parser.add_argument('--also', nargs='*', default=[], metavar='LAW',
                        help='more laws with --offset to print')
    args = parser.parse_args(argv)
    warnings.simplefilter('ignore')
    model, joints, _ = prior_model([args.prior])
    t, q, qd, tau = columns(os.path.join(args.bags, 'excitation'), joints)
    vt, vq, vqd, vtau = columns(os.path.join(args.bags, 'validation'), joints)
    settings = [('flagless (chosen from the data)', 'auto', 'auto'),
                (f'--offset --friction {args.recipe}', True, args.recipe)]
    settings += [(f'--offset --friction {law}', True, law) for law in args.also]
    for label, offset, friction in settings:
        wall, cpu = time.perf_counter(), time.process_time()
        result = ai.identify_arm(model, t, q, qd, tau, offset=offset, friction=friction)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        relative = ai.validation_errors(result.model, vt, vq, vqd, vtau,
                                        accelerations=result.accelerations)[1]
        chosen = ''
        if result.drive_fit:
            law, with_offset = result.drive_fit['chosen']
            chosen = (f'; chose {law}{" + offsets" if with_offset else ""} ('
                      + ', '.join(f'{c[0]}{"+o" if c[1] else ""} {100 * v:.3f} %'
                                  for c, v in result.drive_fit['scores'].items()) + ')')
        choice = result.timing.get('friction law and offsets chosen', 0.0)
        print(f'{label}: held-out relative error {np.round(100 * relative, 2).tolist()} %, '
              f'mean {100 * np.mean(relative):.3f} %; accelerations {result.accelerations}'
              f'{chosen}; consistent {not result.consistency}; identify_arm {wall:.2f} s '
              f'wall, {cpu:.2f} s CPU (the choice {choice:.2f} s wall)')


if __name__ == '__main__':
    main()
