"""The test suite. Under pytest, the asserts of the helpers several modules share
(`tests.support`) are rewritten as the tests' own are, so that a failing one shows the
values it compared. Registered here, before anything imports them; a process the tests
start (a worker loading handlers from `tests.integration`) does not import pytest for it."""

import sys

if "pytest" in sys.modules:
    sys.modules["pytest"].register_assert_rewrite("tests.support")
