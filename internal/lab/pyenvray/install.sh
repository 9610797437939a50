#!/bin/sh
# The lab's second Ray release (Ray's core, no vLLM), mounted read-only at
# /opt/ray-next on every node. Runs like ../pyenv/install.sh: in a throwaway
# container of the base image, the volume at /opt/ray-next, the wheels at
# /tmp/wheels, no network.
set -eu
env=/opt/ray-next
rm -rf "$env"/* "$env"/.complete
python3 -m venv "$env"
"$env"/bin/pip install --no-index --no-deps --quiet --find-links /tmp/wheels -r /tmp/pyenvray/requirements.txt
# Sanity: Ray's native core loads, and it is the release the requirements pin.
"$env"/bin/python -c 'import sys, ray._raylet, ray
assert ray.__version__ == sys.argv[1], (ray.__version__, sys.argv[1])
print("ray", ray.__version__)' "$(sed -n 's/^ray==//p' /tmp/pyenvray/requirements.txt)"
touch "$env"/.complete
