"""Headless Chromium for irviz's pages: the system's chromium and chromedriver (Debian packages
``chromium`` and ``chromium-driver``, installed by ``.ci/run``), driven by selenium, with the
network log on so a test can tell that a page fetched nothing."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time

ARTIFACTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test-artifacts")


def _find(*names: str) -> str | None:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


def start_chromium(width: int = 1400, height: int = 900):
    """A fresh headless Chromium (its own profile folder, no background networking)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = _find("chromium", "chromium-browser"), _find("chromedriver")
    if chromium is None or driver is None:
        raise RuntimeError("the browser tests need Chromium and its driver: apt-get install chromium chromium-driver")
    profile = tempfile.mkdtemp(prefix="irviz-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-dev-shm-usage", f"--user-data-dir={profile}", f"--window-size={width},{height}"]  # fmt: skip
    for flag in flags:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    browser = webdriver.Chrome(service=Service(driver), options=options)
    browser.irviz_profile = profile
    return browser


def stop_chromium(browser) -> None:
    browser.quit()
    shutil.rmtree(browser.irviz_profile, ignore_errors=True)


def open_page(browser, path: str, timeout: float = 60.0) -> float:
    """Load ``path`` and wait for the viewer's first paint; returns the seconds it took."""
    browser.get("about:blank")
    browser.get_log("performance")  # drop what earlier pages (and the start page) logged
    started = time.perf_counter()
    browser.get("file://" + os.path.abspath(path))
    while browser.execute_script("return document.body && document.body.dataset.state") != "ready":
        if time.perf_counter() - started > timeout:
            raise AssertionError(f"{path}: the viewer did not paint within {timeout} s; console: "
                                 f"{browser.get_log('browser')}")  # fmt: skip
        time.sleep(0.02)
    return time.perf_counter() - started


def requested_urls(browser) -> list[str]:
    """Every URL the page asked for since it was opened (from Chromium's network log)."""
    urls = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def console_errors(browser) -> list[str]:
    return [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def screenshot(browser, name: str) -> str:
    os.makedirs(ARTIFACTS, exist_ok=True)
    path = os.path.join(ARTIFACTS, name)
    browser.save_screenshot(path)
    return path
