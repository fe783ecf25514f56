#!/bin/sh
# Not what the host does: a what-if for the benchmark's "where the time goes"
# table. The converging run's work in six systemctl processes instead of
# 1 + 6N: one query of every unit, one start and one enable of all of them,
# one reload, one query to verify.
#
#   sh what-if-batched-converge.sh UNIT...
systemctl daemon-reload
systemctl show --property=Id,ActiveState,UnitFileState --system -- "$@" >/dev/null
systemctl start --system -- "$@"
systemctl enable --no-reload --system -- "$@"
systemctl daemon-reload
systemctl show --property=Id,ActiveState,UnitFileState --system -- "$@" >/dev/null
exit 0
