"""Search in the console: the API's highlights rendered as marks, in
Latin and in Chinese."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.console.browsing import shot, sign_in, texts, wait_for
from tests.console.conftest import Console


def _search(browser: WebDriver, words: str) -> None:
    field = wait_for(browser, "#search-q")
    field.clear()
    field.send_keys(words)
    browser.find_element(By.CSS_SELECTOR, "#search-form button[type=submit]").click()


def _asked(console: Console) -> list[str]:
    return [parse_qs(q)["q"][0] for q in console.recorder.asked("/messages/search")]


def test_a_word_is_found_across_the_tenant_and_highlighted(
    browser: WebDriver, console: Console, screenshots: Path
) -> None:
    sign_in(browser, console, console.reader, "#/search")
    _search(browser, "deploy")
    wait_for(browser, "#search-results .hit mark")
    assert "deploy" in _asked(console)
    marks = {mark.lower() for mark in texts(browser, "#search-results .hit mark")}
    assert marks == {"deploy"}
    found = {
        hit.get_attribute("data-conversation")
        for hit in browser.find_elements(By.CSS_SELECTOR, ".hit")
    }
    assert {"travel", "long-run"} <= found
    shot(browser, screenshots, "search")
    # Pages with the API's cursor.
    first_page = len(browser.find_elements(By.CSS_SELECTOR, ".hit"))
    browser.find_element(By.ID, "more-hits").click()
    wait_for(browser, f"#search-results[data-count='{2 * first_page}']")
    assert any("cursor=" in q for q in console.recorder.asked("/messages/search"))


def test_a_two_character_chinese_word_written_apart_is_found(
    browser: WebDriver, console: Console
) -> None:
    sign_in(browser, console, console.reader, "#/search")
    _search(browser, "北京")
    wait_for(browser, "#search-results .hit mark")
    assert "北京" in _asked(console)
    hits = browser.find_elements(By.CSS_SELECTOR, "#search-results .hit")
    first = hits[0]
    assert first.get_attribute("data-conversation") == "travel"
    assert "北京" in texts(browser, "#search-results .hit mark")


def test_a_two_character_chinese_word_inside_a_sentence_is_found(
    browser: WebDriver, console: Console
) -> None:
    sign_in(browser, console, console.reader, "#/search/q=%E8%A7%81%E9%9D%A2")
    wait_for(browser, "#search-results .hit", timeout=5)
    assert "见面" in _asked(console)
    snippets = texts(browser, "#search-results .hit .snippet")
    assert any("我们明天在北京见面" in snippet for snippet in snippets)
    assert "见面" in texts(browser, "#search-results .hit mark")
