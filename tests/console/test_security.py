"""Sign-in, ACLs, quotas and connectors in a real browser, on a broker whose console's listener wants SASL and
whose authorizer applies ACLs: the console acts as the signed-in user, so `alice` sees only the topics her ACLs
let her describe and cannot create ACLs, while the super user `admin` can."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from selenium.webdriver.support.select import Select

from tests.support.broker_process import BrokerProcess
from tests.support.browser import Browser
from tests.support.clients import ck_produce
from tests.support.connect_worker import WorkerProcess
from tests.support.console_auth import PASSWORDS, SecuredBroker, http
from tests.support.delegation_tokens import token_logs_in

REPO = Path(__file__).resolve().parents[2]
VISIBLE, HIDDEN = ["sec-visible-a", "sec-visible-b"], "sec-hidden"
TIMEOUT_S = 30


@pytest.fixture(scope="module")
def secured(secured_broker: SecuredBroker) -> Iterator[SecuredBroker]:
    broker = secured_broker
    admin = AdminClient(broker.conf("admin"))
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in [*VISIBLE, HIDDEN]]).values():
        future.result(TIMEOUT_S)
    alice_acls = [
        AclBinding(ResourceType.TOPIC, "sec-visible-", ResourcePatternType.PREFIXED, "User:alice", "*",
                   AclOperation.DESCRIBE, AclPermissionType.ALLOW),
        # DESCRIBE on the cluster lets her list ACLs, but creating one needs ALTER.
        AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.DESCRIBE, AclPermissionType.ALLOW),
    ]
    for future in admin.create_acls(alice_acls).values():
        future.result(TIMEOUT_S)
    yield broker


@pytest.fixture
def web(chromium: Browser, secured: SecuredBroker) -> Iterator[Browser]:
    """The session's browser on the secured console, signed out, its console log checked afterwards."""
    chromium.base_url = secured.proc.console_url
    # A blank page first: a page left open by the previous test would poll (htmx) without a session, and its
    # 401s would be logged as errors of this test.
    chromium.driver.get("about:blank")
    chromium.driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    chromium.console_errors()
    yield chromium
    errors = chromium.console_errors()
    chromium.driver.get("about:blank")
    chromium.driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    assert not errors, f"the page logged errors: {errors}"


def submit(browser: Browser, css: str) -> None:
    """Click a submit button and wait for the next page."""
    browser.submit(css)


def sign_in(browser: Browser, user: str, password: str | None = None, mechanism: str = "PLAIN") -> None:
    browser.open("/login")
    browser.find("#username").send_keys(user)
    browser.find("#password").send_keys(PASSWORDS[user] if password is None else password)
    Select(browser.find("#mechanism")).select_by_visible_text(mechanism)
    submit(browser, "#signin-form button[type=submit]")


def acls_of(secured: SecuredBroker, principal: str) -> list[Any]:
    admin = AdminClient(secured.conf("admin"))
    query = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,  # type: ignore[arg-type]
                             AclOperation.ANY, AclPermissionType.ANY)
    return list(admin.describe_acls(query).result(TIMEOUT_S))


def moldau_cli(secured: SecuredBroker, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "moldau", *args, "-b", secured.bootstrap, "--command-config",
                           str(secured.admin_properties())], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_anonymous_requests_are_sent_to_sign_in(web: Browser, secured: SecuredBroker) -> None:
    web.open("/acls?principal=User%3Aalice")
    assert web.driver.current_url.endswith("/login?next=%2Facls%3Fprincipal%3DUser%253Aalice")
    assert [o.text for o in Select(web.find("#mechanism")).options] == ["PLAIN", "SCRAM-SHA-512"]
    web.screenshot("auth-login")

    base = secured.proc.console_url
    status, _, body = http(base + "/", headers={"Accept": "application/json"})
    assert status == 401 and json.loads(body)["error_code"] == 401
    status, headers, _ = http(base + "/quotas", headers={"HX-Request": "true"})
    assert status == 401 and headers["hx-redirect"] == "/login?next=%2Fquotas"
    status, _, _ = http(base + "/metrics")
    assert status == 200  # Prometheus scrapes without signing in


def test_a_wrong_password_is_refused_without_detail(web: Browser, secured: SecuredBroker) -> None:
    sign_in(web, "alice", "not-her-password")
    assert web.find("#signin-error").text == "sign-in failed"
    assert "/login" in web.driver.current_url
    web.console_errors()  # the 401 of the refused sign-in is logged by the browser

    base = secured.proc.console_url
    for user, password, mechanism in [("alice", "wrong", "PLAIN"), ("nobody", "x", "PLAIN"),
                                      ("bob", "wrong", "SCRAM-SHA-512")]:
        status, headers, body = http(base + "/login", "POST", {"username": user, "password": password,
                                                               "mechanism": mechanism})
        assert status == 401, (user, status, body)
        # The same words whatever was wrong: no hint whether the user exists or what the broker said.
        assert '<p class="error" role="alert" id="signin-error">sign-in failed</p>' in body
        assert "SASL_AUTHENTICATION_FAILED" not in body and "Invalid" not in body
        assert "set-cookie" not in headers
    status, _, body = http(base + "/login", "POST", {"username": "alice", "password": "alice-secret",
                                                     "mechanism": "GSSAPI"})
    assert status == 400 and "choose one of: PLAIN, SCRAM-SHA-512" in body


def test_a_limited_user_sees_only_its_topics_and_cannot_create_acls(web: Browser) -> None:
    sign_in(web, "alice")
    assert web.driver.current_url.endswith("/")
    assert web.find(".session .user").text == "alice"
    assert web.find("#topic-count").text == "2"  # sec-visible-a and -b: her ACLs hide sec-hidden

    web.open("/acls")
    principals = {row.find_elements("css selector", "td")[0].text for row in web.find_all("#acls tbody tr")}
    assert principals == {"User:alice"}
    web.find("#acl-create summary").click()
    web.find("#acl-create input[name=principal]").send_keys("User:alice")
    web.find("#acl-create input[name=resource_name]").send_keys(VISIBLE[0])
    submit(web, "#acl-create button[type=submit]")
    assert web.find("h1").text == "Error 403"
    assert "CLUSTER_AUTHORIZATION_FAILED" in web.find(".error").text
    web.console_errors()  # the 403 itself

    submit(web, ".session form button")  # sign out
    assert web.driver.current_url.endswith("/login")
    web.open("/")
    assert "/login?next=" in web.driver.current_url


def test_the_super_user_creates_and_deletes_an_acl(web: Browser, secured: SecuredBroker) -> None:
    sign_in(web, "admin")
    assert int(web.find("#topic-count").text) >= 3

    web.open("/acls")
    web.find("#acl-create summary").click()
    Select(web.find("#acl-create select[name=permission]")).select_by_visible_text("ALLOW")
    web.find("#acl-create input[name=principal]").send_keys("User:carol")
    Select(web.find("#acl-create select[name=operation]")).select_by_visible_text("WRITE")
    Select(web.find("#acl-create select[name=resource_type]")).select_by_visible_text("TOPIC")
    web.find("#acl-create input[name=resource_name]").send_keys("sec-")
    Select(web.find("#acl-create select[name=pattern_type]")).select_by_visible_text("PREFIXED")
    submit(web, "#acl-create button[type=submit]")
    assert "created: ALLOW User:carol WRITE on TOPIC sec-" in web.find("#acl-notice").text
    made = acls_of(secured, "User:carol")
    assert [(b.name, b.resource_pattern_type, b.operation, b.permission_type, b.host) for b in made] == [
        ("sec-", ResourcePatternType.PREFIXED, AclOperation.WRITE, AclPermissionType.ALLOW, "*")]

    web.open("/acls?principal=User%3Acarol")
    rows = [row.text for row in web.find_all("#acls tbody tr")]
    assert len(rows) == 1 and "WRITE" in rows[0] and "PREFIXED" in rows[0], rows
    web.open("/acls")
    web.screenshot("auth-acls")

    web.open("/acls?principal=User%3Acarol")
    web.find("#acls a.delete").click()
    web.settle()
    web.find("#confirm").send_keys("User:carol")
    submit(web, "#acl-delete button[type=submit]")
    assert web.find("#acl-notice").text == "deleted 1 ACL of User:carol"
    assert acls_of(secured, "User:carol") == []


def test_the_super_user_grants_a_token_acl_on_a_user(web: Browser, secured: SecuredBroker) -> None:
    """A User resource (KIP-373), which librdkafka's admin API cannot name: CREATE_TOKENS for User:dave."""
    sign_in(web, "admin")
    web.open("/acls")
    web.find("#acl-create summary").click()
    Select(web.find("#acl-create select[name=permission]")).select_by_visible_text("ALLOW")
    web.find("#acl-create input[name=principal]").send_keys("User:carol")
    Select(web.find("#acl-create select[name=operation]")).select_by_visible_text("CREATE_TOKENS")
    Select(web.find("#acl-create select[name=resource_type]")).select_by_visible_text("USER")
    web.find("#acl-create input[name=resource_name]").send_keys("User:dave")
    Select(web.find("#acl-create select[name=pattern_type]")).select_by_visible_text("LITERAL")
    submit(web, "#acl-create button[type=submit]")
    assert "created: ALLOW User:carol CREATE_TOKENS on USER User:dave" in web.find("#acl-notice").text
    web.open("/acls?principal=User%3Acarol&resource_type=USER")
    rows = [row.text for row in web.find_all("#acls tbody tr")]
    assert len(rows) == 1 and "CREATE_TOKENS" in rows[0] and "User:dave" in rows[0], rows
    web.find("#acls a.delete").click()
    web.settle()
    web.find("#confirm").send_keys("User:carol")
    submit(web, "#acl-delete button[type=submit]")
    assert web.find("#acl-notice").text == "deleted 1 ACL of User:carol"


def test_a_user_creates_renews_and_expires_a_delegation_token(web: Browser, secured: SecuredBroker) -> None:
    """KIP-48 in the console, as alice: the HMAC is shown once, the token logs in with SCRAM as alice, carol (a
    renewer) is not needed for alice's own renewal, and an expired token no longer logs in."""
    sign_in(web, "alice")
    web.open("/tokens")
    web.find("#token-create summary").click()
    web.find("#token-create input[name=renewers]").send_keys("User:carol")
    web.find("#token-create input[name=max_lifetime_hours]").send_keys("2")
    submit(web, "#token-create button[type=submit]")
    token = {"token_id": web.find("#token-id").text, "hmac": web.find("#token-hmac").text}
    web.screenshot("tokens-created")
    assert token_logs_in(secured.bootstrap, token, "SCRAM-SHA-512")

    web.open("/tokens")
    rows = [row.text for row in web.find_all("#tokens tbody tr")]
    mine = [r for r in rows if token["token_id"] in r]
    assert len(mine) == 1 and "User:alice" in mine[0] and "User:carol" in mine[0], rows
    assert token["hmac"] not in web.driver.page_source  # the password is never listed
    web.screenshot("tokens")

    renew = f'form.renew[data-token="{token["token_id"]}"]'
    web.find(f"{renew} input[name=hours]").send_keys("1")
    submit(web, f"{renew} button")
    assert f"renewed {token['token_id']}" in web.find("#token-notice").text

    submit(web, f'form.expire[data-token="{token["token_id"]}"] button')
    assert web.find("#token-notice").text == f"expired {token['token_id']}"
    assert not token_logs_in(secured.bootstrap, token, "SCRAM-SHA-512")


def test_a_scram_user_signs_in(web: Browser) -> None:
    sign_in(web, "bob", mechanism="SCRAM-SHA-512")
    assert web.find(".session .user").text == "bob"
    assert web.find("#topic-count").text == "0"  # no ACL lets bob describe any topic


def test_cross_site_posts_are_refused(secured: SecuredBroker) -> None:
    base = secured.proc.console_url
    status, _, body = http(base + "/logout", "POST", {}, {"Origin": "http://evil.example"})
    assert status == 403 and "cross-site" in body
    status, _, _ = http(base + "/login", "POST", {"username": "admin", "password": "admin-secret",
                                                  "mechanism": "PLAIN"}, {"Referer": "http://evil.example/x"})
    assert status == 403


def test_the_quotas_page_shows_and_edits_client_quotas(web: Browser, secured: SecuredBroker) -> None:
    moldau_cli(secured, "quotas", "alter", "--user", "alice", "--add-config", "producer_byte_rate=1048576")
    sign_in(web, "admin")
    web.open("/quotas")
    rows = [row.text for row in web.find_all("#quotas tbody tr")]
    assert any(r.startswith("alice") and "1048576" in r for r in rows), rows
    web.screenshot("auth-quotas")

    web.find("#quotas tbody tr a").click()
    web.settle()
    assert web.find("#quota-form input[name=producer_byte_rate]").get_attribute("value") == "1048576"
    web.find("#quota-form input[name=consumer_byte_rate]").send_keys("2048")
    submit(web, "#quota-form button[type=submit]")
    assert "saved the quotas of user=alice" in web.find("#quota-notice").text
    shown = moldau_cli(secured, "quotas", "describe", "--user", "alice")
    assert "consumer_byte_rate" in shown and "2048" in shown and "1048576" in shown, shown

    web.driver.execute_script("localStorage.setItem('moldau-theme', 'dark')")
    web.open("/quotas")
    web.screenshot("auth-quotas-dark")
    web.driver.execute_script("localStorage.removeItem('moldau-theme')")


def test_the_connectors_page_lists_and_pauses_a_real_worker(
        web: Browser, secured: SecuredBroker, console_broker: BrokerProcess, connect_port: int,
        tmp_path: Path) -> None:
    sign_in(web, "admin")
    worker = WorkerProcess(tmp_path / "worker", console_broker.bootstrap,
                           {"listeners": f"http://127.0.0.1:{connect_port}"})
    worker.port = connect_port
    source = tmp_path / "lines.txt"
    source.write_text("one\ntwo\n")
    worker.start()
    try:
        status, _ = worker.request("POST", "/connectors", {"name": "console-file-source", "config": {
            "connector.class": "FileStreamSource", "file": str(source), "topic": "console-connect-lines"}})
        assert status == 201
        web.open("/connectors")
        web.wait_for_text("#connectors tr[data-connector=console-file-source] .state", "RUNNING")
        assert "#0 RUNNING" in web.find("#connectors tr[data-connector=console-file-source] .tasks").text
        web.screenshot("auth-connectors")
        submit(web, "#connectors tr[data-connector=console-file-source] form[action$=pause] button")
        web.wait_for_text("#connectors tr[data-connector=console-file-source] .state", "PAUSED")
        assert worker.request("GET", "/connectors/console-file-source/status")[1]["connector"]["state"] == "PAUSED"
        submit(web, "#connectors tr[data-connector=console-file-source] form[action$=resume] button")
        web.wait_for_text("#connectors tr[data-connector=console-file-source] .state", "RUNNING")
        submit(web, "#connectors tr[data-connector=console-file-source] form[action$=restart] button")
        assert web.find("#connector-notice").text == "restart: console-file-source"
        web.wait_for_text("#connectors tr[data-connector=console-file-source] .tasks", "#0 RUNNING")
    finally:
        try:
            assert worker.stop() == 0, worker.log_tail()
        finally:
            worker.cleanup()


def test_without_a_schema_registry_the_pages_say_so(web: Browser, secured: SecuredBroker) -> None:
    """This broker runs no schema registry: the schema pages say so, and values in the wire format show as bytes."""
    admin = AdminClient(secured.conf("admin"))
    admin.create_topics([NewTopic("sec-bare", 1, 1)])["sec-bare"].result(TIMEOUT_S)
    ck_produce(secured.bootstrap, "sec-bare", [{"value": b"\x00\x00\x00\x00\x01\x02ok"}], **secured.conf("admin"))
    sign_in(web, "admin")
    web.open("/schemas")
    assert "runs no schema registry" in web.find("#no-registry").text
    web.open("/topics/sec-bare/messages")
    assert web.find("#records .value .badge").text == "binary"
    assert "runs no schema registry" in web.find("main").text


def test_the_connectors_page_says_how_to_configure_it(browser: Browser) -> None:
    browser.open("/connectors")  # the shared broker, unsecured and without console.connect.urls
    assert "console.connect.urls" in browser.find("#connect-not-configured").text
