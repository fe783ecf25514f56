"""An example policy for a small web host, in Python: the same services as
the Rust example (policies/example).

- `httpd` must run, start at boot, and restart when its configuration file
  or package changed. On a machine labelled `role = "db"` it is left out,
  with the reason in the report.
- `legacy-ftpd` has been retired: stopped and kept from starting at boot.
- `metrics-agent` must run, but its boot setting belongs to another team,
  so the policy leaves it alone.
- Settings (JSON) may name more services to run: `{"extra": ["cron"]}`.

Build it into a declaration component from the repository's root:

    componentize-py -d wit/declaration -w declaration componentize app \\
        -p policies/example-python -p sdk/python -o example-python.wasm
"""

from policy_host import RUNNING, STOPPED, Context, Policy, Service, export

HTTPD_CONFIG = "file#/etc/httpd/conf/httpd.conf"
"""The web server's configuration; a change to it restarts `httpd`."""


def extra_services(ctx: Context) -> list[str]:
    """The names under `extra` in the settings; none without settings."""
    if ctx.settings is None:
        return []
    settings = ctx.settings_json()
    if not isinstance(settings, dict):
        raise ValueError("settings: expected a JSON object, like {\"extra\": [\"cron\"]}")
    extra = settings.get("extra", [])
    if not isinstance(extra, list):
        raise ValueError("settings: extra must be a list of service names")
    return extra


def web_host(ctx: Context) -> Policy:
    """The web host's declaration on this machine."""
    policy = Policy()
    role = ctx.facts.label("role")
    if role == "db":
        policy.leave_out("httpd", f"when role = web (this machine: {role})")
    else:
        policy.add(
            Service(
                "httpd",
                RUNNING,
                enable=True,
                subscribe=[HTTPD_CONFIG, "package#httpd"],
            )
        )
    policy.add(Service("legacy-ftpd", STOPPED, enable=False))
    policy.add(Service("metrics-agent", RUNNING))
    for name in extra_services(ctx):
        policy.add(Service(name, RUNNING))
    return policy


Declare = export(web_host)
