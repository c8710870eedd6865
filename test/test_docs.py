"""The documentation holds together: every relative link in README.md, doc/*.md and
examples/README.md points to an existing file (and an existing heading), every doc page is
reachable from the README, the README's quick-start commands and Python example work as
written, its figure is on the first screen with the command that draws it, and no file
in the repository points to notes that are not in it."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, 'doc')
PAGES = (['README.md', os.path.join('examples', 'README.md')]
         + sorted(os.path.join('doc', name) for name in os.listdir(DOC) if name.endswith('.md')))
FENCE = re.compile(r'^(```|~~~).*?^\1', re.MULTILINE | re.DOTALL)
LINK = re.compile(r'\]\(([^)\s]+)\)')
# Pointers to the planning notes and paper files that only the authors had (assembled from
# pieces so that this file does not match itself).
PLANNING_NOTES = re.compile('|'.join([
    'DESIGN' + r'\.md', 'STYLE' + r'\.md', 'seed' + r'[- ]?0\d\d', 'seed' + '-digest',
    'digest' + r' [AB]\b', r'\.\./' + 'shared', r'\bissue' + r' #?\d+', 'ros' + '-conventions']),
    re.IGNORECASE)


def read(relative):
    with open(os.path.join(ROOT, relative), encoding='utf-8') as stream:
        return stream.read()


def without_code(text):
    return FENCE.sub('', text)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r'[^\w\- ]', '', heading.strip().lower())
    return text.replace(' ', '-')


def anchors(relative):
    seen, result = {}, set()
    for line in without_code(read(relative)).splitlines():
        match = re.match(r'#{1,6}\s+(.*)', line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.add(base if count == 0 else f'{base}-{count}')
    return result


def relative_links(relative):
    """(target file relative to the repository or None for the page itself, anchor)."""
    for target in LINK.findall(without_code(read(relative))):
        if re.match(r'[a-z]+:', target):            # http:, https:, mailto:
            continue
        path, _, anchor = target.partition('#')
        if path:
            path = os.path.normpath(os.path.join(os.path.dirname(relative), path))
        yield (path or relative), anchor


@pytest.mark.parametrize('page', PAGES)
def test_every_relative_link_points_to_an_existing_file_and_heading(page):
    for path, anchor in relative_links(page):
        assert os.path.exists(os.path.join(ROOT, path)), f'{page}: broken link to {path}'
        if anchor:
            assert path.endswith('.md'), f'{page}: anchor #{anchor} into non-page {path}'
            assert anchor in anchors(path), f'{page}: no heading #{anchor} in {path}'


def test_every_doc_page_is_linked_from_the_readme():
    linked = {path for path, _ in relative_links('README.md')}
    assert len(linked) > 10             # the link pattern finds the README's links
    for page in PAGES[2:]:
        assert page in linked, f'{page} is not reachable from README.md'


def test_slug_follows_github_for_the_headings_used_here():
    assert slug('[LEE] §5: computed torque on the PUMA 560') == \
        'lee-5-computed-torque-on-the-puma-560'
    assert slug("Sasaki's six-link arm") == 'sasakis-six-link-arm'
    assert slug('The simulation: `sim`, the plant node') == 'the-simulation-sim-the-plant-node'


def tracked_text_files():
    try:
        listing = subprocess.run(['git', 'ls-files', '-z'], cwd=ROOT, capture_output=True,
                                 check=True).stdout.decode().split('\0')
        files = [name for name in listing if name]
    except (OSError, subprocess.CalledProcessError):        # not a git checkout
        files = [os.path.relpath(os.path.join(folder, name), ROOT)
                 for folder, dirs, names in os.walk(ROOT)
                 if not any(part.startswith('.') for part in
                            os.path.relpath(folder, ROOT).split(os.sep) if part != '.')
                 for name in names]
    for name in files:
        path = os.path.join(ROOT, name)
        if not os.path.isfile(path):
            continue
        with open(path, 'rb') as stream:
            data = stream.read()
        if b'\0' in data:
            continue                                         # binary (figures, .npz)
        yield name, data.decode('utf-8', errors='replace')


def test_no_file_points_to_planning_notes_outside_the_repository():
    hits = [f'{name}:{number}: {line.strip()[:80]}'
            for name, text in tracked_text_files()
            for number, line in enumerate(text.splitlines(), 1)
            if PLANNING_NOTES.search(line)]
    assert not hits, 'cite papers or doc/ instead:\n' + '\n'.join(hits)


def test_code_and_configs_cite_doc_pages_and_readme_sections_that_exist():
    sections = {re.match(r'#+\s+(.*)', line).group(1)
                for line in without_code(read('README.md')).splitlines() if line.startswith('#')}
    cited = 0
    for name, text in tracked_text_files():
        for page in re.findall(r'\bdoc/[\w-]+\.md', text):
            cited += 1
            assert os.path.exists(os.path.join(ROOT, page)), f'{name}: cites missing {page}'
        for section in re.findall(r'README(?:\.md)?,?\s+"([^"]+)"', text):
            section = ' '.join(section.split())          # a quote wrapped over lines
            assert section in sections, f'{name}: README has no section "{section}"'
    assert cited > 20


def test_planning_note_pattern_catches_what_it_must_and_spares_ordinary_words():
    for parts in (('see DESIGN', '.md'), ('Seed', ' 000 §2'), ('seed', '-digest-B §2.8'),
                  ('digest', ' A §3.4'), ('..', '/shared/x'), ('issue', ' 6'),
                  ('ros', '-conventions §3')):
        assert PLANNING_NOTES.search(''.join(parts)), parts
    for text in ('hexdigest()[:20]', 'random seed 20260522', 'an issue with the clock'):
        assert not PLANNING_NOTES.search(text), text


def test_readme_keeps_the_two_quick_start_commands_that_ci_runs():
    readme = read('README.md')
    assert 'python3 tools/dev.py sim --duration 5' in readme
    assert '\npython3 tools/dev.py test ' in readme
    assert 'python3 tools/dev.py test\n' in read(os.path.join('.ci', 'run'))


def readme_figure_command():
    """The command the README names for its figure, as one line of words."""
    readme = read('README.md')
    commands = [' '.join(c.split()) for c in re.findall(r'`([^`]+)`', readme)
                if FIGURE in c]
    assert len(commands) == 1, commands
    return commands[0].split()


FIGURE = 'doc/figures/demo_tracking.png'


def png_size(data):
    """(width, height) of a PNG image from its header; fails on anything else."""
    assert data[:8] == b'\x89PNG\r\n\x1a\n'
    return int.from_bytes(data[16:20], 'big'), int.from_bytes(data[20:24], 'big')


def test_readme_shows_the_demo_figure_before_its_first_section():
    readme = read('README.md')
    image = re.search(r'!\[[^\]]+\]\(' + re.escape(FIGURE) + r'\)', readme)
    assert image, f'README.md does not show {FIGURE}'
    assert image.start() < readme.index('\n## ')            # the first screen
    width, height = png_size(open(os.path.join(ROOT, FIGURE), 'rb').read())
    assert 800 <= width <= 1400 and height < width / 2     # one wide row: GitHub's width


def test_readme_names_the_command_that_draws_its_figure():
    words = readme_figure_command()
    assert words[:3] == ['python3', 'tools/dev.py', 'sim']
    assert words[words.index('--plot') + 1] == FIGURE and '--' in words
    assert words[words.index('--plot-layout') + 1] == 'overview'
    assert '--duration' in words[:words.index('--')]    # it ends by itself


def test_readme_python_example_runs_as_written():
    readme = read('README.md')
    section = readme[readme.index('## Python API'):]
    code = re.search(r'```python\n(.*?)```', section, re.DOTALL).group(1)
    completed = subprocess.run(
        [sys.executable, '-W', 'ignore', '-c', code + '\nprint(len(tau), M.shape, len(qdd))'],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, 'PYTHONPATH': ROOT})
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split()[0] == '6'


def test_readme_stays_short():
    """The README is the front page: at most 500 lines; the reference material (every
    parameter, the JTC parity table, the methods) lives in doc/."""
    assert len(read('README.md').splitlines()) <= 500


def test_python_api_snippets_run_as_written_in_order():
    """doc/python-api.md's Python blocks, one after the other, from the repository root
    (the names one block defines are used by the next)."""
    page = read(os.path.join('doc', 'python-api.md'))
    blocks = re.findall(r'```python\n(.*?)```', page, re.DOTALL)
    assert len(blocks) >= 2
    completed = subprocess.run(
        [sys.executable, '-W', 'ignore', '-c', '\n'.join(blocks)
         + '\nprint(len(tau), M.shape, len(qdd), T.shape)'],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, 'PYTHONPATH': ROOT})
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split()[0] == '6'


def test_examples_readme_names_every_example_script():
    listed = read(os.path.join('examples', 'README.md'))
    scripts = sorted(name for name in os.listdir(os.path.join(ROOT, 'examples'))
                     if name.endswith('.py'))
    assert scripts
    assert [name for name in scripts if f'`{name}`' not in listed] == []
