"""The one masking rule (core/masking.py) on its own: Set-Cookie values, webhook URLs, and secrets
quoted in an error's text."""

import pytest

from core.masking import (
    config_secrets,
    masked_config,
    masked_secrets,
    masked_set_cookie,
    masked_webhook_url,
    unmasked_config,
)


@pytest.mark.parametrize(
    ("header", "shown"),
    [
        ("sid=abc; Path=/; HttpOnly", "sid=***; Path=/; HttpOnly"),
        (
            "a=1; Expires=Wed, 21 Oct 2037 07:28:00 GMT; Secure, b=2",
            "a=***; Expires=Wed, 21 Oct 2037 07:28:00 GMT; Secure, b=***",
        ),
        ("sid=a,b c; Domain=shop.test", "sid=***,***; Domain=shop.test"),
        ("just-a-token", "***"),
    ],
)
def test_a_set_cookie_keeps_its_names_and_attributes_and_masks_the_rest(header, shown):
    assert masked_set_cookie(header) == shown


def test_a_webhooks_password_path_and_query_are_masked_and_a_masked_config_sent_back_keeps_them():
    stored = {"url": "https://u:pw@hooks.slack.com/services/T0/B0/XX?x=1", "secret": "s" * 40}
    shown = masked_config(stored)
    assert shown == {"url": "https://u:***@hooks.slack.com/***", "secret": "***"}
    assert unmasked_config(shown, stored) == stored
    assert masked_webhook_url("https://receiver.test/") == "https://receiver.test/"
    assert masked_config({"url": "redis://:pw@r.test/0"}) == {"url": "redis://:***@r.test/0"}


def test_an_error_quoting_a_sinks_url_keeps_none_of_its_secrets():
    config = {"url": "https://u:p%40ssword@h.test/hook/T0KEN?key=V4LUE", "secret": "signing-key-0123456789"}
    error = "ConnectError: https://u:p@ssword@h.test/hook/T0KEN?key=V4LUE refused (key signing-key-0123456789)"
    assert masked_secrets(error, config_secrets(config)) == "ConnectError: https://u:***@h.test/*** refused (key ***)"
