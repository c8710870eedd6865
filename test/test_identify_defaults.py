"""The effort offsets and the friction law chosen from the data when not given
(`identify_arm(offset='auto', friction='auto')`, `identify estimate` without --offset and
--friction): the simulated arm's own law and offsets are found, and what is chosen
predicts a motion it did not see as well as the true law does."""

import numpy as np
import pytest

pytest.importorskip('scipy')
pytest.importorskip('cvxpy')

from robot_dynamics.identification import arm as ai  # noqa: E402
from test_arm_identification_models import open_loop, preset, with_drive  # noqa: E402, I100

NOISE = (1e-4, 0.002, 0.005)
RATE = 250.0


@pytest.fixture(scope='module')
def panda():
    prior = preset('panda')
    rigid = ai.perturbed_model(prior, 0.3, seed=2, **ai.drive_terms(prior))
    excitation = ai.optimal_excitation(prior, 15.0, [0, -0.3, 0, -2.2, 0, 2.0, 0.8], seed=0,
                                       iterations=0)
    validation = ai.optimal_excitation(prior, 10.0, excitation.q0, seed=9, iterations=0)
    return prior, rigid, excitation, validation


@pytest.mark.parametrize('law, velocity, offsets', [
    ('tanh', 0.15, True),          # a smooth law, far from a sign at the excitation's speeds
    ('stribeck', 0.1, True),       # a break-away level 0.8 f_c above the sliding one
    ('coulomb', 0.01, False),      # the estimator's default: nothing to add
])
def test_the_arms_own_law_and_offsets_are_chosen(panda, law, velocity, offsets):
    prior, rigid, excitation, validation = panda
    bias = np.linspace(-0.6, 0.6, 7) if offsets else np.zeros(7)
    true = with_drive(rigid, [law] * 7, [velocity] * 7, bias)
    data = open_loop(true, excitation, RATE, NOISE, 3)
    result = ai.identify_arm(prior, *data, offset='auto', friction='auto')
    assert result.drive_fit['chosen'] == (law, offsets), result.drive_fit['scores']
    assert result.friction_model == (law,) * 7 and (result.offset is not None) == offsets
    assert set(result.drive_fit['scores']) == {(name, o) for name in ('coulomb', 'tanh',
                                                                      'stribeck')
                                               for o in (False, True)}
    # on a motion it did not see: as good as the estimate told the true law and offsets
    held = open_loop(true, validation, RATE, NOISE, 4)
    told = ai.identify_arm(prior, *data, offset=offsets, friction=law)
    chosen_error = np.mean(ai.validation_errors(result.model, *held)[1])
    told_error = np.mean(ai.validation_errors(told.model, *held)[1])
    assert chosen_error <= 1.02 * told_error, (chosen_error, told_error)


def test_a_given_law_or_offset_is_kept_and_the_other_chosen(panda):
    prior, rigid, excitation, _ = panda
    true = with_drive(rigid, ['tanh'] * 7, [0.15] * 7, np.linspace(-0.6, 0.6, 7))
    data = open_loop(true, excitation, RATE, NOISE, 3)
    result = ai.identify_arm(prior, *data, offset='auto', friction='coulomb')
    assert result.friction_model == ('coulomb',) * 7 and result.offset is not None
    assert set(result.drive_fit['scores']) == {('coulomb', False), ('coulomb', True)}
    unbiased = open_loop(with_drive(rigid, ['tanh'] * 7, [0.15] * 7), excitation, RATE,
                         NOISE, 3)
    result = ai.identify_arm(prior, *unbiased, offset=False, friction='auto')
    assert result.offset is None and result.friction_model == ('tanh',) * 7
    assert {o for _, o in result.drive_fit['scores']} == {False}
    # both given: nothing compared
    assert ai.identify_arm(prior, *data, offset=True, friction='tanh').drive_fit == {}


def test_identify_estimate_without_flags_says_what_it_chose(panda, tmp_path, capsys):
    """The command line: one line naming the choice and every alternative's held-out
    residual; the written file holds the chosen law and the offsets; a robot file that
    names its friction law keeps it (only the offsets are chosen)."""
    pytest.importorskip('rosbags')
    import os
    import yaml
    from robot_dynamics.identification.recordings import write_joint_states
    from robot_dynamics.nodes.identify import main
    from test_arm_identification_models import REPO
    prior, rigid, excitation, _ = panda
    true = with_drive(rigid, ['tanh'] * 7, [0.15] * 7, np.linspace(-0.6, 0.6, 7))
    t, q, qd, tau = open_loop(true, excitation, RATE, NOISE, 3)
    joints = [f'panda_joint{i}' for i in range(1, 8)]
    write_joint_states(tmp_path / 'bag', joints, 10.0 + t, q, qd, tau)
    robot = os.path.join(REPO, 'config', 'panda.yaml')
    output = tmp_path / 'out.yaml'
    code = main(['identify', 'estimate', '--params-file', robot, '--bag',
                 str(tmp_path / 'bag'), '--output', str(output)])
    out = capsys.readouterr().out
    assert code == 0, out
    line = next(row for row in out.splitlines() if row.startswith('friction law and offsets'))
    assert line.startswith('friction law and offsets: tanh + offsets, chosen from the data')
    for name in ('coulomb', 'coulomb + offsets', 'stribeck + offsets', 'tanh'):
        assert f'{name} ' in line
    written = yaml.safe_load(output.read_text())
    robot_keys = next(iter(written.values()))['ros__parameters']['robot']
    assert robot_keys['friction_model'] == ['tanh'] * 7 and len(robot_keys['effort_offset']) == 7
    law = tmp_path / 'law.yaml'
    law.write_text('/**:\n  ros__parameters:\n    robot:\n      friction_model: '
                   + str(['coulomb'] * 7).replace("'", '') + '\n')
    code = main(['identify', 'estimate', '--params-file', robot, str(law), '--bag',
                 str(tmp_path / 'bag'), '--output', str(output)])
    out = capsys.readouterr().out
    assert code == 0, out
    line = next(row for row in out.splitlines() if row.startswith('friction law and offsets'))
    assert line.startswith('friction law and offsets: coulomb + offsets') and 'tanh' not in line
