# A GPU node for `make compose-test`: Debian's sshd, a host key and an authorized key made by the test for this run
# (never kept in the repository), and a "python" that answers as the agent would with a real H200 report
# (tests/fixtures/real/), after $FAKE_AGENT_DELAY_S seconds (a file the test writes, so a run can be caught live).
ARG BASE
FROM ${BASE}
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openssh-server \
 && rm -rf /var/lib/apt/lists/* && mkdir -p /run/sshd /root/.ssh && chmod 700 /root/.ssh \
 && rm -f /etc/ssh/ssh_host_*
COPY sshd_config /etc/ssh/sshd_config.d/cudaweb-test.conf
COPY ssh_host_ed25519_key ssh_host_ed25519_key.pub /etc/ssh/
COPY authorized_keys /root/.ssh/authorized_keys
COPY fake-python /usr/local/bin/fake-python
COPY report.json /opt/report.json
RUN chmod 600 /etc/ssh/ssh_host_ed25519_key /root/.ssh/authorized_keys && chmod 755 /usr/local/bin/fake-python
EXPOSE 22
CMD ["/usr/sbin/sshd", "-D", "-e"]
