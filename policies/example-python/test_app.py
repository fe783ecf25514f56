"""The example's own tests, natively: `python3 -m pytest policies/example-python`.

A policy outside this repository would `pip install policy-host-sdk`; here
the SDK is taken from the working tree.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk" / "python"))

from policy_host import RUNNING, STOPPED, Context, Service  # noqa: E402

from app import HTTPD_CONFIG, web_host  # noqa: E402


def test_declares_the_web_host():
    policy = web_host(Context(facts={"os.id": "debian"}))
    assert policy.services == [
        Service("httpd", RUNNING, enable=True, subscribe=[HTTPD_CONFIG, "package#httpd"]),
        Service("legacy-ftpd", STOPPED, enable=False),
        Service("metrics-agent", RUNNING),
    ]
    assert policy.left_out == []


def test_a_db_machine_leaves_httpd_out():
    policy = web_host(Context(facts={"role": "db"}))
    assert [s.name for s in policy.services] == ["legacy-ftpd", "metrics-agent"]
    assert [(l.name, l.why) for l in policy.left_out] == [
        ("httpd", "when role = web (this machine: db)")
    ]


def test_settings_add_extra_services():
    policy = web_host(Context(settings='{"extra": ["cron", "backup.timer"]}'))
    assert policy.services[-2:] == [Service("cron"), Service("backup.timer")]
