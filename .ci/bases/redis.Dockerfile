# vcfleet-base/redis:7-bookworm: Debian bookworm's Redis 7 on the Debian base, made without a
# container registry by .ci/containers, standing in for redis:7.4-bookworm in the compose CI run.
# Like the official image: redis-server on PATH, /data as the working folder, run as `redis`.
ARG DEBIAN_IMAGE=vcfleet-base/debian:bookworm
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /data && chown redis:redis /data
WORKDIR /data
USER redis
EXPOSE 6379
CMD ["redis-server"]
