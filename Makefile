# Two commands: `make run` (the dashboard on embedded defaults) and `make test` (the whole suite).
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test sshd slurm browser promtool clean wheelhouse image compose-test compose-clean

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

# promtool from Debian's prometheus package, unpacked into var/prometheus (not installed: no server is set up or
# started): tests/api/test_gpu_metrics.py lints /metrics with it and evaluates the README's PromQL joins.
PROMTOOL := var/prometheus/usr/bin/promtool
promtool:
	@test -x $(PROMTOOL) || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && rm -rf var/prometheus && mkdir -p var/prometheus && \
	  (cd var/prometheus && apt-get download -qq prometheus && dpkg-deb -x prometheus_*.deb . && rm prometheus_*.deb); }

run: $(STAMP)
	$(PY) -m cudaweb.local_state
	$(PY) manage.py runlocal

test: $(STAMP) sshd slurm browser promtool
	$(PY) -m pytest $(PYTEST_ARGS)

# The production image (Dockerfile), built without internet: `pip download` fills the wheelhouse with this host's
# own pip settings (its index or mirror, its CA), then the build installs from it alone (--no-index). The base is a
# build argument: BASE=<a site's own Debian 12+ image>. async-timeout is named because redis needs it below Python
# 3.11.3 (Debian bookworm's python3 is 3.11.2) and pip evaluates that marker for this host's Python, not the image's.
BASE ?= python:3.11-slim-bookworm
IMAGE ?= cudaweb:latest
DOCKER ?= docker
WHEELHOUSE := var/wheelhouse

wheelhouse:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || { \
	  echo "the wheelhouse is fetched for this host's Python, which must be the image's 3.11 (set PYTHON=...)"; exit 2; }
	rm -rf $(WHEELHOUSE) && mkdir -p $(WHEELHOUSE)
	$(PYTHON) -m pip download --disable-pip-version-check -q --only-binary=:all: -d $(WHEELHOUSE) \
	  -r requirements.txt 'async-timeout>=4.0.3'

image: wheelhouse
	$(DOCKER) build --network host --build-arg BASE=$(BASE) -t $(IMAGE) .

# The whole production stack from docker-compose.yml (+ tests/compose/docker-compose.test.yml), proven end to end:
# it starts its own dockerd if none answers (tests/compose/daemon.py) and stops only what it started.
compose-test: $(STAMP)
	CUDAWEB_COMPOSE_TEST=1 $(PY) -m pytest tests/compose -p no:cacheprovider $(PYTEST_ARGS)
	@cat var/compose-test-figures.json

# The compose test's images and layer cache (its dockerd must be stopped: it is, once compose-test ends).
compose-clean:
	rm -rf $${CUDAWEB_COMPOSE_STATE:-/var/tmp/cudaweb-compose}

clean:
	rm -rf $(VENV) var staticfiles
