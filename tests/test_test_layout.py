"""The test suite's own layout: no test module imports another, so it runs the same under `--import-mode=importlib`;
and the inner loop's hypothesis profile.

Shared code lives in tests/helpers/ (imported as `helpers`, tests/ being on pytest's pythonpath) or in a conftest.py
as fixtures. Under importlib a test module is not importable by its bare name, so `from test_metrics import ...`
works only under the default import mode; a conftest is pytest's to load, never a module's to import.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module `path` imports, at any depth (function-local imports included), with its line."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found += [
                (node.lineno, f"{base}.{alias.name}" if node.level and not node.module else base)
                for alias in node.names
            ]
    return found


def is_test_module(name: str) -> bool:
    parts = name.lstrip(".").split(".")
    return parts[0] == "tests" or any(part == "conftest" or part.startswith("test_") for part in parts)


def test_is_test_module_tells_test_modules_from_helpers_and_libraries():
    for name in ("test_metrics", "tests.daemon.test_metrics", "conftest", "tests.helpers", "..test_jobs"):
        assert is_test_module(name), name
    for name in ("helpers", "helpers.proc", "collector.testing", "pytest", "collector.sdk.timeutil"):
        assert not is_test_module(name), name


def test_no_test_module_imports_another_test_module_or_a_conftest():
    python_files = sorted(TESTS.rglob("*.py"))
    assert len(python_files) > 40  # the walk does see the suite
    offences = [
        f"{path.relative_to(TESTS)}:{line}: imports {name}"
        for path in python_files
        for line, name in imported_modules(path)
        if is_test_module(name)
    ]
    assert not offences, "\n".join(offences) + "\nshared code goes in tests/helpers/ or a conftest.py fixture"


def test_the_shared_helpers_are_one_package_under_tests():
    helpers = TESTS / "helpers"
    assert (helpers / "__init__.py").is_file()
    loose = [p.name for p in TESTS.glob("*.py") if p.name != "conftest.py" and not p.name.startswith("test_")]
    assert not loose, f"shared test code belongs in tests/helpers/: {loose}"


def test_a_property_test_runs_a_tenth_of_its_examples_in_the_fast_profile_and_all_of_them_otherwise():
    from hypothesis import settings

    from helpers import examples

    current = settings.get_current_profile_name()
    try:
        settings.load_profile("fast")  # what tests/conftest.py loads for -m "not system"
        assert (examples(1500), examples(300), examples(20)) == (150, 30, 5)
        settings.load_profile("default")
        assert (examples(1500), examples(300), examples(20)) == (1500, 300, 20)
    finally:
        settings.load_profile(current)


def test_a_test_servers_failing_request_writes_nothing_into_a_tests_standard_error(capsys):
    """conftest.py's test_servers_write_no_stderr: a handler's failure, on the server's own thread, is logged, not
    printed into whichever test runs meanwhile."""
    import threading
    import urllib.request
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Failing(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            raise ConnectionResetError("the client went away")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/", timeout=30)
        except OSError:
            pass  # the handler answered nothing
    finally:
        server.shutdown()
        server.server_close()
    assert capsys.readouterr().err == ""
