# The fleet image: one image for every role of visual-coding-fleet
#   docker run IMAGE worker sandbox | worker judge | worker results | dashboard | produce | run | status ...
#
# Base: node:20-bookworm-slim pinned by its multi-platform index digest. The digest below is the one
# pinned for this tag in public Dockerfiles at the time of writing; it was not checked against the
# registry from here. Confirm or refresh it with
#   docker buildx imagetools inspect node:20-bookworm-slim --format '{{json .Manifest.Digest}}'
# Any Debian bookworm image with Node 20 (npm, a `node` user) will do: without a registry, make one
# as .ci/containers does and build with --build-arg NODE_IMAGE=vcfleet-base/node:20-bookworm.
ARG NODE_IMAGE=node:20-bookworm-slim@sha256:2cf067cfed83d5ea958367df9f966191a942351a2df77d6f0193e162b5febfc0
FROM ${NODE_IMAGE}

# bubblewrap + python3 with pillow/numpy/scipy/opencv: local sandboxes (sandbox_provider: local) run the
# agent's shell on this container with these tools; python3-seccomp (libseccomp's bindings) builds their
# seccomp filter. redis-tools: redis-cli for health checks and ops. tini: PID 1 that forwards SIGTERM,
# so a stopping container hands its rollouts back to the queue.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      bubblewrap ca-certificates redis-tools tini \
      python3 python3-pil python3-numpy python3-scipy python3-opencv python3-seccomp \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
ENV NODE_ENV=production

# Dependencies first (cached while only sources change). tsx is a runtime dependency: bin/vcfleet.js
# runs the TypeScript sources through it, there is no build step. opencode-linux-x64 (an optional dependency) brings the OpenCode binary.
COPY package.json package-lock.json ./
# `npm ls`: npm can exit 0 from an install whose downloads failed ("Exit handler never called"),
# leaving empty package folders; this fails the build instead.
RUN npm ci --omit=dev && npm ls --omit=dev >/dev/null && npm cache clean --force

COPY bin ./bin
COPY src ./src
COPY configs ./configs

# Results, prepared data and local state live in volumes (see docker-compose.yml).
RUN mkdir -p /app/results /app/data /app/.vcfleet && chown -R node:node /app/results /app/data /app/.vcfleet
USER node

ENTRYPOINT ["/usr/bin/tini", "--", "node", "bin/vcfleet.js"]
CMD ["--help"]
