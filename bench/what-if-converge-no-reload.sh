#!/bin/sh
# Not what the host does: a what-if for the benchmark's "where the time goes"
# table. systemctl-converge.sh, except that `systemctl enable` does not make
# systemd reload its configuration after each unit (--no-reload); one
# daemon-reload at the end instead.
#
#   sh what-if-converge-no-reload.sh UNIT...
systemctl daemon-reload
for unit in "$@"; do
    systemctl is-active --system -- "$unit" >/dev/null
    systemctl is-enabled --system -- "$unit" >/dev/null
    systemctl start --system -- "$unit"
    systemctl enable --no-reload --system -- "$unit"
    systemctl is-active --system -- "$unit" >/dev/null
    systemctl is-enabled --system -- "$unit" >/dev/null
done
systemctl daemon-reload
exit 0
