#!/bin/sh
# Runs inside the build container: turns the debootstrap base into a lab node.
# Wheels were fetched on the host, so this needs no network.
set -eu
python3 -m venv /opt/ray
/opt/ray/bin/pip install --no-index --no-deps --quiet --find-links /tmp/wheels -r /tmp/nodeimage/requirements.txt
ln -sf /opt/ray/bin/ray /usr/local/bin/ray
# The lab's vLLM stand-in (a test double: no GPU here), named as such.
install -m 0755 /tmp/nodeimage/vllm /usr/local/bin/vllm
install -m 0755 /tmp/nodeimage/node-init /usr/local/sbin/node-init
install -m 0644 /tmp/nodeimage/sshd_config /etc/ssh/sshd_config
rm -f /etc/ssh/ssh_host_*
install -d -m 0700 /root/.ssh
rm -rf /tmp/wheels /tmp/nodeimage /var/cache/apt/archives/*.deb
