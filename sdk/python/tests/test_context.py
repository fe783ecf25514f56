"""Settings and facts."""

import pytest

from policy_host import Context, Facts, SettingsError


def test_settings_are_given_as_text():
    assert Context(settings="extra: [cron]").settings == "extra: [cron]"
    assert Context().settings is None


def test_settings_json_parses():
    assert Context(settings='{"extra": ["cron"]}').settings_json() == {"extra": ["cron"]}


def test_settings_json_names_line_and_column():
    ctx = Context(settings='{\n  "extra": ["cron",]\n}')
    with pytest.raises(SettingsError) as error:
        ctx.settings_json()
    assert (error.value.line, error.value.column) == (2, 20)
    assert str(error.value).startswith("settings: not valid JSON at line 2 column 20: ")


def test_settings_json_without_settings_says_how_to_give_them():
    with pytest.raises(SettingsError) as error:
        Context().settings_json()
    assert "no settings given: run with --settings FILE" in str(error.value)
    assert error.value.line is None


def test_the_last_fact_given_wins():
    facts = Facts([("role", "web"), ("os.id", "debian"), ("role", "db")])
    assert facts.get("role") == "db"
    assert facts.get("nothing") is None


def test_labels_are_the_facts_not_gathered():
    facts = Context(facts=[("os.id", "debian"), ("role", "web"), ("zone", "b")]).facts
    assert facts.label("role") == "web"
    assert facts.label("os.id") is None
    assert facts.get("os.id") == "debian"
    assert facts.labels() == {"role": "web", "zone": "b"}


def test_typed_helpers_read_the_gathered_facts():
    facts = Facts(
        {
            "hostname": "web1",
            "fqdn": "web1.example.org",
            "os.id": "debian",
            "os.version_id": "12",
            "os.version_codename": "bookworm",
            "arch": "amd64",
            "kernel.release": "6.1.0-18-amd64",
            "cpus": "16",
            "memory_mib": "2048",
            "systemd.version": "",
            "host.version": "0.1.0",
        }
    )
    assert (facts.hostname, facts.fqdn) == ("web1", "web1.example.org")
    assert (facts.os_id, facts.os_version_id, facts.os_version_codename) == (
        "debian",
        "12",
        "bookworm",
    )
    assert (facts.arch, facts.kernel_release, facts.host_version) == (
        "amd64",
        "6.1.0-18-amd64",
        "0.1.0",
    )
    assert (facts.cpus, facts.memory_mib) == (16, 2048)
    assert facts.systemd_version is None, "not told: not a number"


def test_absent_facts_read_empty():
    facts = Facts()
    assert facts.os_id == ""
    assert facts.cpus is None
    assert facts.labels() == {}


def test_facts_refuse_what_is_not_pairs_of_text():
    with pytest.raises(ValueError, match="expected \\(name, value\\) pairs of str"):
        Facts([("cpus", 4)])
