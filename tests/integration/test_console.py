"""The console at /ui in a real headless Chromium (Debian's, ``make chromium``) against a real worker with
basic auth on and FileStream tasks running: the list (failures first, counts, filter), a connector's
tasks, trace, restarts and offsets edited through the REST API, bulk pause and resume, the form from
the plugin's ConfigDef with validate's per-field errors, the group picture, and the REST API's
cross-site write checks holding for a page from another origin. Screenshots go to docs/screenshots/."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kconnect.rest.server import BASIC_AUTH_EXTENSION, PROPERTY_FILE_LOGIN_MODULE
from kconnect.runtime.cli.broker import free_port
from tests.support import browser
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, wait_until, worker_properties

pytestmark = pytest.mark.integration

SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
AUTH = ("operator", "s3cret-pw")


class Api:
    """The worker's REST API with the operator's credentials, for setting up and checking."""

    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return httpx.request(method, self.url + path, json=body, auth=AUTH, timeout=60)

    def status(self, name: str) -> dict[str, Any]:
        resp = self.call("GET", f"/connectors/{name}/status")
        return resp.json() if resp.status_code == 200 else {}

    def state(self, name: str) -> str | None:
        return (self.status(name).get("connector") or {}).get("state")


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, broker: Broker
) -> Iterator[tuple[WorkerProcess, Api, Path]]:
    if (why := browser.missing()) is not None:
        pytest.fail(why)  # make test installs it: a skip would hide a missing install step
    tmp = tmp_path_factory.mktemp("console")
    (tmp / "users.properties").write_text(f"{AUTH[0]}={AUTH[1]}\n")
    jaas = tmp / "jaas.conf"
    jaas.write_text(
        f"KafkaConnect {{\n  {PROPERTY_FILE_LOGIN_MODULE} required\n"
        f'  file="{tmp / "users.properties"}";\n}};\n'
    )
    group = f"console-{uuid.uuid4().hex[:6]}"
    props = worker_properties(
        broker.bootstrap,
        group,
        free_port(),
        **{"rest.extension.classes": BASIC_AUTH_EXTENSION, "offset.flush.interval.ms": "1000"},
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KCONNECT_JAAS_CONFIG", str(jaas))
        worker = WorkerProcess(tmp, props, spark=True).start()
    api = Api(worker.url)
    try:
        wait_until(
            lambda: (r := _answer(api, "/workers")) is not None and r.get("source") == "leader",
            120,
            "the worker to lead its group",
        )
        topic = f"{group}-orders"
        (tmp / "orders.txt").write_text("".join(f"order {i}\n" for i in range(20)))
        pipelines = {
            "orders-source": {
                "connector.class": "FileStreamSource",
                "file": str(tmp / "orders.txt"),
                "topic": topic,
            },
            "orders-sink": {
                "connector.class": "FileStreamSink",
                "topics": topic,
                "file": str(tmp / "out.txt"),
            },
            "audit-sink": {
                "connector.class": "FileStreamSink",
                "topics": topic,
                "file": "/nonexistent-dir/audit.txt",
            },
            "metrics-sink": {
                "connector.class": "FileStreamSink",
                "topics": topic,
                "file": str(tmp / "m.txt"),
            },
        }
        for name, config in pipelines.items():
            assert api.call("POST", "/connectors", {"name": name, "config": config}).status_code == 201
        wait_until(
            lambda: (
                all(api.state(n) == "RUNNING" for n in pipelines)
                and (api.status("audit-sink").get("tasks") or [{}])[0].get("state") == "FAILED"
                and len((tmp / "out.txt").read_text().splitlines() if (tmp / "out.txt").exists() else [])
                == 20
            ),
            120,
            "the pipelines running and audit-sink's task failed",
        )
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield worker, api, tmp
    finally:
        worker.stop()


def _answer(api: Api, path: str) -> dict[str, Any] | None:
    try:
        resp = api.call("GET", path)
    except httpx.HTTPError:
        return None
    return resp.json() if resp.status_code == 200 else None


def _wait(driver: Any, script: str, timeout: float = 20, what: str = "") -> Any:
    """Poll a JavaScript expression in the page until it is truthy."""
    return wait_until(lambda: driver.execute_script("return " + script), timeout, what or script)


def _open(driver: Any, url: str, view: str) -> None:
    driver.get(url)
    _wait(driver, f"document.body.dataset.view === {json.dumps(view)}", what=f"the {view} view")


def _rows(driver: Any) -> list[str]:
    return list(
        driver.execute_script(
            "return [...document.querySelectorAll('#connectors tbody tr')].map(r => r.dataset.connector)"
        )
    )


def test_the_console_needs_the_operators_credentials(cluster: tuple[WorkerProcess, Api, Path]) -> None:
    worker, _, _ = cluster
    assert httpx.get(worker.url + "/ui/", timeout=10).status_code == 401
    with browser.chromium() as driver:
        driver.get(worker.url + "/ui/")
        # Chromium waits for credentials (the 401's Basic challenge): nothing of the console loads.
        assert "console.js" not in driver.page_source
        assert driver.find_elements("id", "main") == []


def test_list_puts_failures_first_counts_states_and_filters(cluster: tuple[WorkerProcess, Api, Path]) -> None:
    worker, _, _ = cluster
    with browser.chromium(basic_auth=AUTH) as driver:
        _open(driver, worker.url + "/ui/", "#/")
        # audit-sink's connector runs but its task failed: it comes first, marked failing.
        assert _rows(driver) == ["audit-sink", "metrics-sink", "orders-sink", "orders-source"]
        assert (
            driver.execute_script(
                "return document.querySelector('tr[data-connector=\"audit-sink\"]').className"
            )
            == "failed"
        )
        counts = driver.execute_script(
            "return Object.fromEntries([...document.querySelectorAll('#counts .count')]"
            ".map(c => [c.dataset.state || 'ALL', c.querySelector('b').textContent]))"
        )
        assert counts == {"ALL": "4", "RUNNING": "4", "FAILED_TASKS": "1"}
        driver.save_screenshot(str(SHOTS / "console-connectors.png"))
        box = driver.find_element("id", "filter")
        box.send_keys("orders")
        assert _rows(driver) == ["orders-sink", "orders-source"]
        browser.click(driver, "css selector", '#counts .count[data-state="FAILED_TASKS"]')
        assert _rows(driver) == []  # the filter and the state chip combine
        # The list came from one call for every connector, timed in the page.
        assert int(driver.execute_script("return document.body.dataset.listCount")) == 4


def test_bulk_pause_and_resume_reach_every_selected_connector(
    cluster: tuple[WorkerProcess, Api, Path],
) -> None:
    worker, api, _ = cluster
    with browser.chromium(basic_auth=AUTH) as driver:
        _open(driver, worker.url + "/ui/", "#/")
        for name in ("orders-sink", "metrics-sink"):
            browser.click(driver, "css selector", f'input[data-name="{name}"]')
        assert driver.find_element("id", "selected-count").text == "2 selected"
        browser.click(driver, "css selector", 'button[data-bulk="pause"]')
        wait_until(
            lambda: api.state("orders-sink") == api.state("metrics-sink") == "PAUSED", 60, "both paused"
        )
        assert api.state("orders-source") == "RUNNING"
        _wait(driver, "document.getElementById('notice').textContent.startsWith('pause: 2 of 2 accepted')")
        _wait(
            driver,
            "document.querySelector('#counts .count[data-state=\"PAUSED\"] b')?.textContent === '2'",
            what="the PAUSED count",
        )
        driver.save_screenshot(str(SHOTS / "console-bulk-paused.png"))
        for name in ("orders-sink", "metrics-sink"):
            css = f'input[data-name="{name}"]'
            if not driver.execute_script("return document.querySelector(arguments[0]).checked", css):
                browser.click(driver, "css selector", css)
        browser.click(driver, "css selector", 'button[data-bulk="resume"]')
        wait_until(
            lambda: api.state("orders-sink") == api.state("metrics-sink") == "RUNNING", 60, "both resumed"
        )


def test_a_connectors_tasks_trace_restart_and_offsets(cluster: tuple[WorkerProcess, Api, Path]) -> None:
    worker, api, _ = cluster
    with browser.chromium(basic_auth=AUTH) as driver:
        _open(driver, worker.url + "/ui/#/c/audit-sink", "#/c/audit-sink")
        # Read in one script: the page re-renders on a timer, so elements found apart may go stale between.
        row = driver.execute_script(
            "const r = document.querySelector('#tasks tr[data-task=\"0\"]');"
            "return {text: r.innerText, trace: r.querySelector('details pre').textContent,"
            " summary: r.querySelector('details summary').innerText}"
        )
        assert "FAILED" in row["text"]
        assert "/nonexistent-dir/audit.txt" in row["trace"]
        # The summary is the exception (a Python traceback's last line), the whole trace one click away.
        assert "/nonexistent-dir/audit.txt" in row["summary"]
        browser.click(driver, "css selector", '#tasks tr[data-task="0"] details summary')
        driver.save_screenshot(str(SHOTS / "console-connector-failed-task.png"))
        # Restart with tasks: the failed task is started again (and fails again, the directory still missing).
        browser.click(driver, "css selector", 'button[data-action="Restart with tasks"]')
        _wait(driver, "document.getElementById('notice').textContent === 'Restart with tasks: HTTP 202'")

        # Offsets: stop the source, then alter its offset through the editor (PATCH .../offsets).
        _open(driver, worker.url + "/ui/#/c/orders-source", "#/c/orders-source")
        _wait(driver, "document.getElementById('offsets-editor')", what="the offsets editor")
        stored = wait_until(
            lambda: api.call("GET", "/connectors/orders-source/offsets").json()["offsets"],
            30,
            "the source's committed offset",
        )
        assert stored[0]["offset"]["position"] > 0
        browser.click(driver, "css selector", 'button[data-action="Stop"]')
        wait_until(lambda: api.state("orders-source") == "STOPPED", 60, "the source stopped")
        _open(driver, worker.url + "/ui/#/c/orders-source", "#/c/orders-source")
        _wait(driver, "document.getElementById('offsets-editor')", what="the offsets editor")
        edited = {"offsets": [{"partition": stored[0]["partition"], "offset": {"position": 7}}]}
        # Typed as an operator would (an input event), then the page re-renders twice at once (as when an
        # action's refresh overlaps a navigation): what was typed survives, and the alter sends it.
        driver.execute_script(
            "const e = document.getElementById('offsets-editor'); e.value = arguments[0];"
            " e.dispatchEvent(new Event('input')); e.dataset.probe = 'typed';"
            " window.dispatchEvent(new HashChangeEvent('hashchange'));"
            " window.dispatchEvent(new HashChangeEvent('hashchange'));",
            json.dumps(edited),
        )
        _wait(
            driver,
            "(() => { const e = document.getElementById('offsets-editor');"
            " return e && !e.dataset.probe && document.getElementById('offsets-alter') !== null; })()",
            what="the re-rendered offsets editor",
        )
        typed = driver.execute_script("return document.getElementById('offsets-editor').value")
        assert json.loads(typed) == edited
        browser.click(driver, "id", "offsets-alter")
        _wait(
            driver,
            "document.getElementById('notice').textContent.includes('offsets')",
            what="the alter answer",
        )
        assert "altered successfully" in driver.find_element("id", "notice").text
        wait_until(
            lambda: (
                api.call("GET", "/connectors/orders-source/offsets").json()["offsets"][0]["offset"]
                == {"position": 7}
            ),
            30,
            "the altered offset",
        )
        driver.save_screenshot(str(SHOTS / "console-connector-offsets.png"))
        browser.click(driver, "css selector", 'button[data-action="Resume"]')
        wait_until(lambda: api.state("orders-source") == "RUNNING", 60, "the source resumed")


def test_form_from_the_configdef_shows_validation_errors_per_field_then_creates(
    cluster: tuple[WorkerProcess, Api, Path],
) -> None:
    worker, api, tmp = cluster
    with browser.chromium(basic_auth=AUTH, height=1100) as driver:
        _open(driver, worker.url + "/ui/#/new", "#/new")
        from selenium.webdriver.support.ui import Select

        plugin = Select(driver.find_element("id", "plugin"))
        source_class = next(o.get_attribute("value") for o in plugin.options if "FileStreamSource" in o.text)
        plugin.select_by_value(source_class)
        _wait(driver, "document.querySelector('[data-field=\"topic\"]')", what="the plugin's fields")
        # Fields come from the plugin's ConfigDef, with its documentation.
        keys = driver.execute_script(
            "return [...document.querySelectorAll('#fields [data-key]')].map(i => i.dataset.key)"
        )
        assert {"file", "topic", "batch.size", "tasks.max"} <= set(keys)
        driver.find_element("id", "connector-name").send_keys("typed-in-the-console")
        driver.find_element("id", "f-tasks.max").send_keys("0")
        browser.click(driver, "id", "validate")
        _wait(driver, "document.getElementById('validate-result')", what="the validation answer")
        errors = driver.execute_script(
            "return Object.fromEntries([...document.querySelectorAll('.field.invalid')]"
            ".map(f => [f.dataset.field, f.querySelector('.err').textContent]))"
        )
        assert set(errors) >= {"topic", "tasks.max"}, errors
        driver.execute_script("document.querySelector('[data-field=\"topic\"]').scrollIntoView()")
        driver.save_screenshot(str(SHOTS / "console-form-errors.png"))
        assert api.call("GET", "/connectors/typed-in-the-console").status_code == 404

        (tmp / "typed.txt").write_text("typed\n")
        driver.find_element("id", "f-tasks.max").clear()
        driver.find_element("id", "f-tasks.max").send_keys("1")
        driver.find_element("id", "f-topic").send_keys("typed-topic")
        driver.find_element("id", "f-file").send_keys(str(tmp / "typed.txt"))
        browser.click(driver, "id", "save")
        _wait(
            driver,
            "document.body.dataset.view === '#/c/typed-in-the-console'",
            what="the new connector's page",
        )
        config = api.call("GET", "/connectors/typed-in-the-console/config").json()
        assert config["topic"] == "typed-topic" and config["tasks.max"] == "1"
        assert config["connector.class"] == source_class
        wait_until(lambda: api.state("typed-in-the-console") == "RUNNING", 60, "the typed connector running")

        # Edit: the form comes back filled from the stored config.
        _open(driver, worker.url + "/ui/#/edit/typed-in-the-console", "#/edit/typed-in-the-console")
        assert driver.find_element("id", "f-topic").get_attribute("value") == "typed-topic"
        api.call("DELETE", "/connectors/typed-in-the-console")


def test_group_picture_shows_workers_and_the_tasks_each_runs(
    cluster: tuple[WorkerProcess, Api, Path],
) -> None:
    worker, api, _ = cluster
    with browser.chromium(basic_auth=AUTH) as driver:
        _open(driver, worker.url + "/ui/#/group", "#/group")
        me = api.call("GET", "/workers").json()["this_worker"]
        card = driver.find_element("css selector", ".worker")
        assert "leader" in card.text
        chips = driver.execute_script(
            "return [...document.querySelectorAll('.worker .chip')].map(c => c.dataset.chip)"
        )
        assert set(me["assignment"]["tasks"]) <= set(chips)
        assert set(me["assignment"]["connectors"]) <= set(chips)
        summary = driver.find_element("id", "group-summary").text
        assert "GROUP EPOCH" in summary.upper() and "TARGET EPOCH" in summary.upper()
        # records/s appear once two /metrics samples were taken (the view refreshes every 3 s).
        _wait(
            driver, "[...document.querySelectorAll('.chip .rate')].length > 0", timeout=30, what="task rates"
        )
        driver.save_screenshot(str(SHOTS / "console-group.png"))


def test_a_page_from_another_origin_cannot_write(cluster: tuple[WorkerProcess, Api, Path]) -> None:
    """The REST API's CSRF rules hold with the console on: a page served from another origin (the same
    worker reached as localhost, with the operator's credentials in the browser) sends the simple POST a
    browser needs no preflight for; the worker refuses it and no connector appears."""
    worker, api, _ = cluster
    other = worker.url.replace("127.0.0.1", "localhost")
    with browser.chromium(basic_auth=AUTH) as driver:
        _open(driver, other + "/ui/", "#/")
        body = json.dumps(
            {
                "name": "evil",
                "config": {"connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/evil"},
            }
        )
        driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch(arguments[0], {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'},"
            " body: arguments[1]})"
            ".then(() => done('sent'), (e) => done(String(e)));",
            worker.url + "/connectors",
            body,
        )
        time.sleep(1)
    assert api.call("GET", "/connectors/evil").status_code == 404
