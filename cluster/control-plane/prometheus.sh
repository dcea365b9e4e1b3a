#!/usr/bin/env bash
# Installs Debian's Prometheus (`prometheus` and `promtool`) for the e2e, which runs its own
# Prometheus on a free loopback port. The package's own service must not run: it is kept
# from starting while the package installs (policy-rc.d), and stopped should it run. Needs
# root.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
  exit 0
fi
policy=/usr/sbin/policy-rc.d
placed=false
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod 0755 "$policy"
  placed=true
fi
trap '[ "$placed" = true ] && rm -f "$policy"' EXIT
apt-get update -qq
apt-get install -y -qq --no-install-recommends prometheus >/dev/null
if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
  systemctl disable --now prometheus
fi
if [ -x /etc/init.d/prometheus ]; then
  /etc/init.d/prometheus stop >/dev/null 2>&1 || true
fi
