"""How `make test` shares the tests between its two workers (`pytest -n 2 --dist loadgroup`).

Each test runs in its module's group, so a module's tests run on one worker and its module fixtures (a
class graded, a book built) are computed once, unless the test names a group of its own
(``pytest.mark.xdist_group``): tests/test_catalogue.py grades each assignment's known mistakes as a
group of their own, so that both workers share that longest file.
"""

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
