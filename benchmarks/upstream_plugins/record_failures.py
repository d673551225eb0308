"""pytest plugin (upstream stage): append each failure's report to
$UPSTREAM_FAIL_DIR/fail_<worker>.txt as it happens, so a run cut by its time limit
still says why tests failed."""
import os


def pytest_runtest_logreport(report):
    out = os.environ.get("UPSTREAM_FAIL_DIR")
    if not report.failed or not out:
        return
    os.makedirs(out, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(out, f"fail_{worker}.txt"), "a") as f:
        f.write(f"=== {report.nodeid} [{report.when}]\n{report.longreprtext[-2500:]}\n")
