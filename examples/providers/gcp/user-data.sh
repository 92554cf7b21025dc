#!/bin/bash
# gpufleet node bootstrap for Compute Engine (the startup-script metadata; create.sh fills in the
# @...@ values, shell-quoted).
# Runs as root at every boot: installs gpufleet if the image lacks it, writes the join token
# (mode 0600, never on a command line) and starts the agent as a systemd service that polls GCE's
# preemption notice (instance/preempted, header Metadata-Flavor: Google).
set -euo pipefail
GPUFLEET_SERVER=@SERVER@
JOIN_TOKEN=@JOIN_TOKEN@
NODE_NAME=@NAME@
MARKET=@MARKET@
PRICE_PER_HOUR=@PRICE_PER_HOUR@
LABELS=(@LABELS@)
INSTALL_URL=@INSTALL_URL@
NOTICE_URL=http://metadata.google.internal/computeMetadata/v1/instance/preempted
NOTICE_FORMAT=gcp

if ! command -v gpufleet >/dev/null 2>&1; then
  if [[ -z "$INSTALL_URL" ]]; then
    echo "gpufleet is not on this image and GPUFLEET_INSTALL_URL was not set" >&2
    exit 1
  fi
  curl -fsSL --retry 5 -o /usr/local/bin/gpufleet "$INSTALL_URL"
  chmod 0755 /usr/local/bin/gpufleet
fi
install -d -m 0700 /etc/gpufleet /var/lib/gpufleet
umask 077
printf '%s\n' "$JOIN_TOKEN" >/etc/gpufleet/join.token
# Jobs run as unprivileged users: keep them away from the metadata service, which serves this
# startup script (the join token) and the service account's tokens. The agent runs as root.
if command -v iptables >/dev/null 2>&1; then
  iptables -C OUTPUT -d 169.254.169.254 -m owner ! --uid-owner 0 -j REJECT 2>/dev/null ||
    iptables -A OUTPUT -d 169.254.169.254 -m owner ! --uid-owner 0 -j REJECT
fi
args=(agent --server "$GPUFLEET_SERVER" --join-token-file /etc/gpufleet/join.token --name "$NODE_NAME"
      --data-dir /var/lib/gpufleet --market "$MARKET" --price-per-hour "$PRICE_PER_HOUR"
      --spot-notice-url "$NOTICE_URL" --spot-notice-format "$NOTICE_FORMAT")
for l in "${LABELS[@]}"; do args+=(--label "$l"); done
{
  echo '#!/bin/bash'
  printf 'exec'
  printf ' %q' "$(command -v gpufleet)" "${args[@]}"
  echo
} >/etc/gpufleet/agent.sh
chmod 0700 /etc/gpufleet/agent.sh
cat >/etc/systemd/system/gpufleet-agent.service <<'UNIT'
[Unit]
Description=gpufleet agent
After=network-online.target
Wants=network-online.target
[Service]
ExecStart=/etc/gpufleet/agent.sh
Restart=always
RestartSec=5
KillMode=mixed
TimeoutStopSec=120
[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now gpufleet-agent.service
