"""Browser tests of the web UI: Debian's Chromium (headless) driven by Selenium through Debian's
chromedriver, against real `sediment server` processes (tests/e2e/harness.py; the cluster page
test starts a 3-node cluster on a real Kafka broker with tests/cluster/cluster_harness.py).

Contract:
- Never downloads a browser or a driver: /usr/bin/chromium and /usr/bin/chromedriver (apt packages
  chromium, chromium-driver: `scripts/install-deps.sh --test`) or $SEDIMENT_CHROMIUM /
  $SEDIMENT_CHROMEDRIVER. Without them every test is skipped with the reason.
- Selenium: the interpreter's own, else Debian's python3-selenium when the interpreter is the
  system one, else a pinned selenium in a cached venv (harness.pip_venv_python) whose
  site-packages is added to sys.path (same interpreter version: the venv is made with it).
- One browser per test module (`browser` fixture, module scope); each module starts its own
  server(s) and stops them by pid at module teardown.
- Screenshots go to build/test-artifacts/screenshots/<name>.png (`screenshot`); docs/screenshots
  holds committed copies.
- Each test is bounded: faulthandler aborts the run with tracebacks after BROWSER_TEST_TIMEOUT
  seconds (default 120).
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for _p in (ROOT / "tests" / "e2e", Path(__file__).resolve().parent):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from harness import import_pinned  # noqa: E402

SELENIUM_PIN = {"selenium": "4.27.1"}
CHROMIUM = os.environ.get("SEDIMENT_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("SEDIMENT_CHROMEDRIVER", "/usr/bin/chromedriver")
SCREENSHOTS = ROOT / "build" / "test-artifacts" / "screenshots"
TEST_TIMEOUT = float(os.environ.get("BROWSER_TEST_TIMEOUT", "120"))


def _load_selenium() -> str | None:
    """None when `selenium` imports, else why not."""
    return import_pinned("selenium", "selenium", SELENIUM_PIN)


def _missing() -> str | None:
    for what, path in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER)):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)) and not shutil.which(path):
            return f"needs {what} at {path} (scripts/install-deps.sh --test installs chromium and chromium-driver)"
    return _load_selenium()


_WHY_NOT = _missing()


def pytest_collection_modifyitems(config, items):
    if _WHY_NOT:
        skip = pytest.mark.skip(reason=_WHY_NOT)
        for item in items:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _bounded_test():
    faulthandler.dump_traceback_later(TEST_TIMEOUT, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module (the driver and the browser are stopped at teardown)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,900", "--no-first-run", "--disable-extensions",
                "--disable-background-networking", "--disable-sync", "--disable-component-update"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def save_screenshot(driver, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


@pytest.fixture
def screenshot(browser):
    """screenshot(name) -> the path of build/test-artifacts/screenshots/<name>.png."""
    return lambda name: save_screenshot(browser, name)


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_management_api: needs /api/v1/whoami and the token API "
                                       "(skipped only when /api/v1/whoami answers 404)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On failure: a screenshot and the browser's console log."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when != "call" or not rep.failed:
        return
    driver = getattr(item, "funcargs", {}).get("browser")
    if driver is None:
        return
    try:
        path = save_screenshot(driver, f"failed-{item.name}-{int(time.time())}")
        rep.sections.append(("browser", f"screenshot: {path}\nurl: {driver.current_url}"))
        rep.sections.append(("browser console", "\n".join(str(e) for e in driver.get_log("browser"))))
    except Exception as e:  # noqa: BLE001 - best effort: the browser may be gone
        rep.sections.append(("browser", f"no screenshot: {e}"))
