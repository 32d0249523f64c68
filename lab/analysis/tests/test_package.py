import importlib
import pathlib
import subprocess
import sys

import asa_analysis

PACKAGE = pathlib.Path(asa_analysis.__file__).parent
HELPERS = {'__init__', 'common', 'procfs', 'tracefs_events'}


def test_every_module_imports_and_exposes_main():
    for name in asa_analysis.MODULES:
        module = importlib.import_module(f'asa_analysis.{name}')
        assert callable(module.main), name


def test_every_script_file_is_listed_as_a_module():
    files = {p.stem for p in PACKAGE.glob('*.py')}
    assert files - HELPERS == set(asa_analysis.MODULES)


def test_every_module_docstring_gives_its_python_m_usage():
    for name in asa_analysis.MODULES:
        doc = importlib.import_module(f'asa_analysis.{name}').__doc__
        assert f'python -m asa_analysis.{name}' in doc, name


def test_no_module_edits_sys_path_or_cites_old_result_paths():
    for path in PACKAGE.glob('*.py'):
        text = path.read_text()
        assert 'sys.path' not in text, path.name
        assert 'gru_expert/results' not in text, path.name
        assert '../2026' not in text and '../thread_samples' not in text, path.name


def test_modules_run_with_python_m():
    for name in asa_analysis.MODULES:
        done = subprocess.run([sys.executable, '-m', f'asa_analysis.{name}', '--help'],
                              cwd=PACKAGE.parent, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, (name, done.stderr)
        assert done.stdout.startswith('usage:'), name


def test_main_without_arguments_is_a_usage_error():
    for name in asa_analysis.MODULES:
        module = importlib.import_module(f'asa_analysis.{name}')
        try:
            module.main([])
        except SystemExit as e:
            assert e.code == 2, name
        else:
            raise AssertionError(f'{name}: main([]) returned')
