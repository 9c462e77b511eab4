# Two commands: `make run` (the dashboard on embedded defaults) and `make test` (the whole suite).
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test sshd slurm browser clean

$(PY):
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (or set PYTHON=...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(PY) requirements.txt requirements-dev.txt
	$(PY) -m pip install --disable-pip-version-check -q -r requirements-dev.txt
	touch $(STAMP)

# Debian's openssh-server and iptables: the tests start their own sshd on loopback and in network namespaces
# (tests/simcluster.py), and make link faults between those with iptables.
sshd:
	@{ test -x /usr/sbin/sshd && command -v iptables >/dev/null; } || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq openssh-server iptables >/dev/null; }

# Debian's slurm-wlm and munge: the hook tests start their own munged, slurmctld and slurmd (tests/hooks/slurm_cluster.py).
slurm:
	@{ test -x /usr/sbin/slurmctld && test -x /usr/sbin/munged; } || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq slurm-wlm munge >/dev/null; }

# Debian's chromium for the browser test (driven by the playwright package; no browser download).
browser:
	@test -x /usr/bin/chromium || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

run: $(STAMP)
	$(PY) -m cudaweb.local_state
	$(PY) manage.py runlocal

test: $(STAMP) sshd slurm browser
	$(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) var staticfiles
