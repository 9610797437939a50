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
# systemd is PID 1 (node-init): a first-boot host key before sshd, the
# Docker engine's flags, and nothing a container has no use for (consoles,
# udev, the hardware clock), which only slows a boot.
install -m 0644 /tmp/nodeimage/spark-lab-hostkey.service /etc/systemd/system/
install -d /etc/systemd/system/docker.service.d
install -m 0644 /tmp/nodeimage/docker-lab.conf /etc/systemd/system/docker.service.d/lab.conf
systemctl enable spark-lab-hostkey.service ssh.service docker.service >/dev/null 2>&1
systemctl mask getty@tty1.service console-getty.service systemd-udevd.service systemd-udev-trigger.service \
  systemd-hwdb-update.service systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer \
  fstrim.timer >/dev/null 2>&1
rm -rf /tmp/nodeimage /var/cache/apt/archives/*.deb
