"""Driving the console in the browser: sign in, go to a view, wait for it."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from tests.console.conftest import Console

WAIT_S = 15
# A view draws its content anew when it changes: an element found a moment
# ago may be gone (stale), and looked for again.
REDRAWN = (NoSuchElementException, StaleElementReferenceException)


def sign_in(browser: WebDriver, console: Console, key: str, route: str = "") -> None:
    """A fresh tab state, signed in with `key`, at `route` (#/…)."""
    browser.get(f"{console.base_url}/ui/")
    browser.execute_script("sessionStorage.clear()")
    # Away and back: a page load with an empty session (a change of the hash
    # alone would not load the page again).
    browser.get("about:blank")
    browser.get(f"{console.base_url}/ui/{route}")
    field = wait_for(browser, "#key")
    field.send_keys(key)
    browser.find_element(By.CSS_SELECTOR, "#sign-in button[type=submit]").click()
    wait_until(browser, lambda b: b.find_element(By.ID, "identity").is_displayed())


def go(browser: WebDriver, route: str) -> None:
    browser.execute_script("location.hash = arguments[0]", route)


def wait_for(browser: WebDriver, css: str, timeout: float = WAIT_S) -> WebElement:
    found = WebDriverWait(browser, timeout, ignored_exceptions=REDRAWN).until(
        lambda b: _visible(b, css), message=f"nothing shown matches {css}"
    )
    assert isinstance(found, WebElement)
    return found


def _visible(browser: WebDriver, css: str) -> WebElement | bool:
    for element in browser.find_elements(By.CSS_SELECTOR, css):
        if element.is_displayed():
            return element
    return False


def wait_until(
    browser: WebDriver, condition: Callable[[WebDriver], Any], timeout: float = WAIT_S
) -> Any:
    return WebDriverWait(browser, timeout, ignored_exceptions=REDRAWN).until(condition)


def texts(browser: WebDriver, css: str) -> list[str]:
    """The text of what matches `css`, read in one go (nothing goes stale meanwhile)."""
    found = browser.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.innerText)", css
    )
    return [str(text) for text in found]


def seqs(browser: WebDriver) -> list[int]:
    """The seqs of the timeline's messages, in page order."""
    found = browser.execute_script(
        "return [...document.querySelectorAll('#timeline article')].map(a => +a.dataset.seq)"
    )
    return [int(seq) for seq in found]


# Screenshots are taken at this scale of the window: readable, and small
# enough to keep in the repository (docs/console/).
SHOT_SCALE = 0.75


def shot(browser: WebDriver, folder: Path, name: str) -> None:
    """The window as `<name>.png` in `folder`, scaled down."""
    width, height = browser.execute_script("return [innerWidth, innerHeight]")
    clip = {"x": 0, "y": 0, "width": width, "height": height, "scale": SHOT_SCALE}
    captured = browser.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": False}
    )
    (folder / f"{name}.png").write_bytes(base64.b64decode(captured["data"]))
