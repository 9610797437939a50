#!/bin/sh
# Runs inside the build container: turns the debootstrap base into a lab node.
# Ray and vLLM are not in the image: they live in the lab's Python environment,
# a read-only volume mounted at /opt/ray on every node (internal/lab/pyenv).
set -eu
ln -sf /opt/ray/bin/ray /usr/local/bin/ray
ln -sf /opt/ray/bin/vllm /usr/local/bin/vllm
install -m 0755 /tmp/nodeimage/node-init /usr/local/sbin/node-init
install -m 0644 /tmp/nodeimage/sshd_config /etc/ssh/sshd_config
rm -f /etc/ssh/ssh_host_*
install -d -m 0700 /root/.ssh
rm -rf /tmp/nodeimage /var/cache/apt/archives/*.deb
