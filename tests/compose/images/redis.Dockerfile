# Redis from Debian's packages, for `make compose-test` where the registry's redis image cannot be pulled. Like the
# official image, a `redis-server` started without a configuration file listens on every address with protected
# mode off (the compose network is its only way in) and keeps its files in /data.
ARG BASE
FROM ${BASE}
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* && mkdir -p /data && chown redis:redis /data
COPY redis-entrypoint.sh /usr/local/bin/redis-entrypoint.sh
WORKDIR /data
USER redis
ENTRYPOINT ["/usr/local/bin/redis-entrypoint.sh"]
CMD ["redis-server"]
