"""The web console (docs/console.md) in real headless Chromium, driven by Selenium, against a real secured cluster
(1 controller, 1 broker; an authorizer, HTTP Basic sign-in; ``admin`` a super user, ``alice`` without any ACL).
The tests run in order, each going on from the state the previous one left: sign in and see the cluster; create a
topic and produce a record with a key and a header; find it by key and by header; republish it to another topic;
watch a group's lag fall as a consumer reads, and reset the stopped group's offsets; see the charts; be refused,
signed in as alice, an action she has no ACL for. Each step saves a screenshot (``build/console-screenshots/``, or
``$ODRADEK_CONSOLE_SCREENSHOTS``), checked to be a PNG of the browser's viewport that is not blank.

Skipped, saying why, where Chromium, its driver or Selenium is missing (CI installs them: docs/console.md).
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import os
import shutil
import struct
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest

from odradek.client.admin import Admin
from odradek.client.consumer import Consumer
from odradek.client.producer import Producer
from odradek.client.structs import TopicPartition
from odradek.deploy.local import DevCluster, running_cluster

from ..integration.conftest import wait_for
from ..rest.test_http_api_security import ADMIN, ALICE, SECURED, http

CHROMIUM = next((p for name in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(name))), None)
DRIVER = shutil.which("chromedriver")
MISSING = [
    what
    for what, found in (
        ("chromium", CHROMIUM),
        ("chromedriver", DRIVER),
        ("the selenium package", importlib.util.find_spec("selenium")),
    )
    if not found
]
if MISSING:
    pytest.skip(
        f"the browser tests need {', '.join(MISSING)} (apt-get install chromium chromium-driver; pip install selenium)",
        allow_module_level=True,
    )

from selenium import webdriver  # noqa: E402  (only once the skip above has passed)
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.select import Select  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("ODRADEK_CONSOLE_SCREENSHOTS", ROOT / "build" / "console-screenshots"))
WIDTH, HEIGHT = 1280, 860
WAIT_S = 20


# ---- the cluster and the browser ----


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    directory = tmp_path_factory.mktemp("console")
    with running_cluster(1, 1, config=SECURED, directory=directory, http_api=True, schema_registry=True) as c:
        yield c


@pytest.fixture(scope="module")
def admin(cluster: DevCluster) -> Iterator[Admin]:
    a = Admin({"bootstrap.servers": cluster.bootstrap_servers, "request.timeout.ms": 15000})
    for user, password in (ADMIN, ALICE):
        a.upsert_user_scram_credential(user, password)
    yield a
    a.close()


@pytest.fixture(scope="module")
def api(cluster: DevCluster, admin: Admin) -> str:
    """The cluster's HTTP API URL, once the broker knows both users."""
    out = f"{cluster.http_urls}/v3/clusters/{cluster.cluster_id}"
    wait_for(lambda: http(f"{out}/topics", user=ALICE)[0] == 200, 20, 0.2, "alice's credential on the broker")
    return out


@pytest.fixture(scope="module")
def browser(cluster: DevCluster, api: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--force-device-scale-factor=1",
        f"--window-size={WIDTH},{HEIGHT}",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(str(DRIVER)))
    driver.set_script_timeout(WAIT_S)
    # The viewport itself (the window's size includes the browser's own bars), as the screenshots' size.
    metrics = {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        driver.get(f"{cluster.http_urls}/ui/")
        yield driver
    finally:
        driver.quit()


# ---- driving the console ----


def until(browser: WebDriver, condition: Callable[[WebDriver], Any], what: str) -> Any:
    """``condition``'s first true value; on a timeout, the failure says what the console showed."""
    try:
        return WebDriverWait(browser, WAIT_S, 0.1, (StaleElementReferenceException,)).until(condition)
    except TimeoutException:
        shown = browser.execute_script(
            "const b = document.getElementById('banner');"
            "return [b.hidden ? '' : b.innerText, document.getElementById('view').innerText.slice(0, 600)]"
        )
        pytest.fail(f"timed out after {WAIT_S} s waiting for {what}; banner: {shown[0]!r}; page: {shown[1]!r}")


def page(browser: WebDriver, hash_: str) -> None:
    """Open a page of the console (``#/topics``...), afresh if it is the one shown, and wait until it has rendered."""
    browser.execute_script("if (location.hash === arguments[0]) render(); else location.hash = arguments[0]", hash_)
    name = hash_.lstrip("#/").split("/")[0]
    until(browser, lambda b: b.execute_script("return document.body.dataset.page") == name, f"page {hash_}")


def text_of(browser: WebDriver, element_id: str) -> str:
    """An element's text, read at once (the console redraws what it polls)."""
    return str(
        browser.execute_script(
            "const e = document.getElementById(arguments[0]); return e ? e.innerText : ''", element_id
        )
    )


def fill(browser: WebDriver, element_id: str, text: str) -> None:
    box = browser.find_element(By.ID, element_id)
    box.clear()
    box.send_keys(text)


def click_for_banner(browser: WebDriver, element_id: str) -> tuple[str, str]:
    """Click, and wait for the banner the console answers with: its kind (ok, error, refused) and text."""
    browser.execute_script("document.getElementById('banner').hidden = true")
    browser.find_element(By.ID, element_id).click()
    until(browser, lambda b: b.find_element(By.ID, "banner").is_displayed(), f"the banner after clicking {element_id}")
    found = browser.find_element(By.ID, "banner")
    return str(found.get_attribute("data-kind")), found.text


def sign_in(browser: WebDriver, user: str, password: str) -> None:
    until(browser, lambda b: b.find_elements(By.ID, "login-user"), "the sign-in form")
    fill(browser, "login-user", user)
    fill(browser, "login-password", password)
    browser.find_element(By.ID, "login-submit").click()
    until(browser, lambda b: b.find_element(By.ID, "who").text.startswith(f"User:{user}"), f"{user} signed in")
    until(browser, lambda b: b.execute_script("return document.body.dataset.page") == "overview", "the overview")


def search_rows(browser: WebDriver) -> list[dict[str, str]]:
    """The search's matches as shown: partition, offset, and the key, value and headers as rendered."""
    until(browser, lambda b: b.find_elements(By.ID, "search-status"), "the search's answer")
    rows: list[dict[str, str]] = browser.execute_script(
        "return [...document.querySelectorAll('#search-table tr.record')].map(r => ({"
        "partition: r.dataset.partition, offset: r.dataset.offset, key: r.querySelector('td.key').innerText,"
        "value: r.querySelector('td.value').innerText, headers: r.querySelector('td.headers').innerText}))"
    )
    return rows


def search(browser: WebDriver, topic: str, **filters: str) -> list[dict[str, str]]:
    page(browser, "#/browse")
    Select(browser.find_element(By.ID, "search-topic")).select_by_value(topic)
    for name in ("key", "value", "header", "header-value", "json-path", "json-value"):
        fill(browser, f"search-{name}", filters.get(name.replace("-", "_"), ""))
    browser.execute_script("document.getElementById('search-results').replaceChildren()")
    browser.find_element(By.ID, "search-submit").click()
    return search_rows(browser)


# ---- screenshots ----


def shot(browser: WebDriver, name: str) -> Path:
    """Save the viewport as ``<name>.png`` and check it: a PNG of the viewport's size, not of one colour."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    data = browser.get_screenshot_as_png()
    path.write_bytes(data)
    width, height, colours = png_facts(data)
    viewport = browser.execute_script("return [window.innerWidth, window.innerHeight]")
    assert (width, height) == tuple(viewport) == (WIDTH, HEIGHT), (name, width, height, viewport)
    assert colours >= 8, f"{name}.png looks blank ({colours} colours)"
    return path


def png_facts(data: bytes) -> tuple[int, int, int]:
    """Width, height and the number of distinct colours (up to 1000) of an 8-bit RGB or RGBA PNG, read with the
    standard library: the signature, the IHDR, the IDAT stream unfiltered row by row."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, chunks = 8, []
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length : position + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in the {kind!r} chunk"
        chunks.append((kind, body))
        position += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    width, height, depth, colour_type = struct.unpack(">IIBB", chunks[0][1][:10])
    assert depth == 8 and colour_type in (2, 6), (depth, colour_type)
    channels = 3 if colour_type == 2 else 4
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = width * channels
    previous = bytearray(stride)
    colours: set[bytes] = set()
    for y in range(height):
        start = y * (stride + 1)
        mode, row = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = row[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if mode == 1:
                row[i] = (row[i] + left) & 0xFF
            elif mode == 2:
                row[i] = (row[i] + up) & 0xFF
            elif mode == 3:
                row[i] = (row[i] + (left + up) // 2) & 0xFF
            elif mode == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                row[i] = (row[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        if len(colours) < 1000 and y % 8 == 0:
            colours.update(bytes(row[x : x + channels]) for x in range(0, stride, channels * 7))
        previous = row
    return width, height, len(colours)


# ---- the tests ----


def test_sign_in_and_see_the_cluster(browser: WebDriver, cluster: DevCluster) -> None:
    """A signed-out browser gets the sign-in form; admin signs in and sees the broker, the controller quorum and
    the cluster's health."""
    sign_in(browser, *ADMIN)
    until(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#brokers tbody tr"), "the brokers")
    brokers = browser.find_elements(By.CSS_SELECTOR, "#brokers tbody tr")
    assert len(brokers) == 1 and "running" in brokers[0].text
    assert browser.find_element(By.ID, "stat-health").text.endswith("healthy")
    assert "(leader)" in browser.find_element(By.TAG_NAME, "main").text
    cookie = browser.get_cookie("odradek_session")
    assert cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    shot(browser, "overview")


def test_create_a_topic_and_produce_a_record_with_a_key_and_a_header(browser: WebDriver, admin: Admin) -> None:
    page(browser, "#/topics")
    fill(browser, "create-topic-name", "orders")
    fill(browser, "create-topic-partitions", "2")
    fill(browser, "create-topic-configs", "retention.ms=86400000")
    kind, text = click_for_banner(browser, "create-topic-submit")
    assert (kind, text) == ("ok", "Topic orders created."), text
    until(browser, lambda b: b.execute_script("return document.body.dataset.page") == "topic", "the topic's page")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")) == 2
    retention = browser.find_element(By.CSS_SELECTOR, "#configs tr[data-config='retention.ms']").text
    assert "86400000" in retention and "DYNAMIC_TOPIC_CONFIG" in retention
    shot(browser, "topic")
    assert admin.describe_topic("orders").configs == {"retention.ms": "86400000"}

    page(browser, "#/produce/orders")
    for key, item in (("order-16", "pen"), ("order-17", "book"), ("order-18", "ink")):
        fill(browser, "produce-key", key)
        Select(browser.find_element(By.ID, "produce-type")).select_by_value("JSON")
        fill(browser, "produce-value", json.dumps({"item": item, "qty": 2}))
        fill(browser, "produce-headers", "source=web" if key == "order-17" else "source=batch")
        kind, text = click_for_banner(browser, "produce-submit")
        assert kind == "ok" and text.startswith("Produced to orders partition"), text
    shot(browser, "produce")
    assert sum(p.high_watermark for p in admin.describe_topic("orders").partitions) == 3


def test_the_record_is_found_by_key_and_by_header(browser: WebDriver) -> None:
    by_key = search(browser, "orders", key="order-17")
    assert [(r["key"], r["headers"]) for r in by_key] == [("order-17", "source=web")]
    assert json.loads(by_key[0]["value"]) == {"item": "book", "qty": 2}
    by_header = search(browser, "orders", header="source", header_value="web")
    assert [(r["partition"], r["offset"]) for r in by_header] == [(r["partition"], r["offset"]) for r in by_key]
    by_path = search(browser, "orders", json_path="$.item", json_value='"ink"')
    assert [r["key"] for r in by_path] == ["order-18"]
    assert len(search(browser, "orders", header="source")) == 3
    status = browser.find_element(By.ID, "search-status")
    assert status.get_attribute("data-scanned") == "3" and "stopped: end" in status.text
    Select(browser.find_element(By.ID, "search-render")).select_by_value("hex")
    browser.find_element(By.ID, "search-submit").click()
    until(browser, lambda b: "6f 72 64 65 72" in text_of(b, "search-table"), "the keys in hex")
    search(browser, "orders", key="order-17")
    shot(browser, "messages")


def test_a_long_search_shows_its_progress_as_it_pages(browser: WebDriver, admin: Admin, cluster: DevCluster) -> None:
    """4,000 records searched 500 a request: the page shows, after each request, the offsets scanned of those to scan
    and the percentage, within the time limit it shows, and ends with the one match, at 100%."""
    admin.create_topic("haystack", 1, 1)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 20}) as producer:
        for i in range(4000):
            producer.send("haystack", b"needle" if i == 3990 else f"hay {i}".encode())
        producer.flush()
    page(browser, "#/browse")
    Select(browser.find_element(By.ID, "search-topic")).select_by_value("haystack")
    for name, text in (("value", "needle"), ("chunk", "500"), ("time", "20")):
        fill(browser, f"search-{name}", text)
    browser.execute_script(
        "window.progressSeen = [];"
        "new MutationObserver(() => { const bar = document.getElementById('search-progress');"
        "  if (bar && bar.dataset.percent) window.progressSeen.push(bar.dataset.percent + ' '"
        "    + document.getElementById('search-progress-text').textContent); })"
        ".observe(document.getElementById('search-results'), {subtree: true, childList: true, attributes: true});"
        "document.getElementById('search-results').replaceChildren()"
    )
    browser.find_element(By.ID, "search-submit").click()
    [row] = search_rows(browser)
    assert (row["offset"], row["value"]) == ("3990", "needle")
    seen: list[str] = browser.execute_script("return [...new Set(window.progressSeen)]")
    percents = [int(text.split(" ", 1)[0]) for text in seen]
    assert len(set(percents)) >= 4 and percents == sorted(percents) and percents[-1] == 100, seen
    assert any(0 < p < 100 for p in percents), seen
    assert "Scanned offsets 4,000 of 4,000 (100%) · 1 matches" in text_of(browser, "search-progress-text")
    assert " s of 20 s" in text_of(browser, "search-progress-text")
    shot(browser, "search-progress")


def test_the_record_is_republished_to_another_topic(browser: WebDriver, api: str) -> None:
    page(browser, "#/topics")
    fill(browser, "create-topic-name", "orders-retry")
    fill(browser, "create-topic-partitions", "1")
    assert click_for_banner(browser, "create-topic-submit")[0] == "ok"
    [found] = search(browser, "orders", key="order-17")
    browser.find_element(By.CSS_SELECTOR, "#search-table input.pick").click()
    fill(browser, "republish-destination", "orders-retry")
    kind, text = click_for_banner(browser, "republish-submit")
    assert (kind, text) == ("ok", "Republished 1 records to orders-retry."), text
    status, read, _ = http(f"{api}/topics/orders-retry/partitions/0/records?timeout_ms=0", user=ADMIN)
    assert status == 200, read
    [copy] = read["data"]
    assert copy["key"]["type"] == "BINARY" and base64.b64decode(copy["key"]["data"]) == b"order-17"
    assert copy["value"] == {"type": "JSON", "data": {"item": "book", "qty": 2}}
    assert copy["headers"] == [{"name": "source", "value": base64.b64encode(b"web").decode()}]
    copies = search(browser, "orders-retry")
    assert [(r["key"], r["headers"]) for r in copies] == [("order-17", "source=web")]
    assert found["value"] == copies[0]["value"]


def test_a_value_framed_for_the_schema_registry_is_shown_decoded(
    browser: WebDriver, cluster: DevCluster, admin: Admin, api: str
) -> None:
    """A value written as Confluent's Avro serializer writes it (magic byte, schema id, Avro) is shown decoded with
    its registered schema, which the broker fetches from its registry."""
    schema = {"type": "record", "name": "Order", "fields": [{"name": "item", "type": "string"}]}
    registered = json.dumps({"schema": json.dumps(schema)}).encode()
    request = urllib.request.Request(
        f"{cluster.schema_registry_urls}/subjects/avro-orders-value/versions", data=registered, method="POST"
    )
    request.add_header("Content-Type", "application/vnd.schemaregistry.v1+json")
    with urllib.request.urlopen(request, timeout=30) as answer:
        schema_id = json.loads(answer.read())["id"]
    payload = io.BytesIO()
    fastavro.schemaless_writer(payload, fastavro.parse_schema(schema), {"item": "lamp"})
    framed = b"\x00" + schema_id.to_bytes(4, "big") + payload.getvalue()
    admin.create_topic("avro-orders", 1, 1)
    value = {"type": "BINARY", "data": base64.b64encode(framed).decode()}
    status, answer, _ = http(f"{api}/topics/avro-orders/records", "POST", {"value": value}, user=ADMIN)
    assert status == 200, answer
    page(browser, "#/browse")
    Select(browser.find_element(By.ID, "search-topic")).select_by_value("avro-orders")
    Select(browser.find_element(By.ID, "search-render")).select_by_value("schema")
    browser.execute_script("document.getElementById('search-results').replaceChildren()")
    browser.find_element(By.ID, "search-submit").click()
    [row] = search_rows(browser)
    assert row["value"].startswith(f"AVRO schema {schema_id}") and json.loads(row["value"].split("\n", 1)[1]) == {
        "item": "lamp"
    }


def test_a_groups_lag_falls_as_a_consumer_reads_and_its_offsets_are_reset(
    browser: WebDriver, cluster: DevCluster, admin: Admin, api: str
) -> None:
    admin.create_topic("lagging", 1, 1)
    for i in range(30):
        status, answer, _ = http(f"{api}/topics/lagging/records", "POST", {"value": {"data": i}}, user=ADMIN)
        assert status == 200, answer
    admin.alter_group_offsets("readers", {TopicPartition("lagging", 0): 0})
    page(browser, "#/group/readers")

    def lag() -> int | None:
        text = browser.execute_script("return document.getElementById('group-total-lag').dataset.lag")
        return None if text is None else int(text)

    until(browser, lambda b: lag() == 30, "the lag of 30 records")
    seen = [30]
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "readers",
            "enable.auto.commit": False,
            "max.poll.records": 10,
        }
    )
    try:
        consumer.subscribe(["lagging"])
        for expected in (20, 10, 0):
            read = 0
            deadline = time.monotonic() + 30
            while read < 10 and time.monotonic() < deadline:
                read += len(consumer.poll(timeout_ms=500))
            assert read == 10
            consumer.commit()
            until(browser, lambda b, expected=expected: lag() == expected, f"the lag to fall to {expected}")
            seen.append(expected)
            if expected == 10:
                shot(browser, "group-lag")
    finally:
        consumer.close()
    assert seen == [30, 20, 10, 0]
    wait_for(lambda: http(f"{api}/consumer-groups/readers", user=ADMIN)[1]["state"] == "EMPTY", 20, 0.2, "empty")

    until(browser, lambda b: text_of(b, "members") == "No members: the group is stopped.", "no members")
    assert text_of(browser, "group-state") == "EMPTY"
    Select(browser.find_element(By.ID, "reset-to")).select_by_value("earliest")
    kind, text = click_for_banner(browser, "reset-submit")
    assert (kind, text) == ("ok", "Offsets of readers reset to earliest."), text
    until(browser, lambda b: lag() == 30, "the lag back at 30 after the reset")
    assert "30" in text_of(browser, "reset-result")
    shot(browser, "group-reset")
    status, lags, _ = http(f"{api}/consumer-groups/readers/lags", user=ADMIN)
    assert [(x["current_offset"], x["lag"]) for x in lags["data"]] == [(0, 30)]


def test_the_metrics_page_charts_the_brokers_throughput_and_the_groups_lag(browser: WebDriver, api: str) -> None:
    """Records produced while the page polls show as a rate above zero; the lag chart has the group's series."""
    page(browser, "#/metrics")

    def records(b: WebDriver) -> tuple[float, int]:
        """The records chart's last rate and how many rates it has drawn (read at once: each poll redraws)."""
        found = b.execute_script(
            "const s = document.querySelector(\"#chart-records .legend span[data-series='records']\");"
            "return s ? [Number(s.dataset.last), Number(s.dataset.points)] : [0, 0];"
        )
        return float(found[0]), int(found[1])

    deadline = time.monotonic() + 2 * WAIT_S
    while not (records(browser)[0] > 0 and records(browser)[1] >= 3) and time.monotonic() < deadline:
        assert http(f"{api}/topics/lagging/records", "POST", {"value": {"data": "tick"}}, user=ADMIN)[0] == 200
        time.sleep(0.1)
    rate, points = records(browser)
    assert rate > 0 and points >= 3, (rate, points)
    drawn = "return document.querySelectorAll('#chart-throughput svg polyline, #chart-records svg circle').length"
    assert browser.execute_script(drawn) >= 5  # two series, and a dot for each of the (at least 3) rates

    def lag_series(b: WebDriver) -> list[str]:
        return list(
            b.execute_script(
                "return [...document.querySelectorAll('#chart-lag .legend span')].map(s => s.dataset.series)"
            )
        )

    until(browser, lambda b: lag_series(b) == ["readers"], "the group's lag series")
    shot(browser, "metrics")


def test_the_session_refuses_cross_site_and_token_less_changes(browser: WebDriver, api: str) -> None:
    """The session cookie alone changes nothing: without the CSRF header, or from another origin, 403 (40303)."""
    cookie = browser.get_cookie("odradek_session")
    assert cookie is not None
    body = json.dumps({"topic_name": "forged"}).encode()

    def post(headers: dict[str, str]) -> tuple[int, Any]:
        request = urllib.request.Request(f"{api}/topics", data=body, method="POST")
        request.add_header("Content-Type", "application/json")
        request.add_header("Cookie", f"odradek_session={cookie['value']}")
        for name, value in headers.items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    token = browser.execute_script("return state.csrf")
    status, answer = post({})
    assert (status, answer["error_code"]) == (403, 40303)
    status, answer = post({"X-Odradek-CSRF": token, "Origin": "http://evil.example"})
    assert (status, answer["error_code"]) == (403, 40303)
    status, answer = post({"X-Odradek-CSRF": "not-the-token"})
    assert (status, answer["error_code"]) == (403, 40303)
    status, listed, _ = http(f"{api}/topics", user=ADMIN)
    assert "forged" not in [t["topic_name"] for t in listed["data"]]


def test_a_user_without_acls_is_refused_clearly_and_nothing_changes(
    browser: WebDriver, admin: Admin, cluster: DevCluster
) -> None:
    browser.find_element(By.ID, "sign-out").click()
    sign_in(browser, *ALICE)
    page(browser, "#/topics")
    assert browser.find_elements(By.CSS_SELECTOR, "#topics tbody tr") == []  # alice may describe none
    fill(browser, "create-topic-name", "alices")
    kind, text = click_for_banner(browser, "create-topic-submit")
    assert kind == "refused", text
    assert text.startswith(
        "Refused: User:alice may not create topic alices. The cluster answered HTTP 403 (40301): "
    ), text
    shot(browser, "refused")
    assert "alices" not in admin.list_topics()


def test_every_change_and_sign_in_is_in_the_audit_log(cluster: DevCluster) -> None:
    """What the tests above did, as the broker's odradek.audit log has it: who, what, and how it ended."""
    [broker] = [n for n in cluster.nodes if "broker" in n.roles]
    log = broker.log_file.read_text()
    topics = f"POST /v3/clusters/{cluster.cluster_id}/topics"
    for line in (
        "console sign-in User:admin from 127.0.0.1",
        f"http User:admin from 127.0.0.1: createKafkaTopic {topics} -> 201",
        f"http User:admin from 127.0.0.1: produceRecord {topics}/orders/records -> 200",
        f"http User:admin from 127.0.0.1: republishOdradekRecords {topics}/orders/records:republish -> 200",
        "http User:admin from 127.0.0.1: resetOdradekConsumerGroupOffsets POST",
        f"http User:admin from 127.0.0.1: createKafkaTopic {topics} -> 403 " + '{"error_code": 40303',  # forged
        "console sign-out User:admin from 127.0.0.1",
        "console sign-in User:alice from 127.0.0.1",
        f"http User:alice from 127.0.0.1: createKafkaTopic {topics} -> 403 " + '{"error_code": 40301',
    ):
        assert line in log, line
    assert "searchOdradekRecords" not in log  # a search changes nothing
