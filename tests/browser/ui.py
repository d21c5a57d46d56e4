"""Helpers for driving the web UI with Selenium through its data-testid attributes."""

from __future__ import annotations

import time
from typing import Any, Callable

from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait


def sel(testid: str) -> str:
    return f'[data-testid="{testid}"]'


class Ui:
    def __init__(self, driver, base_url: str):
        self.d = driver
        self.base = base_url

    def open(self, path: str) -> None:
        self.d.get(self.base + path)

    def find(self, testid: str, timeout: float = 10.0):
        return WebDriverWait(self.d, timeout).until(lambda d: d.find_element(By.CSS_SELECTOR, sel(testid)))

    def all(self, testid: str) -> list:
        return self.d.find_elements(By.CSS_SELECTOR, sel(testid))

    def wait(self, pred: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
        """The first truthy value of pred() within `timeout` (stale elements are retried)."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                v = pred()
                if v:
                    return v
            except (StaleElementReferenceException, LookupError, ValueError) as e:
                last = e
            time.sleep(0.1)
        raise TimeoutException(f"{what or 'condition'} not met within {timeout}s (last error: {last}); "
                               f"status={self.text('search-status')!r} error={self.text('search-error')!r}")

    def text(self, testid: str) -> str:
        els = self.all(testid)
        return els[0].text if els else ""

    def sign_in(self, token: str, path: str = "/") -> None:
        """Opens `path` in a fresh session and signs in with `token`."""
        self.open(path)
        self.d.execute_script("sessionStorage.clear()")
        self.open(path)
        box = self.find("signin-token")
        box.clear()
        box.send_keys(token)
        self.find("signin-submit").click()
        self.find("signout")

    # ---- search page ----
    def set_repo(self, repo: str) -> None:
        self.wait(lambda: self.find("repo-select").get_attribute("data-loaded"), what="repositories loaded")
        Select(self.find("repo-select")).select_by_value(repo)

    def set_range(self, value: str) -> None:
        Select(self.find("time-range")).select_by_value(value)

    def run_query(self, q: str) -> None:
        """Types `q` into the editor and presses Enter (which runs it)."""
        box = self.find("query-input")
        box.clear()
        # Shift+Enter is a newline; a plain Enter runs the query.
        lines = q.split("\n")
        for i, line in enumerate(lines):
            box.send_keys(line)
            if i < len(lines) - 1:
                box.send_keys(Keys.SHIFT, Keys.ENTER)
        box.send_keys(Keys.ENTER)

    def event_count(self, timeout: float = 20.0) -> int:
        """The count the finished search shows."""
        self.wait(lambda: self.find("run-button").is_enabled() and self.all("event-count"), timeout,
                  "a finished search")
        return int(self.find("event-count").text)

    def aggregate_rows(self) -> list[dict[str, str]]:
        rows = []
        for tr in self.all("aggregate-row"):
            rows.append({td.get_attribute("data-col"): td.text for td in tr.find_elements(By.CSS_SELECTOR, "td")})
        return rows
