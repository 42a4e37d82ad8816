"""What the console must never do: run content as code, show another
tenant's data, offer a write to a read-only key, or serve a page without
its Content-Security-Policy."""

from __future__ import annotations

from pathlib import Path

import httpx
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from api.console import CONTENT_SECURITY_POLICY
from tests.console.browsing import go, shot, sign_in, wait_for, wait_until
from tests.console.conftest import LONG, Console


def _no_script_ran(browser: WebDriver) -> None:
    try:
        alert = browser.switch_to.alert
    except NoAlertPresentException:
        pass
    else:
        text = alert.text
        alert.dismiss()
        raise AssertionError(f"an alert opened: {text}")
    assert browser.execute_script("return window.__xss") is None
    assert browser.find_elements(By.CSS_SELECTOR, "#view img, #view script") == []


def test_content_that_looks_like_html_is_shown_as_text(
    browser: WebDriver, console: Console, screenshots: Path
) -> None:
    sign_in(browser, console, console.writer, "#/c/hostile")
    wait_for(browser, "#timeline article")
    timeline = browser.find_element(By.ID, "timeline").text
    assert "<script>window.__xss = 1; alert('xss')</script> xsscheck" in timeline
    assert '<img src=x onerror="window.__xss=1;alert(1)"> xsscheck' in timeline
    header = browser.find_element(By.CSS_SELECTOR, "#view .toolbar").text
    assert "<img src=x onerror=window.__xss=1>" in header  # the metadata
    _no_script_ran(browser)
    shot(browser, screenshots, "hostile-content")
    go(browser, "#/search/q=xsscheck")
    wait_until(browser, lambda b: len(b.find_elements(By.CSS_SELECTOR, ".hit")) == 2)
    assert "xsscheck" in browser.find_element(By.ID, "search-results").text
    _no_script_ran(browser)
    go(browser, "#/conversations")
    wait_for(browser, "#conversations tr[data-conversation='hostile']")
    _no_script_ran(browser)


def test_a_read_only_key_is_offered_no_write_action(
    browser: WebDriver, console: Console, screenshots: Path
) -> None:
    sign_in(browser, console, console.writer, f"#/c/{LONG}")
    wait_for(browser, "#timeline article")
    assert browser.find_elements(By.CSS_SELECTOR, "[data-write]")  # a writer has them

    sign_in(browser, console, console.reader, f"#/c/{LONG}")
    wait_for(browser, "#timeline article")
    assert browser.find_element(By.ID, "scope").text == "read-only"
    assert browser.find_elements(By.CSS_SELECTOR, "[data-write]") == []
    shot(browser, screenshots, "read-only")
    go(browser, "#/conversations")
    wait_for(browser, "#conversations tr[data-conversation]")
    assert browser.find_elements(By.CSS_SELECTOR, "[data-write]") == []


def test_another_tenants_conversation_is_not_found(browser: WebDriver, console: Console) -> None:
    sign_in(browser, console, console.reader, "#/c/globex-secret")
    status = wait_for(browser, "#status")
    assert "No such conversation" in status.text
    assert browser.find_elements(By.CSS_SELECTOR, "#timeline article") == []


def test_a_wrong_key_is_refused_and_signing_out_forgets_the_key(
    browser: WebDriver, console: Console
) -> None:
    sign_in(browser, console, console.reader)
    browser.find_element(By.ID, "sign-out").click()
    wait_for(browser, "#sign-in")
    assert browser.execute_script("return sessionStorage.length") == 0
    browser.find_element(By.ID, "key").send_keys("cs_not-a-key")
    browser.find_element(By.CSS_SELECTOR, "#sign-in button[type=submit]").click()
    wait_until(
        browser, lambda b: "unknown, revoked or expired" in b.find_element(By.ID, "status").text
    )
    assert browser.execute_script("return sessionStorage.length") == 0


def test_every_page_is_served_with_the_security_headers(console: Console) -> None:
    with httpx.Client(base_url=console.base_url) as client:
        redirect = client.get("/ui")
        assert redirect.status_code in (307, 308)
        assert redirect.headers["location"].endswith("/ui/")
        for path in (
            "/ui/",
            "/ui/index.html",
            "/ui/console.css",
            "/ui/js/main.js",
            "/ui/js/views/conversation.js",
        ):
            response = client.get(path)
            assert response.status_code == 200, path
            assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
            assert response.headers["x-content-type-options"] == "nosniff"
            assert response.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY
        assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
        assert client.get("/ui/js/missing.js").status_code == 404
