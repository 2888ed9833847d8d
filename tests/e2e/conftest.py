"""Every end-to-end test ends with the upstream as CodSpeed would hold it: no benchmark in two
parts of one run (the stand-in combines parts by runId, the last upload of a runPartId wins)."""

import pytest


@pytest.fixture(autouse=True)
def each_benchmark_once_upstream(request):
    if "stack" not in request.fixturenames:
        yield
        return
    upstream = request.getfixturevalue("stack").upstream
    before = set(upstream.benchmarks_twice())  # the stack is the session's: only this test's count
    yield
    twice = {b: parts for b, parts in upstream.benchmarks_twice().items() if b not in before}
    assert not twice, f"CodSpeed would count these twice (benchmark: runPartIds): {twice}"
