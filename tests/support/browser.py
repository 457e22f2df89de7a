"""A real headless browser for the console's tests: Debian's Chromium driven by its own chromedriver through
Selenium (no browser download), one per test session.

`Browser.open` loads a page and waits until htmx has settled; `screenshot` saves a PNG under
test-artifacts/console/ for people to review; `console_errors` returns what the page logged at SEVERE level
(JavaScript errors, failed loads), which tests assert is empty.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

from tests.support import polling

__all__ = ["ARTIFACTS", "Browser", "chromium_available"]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_S = 15.0


def chromium_available() -> bool:
    return shutil.which("chromium") is not None and Path(CHROMEDRIVER).exists()


class Browser:
    def __init__(self, width: int = 1366, height: int = 900) -> None:
        options = webdriver.ChromeOptions()
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={width},{height}", "--lang=en-US"):
            options.add_argument(flag)
        options.binary_location = shutil.which("chromium") or "chromium"
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        self.driver.set_page_load_timeout(WAIT_S)
        self.base_url = ""

    def close(self) -> None:
        self.driver.quit()

    def open(self, path: str) -> None:
        """Load `path` (relative to base_url) and wait for the document and any htmx requests to finish."""
        self.driver.get(self.base_url + path)
        self.settle()

    def settle(self, timeout_s: float = WAIT_S) -> None:
        """Wait until the page is loaded and htmx has no request in flight."""
        script = ("return document.readyState === 'complete' && "
                  "document.querySelectorAll('.htmx-request').length === 0")
        WebDriverWait(self.driver, timeout_s).until(lambda d: d.execute_script(script))

    def submit(self, css: str, timeout_s: float = 2 * WAIT_S) -> None:
        """Click the submit button `css` and wait until the next page has loaded and settled.

        The old page is marked with a property of its window: the next document has none. Checking for a stale
        button instead asks chromedriver about an element of a document being torn down, which on a busy machine
        can fail with errors other than "stale element"; the window marker is read by a script, retried while the
        navigation is under way."""
        self.driver.execute_script("window.__moldauLeaving = true")
        self.find(css).click()

        def next_page_loaded(driver: Any) -> bool:
            try:
                return bool(driver.execute_script(
                    "return window.__moldauLeaving !== true && document.readyState === 'complete'"))
            except WebDriverException:
                return False  # the navigation is still tearing down the old document

        WebDriverWait(self.driver, timeout_s).until(next_page_loaded)
        self.settle()

    def find(self, css: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def text_of(self, css: str) -> str | None:
        """The first matching element's text; None when there is none or htmx is swapping it right now."""
        try:
            elements = self.find_all(css)
            return elements[0].text if elements else None
        except StaleElementReferenceException:
            return None

    def wait_for(self, css: str, timeout_s: float = WAIT_S) -> WebElement:
        element: WebElement = WebDriverWait(self.driver, timeout_s).until(
            expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css)))
        return element

    def wait_for_text(self, css: str, text: str, timeout_s: float = WAIT_S) -> None:
        """Wait until the element's text contains `text` (live parts update without reloading)."""
        try:
            WebDriverWait(self.driver, timeout_s).until(
                expected_conditions.text_to_be_present_in_element((By.CSS_SELECTOR, css), text))
        except TimeoutException:
            shown = [e.text for e in self.find_all(css)]
            raise AssertionError(f"{css} never showed {text!r}; it shows {shown}") from None

    def wait_until(self, condition: Any, timeout_s: float = WAIT_S, what: str = "condition") -> None:
        polling.wait_until(condition, timeout_s, what, interval_s=0.2)

    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def console_errors(self) -> list[str]:
        """SEVERE entries of the page's console log since the last call (the log is drained when read)."""
        # Selenium leaves ChromiumDriver.get_log unannotated.
        log: list[dict[str, Any]] = self.driver.get_log("browser")  # type: ignore[no-untyped-call]
        return [entry["message"] for entry in log if entry["level"] == "SEVERE"]
