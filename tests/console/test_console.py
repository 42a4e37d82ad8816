"""The console's views in Chromium: sign in, list, a 5,000-message
conversation paged, search, payload preview, live tail, export."""

from __future__ import annotations

import time
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tests.console.browsing import go, seqs, shot, sign_in, texts, wait_for, wait_until
from tests.console.conftest import LONG, LONG_MESSAGES, TENANT, Console


def test_sign_in_shows_the_tenant_and_its_conversations_newest_first(
    browser: WebDriver, console: Console, screenshots: Path
) -> None:
    sign_in(browser, console, console.writer)
    assert browser.find_element(By.ID, "tenant").text == TENANT
    assert browser.find_element(By.ID, "scope").text == "read-write"
    wait_for(browser, "#conversations tr[data-conversation]")
    listed = texts(browser, "#conversations tr[data-conversation] td.mono a")
    assert listed[:3] == ["hostile", "travel", LONG]  # newest first
    assert "globex-secret" not in listed  # another tenant's
    shot(browser, screenshots, "conversations")
    # The key is in the tab's session, never in an address the server saw.
    assert browser.execute_script("return Object.values(sessionStorage)") == [console.writer]
    assert not [r for r in console.recorder.requests if console.writer in r[1] + r[2]]


def test_the_listing_filters_and_pages(browser: WebDriver, console: Console) -> None:
    sign_in(browser, console, console.writer)
    wait_for(browser, "#conversation-filters")
    browser.find_element(By.ID, "filter-metadata").send_keys('{"project": "billing"}')
    Select(browser.find_element(By.ID, "filter-limit")).select_by_value("25")
    browser.find_element(By.CSS_SELECTOR, "#conversation-filters button[type=submit]").click()
    wait_until(browser, lambda b: len(texts(b, "#conversations td.mono a")) == 10)
    assert set(texts(browser, "#conversations td.mono a")) == {
        f"chat-{n:02d}" for n in range(0, 30, 3)
    }
    assert any(
        '"project":"billing"' in q.replace("%22", '"').replace("%3A", ":").replace("+", "")
        for q in console.recorder.asked("/conversations")
    )

    go(browser, "#/conversations/archived=true")
    wait_until(browser, lambda b: texts(b, "#conversations td.mono a") == ["chat-05"])

    go(browser, "#/conversations/limit=25&order=oldest")
    wait_until(browser, lambda b: len(texts(b, "#conversations td.mono a")) == 25)
    first_page = texts(browser, "#conversations td.mono a")
    assert first_page[0] == "chat-00"
    browser.find_element(By.ID, "next-page").click()
    wait_until(browser, lambda b: texts(b, "#conversations td.mono a")[:1] == ["chat-25"])
    assert texts(browser, "#conversations td.mono a")[-1] == "hostile"
    assert browser.find_element(By.ID, "next-page").get_attribute("disabled") is not None
    browser.find_element(By.ID, "previous-page").click()
    wait_until(browser, lambda b: texts(b, "#conversations td.mono a") == first_page)


def test_a_long_conversation_pages_by_seq(
    browser: WebDriver, console: Console, screenshots: Path
) -> None:
    sign_in(browser, console, console.writer, f"#/c/{LONG}")
    wait_for(browser, "#timeline article")
    assert seqs(browser) == list(range(1, 101))
    facts = browser.find_element(By.ID, "conversation-facts").text
    assert f"{LONG_MESSAGES + 1} messages" in facts  # and the summary
    # The first messages: a system prompt, a tool call and its result.
    first = browser.find_element(By.CSS_SELECTOR, "#timeline article[data-seq='2']").text
    assert '→ ls({"path":"/srv"})' in first
    browser.find_element(By.ID, "next-page").click()
    wait_until(browser, lambda b: seqs(b)[:1] == [101])
    assert seqs(browser) == list(range(101, 201))
    browser.find_element(By.ID, "last-page").click()
    wait_until(browser, lambda b: seqs(b)[-1:] == [LONG_MESSAGES + 1])  # and the summary
    assert browser.find_element(By.ID, "next-page").get_attribute("disabled") is not None
    browser.find_element(By.ID, "previous-page").click()
    wait_until(browser, lambda b: seqs(b)[-1:] == [LONG_MESSAGES + 1 - 100])
    go_to = browser.find_element(By.ID, "go-to-seq")
    go_to.send_keys("4500")
    browser.find_element(By.CSS_SELECTOR, "#timeline-filters button[type=submit]").click()
    wait_until(browser, lambda b: seqs(b)[:1] == [4500])
    pinned = browser.find_element(By.CSS_SELECTOR, "#timeline article[data-seq='4500']").text
    assert "pinned" in pinned
    # Batches and the compaction summary.
    batches = browser.find_element(By.ID, "batches").text
    assert "batch 2" in batches
    assert f"#{LONG_MESSAGES + 1}" in batches  # the summary's seq
    # Tool blocks, complete and pending.
    browser.find_element(By.ID, "load-tool-blocks").click()
    wait_for(browser, "#tool-blocks tr[data-call]")
    blocks = {
        row.get_attribute("data-call"): row.text
        for row in browser.find_elements(By.CSS_SELECTOR, "#tool-blocks tr[data-call]")
    }
    assert "complete" in blocks["call_ls"]
    assert "pending" in blocks["call_tail"]
    # Only the summaries, by kind.
    Select(browser.find_element(By.ID, "filter-kind")).select_by_value("summary")
    go_to.clear()
    browser.find_element(By.CSS_SELECTOR, "#timeline-filters button[type=submit]").click()
    wait_until(browser, lambda b: seqs(b) == [LONG_MESSAGES + 1])
    assert "builds 1 to 4000" in browser.find_element(By.ID, "timeline").text
    Select(browser.find_element(By.ID, "filter-kind")).select_by_value("")
    browser.find_element(By.CSS_SELECTOR, "#timeline-filters button[type=submit]").click()
    wait_until(browser, lambda b: seqs(b)[:1] == [1])
    shot(browser, screenshots, "conversation")
    # Paged by the API's keyset cursors: no page read more than a page.
    asked = console.recorder.asked(f"/conversations/{LONG}/messages")
    assert all("limit=100" in q for q in asked), asked


def test_the_payload_preview_shows_the_payload_and_its_diagnostics(
    browser: WebDriver, console: Console, screenshots: Path
) -> None:
    sign_in(browser, console, console.writer, f"#/c/{LONG}/payload")
    wait_for(browser, "#payload")
    assert '"messages"' in browser.find_element(By.ID, "payload").text
    diagnostics = browser.find_element(By.ID, "diagnostics").text
    for name in ("special block", "repairs", "token estimate", "stable prefix"):
        assert name in diagnostics
    Select(browser.find_element(By.ID, "payload-format")).select_by_value("anthropic")
    Select(browser.find_element(By.ID, "payload-policy")).select_by_value("tail")
    browser.find_element(By.CSS_SELECTOR, "#payload-form button[type=submit]").click()
    wait_until(
        browser,
        lambda b: "anthropic" in b.find_element(By.CSS_SELECTOR, "dd[data-name=format]").text,
    )
    assert '"max_tokens"' not in browser.find_element(By.ID, "payload").text  # the body as stored
    estimate = browser.find_element(By.CSS_SELECTOR, "dd[data-name='token estimate']").text
    assert int(estimate) > 0
    shot(browser, screenshots, "payload")


def test_a_live_append_appears_within_two_seconds(
    browser: WebDriver, console: Console, screenshots: Path
) -> None:
    """The tail of GET /events/stream, read with fetch(). (The feed hands out
    an event once every transaction older than it has ended, anywhere in the
    database cluster: a long transaction of another client of the same
    server holds it back, and this test with it.)"""
    sign_in(browser, console, console.reader, "#/c/travel")
    wait_for(browser, "#timeline article")
    browser.find_element(By.ID, "live-tail").click()
    wait_until(
        browser,
        lambda b: b.find_element(By.ID, "live-state").get_attribute("data-state") == "listening",
    )
    with console.client() as client:
        sent = time.monotonic()
        appended = client.post(
            "/conversations/travel/messages",
            json={
                "messages": [{"role": "assistant", "content": "the deploy window moved to 13:00"}]
            },
        )
        assert appended.status_code == 201, appended.text
    wait_until(browser, lambda b: "moved to 13:00" in b.find_element(By.ID, "live").text, timeout=2)
    assert time.monotonic() - sent < 2
    shot(browser, screenshots, "live-tail")


def test_export_downloads_the_conversation_as_json_lines(
    browser: WebDriver, console: Console, downloads: Path
) -> None:
    sign_in(browser, console, console.reader, "#/c/hostile")
    wait_for(browser, "#timeline article")
    browser.find_element(By.ID, "export").click()
    wait_until(browser, lambda b: (downloads / "hostile.jsonl").exists())
    lines = (downloads / "hostile.jsonl").read_text().splitlines()
    assert len(lines) == 2
    assert "xsscheck" in lines[0]
